"""Per-leader drain: one drain sends at most one ProduceRequest per node, holding every sendable
partition that node leads, and the producer's metrics count it (``produce-drain-total``, per node
``produce-request-total`` / ``produce-partition-total``). In-memory brokers, fake clock."""

from __future__ import annotations

from spark_kafka_sink.producer.metrics import ProducerMetrics
from spark_kafka_sink.structs import TopicPartition

from .sender_harness import PRODUCE, Harness

BROKERS = [(1, "b1", 9092), (2, "b2", 9092), (3, "b3", 9092)]
PARTITIONS = 12  # leaders round-robin: partition p is led by node p % 3 + 1


def _partitions_by_request(h: Harness, node_id: int) -> list[set[int]]:
    return [{p.index for t in r.body.topic_data for p in t.partition_data}
            for r in h.requests(PRODUCE, node_id)]


def _harness(metrics=None, **options) -> Harness:
    h = Harness(topics={"t": PARTITIONS}, brokers=BROKERS, metrics=metrics, idempotent=True,
                **options)
    h.bootstrap()
    return h


def test_one_drain_sends_one_request_per_node_with_all_its_ready_partitions():
    h = _harness(metrics := ProducerMetrics(clock=Harness().clock, client_id="drain"))
    h.run_until(lambda: h.transaction_manager.has_producer_id)   # connected to node 1 with a pid
    for node_id in (1, 2, 3):                             # connections ready, as after a warm-up
        h.run_until(lambda n=node_id: h.client.ready(n, h.now))
    futures = [h.append(TopicPartition("t", p)) for p in range(PARTITIONS)]
    h.step()                                             # exactly one drain, then its I/O
    for node_id in (1, 2, 3):
        led = {p for p in range(PARTITIONS) if p % 3 + 1 == node_id}
        assert _partitions_by_request(h, node_id) == [led]
    h.run_until(lambda: all(f.done() for f in futures))
    assert all(f.exception() is None for f in futures)
    values = metrics.snapshot().as_dict()
    assert values["produce-drain-total"] == 1
    for node_id in (1, 2, 3):
        assert values[f"node-{node_id}.produce-request-total"] == 1
        assert values[f"node-{node_id}.produce-partition-total"] == 4


def test_under_load_no_drain_sends_two_requests_to_one_node():
    h = _harness(metrics := ProducerMetrics(clock=Harness().clock, client_id="drain"),
                 linger_ms=5, batch_size=256)
    futures = []
    for round_ in range(40):
        futures += [h.append(TopicPartition("t", (round_ * 7 + i) % PARTITIONS), value=b"x" * 60)
                    for i in range(25)]
        h.step()
        h.clock.advance(3)
    h.run_until(lambda: all(f.done() for f in futures), max_steps=500, advance_ms=5)
    assert all(f.exception() is None for f in futures)
    values = metrics.snapshot().as_dict()
    drains = values["produce-drain-total"]
    requests = {n: values[f"node-{n}.produce-request-total"] for n in (1, 2, 3)}
    assert drains > 1
    assert all(0 < count <= drains for count in requests.values()), (drains, requests)
    assert sum(requests.values()) == len(h.requests(PRODUCE))
    for node_id in (1, 2, 3):                             # each request holds only its own leader's
        for parts in _partitions_by_request(h, node_id):
            assert parts and all(p % 3 + 1 == node_id for p in parts)
        assert values[f"node-{node_id}.produce-partition-total"] == sum(
            map(len, _partitions_by_request(h, node_id)))
