"""Rebootstrap (KIP-899): the whole cluster replaced behind the same bootstrap address.

The producer's only address is a FaultProxy in front of cluster A (one node, advertising its own
port, so the producer's metadata names A's node). Mid-stream, cluster B starts (a different
cluster, another port), A is killed and the proxy now leads to B. No broker the producer knows
can be reached, so it goes back to ``bootstrap.servers``, learns B's node and carries on: every
record sent after the switch lands on B once, read back with confluent-kafka.
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


def test_the_producer_carries_on_when_the_cluster_behind_its_bootstrap_is_replaced(two_clusters):
    a, b = two_clusters
    topic = f"rebootstrap-{uuid.uuid4().hex[:8]}"
    for cluster in (a, b):
        create_topic(cluster.bootstrap_servers, topic, 2)
    host, port = a.bootstrap_servers.split(",")[0].rsplit(":", 1)
    with FaultProxy(host, int(port)) as proxy:
        props = {"bootstrap.servers": f"127.0.0.1:{proxy.port}", "linger.ms": 5,
                 "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200}
        with KafkaProducer(props) as producer:
            before = [producer.send(topic, b"a-%05d" % i) for i in range(1_000)]
            producer.flush(30)
            assert all(f.exception(0) is None for f in before)
            assert -1 not in producer._metadata.snapshot.nodes      # it knows A's node by now
            b_host, b_port = b.bootstrap_servers.split(",")[0].rsplit(":", 1)
            proxy.target = (b_host, int(b_port))
            a.nodes[0].kill()
            started = time.monotonic()
            after = [producer.send(topic, b"b-%05d" % i) for i in range(2_000)]
            producer.flush(90)
            switched_in = time.monotonic() - started
            failed = [f.exception(0) for f in after if f.exception(0) is not None]
            metrics = producer.metrics()
            rebootstraps = producer._metadata.rebootstraps
    assert not failed, failed[:3]
    assert rebootstraps >= 1
    consumed = consume_all(b.bootstrap_servers, topic, 2, expected_count=2_000)
    values = sorted(m.value for records in consumed.values() for m in records)
    assert values == [b"b-%05d" % i for i in range(2_000)]
    assert switched_in < 60, f"took {switched_in:.1f} s"
    assert metrics["record-error-total"] == 0
