"""DeliveryTally: the outcome of many records, counted once per batch instead of once per record.

A writer that sends a million records and only needs "how many were acknowledged, per topic, and
what was the first error" pays dearly for a callback per record: every completion runs a Python
call on the sender thread, which takes the GIL from the thread that is sending. Pass a tally as a
record's ``callback`` instead::

    tally = DeliveryTally()
    for key, value in rows:
        producer.send("events", value, key=key, callback=tally)
        if tally.first_failure is not None:
            break
    producer.flush()
    tally.acked, tally.failed, tally.acked_by_topic, tally.first_failure

The batch that holds the record counts it against the tally (one dict update at append). When
the batch completes, the tally learns ``(topic-partition, count, error)`` once, under its own
lock. The record's future is an ordinary future without a callback; ``add_done_callback`` still
works on it. Tallies are updated before the batch's per-record callbacks run, and before
``flush()`` returns. One tally may be shared by several threads and producers.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ..structs import TopicPartition


@dataclass(frozen=True)
class DeliveryFailure:
    """The first failed batch a tally saw: its error, partition and how many records it held."""

    error: BaseException
    topic_partition: TopicPartition
    records: int


class DeliveryTally:
    """Counts acknowledged and failed records per completed batch; see the module docstring."""

    __slots__ = ("acked", "failed", "acked_by_topic", "first_failure", "_lock")

    def __init__(self) -> None:
        self.acked = 0
        """Records acknowledged by the broker."""
        self.failed = 0
        """Records whose batch failed (after retries, or expired)."""
        self.acked_by_topic: dict[str, int] = {}
        self.first_failure: DeliveryFailure | None = None
        self._lock = threading.Lock()

    def batch_completed(self, topic_partition: TopicPartition, records: int,
                        error: BaseException | None, base_offset: int = -1) -> None:
        """Count ``records`` of one batch of ``topic_partition`` (called by the batch's completion;
        ``base_offset``: the first record's offset, -1 when failed or unknown)."""
        with self._lock:
            self._count_locked(topic_partition, records, error, base_offset)

    def _count_locked(self, topic_partition: TopicPartition, records: int,
                      error: BaseException | None, base_offset: int) -> None:
        """The counting, under the tally's lock (a subclass extends it, e.g. with offsets)."""
        if error is None:
            self.acked += records
            topic = topic_partition.topic
            self.acked_by_topic[topic] = self.acked_by_topic.get(topic, 0) + records
            return
        self.failed += records
        if self.first_failure is None:
            self.first_failure = DeliveryFailure(error, topic_partition, records)

    @property
    def completed(self) -> int:
        """Records with a known outcome."""
        return self.acked + self.failed

    def __repr__(self) -> str:
        first = "" if self.first_failure is None else f", first_failure={self.first_failure!r}"
        return f"DeliveryTally(acked={self.acked}, failed={self.failed}{first})"
