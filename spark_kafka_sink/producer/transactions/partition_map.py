"""Per-partition sequence bookkeeping of the idempotent producer (Java's ``TxnPartitionMap`` and
``TxnPartitionEntry``), sans I/O.

Per partition: the producer id/epoch its sequences belong to, the next sequence to assign, the
last acknowledged sequence and offset, the connection of the last acknowledgement, and the
batches in flight ordered by base sequence. :class:`~.idempotence.Idempotence` owns one map and
makes every decision; this module only keeps the numbers straight. Owned by the sender thread, no
lock.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from ...record.layout import INVALID_OFFSET
from ...bytecodec import INT32_MAX
from ...record.sequence import NO_SEQUENCE, increment_sequence, sequence_after
from ...structs import TopicPartition

if TYPE_CHECKING:
    from ..producer_batch import ProducerBatch

NO_LAST_ACKED_SEQUENCE = -1


@dataclass(frozen=True)
class ProducerIdAndEpoch:
    """A producer id and its epoch; ``ProducerIdAndEpoch.NONE`` (-1, -1) before InitProducerId."""

    producer_id: int
    epoch: int

    @property
    def is_valid(self) -> bool:
        return self.producer_id >= 0


ProducerIdAndEpoch.NONE = ProducerIdAndEpoch(-1, -1)  # type: ignore[attr-defined]
NONE = ProducerIdAndEpoch.NONE  # type: ignore[attr-defined]


@dataclass
class TxnPartitionEntry:
    """One partition's sequences under one producer id/epoch."""

    producer_id_and_epoch: ProducerIdAndEpoch = NONE
    next_sequence: int = 0
    last_acked_sequence: int = NO_LAST_ACKED_SEQUENCE
    last_acked_offset: int = INVALID_OFFSET
    acked_link: int | None = None  # connection of the last acknowledgement under this id/epoch
    in_flight: list = field(default_factory=list)  # ProducerBatch, ordered by base sequence


class TxnPartitionMap:
    """The entries by partition, created on first use."""

    def __init__(self) -> None:
        self._entries: dict[TopicPartition, TxnPartitionEntry] = {}

    def get(self, tp: TopicPartition) -> TxnPartitionEntry | None:
        return self._entries.get(tp)

    def get_or_create(self, tp: TopicPartition) -> TxnPartitionEntry:
        entry = self._entries.get(tp)
        if entry is None:
            entry = self._entries[tp] = TxnPartitionEntry()
        return entry

    def remove(self, tp: TopicPartition) -> None:
        """Forget ``tp``'s sequences (the broker lost this producer's state for it)."""
        self._entries.pop(tp, None)

    # --- sequences ------------------------------------------------------------------------------

    def next_sequence(self, tp: TopicPartition) -> int:
        """The base sequence the next new batch for ``tp`` gets."""
        return self.get_or_create(tp).next_sequence

    def increment_sequence(self, tp: TopicPartition, increment: int) -> None:
        entry = self.get_or_create(tp)
        entry.next_sequence = increment_sequence(entry.next_sequence, increment)

    def last_acked_sequence(self, tp: TopicPartition) -> int:
        entry = self._entries.get(tp)
        return NO_LAST_ACKED_SEQUENCE if entry is None else entry.last_acked_sequence

    def last_acked_offset(self, tp: TopicPartition) -> int:
        entry = self._entries.get(tp)
        return INVALID_OFFSET if entry is None else entry.last_acked_offset

    def is_next_sequence(self, tp: TopicPartition, sequence: int) -> bool:
        """Whether ``sequence`` directly follows the last acknowledged one (wrap included)."""
        last = self.last_acked_sequence(tp)
        return sequence == (0 if last == NO_LAST_ACKED_SEQUENCE else increment_sequence(last, 1))

    def start_sequences_at_beginning(self, tp: TopicPartition, pid_epoch: ProducerIdAndEpoch) -> None:
        """Move ``tp`` to ``pid_epoch``: its in-flight batches are re-sequenced from 0, in order."""
        entry = self.get_or_create(tp)
        sequence = 0
        for batch in entry.in_flight:
            batch.reset_producer_state(pid_epoch.producer_id, pid_epoch.epoch, sequence)
            sequence = increment_sequence(sequence, batch.record_count)
        entry.producer_id_and_epoch = pid_epoch
        entry.next_sequence = sequence
        entry.last_acked_sequence = NO_LAST_ACKED_SEQUENCE
        entry.acked_link = None

    def restart_all(self, keep: Callable[[ProducerBatch], bool]) -> frozenset[TopicPartition]:
        """Every partition starts again with no producer id (its sequences belong to a producer
        id that is gone); of its batches in flight only those ``keep`` accepts stay tracked, to be
        re-sequenced under the next id (:meth:`start_sequences_at_beginning`). Returns the
        partitions that kept some."""
        kept = set()
        for tp, entry in list(self._entries.items()):
            batches = [batch for batch in entry.in_flight if keep(batch)]
            if not batches:
                del self._entries[tp]
                continue
            self._entries[tp] = TxnPartitionEntry(in_flight=batches)
            kept.add(tp)
        return frozenset(kept)

    def acknowledged_offsets(self) -> dict[TopicPartition, int]:
        """The last acknowledged offset of every partition that has one."""
        return {tp: entry.last_acked_offset for tp, entry in self._entries.items()
                if entry.last_acked_offset != INVALID_OFFSET}

    def close_gap(self, batch: ProducerBatch) -> bool:
        """``batch`` failed and the broker wrote none of it (it refused it on its own, e.g. one
        invalid record): the batches after it in its partition take its sequences, moved down by
        its record count, and so does the next new batch (Java's
        ``adjustSequencesDueToFailedBatch``). ``False`` (nothing changed) when the partition's
        sequences no longer belong to ``batch``'s producer id and epoch."""
        entry = self._entries.get(batch.topic_partition)
        if entry is None or (batch.producer_id, batch.producer_epoch) != (
                entry.producer_id_and_epoch.producer_id, entry.producer_id_and_epoch.epoch):
            return False
        count, base = batch.record_count, batch.base_sequence
        for other in entry.in_flight:
            if other is not batch and sequence_after(other.base_sequence, base):
                other.reset_producer_state(other.producer_id, other.producer_epoch,
                                           _decrement(other.base_sequence, count))
        entry.next_sequence = _decrement(entry.next_sequence, count)
        return True

    # --- in-flight batches ----------------------------------------------------------------------

    def add_in_flight(self, batch: ProducerBatch) -> None:
        if not batch.has_sequence:
            raise RuntimeError(f"Can't track batch for partition {batch.topic_partition} "
                               "when sequence is not set.")
        in_flight = self.get_or_create(batch.topic_partition).in_flight
        keys = [b.base_sequence for b in in_flight]
        in_flight.insert(bisect.bisect_right(keys, batch.base_sequence), batch)

    def remove_in_flight(self, batch: ProducerBatch) -> None:
        entry = self._entries.get(batch.topic_partition)
        if entry is not None:
            entry.in_flight[:] = [b for b in entry.in_flight if b is not batch]

    def has_in_flight(self, tp: TopicPartition) -> bool:
        entry = self._entries.get(tp)
        return entry is not None and bool(entry.in_flight)

    def first_in_flight_sequence(self, tp: TopicPartition) -> int:
        """Lowest base sequence in flight for ``tp``, or ``NO_SEQUENCE``."""
        entry = self._entries.get(tp)
        if entry is None or not entry.in_flight:
            return NO_SEQUENCE
        return entry.in_flight[0].base_sequence


def _decrement(sequence: int, count: int) -> int:
    """``sequence - count`` in the wrapping sequence space."""
    return (sequence - count) % (INT32_MAX + 1)
