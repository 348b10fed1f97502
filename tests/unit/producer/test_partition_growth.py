"""A partition added to a live topic, a partition that does not exist, and timeout errors that
say why. A real producer over the in-memory cluster (see ``threaded_cluster``), max.block.ms of a
minute: every answer here must come after one metadata round trip, not after the minute.

- ``send(partition=p)`` above the cached count asks for fresh metadata and sends once it shows p;
- if an answer fetched after the send began still lacks p, ``InvalidPartitionError`` names the
  count at once, and later sends to p fail at once too (no new request) until an answer shows
  the topic with another count;
- ``send_arrow``'s partition column follows the same rule, naming the row;
- a negative partition fails without asking anything;
- a metadata timeout says which bootstrap addresses were tried and why they failed, or that the
  cluster answered and the topic does not exist.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from spark_kafka_sink.errors import InvalidPartitionError, MetadataTimeoutError
from spark_kafka_sink.producer.producer import KafkaProducer

from .threaded_cluster import Cluster, ThreadedFakeSelector

WAIT_S = 5.0
MINUTE_MS = 60_000


@pytest.fixture
def make_producer():
    producers = []

    def make(selector, **config) -> KafkaProducer:
        producer = KafkaProducer({"bootstrap.servers": "b1:9092", "linger.ms": 0,
                                  "max.block.ms": MINUTE_MS, **config}, selector=selector)
        producers.append(producer)
        return producer

    yield make
    for producer in producers:
        producer.close(0)


def timed(fn):
    started = time.monotonic()
    try:
        return fn(), time.monotonic() - started
    except Exception as exc:
        return exc, time.monotonic() - started


def test_a_partition_added_to_a_live_topic_is_usable_at_once(make_producer):
    cluster = Cluster()
    producer = make_producer(cluster.selector)
    producer.send("t", b"v", partition=1).result(WAIT_S)        # metadata cached: 2 partitions
    cluster.topics["t"] = 3
    future, took = timed(lambda: producer.send("t", b"new", partition=2))
    assert took < WAIT_S
    assert future.result(WAIT_S).partition == 2
    assert cluster.batches[("t", 2)][0].records[0].value == b"new"


def test_a_missing_partition_costs_one_round_trip_then_fails_at_once(make_producer):
    cluster = Cluster()
    producer = make_producer(cluster.selector, **{"metadata.max.age.ms": 60_000})
    producer.send("t", b"v", partition=0).result(WAIT_S)
    before = cluster.metadata_requests()
    error, took = timed(lambda: producer.send("t", b"v", partition=5))
    assert isinstance(error, InvalidPartitionError) and took < WAIT_S
    assert error.num_partitions == 2 and "valid partitions are 0..1" in str(error)
    assert cluster.metadata_requests() == before + 1
    for _ in range(3):                                             # known missing: no new request
        error, took = timed(lambda: producer.send("t", b"v", partition=5))
        assert isinstance(error, InvalidPartitionError) and took < 0.5
    assert cluster.metadata_requests() == before + 1
    with pytest.raises(InvalidPartitionError):
        producer.send("t", b"v", partition=-1)                     # negative: never waits
    assert cluster.metadata_requests() == before + 1


def test_a_newer_answer_that_shows_the_partition_lets_sends_through(make_producer):
    cluster = Cluster()
    producer = make_producer(cluster.selector, **{"metadata.max.age.ms": 200})
    producer.send("t", b"v", partition=0).result(WAIT_S)
    with pytest.raises(InvalidPartitionError):
        producer.send("t", b"v", partition=3)
    cluster.topics["t"] = 4
    deadline = time.monotonic() + WAIT_S                           # the periodic refresh shows it
    while producer._metadata.snapshot.partition_count("t") != 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert producer.send("t", b"v", partition=3).result(WAIT_S).partition == 3


def test_send_arrow_waits_for_a_new_partition_and_names_the_row_of_a_missing_one(make_producer):
    cluster = Cluster()
    producer = make_producer(cluster.selector)
    producer.send("t", b"v", partition=0).result(WAIT_S)
    cluster.topics["t"] = 3
    grown = pa.table({"value": [b"a", b"b"], "partition": [0, 2]})
    result, took = timed(lambda: producer.send_arrow("t", grown))
    assert took < WAIT_S
    result.wait(WAIT_S)
    result.raise_for_errors()
    assert cluster.batches[("t", 2)][0].records[0].value == b"b"
    missing = pa.table({"value": [b"a", b"b", b"c"], "partition": [1, None, 7]})
    error, took = timed(lambda: producer.send_arrow("t", missing))
    assert isinstance(error, InvalidPartitionError) and took < WAIT_S
    assert error.row == 2 and error.num_partitions == 3


def test_the_timeout_names_the_bootstrap_addresses_and_their_errors(make_producer):
    producer = make_producer(ThreadedFakeSelector(),               # no broker listens anywhere
                             **{"bootstrap.servers": "nobroker:9092,unresolvable:9093",
                                "max.block.ms": 300})
    with pytest.raises(MetadataTimeoutError) as info:
        producer.send("t", b"v")
    message = str(info.value)
    assert message.startswith("Topic t not present in metadata after 300 ms: no broker has answered")
    assert "bootstrap.servers tried: nobroker:9092, unresolvable:9093" in message
    assert "nobroker:9092: connection refused" in message
    assert "unresolvable:9093: connecting to node" in message


def test_the_timeout_says_the_cluster_answered_and_the_topic_does_not_exist(make_producer):
    cluster = Cluster()
    producer = make_producer(cluster.selector, **{"max.block.ms": 300})
    with pytest.raises(MetadataTimeoutError, match="the cluster answered, and topic nope does not "
                                                   "exist .* create it first"):
        producer.send("nope", b"v")



def test_the_metadata_wait_and_the_memory_wait_share_one_max_block_ms(make_producer):
    # Metadata for a new topic takes 0.6 s, then memory is exhausted: send() must give up
    # max.block.ms (1 s) after it began, not 0.6 s + a whole max.block.ms.
    cluster = Cluster()
    cluster.topics["u"] = 1
    producer = make_producer(cluster.selector, **{"batch.size": 1024, "buffer.memory": 2048,
                                                  "max.block.ms": 1000})
    producer.send("t", b"v", partition=0).result(WAIT_S)
    cluster.hold = True
    producer.send("t", b"x" * 900, partition=0)
    producer.send("t", b"x" * 900, partition=1)                 # both leases held: pool full
    cluster.metadata_delay_s = 0.6
    error, took = timed(lambda: producer.send("u", b"y" * 900))
    assert type(error).__name__ == "BufferExhaustedError", error
    assert 0.9 <= took < 1.4, took
