"""KafkaProducer.send's shortcuts against the long way: the size check that skips the estimate
for a plain record refuses and accepts exactly what the estimate does; the keyed route cache
gives Java's partition and follows metadata changes. No broker: the metadata is injected and
the sender thread only ever sees a refused connection."""

from __future__ import annotations

import pytest

from spark_kafka_sink.client.cluster_snapshot import ClusterSnapshot, PartitionInfo
from spark_kafka_sink.errors import RecordTooLargeError
from spark_kafka_sink.producer.partitioner import (
    KEY_CACHE_MAX_KEY_BYTES, KEY_CACHE_SIZE, partition_for_key,
)
from spark_kafka_sink.producer.producer import _PLAIN_RECORD_BOUND, KafkaProducer
from spark_kafka_sink.record import RecordBatchBuilder
from spark_kafka_sink.bytecodec import size_of_varint
from spark_kafka_sink.structs import Node

from ..fakes import FakeClock

estimate = RecordBatchBuilder.estimate_size_upper_bound


@pytest.mark.parametrize("key_len", [0, 1, 63, 64, 8191, 8192, (1 << 20) - 1, 1 << 20])
@pytest.mark.parametrize("value_len", [0, 1, 63, 64, 8191, 8192, (1 << 20) - 1, 1 << 20])
def test_the_plain_record_bound_covers_the_estimate(key_len, value_len):
    key, value = b"k" * key_len, b"v" * value_len
    assert estimate(key, value, None) <= key_len + value_len + _PLAIN_RECORD_BOUND


def test_the_plain_record_bound_covers_every_length_an_int32_limit_allows():
    # the bound allows 4 extra bytes per length varint: any length below 2**31 needs at most 5
    for n in (1 << 27, (1 << 28) - 1, 1 << 28, (1 << 31) - 1):
        assert size_of_varint(n) - 1 <= 4


@pytest.fixture
def producer_for():
    producers = []

    def make(**config):
        producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 2_000,
                                  "reconnect.backoff.ms": 1_000, **config})
        producer._metadata.snapshot = ClusterSnapshot(
            [Node(1, "127.0.0.1", 1)], [PartitionInfo("t", p, 1) for p in range(3)])
        producers.append(producer)
        return producer

    yield make
    for producer in producers:
        producer.close(0)


@pytest.mark.parametrize("limit_name, config", [
    ("max.request.size", {"max.request.size": 3_000}),
    ("buffer.memory", {"max.request.size": 10_000, "buffer.memory": 3_000, "batch.size": 1_000}),
])
@pytest.mark.parametrize("key", [None, b"", b"key", bytearray(b"key")])
def test_send_refuses_exactly_the_records_the_estimate_puts_over_the_limit(producer_for, limit_name,
                                                                           config, key):
    producer = producer_for(**config)
    limit = 3_000
    accepted = []
    # every value length around the shortcut's threshold and the real limit
    for value_len in range(limit - _PLAIN_RECORD_BOUND - 10, limit):
        value = b"v" * value_len
        if estimate(key, value, None) > limit:
            with pytest.raises(RecordTooLargeError, match=f"{limit}, the value of the {limit_name}"):
                producer.send("t", value, key=key, partition=0)
        else:
            accepted.append(value)
    assert accepted and estimate(key, accepted[-1], None) == limit
    # a 3,000-byte buffer holds one of them: send the largest (the others fit, as it does)
    for value in accepted if limit_name == "max.request.size" else accepted[-1:]:
        assert producer.send("t", value, key=key, partition=0) is not None


def test_send_still_checks_records_with_headers_and_other_types(producer_for):
    producer = producer_for(**{"max.request.size": 3_000})
    with pytest.raises(RecordTooLargeError, match="max.request.size"):
        producer.send("t", b"v" * 2_900, key=b"k", headers=[("h", b"x" * 200)], partition=0)
    with pytest.raises(RecordTooLargeError, match="max.request.size"):
        producer.send("t", memoryview(b"v" * 3_000), key=b"k", partition=0)
    with pytest.raises(TypeError, match="value must be bytes, str or None, not int"):
        producer.send("t", 42)
    with pytest.raises(TypeError, match="key must be bytes, str or None, not float"):
        producer.send("t", b"v", key=3.5)
    with pytest.raises(TypeError, match=r"header 0 \('h'\) value must be bytes"):
        producer.send("t", b"v", key=b"k", headers=[("h", 3)], partition=0)


# --- the route of a keyed record ----------------------------------------------------------------

def _keyed_partitions(producer, keys):
    return [producer.send("t", b"v", key=key).topic_partition.partition for key in keys]


def test_keyed_records_go_to_javas_partition_whatever_the_key_type(producer_for):
    producer = producer_for()
    keys = [b"k%d" % i for i in range(50)]
    expected = [partition_for_key(key, 3) for key in keys]
    assert _keyed_partitions(producer, keys) == expected          # the first sends of each key
    assert _keyed_partitions(producer, keys) == expected          # then from the key cache
    assert _keyed_partitions(producer, [bytearray(k) for k in keys]) == expected
    assert _keyed_partitions(producer, [memoryview(k) for k in keys]) == expected
    assert _keyed_partitions(producer, [k.decode() for k in keys]) == expected
    route = producer._routes[1]["t"]
    assert set(route.by_key) == set(keys)  # only bytes keys are remembered (the others: hashed)


def test_the_key_cache_is_bounded_and_skips_long_keys(producer_for):
    producer = producer_for()
    long_key = b"x" * (KEY_CACHE_MAX_KEY_BYTES + 1)
    assert _keyed_partitions(producer, [long_key]) == [partition_for_key(long_key, 3)]
    keys = [b"key-%d" % i for i in range(KEY_CACHE_SIZE + 10)]
    assert _keyed_partitions(producer, keys) == [partition_for_key(key, 3) for key in keys]
    by_key = producer._routes[1]["t"].by_key
    assert long_key not in by_key
    assert 0 < len(by_key) <= KEY_CACHE_SIZE
    assert keys[-1] in by_key  # a full cache starts over: the latest keys are the ones kept


def test_a_metadata_change_is_seen_by_the_next_send_in_the_same_millisecond():
    """The route of a topic is reused within a millisecond, but never across metadata snapshots:
    partitions added are used by the very next keyed send, even if the clock has not moved."""
    clock = FakeClock()
    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 2_000,
                              "reconnect.backoff.ms": 1_000}, clock=clock)
    try:
        def use(partitions: int) -> None:
            producer._metadata.snapshot = ClusterSnapshot(
                [Node(1, "127.0.0.1", 1)], [PartitionInfo("t", p, 1) for p in range(partitions)])

        key = next(k for k in (b"k%d" % i for i in range(100))
                   if partition_for_key(k, 3) != partition_for_key(k, 6))
        use(3)
        assert _keyed_partitions(producer, [key, key]) == [partition_for_key(key, 3)] * 2
        use(6)
        assert _keyed_partitions(producer, [key]) == [partition_for_key(key, 6)]
    finally:
        producer.close(0)


def test_a_send_stamps_the_wall_clock_and_a_new_batch_the_monotonic_time_of_that_millisecond():
    """send() reads the wall clock per record; the monotonic time comes from the first send of
    the millisecond (the route's), so the batch's creation and the records' timestamps follow
    both clocks as they move."""
    clock = FakeClock(wall_ms=1_700_000_000_000, monotonic_ms=5_000)
    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 2_000,
                              "reconnect.backoff.ms": 1_000, "linger.ms": 60_000}, clock=clock)
    try:
        producer._metadata.snapshot = ClusterSnapshot(
            [Node(1, "127.0.0.1", 1)], [PartitionInfo("t", p, 1) for p in range(2)])
        tp = producer.send("t", b"a", partition=0).topic_partition
        producer.send("t", b"b", partition=0)         # the same millisecond: the route's times
        clock.advance(3.5)
        producer.send("t", b"c", partition=0)
        [batch] = producer._accumulator.queued_batches(tp)
        assert batch.created_ms == 5_000
        assert (batch.builder.base_timestamp, batch.builder.max_timestamp) == (
            1_700_000_000_000, 1_700_000_000_003)
        other = producer.send("t", b"d", partition=1).topic_partition  # a batch started later
        [later] = producer._accumulator.queued_batches(other)
        assert later.created_ms == 5_003 and later.builder.base_timestamp == 1_700_000_000_003
    finally:
        producer.close(0)
