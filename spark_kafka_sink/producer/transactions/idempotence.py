"""The idempotent producer's sequence bookkeeping and decisions, sans I/O (the sender-thread half
of Java's ``TransactionManager``): which batch may drain, its sequence, what an answer does to
the partition's sequences, whether a refused batch is retried, and when the epoch is bumped.

**Owner: the sender thread, and no lock.** Everything here runs on the producer's I/O thread: the
drain (through the accumulator), the answers, expiry, the loop's housekeeping, and
:class:`~.requests.InitProducerIdHandler`. No other thread calls it, so it keeps its state in
plain fields. It calls one thing outside itself, the :class:`~.manager.TransactionManager` it is
given (the producer id and epoch, the state table, the transaction): it reads that manager's
state and asks it for the id, for epoch bumps and for the transaction's errors. The call goes
this way only: the manager never calls back, and never holds its lock while this runs (see
docs/ARCHITECTURE.md, "Threads and locks"). The per-partition numbers are a
:class:`~.partition_map.TxnPartitionMap`.

- **Sequences are assigned at drain** (:meth:`Idempotence.assign_producer_state`), never at
  append; they wrap from int32 max to 0 (:func:`increment_sequence`). A retried batch keeps its
  sequence; the parts of a split batch (MESSAGE_TOO_LARGE) carry the refused batch's range,
  consecutively, and drain like retries.
- **Drain gate** (:meth:`Idempotence.can_drain`, Java's ``shouldStopDrainBatchesForPartition``):
  nothing drains without a producer id; a new batch waits while its partition has batches in
  flight under an older id/epoch or unresolved sequences; a retried batch goes only when it is
  the first in flight; in a transaction a partition drains once the manager has enrolled it.
  Beyond Java, pipelining is earned per connection (``link``): a new batch joins batches in
  flight only on the connection that acknowledged the partition's last batch, never beside a
  retry (docs/ARCHITECTURE.md, "Idempotence", gives the reordering this prevents).
- **Epoch bump** (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID, as Java 4.x): the decision
  helpers request it per partition; the sender calls
  :meth:`~Idempotence.bump_epoch_and_reset_id_if_needed` at the top of its loop, which has the
  manager raise the epoch and re-sequences the requesting partitions' in-flight batches from 0.
  In a transaction the request goes to the manager instead. Every retry stays bounded by
  ``delivery.timeout.ms``.
- **A replaced cluster** (:meth:`Idempotence.cluster_changed`): the producer forgets its id and
  every sequence; batches waiting to be sent again are re-sequenced under the new id; a
  transactional producer fails with ``ClusterChangedError``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ... import errors
from ...error_codes import ErrorCode
from ...errors import ClusterChangedError
from ...record.layout import INVALID_OFFSET
from ...record.sequence import NO_SEQUENCE, increment_sequence, sequence_after
from ...structs import TopicPartition
from .manager import TransactionManager, fenced_error
from .partition_map import NO_LAST_ACKED_SEQUENCE, ProducerIdAndEpoch, TxnPartitionMap
from .states import TransactionState

if TYPE_CHECKING:
    from ..producer_batch import ProducerBatch

log = logging.getLogger(__name__)

# Errors after which the producer cannot continue (Java's maybeTransitionToErrorState).
_FATAL_CODES = frozenset({ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.UNSUPPORTED_VERSION,
                          ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.PRODUCER_FENCED})
_FENCED_CODES = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})


@dataclass(frozen=True)
class RetryDecision:
    """What to do with a batch the broker refused: ``retry`` it (after the usual backoff) or fail
    it; ``epoch_bump_requested`` says a bump was requested for its partition; ``reason`` is for
    the log."""

    retry: bool
    epoch_bump_requested: bool = False
    reason: str = ""


class Idempotence:
    """The sequences and in-flight batches of one producer, and every decision on them, over a
    :class:`~.partition_map.TxnPartitionMap`; reports to ``manager``. Sender thread only, no
    lock: see the module docstring."""

    def __init__(self, manager: TransactionManager) -> None:
        self._manager = manager
        self._transactional = manager.is_transactional   # fixed for the manager's life
        self._partitions = TxnPartitionMap()
        self._unresolved: dict[TopicPartition, int] = {}  # tp -> sequence after the expired batch
        self._to_rewrite: set[TopicPartition] = set()    # re-sequenced at the next epoch bump
        self._rewrite_on_new_id: set[TopicPartition] = set()  # ... at the next InitProducerId
        self._epoch_bump_required = False

    @property
    def manager(self) -> TransactionManager:
        """The manager this bookkeeping reports to (the producer id, the state, the transaction)."""
        return self._manager

    @property
    def partitions(self) -> TxnPartitionMap:
        return self._partitions

    @property
    def epoch_bump_required(self) -> bool:
        return self._epoch_bump_required

    # --- the producer id and epoch (the manager's), and what they do to the sequences -----------

    def set_producer_id_and_epoch(self, producer_id: int, epoch: int) -> None:
        """The idempotent producer's InitProducerId answered: the manager takes the id (unless
        it asked the cluster that was replaced since); the partitions waiting for a new id are
        re-sequenced under it from 0, the others restart at drain."""
        if not self._manager.set_producer_id_and_epoch(producer_id, epoch):
            return
        pid_epoch = self._manager.producer_id_and_epoch
        self._epoch_bump_required = False
        self._to_rewrite.clear()
        for tp in self._rewrite_on_new_id:
            self._partitions.start_sequences_at_beginning(tp, pid_epoch)
        self._rewrite_on_new_id.clear()

    def bump_epoch(self) -> None:
        """Have the manager raise the epoch by one (or reset the id at the last epoch) and
        re-sequence, from 0, the in-flight batches of every partition that requested the bump."""
        pid_epoch = self._manager.bump_epoch()
        for tp in self._to_rewrite:
            self._partitions.start_sequences_at_beginning(tp, pid_epoch)
            self._unresolved.pop(tp, None)
        self._to_rewrite.clear()
        self._epoch_bump_required = False

    def request_epoch_bump(self, tp: TopicPartition) -> None:
        """Ask for a bump at the sender's next loop; ``tp``'s in-flight batches get re-sequenced.
        In a transaction the coordinator owns the epoch: the manager's abort bumps it instead."""
        if self._transactional:
            self._manager.require_epoch_bump()
            return
        self._epoch_bump_required = True
        self._to_rewrite.add(tp)

    def bump_epoch_and_reset_id_if_needed(self) -> bool:
        """Called by the sender each loop: perform a requested bump; ``True`` when an
        InitProducerId must now be sent (``InitProducerIdHandler`` has the manager
        ``begin_init`` when it goes out). Never for a transactional producer:
        ``init_transactions()`` starts that."""
        if self._transactional:
            return False
        manager = self._manager
        if self._epoch_bump_required and manager.state is TransactionState.READY:
            self.bump_epoch()
        return manager.state is TransactionState.UNINITIALIZED

    def cluster_changed(self, previous: str, current: str) -> None:
        """The cluster behind ``bootstrap.servers`` was replaced (cluster id ``previous``, now
        ``current``): see the module docstring. Batches with ``in_flight`` set (a request still
        out) stop being tracked: the sender fails them when they are answered."""
        manager = self._manager
        if manager.has_fatal_error:
            return
        acknowledged = self._partitions.acknowledged_offsets()
        if acknowledged:
            shown = ", ".join(f"{tp.topic}-{tp.partition} up to offset {offset}"
                              for tp, offset in sorted(acknowledged.items())[:5])
            more = f" and {len(acknowledged) - 5} more" if len(acknowledged) > 5 else ""
            log.warning("the cluster changed (cluster id %s, now %s): the records cluster %s "
                        "acknowledged stay in %s and are not in %s (%s%s)", previous, current,
                        previous, previous, current, shown, more)
        if self._transactional:
            manager.fatal_error(ClusterChangedError(
                f"transactional.id {manager.transactional_id!r}: the cluster behind bootstrap.servers "
                f"changed (cluster id {previous}, now {current}). The producer's id and epoch, its "
                f"coordinator and its open transaction were cluster {previous}'s: the records of "
                f"that transaction are not committed, and none is written to {current}. Close this "
                "producer; a new one registers its transactional.id with the new cluster"))
            return
        waiting = self._partitions.restart_all(keep=lambda batch: not batch.in_flight)
        log.warning("the cluster changed (cluster id %s, now %s): the producer id %s was cluster "
                    "%s's; asking %s for a new one. %d partition(s) have batches to send again, "
                    "re-sequenced under the new id", previous, current,
                    manager.producer_id_and_epoch.producer_id, previous, current, len(waiting))
        self._rewrite_on_new_id = set(waiting)
        self._unresolved.clear()
        self._to_rewrite.clear()
        self._epoch_bump_required = False
        manager.forget_producer_id()

    # --- sequences and in-flight batches (the partition map's) ---------------------------------

    def next_sequence(self, tp: TopicPartition) -> int:
        return self._partitions.next_sequence(tp)

    def last_acked_sequence(self, tp: TopicPartition) -> int:
        return self._partitions.last_acked_sequence(tp)

    def last_acked_offset(self, tp: TopicPartition) -> int:
        return self._partitions.last_acked_offset(tp)

    def has_in_flight(self, tp: TopicPartition) -> bool:
        return self._partitions.has_in_flight(tp)

    def first_in_flight_sequence(self, tp: TopicPartition) -> int:
        return self._partitions.first_in_flight_sequence(tp)

    def add_in_flight(self, batch: ProducerBatch) -> None:
        self._partitions.add_in_flight(batch)

    def remove_in_flight(self, batch: ProducerBatch) -> None:
        self._partitions.remove_in_flight(batch)

    def producer_id_and_epoch_for(self, tp: TopicPartition) -> ProducerIdAndEpoch:
        """The id/epoch ``tp``'s current sequences belong to."""
        return self._partitions.get_or_create(tp).producer_id_and_epoch

    def has_stale_producer_id_and_epoch(self, tp: TopicPartition) -> bool:
        return self.producer_id_and_epoch_for(tp) != self._manager.producer_id_and_epoch

    def maybe_update_producer_id_and_epoch(self, tp: TopicPartition) -> None:
        """Move ``tp`` to the current id/epoch (sequences from 0) once nothing is in flight."""
        if self.has_stale_producer_id_and_epoch(tp) and not self.has_in_flight(tp):
            pid_epoch = self._manager.producer_id_and_epoch
            self._partitions.start_sequences_at_beginning(tp, pid_epoch)
            log.debug("ProducerId of partition %s set to %s. Reinitialize sequence at beginning.",
                      tp, pid_epoch)

    def reset_sequence_for_partition(self, tp: TopicPartition) -> None:
        """Forget ``tp``'s sequences (the broker lost this producer's state for it)."""
        self._partitions.remove(tp)
        self._unresolved.pop(tp, None)

    # --- drain ----------------------------------------------------------------------------------

    def can_drain(self, first: ProducerBatch, link: int = -1) -> bool:
        """Whether the head batch of its partition may be drained now, to go out on connection
        ``link`` (see the module doc: drain gate, pipelining)."""
        tp = first.topic_partition
        manager = self._manager
        if manager.has_fatal_error or not manager.has_producer_id:
            return False
        if self._transactional and not manager.may_drain(tp):
            return False
        entry = self._partitions.get(tp)
        in_flight = entry.in_flight if entry is not None else None
        if not first.has_sequence:
            if tp in self._unresolved:
                return False  # an expired batch may or may not have been written
            if not in_flight:
                return True
            if entry.producer_id_and_epoch != manager.producer_id_and_epoch:
                return False  # new sequences (from 0, new epoch) must not overtake old ones
            if entry.acked_link is None or entry.acked_link != link:
                return False  # pipelining is earned on this connection, under this epoch
            for batch in in_flight:
                if batch.attempts or (batch.in_flight and batch.link != link):
                    return False  # retries settle first; nothing answered elsewhere is pending
            return True
        if in_flight:
            if first.base_sequence != in_flight[0].base_sequence:
                return False  # retries go one at a time, in order
            for batch in in_flight:
                if batch.in_flight and batch.link != link:
                    return False  # an answer from another connection is still to come
        return True

    def assign_producer_state(self, batch: ProducerBatch) -> None:
        """At drain: stamp a new batch with the producer id/epoch and the next sequence, and track
        it in flight. A retried batch keeps what it has (changing it could duplicate)."""
        if batch.has_sequence:
            return
        tp = batch.topic_partition
        self.maybe_update_producer_id_and_epoch(tp)
        pid_epoch = self._manager.producer_id_and_epoch
        batch.set_producer_state(pid_epoch.producer_id, pid_epoch.epoch, self.next_sequence(tp),
                                 self._transactional)
        self._partitions.increment_sequence(tp, batch.record_count)
        log.debug("Assigned producerId %d and producerEpoch %d to batch with base sequence %d "
                  "being sent to partition %s", pid_epoch.producer_id, pid_epoch.epoch,
                  batch.base_sequence, tp)
        self.add_in_flight(batch)

    # --- outcomes -------------------------------------------------------------------------------

    def handle_completed_batch(self, batch: ProducerBatch, base_offset: int) -> None:
        """The broker wrote ``batch``: advance the acknowledged sequence (wrap-aware) and offset.
        A late acknowledgement of a batch stamped under an older id/epoch (it expired in flight
        and the partition moved on) says nothing about the current sequences."""
        entry = self._partitions.get_or_create(batch.topic_partition)
        pid_epoch = entry.producer_id_and_epoch
        if batch.producer_id == pid_epoch.producer_id and batch.producer_epoch == pid_epoch.epoch:
            last = entry.last_acked_sequence
            if last == NO_LAST_ACKED_SEQUENCE:
                entry.last_acked_sequence = batch.last_sequence
            else:
                expected = increment_sequence(last, 1)
                if (batch.base_sequence != expected and sequence_after(batch.base_sequence, expected)
                        and batch.topic_partition not in self._unresolved):  # expired: may fill it
                    log.warning("The broker acknowledged sequence %d for %s while %d was the next: "
                                "it holds no state for producerId %d (expired or lost), so it "
                                "accepted a gap and the order around it is not guaranteed",
                                batch.base_sequence, batch.topic_partition, expected,
                                batch.producer_id)
                if sequence_after(batch.last_sequence, last):
                    entry.last_acked_sequence = batch.last_sequence
            entry.acked_link = batch.link
        if base_offset != INVALID_OFFSET:
            entry.last_acked_offset = max(entry.last_acked_offset,
                                          base_offset + batch.record_count - 1)
        self.remove_in_flight(batch)

    def handle_failed_batch(self, batch: ProducerBatch, exception: BaseException,
                            adjust_sequence_numbers: bool) -> None:
        """``batch`` failed for good. ``adjust_sequence_numbers``: it may have left a gap (it was
        sent, and the error was not one that proves it was not written). Fatal errors and, in a
        transaction, the abortable ones go to the manager."""
        manager = self._manager
        code = getattr(exception, "code", None)
        if code in _FATAL_CODES or isinstance(exception, errors.UnsupportedVersionError) or (
                code == ErrorCode.INVALID_PRODUCER_EPOCH and self._transactional):
            manager.fatal_error(fenced_error(manager, exception, f"Produce to {batch.topic_partition}")
                                if code in _FENCED_CODES else exception)
        self.remove_in_flight(batch)
        if manager.has_fatal_error:
            return
        tp = batch.topic_partition
        if errors.is_record_error(exception) and batch.has_sequence and self._partitions.close_gap(batch):
            # the broker refused the batch on its own and wrote none of it: the partition's later
            # batches take its sequences, no epoch bump (beyond Java, which bumps the epoch). A
            # transaction still becomes abortable, as in Java, unless the sender kept the refused
            # records to handle them (a tally with keep_refused: the sink's dead letters)
            log.debug("batch %s refused on its own (%r): sequences after %d moved down by %d", batch,
                      exception, batch.base_sequence, batch.record_count)
            if self._transactional and not batch.refusal_kept(exception):
                manager.abortable_error(exception)
            return
        if self._transactional:
            if adjust_sequence_numbers or code in (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                                   ErrorCode.UNKNOWN_PRODUCER_ID):
                manager.require_epoch_bump()   # it may have left a sequence gap
            manager.abortable_error(exception)
            return
        if code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            log.error("The broker returned %r for topic-partition %s with producerId %d, epoch %d, "
                      "and sequence number %d", exception, tp, batch.producer_id,
                      batch.producer_epoch, batch.base_sequence)
            self.request_epoch_bump(tp)
        elif code == ErrorCode.UNKNOWN_PRODUCER_ID:
            self.reset_sequence_for_partition(tp)
        elif adjust_sequence_numbers:
            self.request_epoch_bump(tp)

    def can_retry(self, batch: ProducerBatch, error_code: int, log_start_offset: int = -1) -> RetryDecision:
        """Decide on a batch the broker refused with ``error_code`` (Java's ``canRetry``, idempotent
        producer): sequence errors are retried, with an epoch bump when that is what unblocks
        the partition; other errors are retried when retriable."""
        tp = batch.topic_partition
        if error_code == ErrorCode.UNKNOWN_PRODUCER_ID:
            if log_start_offset == -1:
                return RetryDecision(True, reason="log start offset unknown yet")
            if batch.sequence_has_been_reset:
                return RetryDecision(True, reason="sequence already reset for the new epoch")
            if self._transactional:
                return RetryDecision(False, reason="broker lost the producer state: the "
                                     "transaction must abort")
            self.request_epoch_bump(tp)
            return RetryDecision(True, True, "broker lost the producer state")
        if error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            unresolved = tp in self._unresolved
            waiting = batch.sequence_has_been_reset or not self._partitions.is_next_sequence(
                tp, batch.base_sequence)
            first = self.first_in_flight_sequence(tp) in (NO_SEQUENCE, batch.base_sequence)
            if not unresolved and waiting and not (first and not batch.sequence_has_been_reset):
                return RetryDecision(True, reason="an earlier batch is still in flight")
            if not unresolved or self._unresolved[tp] == batch.base_sequence:
                if self._transactional:
                    return RetryDecision(False, reason="gap in the sequence: the transaction "
                                         "must abort")
                self.request_epoch_bump(tp)
                return RetryDecision(True, True, "gap in the sequence")
            return RetryDecision(True, reason="waiting for an unresolved sequence")
        error_class = errors.for_code(error_code)
        retriable = error_class is not None and error_class.retriable
        return RetryDecision(retriable, reason="retriable error" if retriable else "fatal error")

    # --- expired batches with unknown outcome ---------------------------------------------------

    def mark_sequence_unresolved(self, batch: ProducerBatch) -> None:
        """``batch`` expired after being sent: we do not know if the broker wrote it."""
        tp = batch.topic_partition
        following = increment_sequence(batch.last_sequence, 1)
        self._unresolved[tp] = max(self._unresolved.get(tp, following), following)
        log.debug("Marking partition %s unresolved with next sequence number %d", tp,
                  self._unresolved[tp])

    def has_unresolved_sequence(self, tp: TopicPartition) -> bool:
        return tp in self._unresolved

    def maybe_resolve_sequences(self) -> None:
        """Once an unresolved partition has nothing in flight: resolved if the acknowledgements
        caught up with the next sequence, else request an epoch bump (the idempotent way out)."""
        for tp in list(self._unresolved):
            if self.has_in_flight(tp):
                continue
            if not self._partitions.is_next_sequence(tp, self.next_sequence(tp)):
                log.info("No inflight batches remaining for %s, last ack'd sequence for partition is "
                         "%d, next sequence is %d. Going to bump epoch and reset sequence numbers.",
                         tp, self.last_acked_sequence(tp), self.next_sequence(tp))
                self.request_epoch_bump(tp)
            del self._unresolved[tp]

    def __repr__(self) -> str:
        return f"Idempotence(producer_id_and_epoch={self._manager.producer_id_and_epoch})"
