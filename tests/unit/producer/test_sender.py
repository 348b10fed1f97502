"""Sender: stepped by hand (``run_once``) over in-memory brokers and a fake clock, as SenderTest.

One test runs the real thread (``run`` and close); the others never block.
"""

from __future__ import annotations

import threading

import pytest

from spark_kafka_sink.errors import (
    ClusterAuthorizationFailedError, ClusterChangedError, CorruptMessageError, KafkaTimeoutError, NotLeaderOrFollowerError,
    InvalidRecordError, InvalidTimestampError, OutOfOrderSequenceNumberError, ProducerClosedError,
    TopicAuthorizationFailedError,
)
from spark_kafka_sink.producer.sender import SenderSettings
from spark_kafka_sink.producer.tally import DeliveryTally
from spark_kafka_sink.structs import TopicPartition

from .sender_harness import (
    INIT_PRODUCER_ID, MEMORY, METADATA, PRODUCE, PRODUCER_ID, Harness, RecordingMetrics,
)

T0, T1, T2, T3 = (TopicPartition("t", p) for p in range(4))   # leaders 1, 2, 1, 2
NOT_LEADER, OUT_OF_ORDER, DUPLICATE, UNKNOWN_PID = 6, 45, 46, 59


def produced(h: Harness) -> int:
    return len(h.requests(PRODUCE))


# --- settings ---------------------------------------------------------------------------------------

def test_settings_from_producer_config():
    from spark_kafka_sink.config import ProducerConfig
    config = ProducerConfig({"bootstrap.servers": "b:9092", "retries": 7, "acks": "all",
                             "max.in.flight.requests.per.connection": 1})
    settings = SenderSettings.from_config(config)
    assert (settings.retries, settings.acks, settings.max_in_flight_requests_per_connection) == (7, -1, 1)
    assert settings.delivery_timeout_ms == config.delivery_timeout_ms
    assert settings.transaction_timeout_ms == 60_000


# --- metadata, linger, drain ------------------------------------------------------------------------

def test_unknown_topic_gets_metadata_then_produce():
    h = Harness()
    future = h.append(T0)
    h.run_until(future.done)
    assert future.result().offset == 0
    first_with_topic = next(i for i, r in enumerate(h.all_requests(1)) if r.api is METADATA
                            and any(t.name == "t" for t in r.body.topics or ()))
    assert first_with_topic < [r.api for r in h.all_requests(1)].index(PRODUCE)


def test_linger_holds_the_batch_until_it_elapses():
    h = Harness(linger_ms=100)
    h.bootstrap()
    h.append(T0)
    assert h.sender.send_producer_data(h.now) == 100     # the poll timeout is the linger left
    h.step(10)
    h.clock.advance(99)
    h.step(10)
    assert produced(h) == 0
    h.clock.advance(1)
    h.run_until(lambda: produced(h) == 1)


def test_one_request_per_node_with_several_partitions():
    h = Harness(topics={"t": 4})
    h.bootstrap()
    futures = [h.append(tp) for tp in (T0, T1, T2, T3)]
    h.run_until(lambda: all(f.done() for f in futures))
    assert [set(b) for b in h.produce_batches(1)] == [{T0, T2}]
    assert [set(b) for b in h.produce_batches(2)] == [{T1, T3}]


def test_max_request_size_splits_requests_per_node():
    h = Harness(topics={"t": 4}, max_request_size=100)
    h.bootstrap()
    futures = [h.append(tp, value=b"x" * 60) for tp in (T0, T2)]   # both on node 1
    h.run_until(lambda: all(f.done() for f in futures))
    assert sorted(len(b) for b in h.produce_batches(1)) == [1, 1]


def test_success_completes_futures_with_offsets_and_frees_memory():
    h = Harness()
    h.bootstrap()
    h.log[T0].extend([None] * 5)                 # the partition already holds offsets 0..4
    futures = [h.append(T0, value=bytes([i])) for i in range(3)]
    h.run_until(lambda: all(f.done() for f in futures))
    assert [f.result().offset for f in futures] == [5, 6, 7]
    assert h.pool.available_memory == MEMORY
    assert not h.accumulator.has_incomplete()


def test_poll_timeout_is_zero_after_a_send_and_waits_when_idle():
    h = Harness()
    h.bootstrap()
    h.append(T0)
    h.run_until(lambda: h.client.is_ready(1, h.now) or produced(h) > 0)
    h.run_until(lambda: produced(h) == 1)
    assert h.sender.send_producer_data(h.now) > 0          # nothing left to send: wait


# --- retries ----------------------------------------------------------------------------------------

def test_not_leader_requests_metadata_and_retries_after_backoff():
    h = Harness()
    h.bootstrap()
    h.script(T0, {"error_code": NOT_LEADER})
    future = h.append(T0)
    h.run_until(lambda: produced(h) == 1)
    metadata_before = len(h.requests(METADATA))
    h.step()                                            # the response is handled in this poll
    assert h.metadata.update_requested or len(h.requests(METADATA)) > metadata_before
    h.step(20)
    assert produced(h) == 1 and not future.done()        # inside the 100 ms backoff
    h.clock.advance(99)
    h.step(20)
    assert produced(h) == 1
    h.clock.advance(1)
    h.run_until(future.done)
    assert future.result().offset == 0
    assert produced(h) == 2
    assert len(h.requests(METADATA)) > metadata_before


def test_retries_exhausted_fail_with_the_broker_error():
    h = Harness(retries=2)
    h.bootstrap()
    h.script(T0, *[{"error_code": NOT_LEADER, "error_message": "leader moved"}] * 3)
    future = h.append(T0)
    h.run_until(future.done, advance_ms=50, max_steps=200)
    with pytest.raises(NotLeaderOrFollowerError, match="leader moved"):
        future.result()
    assert produced(h) == 3
    assert h.pool.available_memory == MEMORY


def test_disconnect_mid_request_retries():
    h = Harness()
    h.bootstrap()
    h.hold_produce = True
    future = h.append(T0)
    h.run_until(lambda: produced(h) == 1)
    h.sel.drop(1)
    h.step()
    batch_retried = h.accumulator.queued_batches(T0)
    assert batch_retried and batch_retried[0].attempts == 1      # NETWORK_EXCEPTION: retried
    h.hold_produce = False
    h.run_until(future.done, advance_ms=20, max_steps=200)
    assert future.result().offset == 0
    assert produced(h) == 2


def test_request_timeout_retries():
    h = Harness(request_timeout_ms=1000)
    h.bootstrap()
    h.hold_produce = True
    future = h.append(T0)
    h.run_until(lambda: produced(h) == 1)
    h.clock.advance(1001)
    h.step()
    assert h.accumulator.queued_batches(T0)[0].attempts == 1     # REQUEST_TIMED_OUT: retried
    h.hold_produce = False
    h.run_until(future.done, advance_ms=20, max_steps=200)
    assert future.result().offset == 0


def test_fatal_error_fails_at_once():
    metrics = RecordingMetrics()
    h = Harness(metrics=metrics)
    h.bootstrap()
    h.script(T0, {"error_code": 29})
    future = h.append(T0)
    h.run_until(future.done)
    with pytest.raises(TopicAuthorizationFailedError, match=r"Not authorized to access topics: \[t\]"):
        future.result()
    assert produced(h) == 1
    assert "retry" not in metrics.names() and "error" in metrics.names()


def test_record_errors_and_message_are_in_the_failure():
    h = Harness()
    h.bootstrap()
    h.script(T0, {"error_code": 87, "error_message": "bad batch",
                  "record_errors": [{"batch_index": 1, "batch_index_error_message": "no key"}]})
    future = h.append(T0)
    h.run_until(future.done)
    with pytest.raises(Exception, match="bad batch.*record 1: no key"):
        future.result()


def test_message_too_large_with_several_records_splits_the_batch():
    """More in tests/unit/producer/test_batch_split.py."""
    h = Harness()
    h.bootstrap()
    h.script(T0, {"error_code": 10})
    futures = [h.append(T0), h.append(T0)]
    h.run_until(lambda: all(f.done() for f in futures))
    assert [f.result().offset for f in futures] == [0, 1]
    assert [len(b[T0].records) for b in h.produce_batches()] == [2, 1, 1]


@pytest.mark.parametrize("idempotent", [False, True])
def test_records_the_broker_refuses_one_by_one_fail_alone_and_the_others_are_delivered(idempotent):
    """INVALID_RECORD with record_errors (a null key on a compacted topic, say): only the named
    records fail, with the broker's reason; the others are sent again, in order, once each."""
    h = Harness(idempotent=idempotent)
    h.bootstrap()
    h.script(T0, {"error_code": 87, "error_message": "One or more records have been rejected",
                  "record_errors": [{"batch_index": 1, "batch_index_error_message":
                                     "Compacted topic cannot accept message without key"},
                                    {"batch_index": 3, "batch_index_error_message": None}]})
    futures = [h.append(T0, value=f"v{i}".encode()) for i in range(5)]
    h.run_until(lambda: all(f.done() for f in futures), advance_ms=10)
    with pytest.raises(InvalidRecordError, match="Compacted topic cannot accept message without key"):
        futures[1].result()
    with pytest.raises(InvalidRecordError, match="One or more records have been rejected"):
        futures[3].result()
    assert [futures[i].result().offset for i in (0, 2, 4)] == [0, 1, 2]
    assert [record[3] for record in h.log[T0]] == [b"v0", b"v2", b"v4"]
    if idempotent:                          # the refused records' sequences went to the others
        assert {(pid, epoch) for pid, epoch, _, _ in h.log[T0]} == {(PRODUCER_ID, 0)}
        assert sorted(seq for _, _, seq, _ in h.log[T0]) == [0, 1, 2]
    assert h.pool.available_memory == MEMORY


def test_a_batch_whose_records_are_all_refused_fails_record_by_record():
    h = Harness()
    h.bootstrap()
    h.script(T0, {"error_code": 87, "record_errors": [{"batch_index": 0, "batch_index_error_message":
                                                       "first"}, {"batch_index": 1}]})
    futures = [h.append(T0), h.append(T0)]
    h.run_until(lambda: all(f.done() for f in futures))
    assert all(isinstance(f.exception(), InvalidRecordError) for f in futures)
    assert "first" in str(futures[0].exception()) and "first" not in str(futures[1].exception())
    assert produced(h) == 1


def test_a_record_named_corrupt_fails_alone_and_its_batch_mates_are_delivered():
    h = Harness(idempotent=True)
    h.bootstrap()
    h.script(T0, {"error_code": 2, "record_errors": [{"batch_index": 1}]})   # CORRUPT_MESSAGE
    futures = [h.append(T0, value=f"v{i}".encode()) for i in range(3)]
    h.run_until(lambda: all(f.done() for f in futures), advance_ms=10)
    assert isinstance(futures[1].exception(), CorruptMessageError)
    assert [futures[i].result().offset for i in (0, 2)] == [0, 1]


def test_a_tally_keeping_refused_records_gets_them_decoded_not_failed():
    h = Harness()
    h.bootstrap()
    h.script(T0, {"error_code": 87, "record_errors": [{"batch_index": 1, "batch_index_error_message":
                                                       "no key"}]})
    tally = DeliveryTally(keep_refused=True)
    for i in range(3):
        h.append_record(T0, 5, f"k{i}".encode(), f"v{i}".encode(), [("h", b"x")], tally)
    h.run_until(lambda: tally.completed == 3, advance_ms=10)
    assert (tally.acked, tally.failed, tally.refused, tally.first_failure) == (2, 0, 1, None)
    refused, = tally.take_refused()
    assert (refused.key, refused.value, refused.headers, refused.timestamp_ms) == (
        b"k1", b"v1", (("h", b"x"),), 5)
    assert isinstance(refused.error, InvalidRecordError) and "no key" in str(refused.error)
    assert tally.take_refused() == []


def test_a_batch_refused_as_corrupt_without_naming_records_is_a_failure_not_refused_records():
    """CORRUPT_MESSAGE on a batch of several records without record_errors (corruption on the
    wire) is retried like any retriable error; when the retries run out, the records fail as a
    batch: a tally that keeps refused records does not get them as refused one by one (the
    sink's dead letters would swallow a broker or network fault)."""
    h = Harness(retries=2)
    h.bootstrap()
    h.script(T0, *[{"error_code": 2}] * 3)
    tally = DeliveryTally(keep_refused=True)
    for i in range(3):
        h.append_record(T0, 5, f"k{i}".encode(), f"v{i}".encode(), None, tally)
    h.run_until(lambda: tally.completed == 3, advance_ms=200)
    assert (tally.acked, tally.failed, tally.refused) == (0, 3, 0)
    assert isinstance(tally.first_failure.error, CorruptMessageError)
    assert tally.take_refused() == [] and produced(h) == 3


def test_a_single_record_refused_as_corrupt_is_kept_as_refused():
    h = Harness(retries=0)
    h.bootstrap()
    h.script(T0, {"error_code": 2})
    tally = DeliveryTally(keep_refused=True)
    h.append_record(T0, 5, b"k", b"v", None, tally)
    h.run_until(lambda: tally.completed == 1, advance_ms=10)
    assert (tally.acked, tally.failed, tally.refused) == (0, 0, 1)
    assert isinstance(tally.take_refused()[0].error, CorruptMessageError)


@pytest.mark.parametrize("code, error", [(87, InvalidRecordError), (32, InvalidTimestampError)])
def test_a_verdict_on_a_whole_batch_is_asked_again_record_by_record(code, error):
    """INVALID_RECORD or INVALID_TIMESTAMP without record_errors: each record is sent again alone,
    so only the bad one fails."""
    h = Harness(idempotent=True)
    h.bootstrap()
    h.script(T0, {"error_code": code}, None, {"error_code": code}, None)   # all three, then each
    futures = [h.append(T0, value=f"v{i}".encode()) for i in range(3)]
    h.run_until(lambda: all(f.done() for f in futures), advance_ms=10)
    assert isinstance(futures[1].exception(), error)
    assert [futures[i].result().offset for i in (0, 2)] == [0, 1]
    assert produced(h) == 4


# --- expiry -----------------------------------------------------------------------------------------

def test_delivery_timeout_expires_queued_batches():
    h = Harness(delivery_timeout_ms=1000)
    h.bootstrap()
    del h.sel.brokers[("b2", 9092)]         # node 2 refuses every connection from now on
    future = h.append(T1)                   # led by node 2, which never connects
    h.step(5)
    assert not future.done()
    h.clock.advance(1000)
    h.step()
    with pytest.raises(KafkaTimeoutError, match=r"Expiring 1 record\(s\) for t-1"):
        future.result()
    assert h.pool.available_memory == MEMORY


def test_delivery_timeout_expires_in_flight_batches():
    h = Harness(delivery_timeout_ms=1000, request_timeout_ms=30_000)
    h.bootstrap()
    h.hold_produce = True
    future = h.append(T0)
    h.run_until(lambda: produced(h) == 1)
    h.clock.advance(1000)
    h.step()
    with pytest.raises(KafkaTimeoutError, match="ms has passed since batch creation"):
        future.result()
    assert h.pool.available_memory == MEMORY


def test_batches_retried_after_one_disconnect_keep_their_order_and_expire_on_time():
    # found by the model test: two requests for one partition fail together; re-enqueued each
    # at the very front they came back youngest first, and expiry (which stops at the first
    # unexpired batch of a deque) left the older one pending past its deadline
    h = Harness(delivery_timeout_ms=3000, request_timeout_ms=30_000, retry_backoff_ms=100)
    h.bootstrap()
    h.hold_produce = True
    old = h.append(T0)
    h.run_until(lambda: produced(h) == 1)
    h.clock.advance(1000)
    young = h.append(T0)
    h.run_until(lambda: produced(h) == 2)
    h.sel.drop(1)
    h.step()
    queued = h.accumulator.queued_batches(T0)
    assert [b.attempts for b in queued] == [1, 1]
    assert queued[0].created_ms < queued[1].created_ms         # oldest first, as they were sent
    del h.sel.brokers[("b1", 9092)]                            # and node 1 stays away
    h.clock.advance(2000)                                      # the old batch's deadline
    h.step()
    with pytest.raises(KafkaTimeoutError, match="3000 ms has passed since batch creation"):
        old.result(0)
    assert not young.done()


# --- ordering ---------------------------------------------------------------------------------------

def test_max_in_flight_one_mutes_the_partition_while_its_batch_is_in_flight():
    # the client allows 5 per connection here, so only the sender's muting holds t-0 back
    h = Harness(topics={"t": 4}, max_in_flight=1, client_max_in_flight=5, batch_size=200)
    h.bootstrap()
    h.hold_produce = True
    first = h.append(T0, value=b"a" * 150)
    second = h.append(T0, value=b"b" * 150)              # a second batch of t-0
    h.run_until(lambda: produced(h) == 1)
    assert h.accumulator.is_muted(T0)
    h.append(T2)                                          # another partition of node 1
    h.run_until(lambda: produced(h) == 2)
    assert set(h.produce_batches(1)[1]) == {T2}           # t-0 stays back
    h.step(5)
    assert produced(h) == 2
    h.hold_produce = False
    h.sel.drop(1)                                         # the held requests come back as errors
    h.run_until(lambda: first.done() and second.done(), advance_ms=20, max_steps=300)
    assert first.result().offset < second.result().offset


@pytest.mark.parametrize("idempotent", [False, True])
def test_a_batch_past_its_delivery_timeout_when_drainable_does_not_stop_later_records(idempotent):
    # The batch became drainable and expired at the same step: it was drained, failed without a
    # request, and its partition stayed muted, so every later record of t-0 expired too.
    h = Harness(max_in_flight=1, delivery_timeout_ms=1000, idempotent=idempotent)
    h.bootstrap()
    warm_up = h.append(T0)                        # node 1 connected, producer id known
    h.run_until(warm_up.done)
    expired = h.append(T0)
    h.clock.advance(1000)
    h.step()
    assert isinstance(expired.exception(0), KafkaTimeoutError)
    assert produced(h) == 1                       # it never went out
    assert not h.accumulator.is_muted(T0)
    later = h.append(T0)
    h.run_until(later.done, advance_ms=10)
    assert later.result().offset == 1
    assert h.pool.available_memory == MEMORY


def test_a_partition_is_muted_exactly_while_its_request_is_in_flight():
    h = Harness(max_in_flight=1)
    h.bootstrap()
    h.hold_produce = True
    future = h.append(T0)
    h.run_until(lambda: produced(h) == 1)
    assert h.accumulator.is_muted(T0) and h.client.in_flight_request_count(1) == 1
    h.hold_produce = False
    h.sel.drop(1)                                  # the request ends as a disconnect
    h.run_until(lambda: h.client.in_flight_request_count(1) == 0)
    assert not h.accumulator.is_muted(T0)
    h.run_until(future.done, advance_ms=50, max_steps=100)
    assert future.result().offset == 0


def test_an_error_while_handling_a_response_still_unmutes_the_partition(monkeypatch):
    h = Harness(max_in_flight=1)
    h.bootstrap()
    first = h.append(T0)
    real_complete = h.sender._complete_batch
    calls = []

    def complete_that_fails_once(batch, result, now_ms, **kw):
        calls.append(batch)
        if len(calls) == 1:
            raise RuntimeError("a bug while completing the batch")
        return real_complete(batch, result, now_ms, **kw)

    monkeypatch.setattr(h.sender, "_complete_batch", complete_that_fails_once)
    h.run_until(first.done)
    assert isinstance(first.exception(0), RuntimeError)
    assert not h.accumulator.is_muted(T0)
    later = h.append(T0)
    h.run_until(later.done, advance_ms=10)
    assert later.exception(0) is None


def test_a_produce_request_that_cannot_be_sent_fails_its_batches_at_once(monkeypatch):
    h = Harness(max_in_flight=1)
    h.bootstrap()
    real_send = h.client.send

    def send_that_breaks(request, now_ms):
        if request.api is PRODUCE:
            raise RuntimeError("a bug while encoding")
        return real_send(request, now_ms)

    monkeypatch.setattr(h.client, "send", send_that_breaks)
    future = h.append(T0)
    h.run_until(future.done)
    with pytest.raises(ProducerClosedError, match="could not be sent: RuntimeError"):
        future.result(0)
    assert not h.accumulator.is_muted(T0)
    assert h.pool.available_memory == MEMORY


# --- acks=0 -----------------------------------------------------------------------------------------

def test_acks_zero_completes_without_a_response():
    h = Harness(acks=0)
    h.bootstrap()
    future = h.append(T0)
    h.run_until(future.done)
    assert future.result().offset == -1
    assert h.pool.available_memory == MEMORY


# --- idempotence ------------------------------------------------------------------------------------

def test_idempotent_producer_gets_an_id_first_and_stamps_sequences():
    h = Harness(idempotent=True)
    h.bootstrap()
    futures = [h.append(T0)]
    h.run_until(futures[0].done)
    futures.append(h.append(T0))
    futures.append(h.append(T0))
    h.run_until(futures[2].done)
    apis = [r.api for r in h.all_requests(1) + h.all_requests(2) if r.api in (INIT_PRODUCER_ID, PRODUCE)]
    assert INIT_PRODUCER_ID in apis
    init_request = h.requests(INIT_PRODUCER_ID)[0]
    assert init_request.body.transactional_id is None
    assert (init_request.body.producer_id, init_request.body.producer_epoch) == (-1, -1)
    batches = [b[T0] for b in h.produce_batches()]
    assert [(b.producer_id, b.producer_epoch, b.base_sequence) for b in batches] == [
        (PRODUCER_ID, 0, 0), (PRODUCER_ID, 0, 1)]
    assert [f.result().offset for f in futures] == [0, 1, 2]


def test_init_producer_id_retriable_error_is_retried_after_backoff():
    h = Harness(idempotent=True)
    h.bootstrap()
    h.init_answers = [14]                                # COORDINATOR_LOAD_IN_PROGRESS
    future = h.append(T0)
    h.run_until(lambda: len(h.requests(INIT_PRODUCER_ID)) == 1)
    h.step(10)
    assert len(h.requests(INIT_PRODUCER_ID)) == 1
    h.clock.advance(100)
    h.run_until(future.done)
    assert len(h.requests(INIT_PRODUCER_ID)) == 2
    assert future.result().offset == 0


def test_init_producer_id_fatal_error_fails_the_batches():
    h = Harness(idempotent=True)
    h.bootstrap()
    h.init_answers = [31]                                # CLUSTER_AUTHORIZATION_FAILED
    future = h.append(T0)
    h.run_until(future.done)
    with pytest.raises(ClusterAuthorizationFailedError):
        future.result()
    assert produced(h) == 0
    assert h.pool.available_memory == MEMORY


def test_fatal_produce_error_fails_queued_and_in_flight_batches():
    h = Harness(idempotent=True, topics={"t": 4})
    h.bootstrap()
    h.hold_produce = {2}
    h.script(T0, {"error_code": 31})                     # CLUSTER_AUTHORIZATION_FAILED: fatal
    in_flight = h.append(T1)                             # node 2: sent, never answered
    h.run_until(lambda: len(h.requests(PRODUCE, 2)) == 1)
    failing = h.append(T0)
    h.run_until(failing.done)
    queued = h.append(T2)
    h.step(2)
    for future in (failing, in_flight, queued):
        with pytest.raises(ClusterAuthorizationFailedError):
            future.result()
    assert h.transaction_manager.has_fatal_error
    assert h.pool.available_memory == MEMORY


def test_out_of_order_sequence_bumps_the_epoch_and_delivers_once():
    h = Harness(idempotent=True)
    h.bootstrap()
    h.script(T0, {"error_code": OUT_OF_ORDER})
    future = h.append(T0)
    h.run_until(future.done, advance_ms=20, max_steps=200)
    assert future.result().offset == 0
    batches = [b[T0] for b in h.produce_batches()]
    assert [(b.producer_epoch, b.base_sequence) for b in batches] == [(0, 0), (1, 0)]
    assert len(h.log[T0]) == 1                           # written once
    later = h.append(T0)
    h.run_until(later.done, advance_ms=20)
    assert [(b.producer_epoch, b.base_sequence) for b in [h.produce_batches()[-1][T0]]] == [(1, 1)]


def test_out_of_order_forever_ends_at_the_delivery_timeout():
    h = Harness(idempotent=True, delivery_timeout_ms=5000)
    h.bootstrap()
    h.script(T0, *[{"error_code": OUT_OF_ORDER}] * 1000)
    future = h.append(T0)
    h.run_until(future.done, advance_ms=50, max_steps=1000)
    with pytest.raises((OutOfOrderSequenceNumberError, KafkaTimeoutError)):
        future.result()
    assert produced(h) < 60
    assert h.transaction_manager.producer_id_and_epoch.epoch > 1   # each attempt bumped the epoch


def test_unknown_producer_id_bumps_the_epoch_and_retries():
    h = Harness(idempotent=True)
    h.bootstrap()
    h.script(T0, {"error_code": UNKNOWN_PID, "log_start_offset": 0})
    future = h.append(T0)
    h.run_until(future.done, advance_ms=20, max_steps=200)
    assert future.result().offset == 0
    batches = [b[T0] for b in h.produce_batches()]
    assert [(b.producer_epoch, b.base_sequence) for b in batches] == [(0, 0), (1, 0)]


def test_unknown_producer_id_without_log_start_offset_retries_unchanged():
    h = Harness(idempotent=True)
    h.bootstrap()
    h.script(T0, {"error_code": UNKNOWN_PID, "log_start_offset": -1})
    future = h.append(T0)
    h.run_until(future.done, advance_ms=20, max_steps=200)
    batches = [b[T0] for b in h.produce_batches()]
    assert [(b.producer_epoch, b.base_sequence) for b in batches] == [(0, 0), (0, 0)]


def test_ready_data_the_idempotence_gate_holds_back_does_not_spin():
    h = Harness(idempotent=True, retry_backoff_ms=100)
    h.bootstrap()
    h.append(T0)
    for _ in range(20):                        # connect node 1, but never send InitProducerId
        h.sender.send_producer_data(h.now)
        h.client.poll(0, h.now)
    assert h.client.is_ready(1, h.now)
    assert h.sender.send_producer_data(h.now) == 100    # no producer id: wait, do not spin
    assert produced(h) == 0


def test_expired_in_flight_batch_leads_to_an_epoch_bump_for_later_batches():
    h = Harness(idempotent=True, delivery_timeout_ms=1000)
    h.bootstrap()
    h.hold_produce = True
    expired = h.append(T0)
    h.run_until(lambda: produced(h) == 1)
    h.clock.advance(1000)
    h.step()
    assert isinstance(expired.exception(), KafkaTimeoutError)
    assert h.idempotence.has_unresolved_sequence(T0)
    h.hold_produce = False
    h.sel.drop(1)                                # the held request ends: outcome never known
    later = h.append(T0)
    h.run_until(later.done, advance_ms=20, max_steps=200)
    assert later.result().offset == 0
    last = h.produce_batches()[-1][T0]
    # a new epoch, sequences from 0 (bumped once on resolving, and once more, as Java, when the
    # dropped request failed the already-expired batch with adjust_sequence_numbers)
    assert last.producer_epoch >= 1 and last.base_sequence == 0


def test_first_batch_goes_alone_so_a_transient_error_cannot_reorder_records():
    # Seen against Apache Kafka 4.1 right after topic creation: the first Produce of a partition
    # was answered NOT_LEADER_OR_FOLLOWER while the next batch was in flight behind it, and a
    # broker with no state for the producer takes any first sequence, so the second batch was
    # written first. Until the partition's first batch is acknowledged it must go alone.
    metrics = RecordingMetrics()
    h = Harness(idempotent=True, batch_size=200, metrics=metrics)   # one record per batch
    h.bootstrap()
    h.defer_produce = True                 # answers come later: several requests may be in flight
    h.script(T0, {"error_code": NOT_LEADER})
    values = [bytes([ord("a") + i]) * 150 for i in range(4)]
    futures = [h.append(T0, value=value) for value in values]

    def in_flight() -> int:                # Produce requests (each one t-0 batch) not yet handled
        return produced(h) - metrics.names().count("response")

    before_ack, after_ack = [], []
    for step in range(300):
        if all(f.done() for f in futures):
            break
        h.step()
        (after_ack if futures[0].done() else before_ack).append(in_flight())
        if step % 4 == 3:
            h.answer_deferred()            # the broker handles what it holds, oldest first
        h.clock.advance(20)
    assert all(f.done() for f in futures)

    assert max(before_ack) == 1            # never two batches of t-0 in flight before the first ack
    assert max(after_ack) >= 2             # acknowledged once: the partition pipelines again
    assert not h.scripts[T0]               # the NOT_LEADER_OR_FOLLOWER was answered
    assert [(b.producer_epoch, b.base_sequence) for b in (r[T0] for r in h.produce_batches())] == [
        (0, 0), (0, 0), (0, 1), (0, 2), (0, 3)]   # the first batch alone, retried, then the rest
    assert [value for *_, value in h.log[T0]] == values       # in order, each exactly once
    assert [seq for _, _, seq, _ in h.log[T0]] == [0, 1, 2, 3]
    assert [f.result().offset for f in futures] == [0, 1, 2, 3]
    assert h.pool.available_memory == MEMORY


def test_after_a_leader_change_nothing_overtakes_the_old_leaders_answers():
    # Seen against Apache Kafka 4.1 after a whole-cluster restart: batches of a partition were in
    # flight to the old leader when metadata named a new one, and new batches sent to the new
    # leader (which held no producer state, so checked no sequence) were written before the old
    # leader answered NOT_LEADER_OR_FOLLOWER and the first batches were retried behind them.
    h = Harness(idempotent=True, batch_size=200)          # one record per batch
    h.bootstrap()
    primer = h.append(T0, value=b"p" * 150)
    h.run_until(primer.done)                              # acknowledged by node 1: pipelining
    h.defer_produce = True
    values = [bytes([ord("a") + i]) * 150 for i in range(5)]
    futures = [h.append(T0, value=value) for value in values[:3]]
    h.run_until(lambda: len(h.deferred) == 3)             # three requests in flight to node 1
    h.move_leader(T0, 2)
    futures += [h.append(T0, value=value) for value in values[3:]]
    h.step(5)
    h.clock.advance(200)
    h.step(5)
    assert [node for node, _ in h.deferred] == [1, 1, 1]  # nothing to node 2 before node 1 answers
    h.script(T0, *[{"error_code": NOT_LEADER}] * 3)
    h.answer_deferred()
    h.defer_produce = False
    h.run_until(lambda: all(f.done() for f in futures), advance_ms=50, max_steps=200)
    assert [value for *_, value in h.log[T0]] == [b"p" * 150] + values   # in order, each once
    assert [f.result().offset for f in futures] == [1, 2, 3, 4, 5]
    assert h.pool.available_memory == MEMORY


def test_after_a_reconnect_the_first_batch_goes_alone():
    # The broker may have restarted behind the new connection and lost the producer's state: a
    # transient refusal of the first batch must not let a second one in flight behind it win.
    metrics = RecordingMetrics()
    h = Harness(idempotent=True, batch_size=200, metrics=metrics)
    h.bootstrap()
    primer = h.append(T0, value=b"p" * 150)
    h.run_until(primer.done)
    h.sel.drop(1)                                         # node 1's connection resets, then back
    h.run_until(lambda: not h.client.is_ready(1, h.now), advance_ms=10)
    h.defer_produce = True
    futures = [h.append(T0, value=bytes([ord("a") + i]) * 150) for i in range(3)]
    h.run_until(lambda: len(h.deferred) == 1, advance_ms=100)   # reconnected: the first one goes
    h.step(5)
    assert len(h.deferred) == 1                           # ...alone, until it is acknowledged
    h.script(T0, {"error_code": NOT_LEADER})
    h.answer_deferred()
    h.defer_produce = False
    h.run_until(lambda: all(f.done() for f in futures), advance_ms=50, max_steps=200)
    assert [value[:1] for *_, value in h.log[T0]] == [b"p", b"a", b"b", b"c"]


def test_duplicate_sequence_is_success():
    h = Harness(idempotent=True)
    h.bootstrap()
    h.script(T0, {"error_code": DUPLICATE, "base_offset": 7})
    future = h.append(T0)
    h.run_until(future.done)
    assert future.exception() is None
    assert produced(h) == 1
    assert h.pool.available_memory == MEMORY


# --- metrics ----------------------------------------------------------------------------------------

def test_metrics_hooks_are_called():
    metrics = RecordingMetrics()
    h = Harness(metrics=metrics)
    h.bootstrap()
    h.script(T0, {"error_code": NOT_LEADER})
    future = h.append(T0)
    h.run_until(future.done, advance_ms=20, max_steps=200)
    assert metrics.names().count("request") == 2
    assert ("retry", ("t", 1)) in metrics.calls
    assert metrics.names().count("response") == 2


# --- close and the thread ---------------------------------------------------------------------------

def test_graceful_close_sends_what_is_pending():
    h = Harness(linger_ms=60_000)
    h.bootstrap()
    future = h.append(T0)
    h.sender.initiate_close()
    h.sender.run()                           # returns once everything is delivered
    assert future.result().offset == 0
    assert h.sel.closed


def test_force_close_aborts_with_a_clear_error():
    h = Harness()
    h.bootstrap()
    h.hold_produce = True
    in_flight = h.append(T0)
    h.run_until(lambda: produced(h) == 1)
    queued = h.append(T1)
    h.sender.force_close()
    h.sender.run()
    for future in (in_flight, queued):
        with pytest.raises(ProducerClosedError, match="closed forcefully"):
            future.result()
    assert h.pool.available_memory == MEMORY
    assert h.sel.closed


def test_run_thread_survives_a_crash_and_exits_on_close():
    h = Harness()
    h.bootstrap()
    real_ready = h.accumulator.ready
    crashes = []

    def ready_that_crashes_once(cluster, now_ms):
        if not crashes:
            crashes.append(now_ms)
            raise RuntimeError("a bug in one step")
        return real_ready(cluster, now_ms)

    h.accumulator.ready = ready_that_crashes_once
    future = h.append(T0)
    thread = threading.Thread(target=h.sender.run, daemon=True)
    thread.start()
    assert future.result(timeout=5).offset == 0          # the loop went on after the crash
    assert crashes
    h.sender.initiate_close()
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert not h.sender.running
    assert h.sel.closed


def test_a_bug_completing_a_retried_batch_does_not_hold_its_partition_back(monkeypatch):
    # Completing a batch raised (a bug): the batch fails, and it must not stay "in flight" for
    # the idempotence gate, or new batches of its partition would wait behind it forever.
    h = Harness(idempotent=True, batch_size=200)
    h.bootstrap()
    h.script(T0, {"error_code": NOT_LEADER})
    broken = h.append(T0, value=b"a" * 150)
    h.run_until(lambda: h.idempotence.has_in_flight(T0) and h.accumulator.has_incomplete()
                and any(b.attempts for b in h.idempotence.partitions.get_or_create(T0).in_flight), advance_ms=10)
    original = h.sender._succeed_batch

    def exploding(batch, result):
        raise RuntimeError("bug while completing")
    monkeypatch.setattr(h.sender, "_succeed_batch", exploding)
    h.run_until(broken.done, advance_ms=50)
    assert isinstance(broken.exception(0), RuntimeError)
    monkeypatch.setattr(h.sender, "_succeed_batch", original)
    after = h.append(T0, value=b"b" * 150)
    h.run_until(after.done, advance_ms=50)
    assert after.exception(0) is None
    assert not h.idempotence.has_in_flight(T0)


def test_a_metrics_bug_does_not_strand_batches():
    class Exploding(RecordingMetrics):
        def on_produce_request(self, node_id, batches, now_ms):
            raise RuntimeError("metrics bug")

    h = Harness(topics={"t": 4}, metrics=Exploding())
    h.bootstrap()
    futures = [h.append(tp) for tp in (T0, T1)]             # two nodes, two requests
    h.run_until(lambda: all(f.done() for f in futures))
    assert [f.result().offset for f in futures] == [0, 0]


# --- KIP-951: the new leader from the Produce response ----------------------------------------------

def test_a_leader_hint_moves_the_partition_and_retries_there_at_once_without_metadata():
    h = Harness()
    h.bootstrap()
    assert h.metadata.snapshot.leader_for(T0).node_id == 1
    h.leaders[("t", 0)] = 2                              # the cluster moved it (epoch 0 -> 1)
    h.script(T0, {"error_code": NOT_LEADER, "current_leader": {"leader_id": 2, "leader_epoch": 1}})
    future = h.append(T0)
    metadata_before = len(h.requests(METADATA))
    h.run_until(future.done, max_steps=10)               # no clock move: no backoff was waited
    assert future.result(0).offset == 0
    assert [len(h.produce_batches(node)) for node in (1, 2)] == [1, 1]   # then straight to node 2
    assert len(h.requests(METADATA)) == metadata_before and not h.metadata.update_requested
    assert h.metadata.snapshot.partition(T0).leader_epoch == 1


def test_a_stale_or_unknown_leader_hint_is_ignored_and_the_old_path_taken():
    h = Harness()
    h.bootstrap()
    h.script(T0, {"error_code": NOT_LEADER, "current_leader": {"leader_id": 2, "leader_epoch": 0}},
             {"error_code": NOT_LEADER, "current_leader": {"leader_id": 9, "leader_epoch": 7}})
    future = h.append(T0)
    h.run_until(lambda: len(h.produce_batches()) == 1)
    h.step()
    assert h.metadata.snapshot.leader_for(T0).node_id == 1       # epoch 0 is not newer
    assert h.metadata.update_requested or len(h.requests(METADATA)) > 1
    h.run_until(future.done, advance_ms=50, max_steps=100)       # node 9 is nobody: refresh, backoff
    assert future.result(0).offset == 0 and h.metadata.snapshot.leader_for(T0).node_id == 1


def test_leader_hints_can_be_switched_off_to_measure_them():
    h = Harness(use_leader_hints=False)
    h.bootstrap()
    h.script(T0, {"error_code": NOT_LEADER, "current_leader": {"leader_id": 2, "leader_epoch": 1}})
    h.append(T0)
    h.run_until(lambda: len(h.produce_batches()) == 1)
    h.step()
    assert h.metadata.snapshot.leader_for(T0).node_id == 1 and h.metadata.update_requested


# --- the cluster replaced behind the same addresses (another cluster id) -----------------------------

def replace_cluster(h: Harness, *, producer_id: int = PRODUCER_ID) -> None:
    """Cluster "fake" is replaced behind the same addresses by cluster "B": an empty log, and B
    gives producer ids of its own (by default the same one, as a new cluster gives id 0 again to
    its first producer). The producer's connections drop."""
    h.cluster_id = "B"
    h.log.clear()
    h.producer_id = producer_id
    for node_id in h.brokers:
        if h.sel.is_open(node_id):
            h.sel.drop(node_id)


def test_a_replaced_cluster_gets_a_new_producer_id_before_the_unacknowledged_batch_goes_again(caplog):
    """The old cluster acknowledged one batch, the second's request was out when it went away:
    the second is sent to the new cluster once, re-sequenced from 0 under the id the new cluster
    gives (never the old id and sequence, which the new one may know as another producer's)."""
    h = Harness(idempotent=True)
    h.bootstrap()
    acked = h.append(T0, value=b"acked")
    h.run_until(acked.done)
    h.hold_produce = True
    unacked = h.append(T0, value=b"unacked")
    h.run_until(lambda: produced(h) == 2)
    h.hold_produce = False
    replace_cluster(h, producer_id=2000)
    later = h.append(T0, value=b"later")
    with caplog.at_level("WARNING"):
        h.run_until(lambda: unacked.done() and later.done(), advance_ms=20, max_steps=300)
    assert (unacked.result().offset, later.result().offset) == (0, 1)
    assert h.log[T0] == [(2000, 0, 0, b"unacked"), (2000, 0, 1, b"later")]
    inits = h.requests(INIT_PRODUCER_ID)
    assert len(inits) == 2 and inits[1].body.producer_id == -1     # a new id, not a bump of A's
    assert "cluster id fake, now B" in caplog.text
    assert "t-0 up to offset 0" in caplog.text                     # what A keeps, named


def test_a_request_out_when_the_cluster_changed_fails_whatever_its_answer():
    """Sent under the old cluster's producer id, answered after the new cluster's metadata: the
    answer may be the new cluster taking it for another producer's duplicate, so it is not
    trusted, and the batch is not sent again (it may have been written)."""
    h = Harness(idempotent=True)
    h.bootstrap()
    warm_up = h.append(T0)
    h.run_until(warm_up.done)
    h.defer_produce = True
    out = h.append(T0, value=b"out")
    h.run_until(lambda: len(h.deferred) == 1)
    h.cluster_id = "B"                                   # the same connection, a new cluster
    h.metadata.request_update(h.now)
    h.run_until(lambda: h.metadata.snapshot.cluster_id == "B", advance_ms=20)
    h.defer_produce = False
    h.answer_deferred()                                  # "success", at some offset
    h.run_until(out.done)
    with pytest.raises(ClusterChangedError, match="cluster id fake, now B.*may or may not"):
        out.result()
    after = h.append(T0, value=b"after")
    h.run_until(after.done, advance_ms=20)
    assert after.result() is not None
    pid, epoch, sequence, value = h.log[T0][-1]
    assert (sequence, value) == (0, b"after")            # sequences start again under the new id
    assert len(h.requests(INIT_PRODUCER_ID)) == 2
    assert h.pool.available_memory == MEMORY


def test_a_transactional_producer_fails_when_its_cluster_is_replaced():
    h = Harness(transactional_id="etl-1")
    h.bootstrap()
    result = h.transaction_manager.initialize_transactions()
    h.run_until(lambda: result.is_done)
    result.wait(0)
    h.transaction_manager.begin_transaction()
    queued = h.append(T0)
    h.hold_produce = True
    h.run_until(lambda: produced(h) == 1, advance_ms=10)
    replace_cluster(h)
    h.run_until(queued.done, advance_ms=20, max_steps=300)
    error = h.transaction_manager.last_error
    assert isinstance(error, ClusterChangedError)
    assert "'etl-1'" in str(error) and "cluster id fake, now B" in str(error)
    assert isinstance(queued.exception(), ClusterChangedError)
    assert h.log[T0] == []
