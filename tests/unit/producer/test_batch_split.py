"""Splitting a batch the broker refuses as MESSAGE_TOO_LARGE (Java's ``splitAndReenqueue``).

In-memory brokers (``sender_harness``) that refuse any record batch over ``max.message.bytes``
bytes, as a topic with that setting does, and a fake clock: every record that fits is written
once, in order, at the offsets its future reports; only a record that is itself too large fails;
callbacks and tallies hear once per record; the pool gets back exactly what it leased; with
idempotence the parts carry the refused batch's sequences.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from spark_kafka_sink.errors import RecordTooLargeError
from spark_kafka_sink.producer.arrow.input import ArrowSendResult
from spark_kafka_sink.producer.future import SplitPart
from spark_kafka_sink.producer.metrics import ProducerMetrics
from spark_kafka_sink.producer.producer_batch import FinalState
from spark_kafka_sink.producer.tally import DeliveryTally
from spark_kafka_sink.record import RecordBatchBuilder
from spark_kafka_sink.record.arrow import encode_batches
from spark_kafka_sink.structs import TopicPartition

from ..fakes import FakeClock
from .sender_harness import MEMORY, PRODUCER_ID, TS, Harness, RecordingMetrics

T0 = TopicPartition("t", 0)
LIMIT = 300          # the brokers' max.message.bytes
TOO_LARGE = 10


class LimitedHarness(Harness):
    """Brokers that refuse a record batch over ``max_message_bytes`` bytes (as sent)."""

    def __init__(self, *, max_message_bytes: int = LIMIT, **kwargs):
        self.metrics = kwargs.setdefault("metrics", RecordingMetrics())
        super().__init__(**kwargs)
        self.max_message_bytes = max_message_bytes
        self.refused: list[int] = []     # record counts of the batches refused
        self.written: list = []          # the batches written, decoded

    def _append(self, tp, records):
        if len(records) > self.max_message_bytes and not self.scripts.get(tp):
            from spark_kafka_sink.record import read_batch
            self.refused.append(read_batch(records).record_count)
            return {"index": tp.partition, "error_code": TOO_LARGE, "base_offset": -1,
                    "error_message": f"The record batch size in the append to {tp} is "
                                     f"{len(records)} bytes which exceeds the maximum configured "
                                     f"value of {self.max_message_bytes}."}
        answer = super()._append(tp, records)
        if not answer.get("error_code"):
            from spark_kafka_sink.record import read_batch
            self.written.append(read_batch(records))
        return answer

    def values(self, tp=T0) -> list[bytes]:
        return [value for *_, value in self.log[tp]]

    def send(self, values, *, tp=T0, callback=None, headers=None, keys=None):
        keys = keys or [b"k%d" % i for i in range(len(values))]
        return [self.append_record(tp, TS + i, key, value, headers, callback)
                for i, (key, value) in enumerate(zip(keys, values))]

    def settle(self, futures) -> None:
        self.run_until(lambda: all(f.done() for f in futures), max_steps=200, advance_ms=50)
        self.run_until(lambda: not self.accumulator.has_incomplete(), max_steps=50)


def values_of(n: int, size: int = 40) -> list[bytes]:
    return [b"%03d" % i + b"v" * (size - 3) for i in range(n)]


# --- send(): what fits is delivered ---------------------------------------------------------------

def test_a_refused_batch_is_split_until_every_part_fits_and_all_records_arrive_in_order():
    h = LimitedHarness(linger_ms=100)
    h.bootstrap()
    values = values_of(12)
    futures = h.send(values)
    h.settle(futures)
    assert h.refused and h.refused[0] == 12            # one batch of 12 went first, refused
    assert [f.result(0).offset for f in futures] == list(range(12))
    assert h.values() == values
    assert all(len(b[T0].records) < 12 for b in h.produce_batches()[1:])
    assert h.metrics.names().count("split") == len(h.refused)
    assert "error" not in h.metrics.names() and "retry" not in h.metrics.names()
    assert h.pool.available_memory == MEMORY


def test_only_the_record_that_is_itself_too_large_fails_naming_partition_and_size():
    h = LimitedHarness(linger_ms=100)
    h.bootstrap()
    values = values_of(3) + [b"X" * 500] + values_of(7)[3:]
    futures = h.send(values)
    h.settle(futures)
    error = futures[3].exception(0)
    assert isinstance(error, RecordTooLargeError) and error.code == TOO_LARGE
    assert "t-0" in str(error) and "a record of" in str(error) and "1 record(s)" in str(error)
    assert "exceeds the maximum configured value of 300" in str(error)
    good = [f for i, f in enumerate(futures) if i != 3]
    assert [f.result(0).offset for f in good] == list(range(7))
    assert h.values() == values[:3] + values[4:]
    assert h.metrics.calls.count(("error", ("t", 1))) == 1
    assert h.pool.available_memory == MEMORY


def test_a_single_record_batch_is_not_split():
    h = LimitedHarness()
    h.bootstrap()
    [future] = h.send([b"X" * 500])
    h.settle([future])
    assert isinstance(future.exception(0), RecordTooLargeError)
    assert h.refused == [1] and "split" not in h.metrics.names()


def test_timestamps_keys_and_headers_survive_the_split():
    h = LimitedHarness(linger_ms=100)
    h.bootstrap()
    headers = [("h", b"1"), ("n", None)]
    futures = h.send(values_of(8), headers=headers, keys=[None, b""] + [b"k%d" % i for i in range(6)])
    h.settle(futures)
    records = [r for b in h.produce_batches() for r in b[T0].records]
    written = records[-8:]                         # the refused attempts come first
    assert [r.key for r in written] == [None, b""] + [b"k%d" % i for i in range(6)]
    assert [r.timestamp_ms for r in written] == [TS + i for i in range(8)]
    assert all(r.headers == tuple(headers) for r in written)
    assert [f.result(0).timestamp_ms for f in futures] == [TS + i for i in range(8)]


def test_callbacks_and_done_callbacks_run_once_per_record_with_the_final_metadata():
    h = LimitedHarness(linger_ms=100)
    h.bootstrap()
    seen: list = []
    done: list = []

    def callback(metadata, exception):
        seen.append((None if metadata is None else metadata.offset, type(exception).__name__))

    values = values_of(4) + [b"X" * 500] + values_of(3)
    futures = h.send(values, callback=callback)
    futures[1].add_done_callback(lambda f: done.append(("before", f.result(0).offset)))
    h.clock.advance(100)
    h.run_until(lambda: futures[0]._completion.is_split)   # sent, refused and split
    futures[6].add_done_callback(lambda f: done.append(("after", f.result(0).offset)))
    h.settle(futures)
    assert seen == [(0, "NoneType"), (1, "NoneType"), (2, "NoneType"), (3, "NoneType"),
                    (None, "MessageTooLargeError"), (4, "NoneType"), (5, "NoneType"), (6, "NoneType")]
    assert sorted(done) == [("after", 5), ("before", 1)]
    assert all(f.done() and not f.running() for f in futures)
    assert "failed" in repr(futures[4]) and "done" in repr(futures[0])


def test_a_tally_counts_every_record_once():
    h = LimitedHarness(linger_ms=100)
    h.bootstrap()
    tally = DeliveryTally()
    futures = h.send(values_of(5) + [b"X" * 500] + values_of(5), callback=tally)
    h.settle(futures)
    assert (tally.acked, tally.failed) == (10, 1)
    assert tally.first_failure.records == 1 and isinstance(tally.first_failure.error,
                                                           RecordTooLargeError)


def test_order_is_kept_with_one_request_in_flight_and_no_idempotence():
    h = LimitedHarness(linger_ms=100, max_in_flight=1)
    h.bootstrap()
    first = h.send(values_of(12))
    h.clock.advance(100)
    h.step()                                       # the first batch goes out
    second = h.send([b"late-%d" % i for i in range(3)])
    h.settle(first + second)
    assert h.values() == values_of(12) + [b"late-%d" % i for i in range(3)]


def test_a_compressed_batch_is_read_back_and_split():
    import os
    h = LimitedHarness(linger_ms=100)
    h.accumulator._compression_type = "lz4"
    h.bootstrap()
    values = [os.urandom(40) for _ in range(12)]   # incompressible: the batch stays too large
    futures = h.send(values)
    h.settle(futures)
    assert h.refused and h.values() == values
    assert all(b[T0].compression_type.name == "LZ4" for b in h.produce_batches())


# --- idempotence ------------------------------------------------------------------------------------

def test_idempotent_parts_carry_the_refused_batchs_sequences():
    h = LimitedHarness(idempotent=True, linger_ms=100)
    h.bootstrap()
    warmup = h.send([b"first"])                    # the first batch under an id goes alone
    h.settle(warmup)
    values = values_of(12)
    futures = h.send(values)
    h.settle(futures)
    refused = [b[T0] for b in h.produce_batches()][1]
    parts = h.written[1:]
    assert refused.base_sequence == 1 and refused.record_count == 12
    assert sum(p.record_count for p in parts) == 12 and parts[0].base_sequence == 1
    for before, after in zip(parts, parts[1:]):
        assert after.base_sequence == before.base_sequence + before.record_count
    assert {(p.producer_id, p.producer_epoch) for p in parts} == {(PRODUCER_ID, 0)}
    assert h.values() == [b"first"] + values
    assert h.idempotence.next_sequence(T0) == 13
    assert not h.idempotence.has_in_flight(T0)
    assert h.pool.available_memory == MEMORY


def test_idempotent_a_record_too_large_gives_its_sequence_to_the_rest_in_order():
    """The broker wrote none of the refused record: the records after it take its sequence (no
    epoch bump, no gap the broker would refuse as out of order)."""
    h = LimitedHarness(idempotent=True, linger_ms=100)
    h.bootstrap()
    h.settle(h.send([b"first"]))
    values = values_of(3) + [b"X" * 500] + values_of(6)[3:]
    futures = h.send(values)
    h.settle(futures)
    assert isinstance(futures[3].exception(0), RecordTooLargeError)
    assert h.values() == [b"first"] + values[:3] + values[4:]
    written = [b for b in h.written if b.record_count]
    assert {b.producer_epoch for b in written} == {0}
    sequences = [b.base_sequence + i for b in written for i in range(b.record_count)]
    assert sequences == list(range(len(sequences)))               # no gap where it was
    assert h.idempotence.next_sequence(T0) == len(sequences)
    later = h.send([b"later"])
    h.settle(later)
    assert later[0].result(0).offset == 7


def test_idempotent_parts_that_expire_unsent_request_an_epoch_bump():
    """Parts never sent leave a gap in the sequence when they expire (they hold sequences the
    broker never saw): the epoch is bumped, so the next batch starts again at sequence 0 instead
    of being refused as out of order."""
    h = LimitedHarness(idempotent=True, linger_ms=100, delivery_timeout_ms=5_000)
    h.bootstrap()
    h.settle(h.send([b"first"]))
    futures = h.send(values_of(12))
    [big] = h.accumulator.queued_batches(T0)
    h.clock.advance(100)
    h.run_until(lambda: big.is_done)               # sent, refused, split
    h.accumulator.mute(T0)                         # the parts stay queued (say, no leader)
    h.clock.advance(5_000)
    h.step(2)                                      # every part expires; then the bump
    assert all(isinstance(f.exception(0), Exception) for f in futures)
    assert h.transaction_manager.producer_id_and_epoch.epoch == 1
    h.accumulator.unmute(T0)
    later = h.send([b"later"])
    h.settle(later)
    assert (h.written[-1].producer_epoch, h.written[-1].base_sequence) == (1, 0)
    assert h.values()[-1] == b"later"
    assert h.pool.available_memory == MEMORY


# --- pre-built batches (send_arrow) -----------------------------------------------------------------

def test_an_arrow_batch_is_split_and_its_result_counts_every_row_once():
    h = LimitedHarness()
    h.bootstrap()
    values = values_of(5) + [b"X" * 500] + values_of(5)
    [encoded] = encode_batches(pa.array(values, pa.binary()), pa.array([b"a"] * 11, pa.binary()),
                               timestamp_ms=TS, batch_size=16_384)
    result = ArrowSendResult(11)
    batch = h.accumulator.queue_encoded_batch(T0, encoded.builder, result, 0, h.now)
    h.run_until(result.done, max_steps=200)
    h.run_until(lambda: not h.accumulator.has_incomplete(), max_steps=50)
    assert (result.acked, result.failed) == (10, 1)
    assert batch.final_state is FinalState.SPLIT
    assert h.values() == values[:5] + values[6:]
    assert [(r.first, r.last) for r in result.offsets[T0]] == [(0, 9)]
    assert h.pool.available_memory == MEMORY


# --- the pieces -------------------------------------------------------------------------------------

def test_the_pool_lease_is_shared_out_exactly():
    h = LimitedHarness(linger_ms=100)
    h.bootstrap()
    h.send(values_of(12))
    [big] = h.accumulator.queued_batches(T0)
    leased = MEMORY - h.pool.available_memory
    h.clock.advance(100)
    h.run_until(lambda: big.is_done)                # sent, refused, split: the parts are queued
    parts = h.accumulator.queued_batches(T0)
    assert len(parts) >= 2 and sum(p.buffer.size for p in parts) == leased
    assert MEMORY - h.pool.available_memory == leased


def test_a_flush_begun_before_the_split_waits_for_every_part():
    h = LimitedHarness(linger_ms=100)
    h.bootstrap()
    futures = h.send(values_of(12))
    [big] = h.accumulator.queued_batches(T0)
    h.clock.advance(100)
    h.run_until(lambda: big.is_done)
    assert big.final_state is FinalState.SPLIT and big.completion.is_split
    assert not big.completion.settled and not big.completion.wait_settled(0)
    h.settle(futures)
    assert big.completion.wait_settled(0)


def test_split_into_rejects_parts_out_of_order():
    from spark_kafka_sink.producer.future import BatchCompletion
    completion = BatchCompletion(T0)
    with pytest.raises(ValueError):
        completion.split_into([SplitPart(1, BatchCompletion(T0))])
    with pytest.raises(ValueError):
        completion.split_into([SplitPart(0, BatchCompletion(T0)), SplitPart(0, BatchCompletion(T0))])


def test_a_split_part_can_be_split_again_and_futures_follow_both_splits():
    from spark_kafka_sink.producer.future import BatchCompletion, RecordFuture
    root, left, right, right_a, right_b = (BatchCompletion(T0) for _ in range(5))
    tally = DeliveryTally()
    root.count_for(tally, 0, 6)
    futures = [RecordFuture((root, i, TS, 1, 1, None)) for i in range(6)]
    root.split_into([SplitPart(0, left), SplitPart(3, right)])
    right.split_into([SplitPart(0, right_a), SplitPart(2, right_b)])
    assert [f.done() for f in futures] == [False] * 6
    left.finish(10, -1, None)
    right_a.finish(20, -1, None)
    right_b.finish(30, -1, None)
    assert [f.result(0).offset for f in futures] == [10, 11, 12, 20, 21, 30]
    assert tally.acked == 6 and root.settled and right.settled


def test_batch_split_total_is_a_metric():
    metrics = ProducerMetrics(clock=FakeClock(), client_id="c")
    metrics.on_split("t")
    metrics.on_split("t")
    values = metrics.snapshot().values
    assert values["batch-split-total"] == 2 and values["batch-split-rate"] > 0


def test_the_builder_rebuilt_from_records_keeps_the_bytes():
    """The parts are re-encoded with the ordinary builder: a part holding every record of a
    batch is byte-identical to it."""
    builder = RecordBatchBuilder(batch_size=1 << 20)
    for i, value in enumerate(values_of(5)):
        builder.append(TS + i, b"k", value, [("h", b"v")])
    from spark_kafka_sink.producer.producer_batch import ProducerBatch
    batch = ProducerBatch(T0, builder, 0)
    batch.close()
    original = batch.records()
    [part] = batch.split(1 << 20, compression_type="none", compression_level=None)
    part.close()
    assert part.records() == original


def test_a_thread_waiting_on_a_record_follows_it_to_its_new_batch():
    import threading
    h = LimitedHarness(linger_ms=100)
    h.bootstrap()
    futures = h.send(values_of(12))
    mirror = futures[11].to_concurrent_future()
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(futures[11].result(10)))
    waiter.start()
    h.settle(futures)
    waiter.join(10)
    assert not waiter.is_alive() and got[0].offset == 11
    assert mirror.result(0).offset == 11
