"""KafkaProducer under faults, idempotence on: no record lost, none duplicated, per-key order kept.

- A TCP connection cut mid-stream (and mid-request) by a fault proxy in front of a single node that
  advertises the proxy, so every connection the producer makes goes through it.
- On the 3-node cluster (replication factor 3, min ISR 2): the leader of some partitions is killed
  (SIGKILL) while records are being sent.
"""

from __future__ import annotations

import uuid

import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.embedded import EmbeddedKafka
from spark_kafka_sink.embedded.ports import free_ports

from ..faultproxy import FaultProxy, advertise_through
from ..helpers import create_topic, partition_leaders
from ..verify import consume_all
from .test_producer import _check_exactly_once, _record

PARTITIONS = 6


def _send_range(producer: KafkaProducer, topic: str, start: int, stop: int) -> list:
    futures = []
    for i in range(start, stop):
        rec = _record(i)
        futures.append(producer.send(topic, rec["value"], key=rec["key"], headers=rec["headers"],
                                     timestamp_ms=rec["timestamp_ms"]))
    return futures


@pytest.fixture
def proxied_kafka(tmp_path):
    """One node whose client listener is reached only through a FaultProxy."""
    (broker_port,) = free_ports(1)
    with FaultProxy("127.0.0.1", broker_port) as proxy, \
            EmbeddedKafka(1, ports=[broker_port], work_dir=tmp_path,
                          extra_properties=advertise_through(proxy)) as kafka:
        yield kafka, proxy


@pytest.mark.broker
def test_connections_cut_mid_stream_lose_and_duplicate_nothing(proxied_kafka):
    kafka, proxy = proxied_kafka
    topic = f"cut-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, PARTITIONS)
    total, chunk = 60_000, 2_000
    futures: list = []
    with KafkaProducer({"bootstrap.servers": proxy.address, "linger.ms": 5,
                        "retry.backoff.ms": 50, "reconnect.backoff.ms": 20}) as producer:

        def send_until_cut(arm) -> None:
            """Arm a fault, then send (flushing, so requests and responses flow) until it fired."""
            cuts = proxy.cuts
            arm()
            while proxy.cuts == cuts and len(futures) < total:
                futures.extend(_send_range(producer, topic, len(futures), min(total, len(futures) + chunk)))
                producer.flush(timeout=60)
            assert proxy.cuts > cuts, "the armed fault never fired"

        futures.extend(_send_range(producer, topic, 0, 10_000))
        send_until_cut(proxy.cut)                                              # between requests
        send_until_cut(lambda: proxy.cut_after(20_000))                        # mid-request
        send_until_cut(lambda: proxy.cut_after(300, direction="downstream"))   # mid-response
        futures.extend(_send_range(producer, topic, len(futures), total))
        producer.flush(timeout=120)
        failed = [f.exception(0) for f in futures if f.exception(0) is not None]
        metrics = producer.metrics()
    assert len(futures) == total
    assert not failed, f"{len(failed)} records failed, first: {failed[0]!r}"
    assert proxy.cuts >= 3 and proxy.connections_total > 1
    assert metrics["record-retry-total"] > 0, "the cuts should have forced retries"
    consumed = consume_all(kafka.bootstrap_servers, topic, PARTITIONS, expected_count=total)
    _check_exactly_once(consumed, total)


@pytest.mark.cluster
def test_killing_a_leader_mid_stream_loses_and_duplicates_nothing(kafka_cluster):
    cluster = kafka_cluster
    topic = f"failover-{uuid.uuid4().hex[:8]}"
    leaders = create_topic(cluster.bootstrap_servers, topic, PARTITIONS, replication_factor=3)
    victim = leaders[0]
    total, half = 60_000, 30_000
    with KafkaProducer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5,
                        "request.timeout.ms": 10_000, "retry.backoff.ms": 100}) as producer:
        futures = _send_range(producer, topic, 0, half)
        cluster.kill_node(victim)
        futures += _send_range(producer, topic, half, total)
        producer.flush(timeout=120)
        failed = [f.exception(0) for f in futures if f.exception(0) is not None]
    try:
        assert not failed, f"{len(failed)} records failed, first: {failed[0]!r}"
        after = partition_leaders(cluster.bootstrap_servers, topic)
        assert victim not in after.values(), after
        consumed = consume_all(cluster.bootstrap_servers, topic, PARTITIONS, expected_count=total)
        _check_exactly_once(consumed, total)
    finally:
        cluster.restart_node(victim)
