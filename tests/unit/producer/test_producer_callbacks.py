"""What a send callback may do to its producer, and the I/O thread's safety net.

A real ``KafkaProducer`` with its real sender thread, over in-memory brokers (FakeSelector +
FakeBroker) and the real clock: callbacks run on that thread, as they do for users.

- ``flush()`` from a callback raises ``IllegalStateError`` at once instead of deadlocking the
  thread (Kafka 4.1's Java producer), and the producer goes on working;
- ``close()`` from a callback acts as ``close(0)`` (Java) and the producer ends fully closed;
- a callback that raises ``BaseException`` (``sys.exit()``) cannot stop the thread;
- if the thread dies all the same, pending and later records fail at once naming the cause, and
  the sockets are closed;
- every wait in ``close()`` is bounded, and ``close(0)`` with nothing pending logs no warning.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest

from spark_kafka_sink.errors import IllegalStateError, ProducerClosedError
from spark_kafka_sink.producer import producer as producer_module
from spark_kafka_sink.producer.producer import KafkaProducer

from .threaded_cluster import Cluster

WAIT_S = 5.0


@pytest.fixture
def cluster():
    return Cluster()


@pytest.fixture
def make_producer(cluster):
    yield lambda **config: cluster.producer(**{"max.block.ms": 5_000, **config})
    cluster.close_producers()


def wait_for(condition, timeout: float = WAIT_S) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.005)
    return condition()


# --- flush from a callback --------------------------------------------------------------------------

def test_flush_inside_a_callback_raises_and_the_producer_keeps_working(make_producer):
    producer = make_producer()
    outcome: list[BaseException | None] = []
    called = threading.Event()

    def flushing_callback(metadata, exception):
        try:
            producer.flush()
            outcome.append(None)
        except BaseException as exc:  # noqa: B036 - the test records whatever flush raised
            outcome.append(exc)
        called.set()

    producer.send("t", b"first", partition=0, callback=flushing_callback)
    assert called.wait(WAIT_S), "flush() in the callback never returned: the I/O thread is stuck"
    assert isinstance(outcome[0], IllegalStateError)
    assert "callback" in str(outcome[0]) and "flush()" in str(outcome[0])
    later = producer.send("t", b"second", partition=0)
    producer.flush(timeout=WAIT_S)
    assert later.result(0).offset == 1
    started = time.monotonic()
    producer.close(timeout=WAIT_S)
    assert time.monotonic() - started < WAIT_S
    assert cluster_closed(producer)


def cluster_closed(producer: KafkaProducer) -> bool:
    return not producer._thread.is_alive() and producer._client._closed


# --- close from a callback --------------------------------------------------------------------------

@pytest.mark.parametrize("timeout", [None, 10, 0])
def test_close_inside_a_callback_acts_as_close_zero_and_closes_fully(make_producer, cluster, timeout):
    producer = make_producer()
    cluster.hold = False
    closed_in_callback = threading.Event()

    def closing_callback(metadata, exception):
        producer.close(timeout)
        closed_in_callback.set()

    producer.send("t", b"first", partition=0, callback=closing_callback).result(WAIT_S)
    assert closed_in_callback.wait(WAIT_S)
    cluster.hold = True
    assert wait_for(lambda: not producer._thread.is_alive()), "the I/O thread did not stop"
    assert producer._client._closed and cluster.selector.closed   # every socket closed
    with pytest.raises(ProducerClosedError):
        producer.send("t", b"after close", partition=0)
    producer.close()                                                # a second close returns at once


def test_close_inside_a_callback_fails_what_is_still_pending(make_producer, cluster):
    producer = make_producer()
    first_done = threading.Event()
    release = threading.Event()

    def closing_callback(metadata, exception):
        release.wait(WAIT_S)           # the test queues more records while this callback runs
        producer.close()
        first_done.set()

    producer.send("t", b"first", partition=0, callback=closing_callback)
    assert wait_for(lambda: cluster.offsets[("t", 0)] == 1)
    cluster.hold = True
    pending = producer.send("t", b"pending", partition=1)
    release.set()
    assert first_done.wait(WAIT_S)
    with pytest.raises(ProducerClosedError, match="closed forcefully"):
        pending.result(WAIT_S)
    assert wait_for(lambda: not producer._thread.is_alive())


# --- BaseException from a callback, and the safety net --------------------------------------------

@pytest.mark.parametrize("raised", [SystemExit(1), KeyboardInterrupt(), GeneratorExit()])
def test_a_base_exception_in_a_callback_does_not_stop_the_sender(make_producer, raised, caplog):
    producer = make_producer()

    def stop_on_first(metadata, exception):
        raise raised

    with caplog.at_level(logging.ERROR, logger="spark_kafka_sink.producer.future"):
        producer.send("t", b"first", partition=0, callback=stop_on_first).result(WAIT_S)
        later = producer.send("t", b"second", partition=0)
        assert later.result(WAIT_S).offset == 1
    assert producer._thread.is_alive()
    assert any("callback" in r.getMessage() and r.exc_info and r.exc_info[0] is type(raised)
               for r in caplog.records)


class _Fatal(BaseException):
    """Stands for anything that escapes the loop's own ``except Exception``."""


def test_a_dead_sender_fails_pending_and_later_records_naming_the_cause(make_producer, cluster):
    producer = make_producer()
    producer.send("t", b"warm-up", partition=0).result(WAIT_S)    # metadata known, connected
    cluster.hold = True
    pending = producer.send("t", b"pending", partition=0)
    assert wait_for(lambda: producer._client.in_flight_request_count() == 1)
    real_ready = producer._accumulator.ready

    def ready_that_dies(cluster_snapshot, now_ms):
        raise _Fatal("a bug that escapes the loop")

    producer._accumulator.ready = ready_that_dies
    producer._sender.wakeup()
    assert wait_for(lambda: not producer._thread.is_alive()), "the thread should have died"
    producer._accumulator.ready = real_ready
    with pytest.raises(ProducerClosedError, match="I/O thread died .*_Fatal: a bug that escapes"):
        pending.result(0)
    with pytest.raises(ProducerClosedError, match="I/O thread died"):
        producer.send("t", b"later", partition=0)                 # a known topic: the accumulator
    with pytest.raises(ProducerClosedError, match="I/O thread died"):
        producer.send("other-topic", b"later")                     # a new topic: no metadata wait
    assert cluster.selector.closed and producer._client._closed   # every socket released
    started = time.monotonic()
    producer.close()
    assert time.monotonic() - started < 1


# --- close is bounded, and quiet when nothing is pending ------------------------------------------

def test_close_zero_logs_no_warning_when_nothing_is_pending(make_producer, caplog):
    producer = make_producer()
    producer.send("t", b"v", partition=0).result(WAIT_S)
    with caplog.at_level(logging.WARNING, logger="spark_kafka_sink"):
        producer.close(0)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_close_with_a_timeout_warns_when_records_were_still_pending(make_producer, cluster, caplog):
    producer = make_producer()
    producer.send("t", b"v", partition=0).result(WAIT_S)
    cluster.hold = True
    pending = producer.send("t", b"stuck", partition=0)
    with caplog.at_level(logging.WARNING, logger="spark_kafka_sink"):
        producer.close(0.2)
    assert any("not delivered within 0.2 s" in r.getMessage() for r in caplog.records)
    with pytest.raises(ProducerClosedError):
        pending.result(0)


def test_every_wait_in_close_is_bounded_even_when_a_callback_blocks(make_producer, monkeypatch, caplog):
    monkeypatch.setattr(producer_module, "_FORCED_CLOSE_GRACE_S", 0.2)
    producer = make_producer()
    release = threading.Event()
    entered = threading.Event()

    def blocking_callback(metadata, exception):
        entered.set()
        release.wait(30)

    producer.send("t", b"v", partition=0, callback=blocking_callback)
    assert entered.wait(WAIT_S)
    try:
        started = time.monotonic()
        with caplog.at_level(logging.ERROR, logger="spark_kafka_sink"):
            producer.close(0.2)
        assert time.monotonic() - started < 2
        assert any("did not stop" in r.getMessage() for r in caplog.records)
    finally:
        release.set()
    assert wait_for(lambda: not producer._thread.is_alive())


# --- send from a callback ---------------------------------------------------------------------------

def test_a_callback_may_send_to_a_known_topic(make_producer):
    producer = make_producer()
    chained: list = []
    producer.send("t", b"first", partition=0,
                  callback=lambda md, exc: chained.append(producer.send("t", b"second", partition=0)))
    assert wait_for(lambda: chained and chained[0].done())
    assert chained[0].result(0).offset == 1


def test_a_send_from_a_callback_never_waits_for_memory_or_metadata(make_producer, cluster):
    producer = make_producer(**{"batch.size": 1024, "buffer.memory": 2048, "max.block.ms": 60_000})
    producer.send("t", b"v", partition=0).result(WAIT_S)
    cluster.hold = True
    producer.send("t", b"x" * 900, partition=1)                 # holds its lease: requests hang
    outcome: list = []
    started = []

    def sending_callback(metadata, exception):
        started.append(time.monotonic())
        for topic, value, partition in (("t", b"y" * 1500, 0), ("new-topic", b"z", 0), ("t", b"p", 5)):
            try:
                producer.send(topic, value, partition=partition)
                outcome.append(None)
            except Exception as exc:
                outcome.append(exc)
        started.append(time.monotonic())

    cluster.hold = False
    producer.send("t", b"x" * 900, partition=0, callback=sending_callback)  # pool now exhausted
    assert wait_for(lambda: len(started) == 2)
    assert started[1] - started[0] < 1                            # not max.block.ms (60 s)
    memory, metadata, partition = outcome
    assert type(memory).__name__ == "BufferExhaustedError" and "callback" in str(memory)
    assert type(metadata).__name__ == "MetadataTimeoutError" and "callback" in str(metadata)
    # a partition above the cached count is not waited for either, and the error says why
    assert type(partition).__name__ == "MetadataTimeoutError" and "callback" in str(partition)
    assert producer._thread.is_alive()


# --- a flush that times out names what is still pending --------------------------------------------

def test_a_flush_that_times_out_names_the_records_still_pending(cluster, make_producer):
    from spark_kafka_sink.errors import KafkaTimeoutError

    producer = make_producer(**{"linger.ms": 60_000})   # one batch per partition, sent by the flush
    cluster.hold = True                                  # the broker takes the requests, never answers
    for i in range(3):
        producer.send("t", b"x%d" % i, partition=0)
    producer.send("t", b"y", partition=1)
    with pytest.raises(KafkaTimeoutError) as info:
        producer.flush(timeout=0.2)
    assert str(info.value) == ("flush did not complete within 0.2 s: 4 records in 2 batches (topic 't' "
                               "partitions 0, 1) still without an outcome")
