"""spark_kafka_sink.testing for users: the pytest example of docs/testing-kit.md, run exactly as
printed there, plus the kit's controls on one proxied node (leader, ISR, refuse, cut, kill and
restart) and a secured cluster whose client properties work with confluent-kafka on every
listener."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.embedded import BrokerSecurity
from spark_kafka_sink.testing import KafkaCluster

from ..verify import end_offsets

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]


# --- docs/testing-kit.md example: begin -----------------------------------------------------------
@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # One broker whose client listener sits behind a FaultProxy (nodes=3 for replication).
    with KafkaCluster(nodes=1, proxied=True, work_dir=tmp_path_factory.mktemp("kafka")) as cluster:
        yield cluster


def test_records_survive_a_stalled_broker(cluster):
    cluster.create_topic("events", partitions=3)
    config = {"bootstrap.servers": cluster.bootstrap_servers,
              "request.timeout.ms": 2000, "delivery.timeout.ms": 30000}
    with KafkaProducer(config) as producer:
        producer.send("events", b"warm-up").result(timeout=30)
        cluster.proxy(1).stall(seconds=3)     # the broker hears nothing for 3 s
        futures = [producer.send("events", f"event-{i}".encode()) for i in range(1000)]
        producer.flush(timeout=30)
    results = [f.result() for f in futures]   # raises if any record failed
    # Exactly once: every partition's offsets run from 0 without a gap (no duplicate written).
    last = {}
    for r in results:
        last[r.partition] = max(last.get(r.partition, -1), r.offset)
    assert sum(offset + 1 for offset in last.values()) == 1001
# --- docs/testing-kit.md example: end -------------------------------------------------------------


def test_controls_on_one_proxied_node(cluster):
    topic = f"kit-{time.monotonic_ns()}"
    assert cluster.create_topic(topic, partitions=2) == {0: 1, 1: 1}
    assert cluster.leader_of(topic, 1) == 1 and cluster.isr(topic, 0) == (1,)
    assert cluster.node_ids == (1,) and cluster.broker_ids() == (1,)
    proxy = cluster.proxy(1)
    assert cluster.bootstrap_servers == proxy.address            # clients go through the proxy
    assert cluster.client_properties() == {"bootstrap.servers": proxy.address}
    with KafkaProducer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0,
                        "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200}) as producer:
        producer.send(topic, b"first", partition=0).result(timeout=30)
        connections = proxy.connections_total
        proxy.refuse(seconds=1.0)
        proxy.cut()                                              # live connections reset
        began = time.monotonic()
        assert producer.send(topic, b"after cut", partition=0).result(timeout=30).offset == 1
        assert time.monotonic() - began >= 0.5                   # reconnected once refusal ended
        assert proxy.connections_total > connections and not proxy.refusing
        cluster.kill(1)
        assert not cluster.is_alive(1)
        future = producer.send(topic, b"while down", partition=1)
        cluster.restart(1)
        assert future.result(timeout=60).offset == 0
    assert cluster.is_alive(1) and cluster.leader_of(topic, 0) == 1


def test_a_secured_cluster_hands_out_working_client_properties(tmp_path):
    with KafkaCluster(nodes=1, security=BrokerSecurity(), work_dir=tmp_path) as secured:
        secured.create_topic("secured", partitions=1)
        assert secured.bootstrap_for("SASL_SSL") != secured.bootstrap_servers
        for protocol, mechanism in (("SSL", None), ("SASL_SSL", "SCRAM-SHA-512"),
                                    ("SASL_PLAINTEXT", "PLAIN")):
            props = secured.client_properties(protocol, mechanism=mechanism)
            assert props["bootstrap.servers"] == secured.bootstrap_for(protocol)
            assert props["security.protocol"] == protocol
            producer = Producer(props)
            delivered = []
            producer.produce("secured", protocol.encode(),
                             on_delivery=lambda err, msg: delivered.append(err))
            assert producer.flush(30) == 0 and delivered == [None], (protocol, delivered)
        assert end_offsets(secured.bootstrap_servers, "secured", 1) == {0: 3}
