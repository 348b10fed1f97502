"""Rebootstrap (KIP-899): the whole cluster replaced behind the same bootstrap address.

The producer's only address is a FaultProxy in front of cluster A (one node, advertising its own
port, so the producer's metadata names A's node). Mid-stream, cluster B starts (a different
cluster, another port), A is killed and the proxy now leads to B. No broker the producer knows
can be reached, so it goes back to ``bootstrap.servers``, learns B's node and carries on: every
record sent after the switch lands on B once, read back with confluent-kafka.

B is not empty: another idempotent producer wrote to it first, and got the producer id the
producer had from A (each cluster's first), with the sequences the producer uses next. The
producer must notice the new cluster id and ask B for an id of its own: going on with A's id and
sequences, B takes its records for the other producer's duplicates and "acknowledges" them at
the offsets of the other producer's records, never writing them.
"""

from __future__ import annotations

import time
import uuid

import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.embedded import EmbeddedKafka
from spark_kafka_sink.testing import FaultProxy

from ..helpers import create_topic
from ..verify import consume_all

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]


@pytest.fixture
def two_clusters(tmp_path):
    a = EmbeddedKafka(1, heap="256m", work_dir=tmp_path / "a")
    b = EmbeddedKafka(1, heap="256m", work_dir=tmp_path / "b")
    for cluster in (a, b):
        cluster.start()
    try:
        yield a, b
    finally:
        for cluster in (a, b):
            cluster.close()


def send_one_by_one(producer, topic: str, values: list[bytes]) -> list:
    """One record per batch (flushed each time): the sequences are the record numbers."""
    futures = []
    for value in values:
        futures.append(producer.send(topic, value, partition=0))
        producer.flush(30)
    return futures


def test_the_producer_carries_on_when_the_cluster_behind_its_bootstrap_is_replaced(two_clusters):
    a, b = two_clusters
    topic = f"rebootstrap-{uuid.uuid4().hex[:8]}"
    for cluster in (a, b):
        create_topic(cluster.bootstrap_servers, topic, 2)
    with KafkaProducer({"bootstrap.servers": b.bootstrap_servers}) as other:   # B's first producer
        others = send_one_by_one(other, topic, [b"p2-%05d" % i for i in range(15)])
        other_id = other._sender._txn.producer_id_and_epoch
    assert all(f.exception(0) is None for f in others)
    host, port = a.bootstrap_servers.split(",")[0].rsplit(":", 1)
    with FaultProxy(host, int(port)) as proxy:
        props = {"bootstrap.servers": f"127.0.0.1:{proxy.port}", "linger.ms": 5,
                 "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200}
        with KafkaProducer(props) as producer:
            before = send_one_by_one(producer, topic, [b"a-%05d" % i for i in range(10)])
            assert all(f.exception(0) is None for f in before)
            assert -1 not in producer._metadata.snapshot.nodes      # it knows A's node by now
            assert producer._sender._txn.producer_id_and_epoch == other_id   # A's first id: B's too
            b_host, b_port = b.bootstrap_servers.split(",")[0].rsplit(":", 1)
            proxy.target = (b_host, int(b_port))
            a.nodes[0].kill()
            started = time.monotonic()
            # sequences 10..14 of partition 0: B holds the other producer's batches with these
            after = send_one_by_one(producer, topic, [b"b-%05d" % i for i in range(5)])
            after += [producer.send(topic, b"b-%05d" % i) for i in range(5, 2_000)]
            producer.flush(90)
            switched_in = time.monotonic() - started
            failed = [f.exception(0) for f in after if f.exception(0) is not None]
            metrics = producer.metrics()
            rebootstraps = producer._metadata.rebootstraps
    assert not failed, failed[:3]
    assert rebootstraps >= 1
    # every acknowledged record was written before its answer: read to the end, then compare
    consumed = consume_all(b.bootstrap_servers, topic, 2, expected_count=15)
    in_b = {(m.partition, m.offset): m.value for records in consumed.values() for m in records}
    wrong = [(f.result().partition, f.result().offset, value, in_b.get((f.result().partition,
                                                                         f.result().offset)))
             for f, value in zip(after, [b"b-%05d" % i for i in range(2_000)])
             if in_b.get((f.result().partition, f.result().offset)) != value]
    assert not wrong, f"{len(wrong)} acknowledged record(s) not at their offset in B: {wrong[:3]}"
    assert [in_b[(0, offset)] for offset in range(15)] == [b"p2-%05d" % i for i in range(15)]
    values = sorted(v for v in in_b.values() if not v.startswith(b"p2-"))
    assert values == [b"b-%05d" % i for i in range(2_000)]           # none lost, none twice
    assert switched_in < 60, f"took {switched_in:.1f} s"
    assert metrics["record-error-total"] == 0
