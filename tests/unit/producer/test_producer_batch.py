"""ProducerBatch and its record futures: appends, completion once, callbacks, bytes, retry timing.

Also the builder's fast append path, which the batch relies on: it must write exactly the bytes of
the fully checked path.
"""

from __future__ import annotations

import concurrent.futures
import logging
import random
import threading

import pytest

from spark_kafka_sink.errors import KafkaTimeoutError, NotLeaderOrFollowerError
from spark_kafka_sink.producer.future import RecordFuture
from spark_kafka_sink.producer.producer_batch import FinalState, ProducerBatch
from spark_kafka_sink.record import RecordBatchBuilder, read_batch
from spark_kafka_sink.structs import RecordMetadata, TopicPartition

TP = TopicPartition("topic", 3)
TS = 1_700_000_000_000


def new_batch(batch_size: int = 16384, created_ms: int = 1000, **builder_options) -> ProducerBatch:
    return ProducerBatch(TP, RecordBatchBuilder(batch_size=batch_size, **builder_options), created_ms)


def append(batch: ProducerBatch, value: bytes = b"v", key: bytes | None = b"k", callback=None,
           timestamp_ms: int = TS) -> RecordFuture | None:
    return batch.try_append(timestamp_ms, key, value, None, callback)


# --- appending ------------------------------------------------------------------------------------

def test_try_append_until_full():
    batch = new_batch(batch_size=300)
    futures = []
    while (future := append(batch, b"x" * 40)) is not None:
        futures.append(future)
    assert batch.record_count == len(futures) > 1
    assert batch.estimated_size_in_bytes <= 300 < batch.estimated_size_in_bytes + batch.last_append_size
    assert batch.last_append_size > 40
    assert not any(f.done() for f in futures)


def test_no_append_after_close_for_appends_or_close():
    batch = new_batch()
    append(batch)
    batch.close_for_appends()
    assert batch.is_full and append(batch) is None and not batch.is_closed
    batch.close()
    assert batch.is_closed and append(batch) is None
    assert read_batch(batch.records()).record_count == 1


# --- completion -----------------------------------------------------------------------------------

def test_complete_resolves_every_future_with_derived_metadata():
    batch = new_batch()
    futures = [append(batch, b"v" * i, key=None if i == 1 else b"key", timestamp_ms=TS + i)
               for i in range(3)]
    batch.close()
    assert batch.complete(base_offset=500) is True
    assert batch.final_state is FinalState.SUCCEEDED and batch.is_done
    assert [f.result(timeout=0) for f in futures] == [
        RecordMetadata("topic", 3, 500, TS, 3, 0),
        RecordMetadata("topic", 3, 501, TS + 1, -1, 1),
        RecordMetadata("topic", 3, 502, TS + 2, 3, 2),
    ]
    assert all(f.done() and f.exception() is None and not f.running() for f in futures)
    assert not futures[0].cancel() and not futures[0].cancelled()


def test_log_append_time_replaces_the_create_time():
    batch = new_batch()
    future = append(batch)
    batch.complete(base_offset=7, log_append_time_ms=TS + 99)
    assert future.result().timestamp_ms == TS + 99


def test_fail_raises_in_every_future():
    batch = new_batch()
    futures = [append(batch) for _ in range(2)]
    error = NotLeaderOrFollowerError("gone")
    assert batch.fail(error) is True
    for future in futures:
        assert future.exception() is error
        with pytest.raises(NotLeaderOrFollowerError):
            future.result()


def test_callbacks_run_exactly_once_in_order_and_a_raising_one_does_not_stop_the_others(caplog):
    batch = new_batch()
    calls = []

    def record(index):
        return lambda metadata, error: calls.append((index, metadata.offset, error))

    def explode(metadata, error):
        calls.append(("boom", metadata.offset, error))
        raise RuntimeError("user callback bug")

    append(batch, callback=record(0))
    append(batch, callback=explode)
    append(batch)  # no callback
    future = append(batch, callback=record(3))
    done_calls = []
    future.add_done_callback(lambda f: done_calls.append(f.result().offset))
    with caplog.at_level(logging.ERROR, logger="spark_kafka_sink.producer.future"):
        batch.complete(base_offset=10)
        batch.complete(base_offset=99)  # ignored
        batch.fail(RuntimeError("late"))  # ignored
    assert calls == [(0, 10, None), ("boom", 11, None), (3, 13, None)]
    assert done_calls == [13]
    assert "Error executing user-provided callback" in caplog.text and "user callback bug" in caplog.text


def test_callbacks_of_a_failed_batch_get_the_error():
    batch = new_batch()
    seen = []
    append(batch, callback=lambda metadata, error: seen.append((metadata, error)))
    error = KafkaTimeoutError("late")
    batch.fail(error)
    assert seen == [(None, error)]


def test_a_second_completion_is_ignored_with_a_warning(caplog):
    batch = new_batch()
    future = append(batch)
    batch.fail(KafkaTimeoutError("expired while in flight"))
    with caplog.at_level(logging.DEBUG, logger="spark_kafka_sink.producer.producer_batch"):
        assert batch.complete(base_offset=5) is False  # the broker wrote it after all
        assert batch.fail(RuntimeError("again")) is False
    assert batch.final_state is FinalState.FAILED
    assert isinstance(future.exception(), KafkaTimeoutError)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "already failed" in warnings[0].getMessage()


def test_add_done_callback_after_completion_runs_at_once():
    batch = new_batch()
    future = append(batch)
    batch.complete(base_offset=0)
    seen = []
    future.add_done_callback(seen.append)
    assert seen == [future]


def test_futures_are_distinct_objects_with_their_own_done_callbacks():
    """A future is an immutable tuple underneath: still equal only to itself, hashable by
    identity, not ordered; each one's done callbacks run for it alone, once."""
    batch = new_batch()
    first, second = append(batch), append(batch)
    twin = type(first)(tuple(first))  # the same fields, another future
    assert first == first and first != twin and len({first, second, twin}) == 3
    with pytest.raises(TypeError):
        first < second  # noqa: B015
    seen = []
    first.add_done_callback(lambda f: seen.append(("first", f.result().offset)))
    second.add_done_callback(lambda f: seen.append(("second", f.result().offset)))
    second.add_done_callback(lambda f: seen.append(("second again", f.result().offset)))
    batch.complete(100, -1)
    assert seen == [("first", 100), ("second", 101), ("second again", 101)]


def test_result_times_out_while_pending_and_wakes_on_completion():
    batch = new_batch()
    future = append(batch)
    with pytest.raises(concurrent.futures.TimeoutError):
        future.result(timeout=0.01)
    got = []
    waiter = threading.Thread(target=lambda: got.append(future.result(timeout=5)))
    waiter.start()
    batch.complete(base_offset=42)
    waiter.join(5)
    assert got and got[0].offset == 42


def test_result_inside_a_callback_does_not_block():
    batch = new_batch()
    future = append(batch)
    seen = []
    future.add_done_callback(lambda f: seen.append(f.result(timeout=1).offset))
    batch.complete(base_offset=3)
    assert seen == [3]


def test_to_concurrent_future_works_with_wait():
    batch = new_batch()
    mirrors = [append(batch).to_concurrent_future() for _ in range(2)]
    threading.Timer(0.01, batch.complete, args=(20,)).start()
    done, pending = concurrent.futures.wait(mirrors, timeout=5)
    assert not pending and sorted(f.result().offset for f in done) == [20, 21]


def test_completion_settles_after_callbacks():
    batch = new_batch()
    order = []
    append(batch, callback=lambda m, e: order.append("callback"))
    batch.complete(base_offset=0)
    assert batch.completion.wait_settled(0) and order == ["callback"]


# --- bytes and producer state ---------------------------------------------------------------------

def test_close_builds_once_and_records_follow_the_producer_state():
    batch = new_batch(compression_type="gzip")
    for _ in range(5):
        append(batch, b"z" * 100)
    with pytest.raises(RuntimeError, match="must be closed"):
        batch.records()
    batch.close()
    assert batch.size_in_bytes == len(batch.records()) < batch.estimated_size_in_bytes
    assert not batch.has_sequence
    batch.set_producer_state(7, 1, 40, False)
    first = read_batch(batch.records())
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (7, 1, 40)
    assert batch.has_sequence and batch.last_sequence == 44
    batch.reset_producer_state(7, 2, 0)
    assert batch.sequence_has_been_reset
    second = read_batch(batch.records())
    assert (second.producer_epoch, second.base_sequence) == (2, 0)
    assert second.records == first.records
    batch.close()  # drained again: the reset is over
    assert not batch.sequence_has_been_reset


def test_records_hands_over_the_bytes_close_built_unless_the_state_changed_since():
    """close() builds once and records() returns those bytes (no second build); a producer
    state stamped or reset in between is never lost, and later calls rebuild."""
    stamped = new_batch()
    for _ in range(3):
        append(stamped, b"z" * 50)
    stamped.set_producer_state(7, 1, 40, False)
    stamped.close()
    first = stamped.records()
    assert first == stamped.records() == stamped.records()  # rebuilt: byte-identical
    assert read_batch(first).base_sequence == 40

    for change in ("set", "reset"):
        batch = new_batch()
        for _ in range(3):
            append(batch, b"z" * 50)
        batch.set_producer_state(7, 1, 40, False)
        batch.close()  # built with sequence 40, not handed out yet
        if change == "set":
            batch.set_producer_state(7, 1, 90, False)
        else:
            batch.reset_producer_state(7, 2, 90)
        sent = read_batch(batch.records())
        assert (sent.producer_epoch, sent.base_sequence) == ((1 if change == "set" else 2), 90)
        assert sent.records == read_batch(first).records


def test_last_sequence_wraps_past_int32_max():
    batch = new_batch()
    for _ in range(4):
        append(batch)
    batch.set_producer_state(1, 0, (1 << 31) - 2, False)
    assert batch.last_sequence == 1


# --- timing ---------------------------------------------------------------------------------------

def test_retry_timing_and_delivery_timeout():
    batch = new_batch(created_ms=1000)
    append(batch)
    assert batch.waited_time_ms(1010) == 10 and not batch.in_retry
    assert not batch.is_backing_off(1010)
    batch.drained(1020)
    assert batch.queue_time_ms == 20
    batch.reenqueued(1100, backoff_ms=50)
    assert (batch.attempts, batch.last_attempt_ms, batch.in_retry) == (1, 1100, True)
    assert batch.is_backing_off(1149) and not batch.is_backing_off(1150)
    assert batch.waited_time_ms(1120) == 20
    assert not batch.has_reached_delivery_timeout(500, 1499)
    assert batch.has_reached_delivery_timeout(500, 1500)


def test_timeout_error_uses_the_java_wording():
    batch = new_batch(created_ms=1000)
    append(batch)
    append(batch)
    error = batch.timeout_error(now_ms=121_000)
    assert isinstance(error, KafkaTimeoutError) and error.retriable
    assert str(error) == "Expiring 2 record(s) for topic-3: 120000 ms has passed since batch creation"


# --- the builder's fast path ----------------------------------------------------------------------

def _random_record(rng: random.Random, base_ts: int):
    def blob():
        choice = rng.random()
        if choice < 0.15:
            return None
        size = rng.choice([0, 1, 63, 64, 100, 8191, 8192, 9000, rng.randrange(300)])
        data = rng.randbytes(size)
        return bytearray(data) if rng.random() < 0.1 else data  # bytearray: the checked path
    delta = rng.choice([0, 1, 63, 64, 8191, 8192, -1, rng.randrange(100_000)])
    headers = None if rng.random() < 0.8 else [("h", rng.randbytes(3)), ("n", None)]
    return base_ts + delta, blob(), blob(), headers


@pytest.mark.parametrize("seed", range(20))
def test_fast_append_writes_the_same_bytes_as_the_checked_path(seed):
    rng = random.Random(seed)
    fast = RecordBatchBuilder(batch_size=1 << 20)
    checked = RecordBatchBuilder(batch_size=1 << 20)
    for _ in range(rng.randrange(1, 300)):
        record = _random_record(rng, TS)
        assert fast.append(*record) == checked._append_checked(*record)
    assert fast.estimated_size == checked.estimated_size
    assert fast.build() == checked.build()


def test_fast_append_refuses_a_record_that_does_not_fit_like_the_checked_path():
    fast = RecordBatchBuilder(batch_size=200)
    checked = RecordBatchBuilder(batch_size=200)
    while (result := fast.append(TS, b"k", b"v" * 30)) is not None:
        assert result == checked._append_checked(TS, b"k", b"v" * 30, None)
    assert checked._append_checked(TS, b"k", b"v" * 30, None) is None


@pytest.mark.parametrize("seed", range(10))
def test_append_record_reports_what_the_checked_path_returns(seed):
    """append_record (what ProducerBatch calls): the offset delta it returns and the size and
    fullness it leaves behind are the checked path's AppendResult, fast path or not, up to a
    batch too full for the next record (both then refuse it)."""
    rng = random.Random(seed)
    batch_size = rng.choice([300, 2_000, 20_000])
    fast = RecordBatchBuilder(batch_size=batch_size)
    checked = RecordBatchBuilder(batch_size=batch_size)
    for _ in range(rng.randrange(1, 300)):
        record = _random_record(rng, TS)
        expected = checked._append_checked(*record)
        offset_delta = fast.append_record(*record)
        if expected is None:
            assert offset_delta is None
            break
        assert (offset_delta, fast.last_append_size, fast.last_append_full) == (
            expected.offset_delta, expected.size, expected.batch_full)
        assert fast.last_append_full == fast.is_full
    assert fast.build() == checked.build()
