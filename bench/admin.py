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


def committed(bootstrap: str, topic: str, partitions: int, timeout_s: float = 120.0) -> int:
    """The number of records a ``read_committed`` reader sees in ``topic`` (transactional writes:
    the end offsets also count the commit markers). Read with confluent-kafka to each partition's
    end, outside any timed section."""
    import time

    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-count-committed",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": "read_committed"})
    count, at_end = 0, set()
    deadline = time.monotonic() + timeout_s
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        while len(at_end) < partitions and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                error = message.error()
                if error is None:
                    count += 1
                elif error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
        return count
    finally:
        consumer.close()
