"""Reading the topic back with confluent-kafka (librdkafka): a client independent of ours.

The demo's check must not trust our own code, so the records are read by another Kafka client,
with CRC checks on, and every record's key is compared with the ``user_id`` inside its JSON
value (the job was run with ``--key-column user_id``) and duplicates are counted by ``event_id``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class ReadBack:
    """What was in the topic: records per partition, how many had a key other than the
    ``user_id`` of their value, how many distinct ``event_id``s there were (fewer than records:
    duplicates), and how long reading took."""

    per_partition: Mapping[int, int]
    key_mismatches: int
    distinct_events: int
    seconds: float

    @property
    def total(self) -> int:
        return sum(self.per_partition.values())


def read_back(bootstrap: str, topic: str, partitions: int, *, timeout_s: float = 120.0) -> ReadBack:
    """Read every record of ``topic`` from the start up to each partition's end offset as it was
    when reading began. ``TimeoutError`` if that takes longer than ``timeout_s``."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    started = time.monotonic()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"demo-read-back-{topic}",
                         "enable.auto.commit": False, "check.crcs": True,
                         "auto.offset.reset": "earliest"})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
        counts = {p: 0 for p in range(partitions)}
        pending = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in pending])
        mismatches = 0
        event_ids: set[str] = set()
        deadline = started + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} back took over {timeout_s:.0f} s: read {counts} "
                                   f"of {ends}")
            for message in consumer.consume(num_messages=5000, timeout=0.5):
                if message.error():
                    raise KafkaException(message.error())
                partition = message.partition()
                counts[partition] += 1
                event = json.loads(message.value())
                event_ids.add(event["event_id"])
                if message.key() is None or event["user_id"] != message.key().decode():
                    mismatches += 1
                if message.offset() + 1 >= ends[partition]:
                    pending.discard(partition)
        return ReadBack(counts, mismatches, len(event_ids), time.monotonic() - started)
    finally:
        consumer.close()
