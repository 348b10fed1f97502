"""The two broker calls the benchmark needs: create a topic, and count what landed in it."""

from __future__ import annotations

import time

from spark_kafka_sink.client.blocking import BlockingConnection
from spark_kafka_sink.errors import KafkaError, raise_for_code
from spark_kafka_sink.protocol import apis

_POLL_S = 0.1


def _address(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].strip().rsplit(":", 1)
    return host, int(port)


def create_topic(bootstrap: str, name: str, partitions: int, timeout_s: float = 30.0) -> None:
    """CreateTopics ``name`` (replication factor 1); return once every partition has a leader."""
    host, port = _address(bootstrap)
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                        "assignments": [], "configs": []}],
            "timeout_ms": int(timeout_s * 1000), "validate_only": False}
    deadline = time.monotonic() + timeout_s
    with BlockingConnection(host, port, timeout_s=timeout_s + 5) as conn:
        for result in conn.request(apis.CREATE_TOPICS, body).topics:
            raise_for_code(result.error_code, f"CreateTopics {name}: {result.error_message or ''}")
        while True:
            if _led_partitions(conn, name) == partitions:
                return
            if time.monotonic() > deadline:
                raise KafkaError(f"topic {name}: not every partition has a leader after {timeout_s} s")
            time.sleep(_POLL_S)


def _led_partitions(conn: BlockingConnection, topic: str) -> int:
    resp = conn.request(apis.METADATA, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    return sum(1 for t in resp.topics if t.error_code == 0
               for p in t.partitions if p.error_code == 0 and p.leader_id >= 0)


def landed(bootstrap: str, topic: str, partitions: int, timeout_s: float = 10.0) -> int:
    """The number of records in ``topic``: the sum of its partitions' end offsets (start is 0).

    Read with confluent-kafka, a client independent of ours.
    """
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-count",
                         "enable.auto.commit": False})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)[1]
                   for p in range(partitions))
    finally:
        consumer.close()
