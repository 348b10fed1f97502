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

Refused records. A tally made with ``keep_refused=True`` does not count a record that failed with
a per-record error (:func:`~spark_kafka_sink.errors.is_record_error`: the broker refused that
record alone, e.g. INVALID_RECORD or MESSAGE_TOO_LARGE for a single record) as failed: it keeps
the record, as the producer sent it, with its error (:class:`RefusedRecord`), counts it in
``refused`` and leaves ``first_failure`` alone. The caller takes them with :meth:`take_refused`,
e.g. to write them to a dead-letter topic. Other failures count as failed, as always.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Sequence

from ..structs import TopicPartition


@dataclass(frozen=True)
class DeliveryFailure:
    """The first failed batch a tally saw: its error, partition and how many records it held."""

    error: BaseException
    topic_partition: TopicPartition
    records: int


@dataclass(frozen=True)
class RefusedRecord:
    """A record the broker refused on its own (a per-record error), as the producer sent it."""

    topic_partition: TopicPartition
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    error: BaseException


class DeliveryTally:
    """Counts acknowledged and failed records per completed batch; see the module docstring."""

    __slots__ = ("acked", "failed", "refused", "acked_by_topic", "first_failure", "keep_refused",
                 "_refused_records", "_lock")

    def __init__(self, *, keep_refused: bool = False) -> None:
        self.acked = 0
        """Records acknowledged by the broker."""
        self.failed = 0
        """Records whose batch failed (after retries, or expired)."""
        self.refused = 0
        """With ``keep_refused``: records refused one by one, kept for :meth:`take_refused`."""
        self.acked_by_topic: dict[str, int] = {}
        self.first_failure: DeliveryFailure | None = None
        self.keep_refused = keep_refused
        self._refused_records: list[RefusedRecord] = []
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

    def batch_refused(self, topic_partition: TopicPartition, records: Sequence[Any],
                      error: BaseException) -> None:
        """Keep ``records`` (decoded records with ``timestamp_ms``, ``key``, ``value`` and
        ``headers``) of a batch of ``topic_partition`` that failed with the per-record ``error``
        (called by the batch's completion when ``keep_refused`` is set)."""
        kept = [RefusedRecord(topic_partition, record.timestamp_ms, record.key, record.value,
                              tuple(record.headers), error) for record in records]
        with self._lock:
            self._refused_records.extend(kept)
            self.refused += len(kept)
            self._refused_locked()

    def _refused_locked(self) -> None:
        """After refused records were kept, under the lock (a subclass may wake waiters)."""

    def take_refused(self) -> list[RefusedRecord]:
        """The refused records kept since the last call, oldest first."""
        with self._lock:
            taken, self._refused_records = self._refused_records, []
        return taken

    @property
    def completed(self) -> int:
        """Records with a known outcome."""
        return self.acked + self.failed + self.refused

    def __repr__(self) -> str:
        first = "" if self.first_failure is None else f", first_failure={self.first_failure!r}"
        refused = f", refused={self.refused}" if self.refused else ""
        return f"DeliveryTally(acked={self.acked}, failed={self.failed}{refused}{first})"
