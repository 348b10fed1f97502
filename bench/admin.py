"""The two broker calls the benchmark needs: create a topic, and count what landed in it."""

from __future__ import annotations

from spark_kafka_sink import admin as _admin


def create_topic(bootstrap: str, name: str, partitions: int, timeout_s: float = 30.0) -> None:
    """CreateTopics ``name`` (replication factor 1); return once every partition has a leader."""
    _admin.create_topic(bootstrap, name, partitions, replication_factor=1, timeout_s=timeout_s)


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
