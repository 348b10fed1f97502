"""The producer id state machine, the idempotent producer's decisions and the transactional
producer's lifecycle, sans I/O (Java's ``TransactionManager``).

The sender drives it: it sends the requests the manager asks for (:mod:`.requests`), reports
responses, and asks for decisions. Nothing here sends, sleeps or reads a clock. The per-partition
numbers (sequences, acknowledgements, batches in flight) are kept by a
:class:`~.partition_map.TxnPartitionMap` (Java's ``TxnPartitionMap``). The states and their
transitions are one table, in :mod:`.states`. docs/ARCHITECTURE.md ("Idempotence") gives the
reasons behind the drain gate, the epoch bump and a replaced cluster.

- **Sequences are assigned at drain** (:meth:`TransactionManager.assign_producer_state`), never at
  append; they wrap from int32 max to 0, as the broker does. A retried batch keeps its sequence;
  the parts of a split batch (MESSAGE_TOO_LARGE) carry the refused batch's range, consecutively.
- **Drain gate** (:meth:`TransactionManager.can_drain`, Java's
  ``shouldStopDrainBatchesForPartition``): nothing drains without a producer id; a new batch waits
  while its partition has batches in flight under an older id/epoch or unresolved sequences; a
  retried batch goes only when it is the first in flight. Beyond Java, pipelining is earned per
  connection (``link``): a new batch joins batches in flight only on the connection that
  acknowledged the partition's last batch, never beside a retry.
- **Epoch bump** (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID): :meth:`can_retry`,
  :meth:`handle_failed_batch` and :meth:`maybe_resolve_sequences` request it; the sender calls
  :meth:`bump_epoch_and_reset_id_if_needed` at the top of its loop. Every retry stays bounded by
  ``delivery.timeout.ms`` (the sender expires batches).
- **A replaced cluster** (:meth:`TransactionManager.cluster_changed`): the idempotent producer
  forgets its id and sequences and re-sequences the batches waiting to be sent again under the
  new one; a transactional producer fails with ``ClusterChangedError`` (Java only logs it).

- **Transactions** (a ``transactional.id``): the caller's thread starts each step
  (:meth:`~TransactionManager.initialize_transactions`, :meth:`~TransactionManager.begin_transaction`,
  :meth:`~TransactionManager.begin_commit`, :meth:`~TransactionManager.begin_abort`) and waits on
  the :class:`~.states.TransactionalResult` it returns; the sender sends the request
  :meth:`~TransactionManager.next_transactional_step` names. A partition's first queued batch
  notes it for AddPartitionsToTxn (:meth:`~TransactionManager.maybe_add_partition`); under
  transaction version 2 (KIP-890) Produce v12 enrols it. Fencing, authorization, an invalid
  producer epoch and an unknown error are fatal; a failed batch makes the transaction abortable.
  No local epoch bump ever happens in a transaction: the coordinator owns the epoch.

Thread safety: the sequence bookkeeping is the sender thread's (drain, responses, expiry all run
there). The transactional lifecycle is shared with the caller's thread under one lock. Other
threads may read ``state``, ``has_fatal_error`` and ``last_error`` (single attribute reads).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ... import errors
from ...errors import ClusterChangedError, IllegalStateError, KafkaError, TransactionAbortedError
from ...bytecodec import INT16_MAX
from ...error_codes import ErrorCode
from ...record.layout import INVALID_OFFSET
from ...record.sequence import NO_SEQUENCE, increment_sequence, sequence_after
from ...structs import Node, TopicPartition
from .partition_map import NO_LAST_ACKED_SEQUENCE, ProducerIdAndEpoch, TxnPartitionMap
from .states import TransactionalResult, TransactionState, next_state

if TYPE_CHECKING:
    from ..producer_batch import ProducerBatch

NONE = ProducerIdAndEpoch.NONE  # type: ignore[attr-defined]

log = logging.getLogger(__name__)

MAX_EPOCH = INT16_MAX

# Errors after which the producer cannot continue (Java's maybeTransitionToErrorState).
_FATAL_CODES = frozenset({ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.UNSUPPORTED_VERSION,
                          ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.PRODUCER_FENCED})
_FENCED_CODES = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})

# The transactional steps the sender sends, in the order they take precedence.
FIND_COORDINATOR = "FindCoordinator"
INIT_PRODUCER_ID = "InitProducerId"
ADD_PARTITIONS = "AddPartitionsToTxn"
END_TXN = "EndTxn"


def fenced_error(manager: "TransactionManager", cause: BaseException, where: str) -> errors.ProducerFencedError:
    """The fatal error of a producer whose epoch the coordinator no longer accepts; ``where``:
    the request that said so."""
    name = getattr(cause, "name", type(cause).__name__)
    if manager.resumed:
        error = errors.ProducerFencedError(
            f"transactional.id {manager.transactional_id!r}: the transaction cannot be completed "
            f"({name} from {where}): its producer epoch was fenced. If it was not committed "
            "before, its records are lost: the coordinator aborted it, either because a newer "
            "producer with the same transactional.id called init_transactions(), or because it "
            f"outlived transaction.timeout.ms ({manager.transaction_timeout_ms} ms)")
        error.__cause__ = cause
        return error
    error = errors.ProducerFencedError(
        f"transactional.id {manager.transactional_id!r}: the producer was fenced ({name} from "
        f"{where}). Either "
        "a newer producer with the same transactional.id called init_transactions(), or the "
        f"coordinator aborted the open transaction after transaction.timeout.ms "
        f"({manager.transaction_timeout_ms} ms) and bumped the epoch. The open transaction's "
        "records are aborted; close this producer")
    error.__cause__ = cause
    return error


@dataclass(frozen=True)
class RetryDecision:
    """What to do with a batch the broker refused: ``retry`` it (after the usual backoff) or fail
    it; ``epoch_bump_requested`` says a bump was requested for its partition; ``reason`` is for
    the log."""

    retry: bool
    epoch_bump_requested: bool = False
    reason: str = ""


class TransactionManager:
    """The producer id/epoch state machine and every idempotence decision, over a
    :class:`~.partition_map.TxnPartitionMap`; see the module docstring."""

    def __init__(self, transactional_id: str | None = None, transaction_timeout_ms: int = 60_000) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self._lock = threading.RLock()
        self._state = TransactionState.UNINITIALIZED
        self._producer_id_and_epoch: ProducerIdAndEpoch = NONE
        self._partitions = TxnPartitionMap()
        self._unresolved: dict[TopicPartition, int] = {}  # tp -> sequence after the expired batch
        self._to_rewrite: set[TopicPartition] = set()
        self._rewrite_on_new_id: set[TopicPartition] = set()  # re-sequenced at the next InitProducerId
        self._discard_next_id = False    # an InitProducerId in flight went to a replaced cluster
        self._epoch_bump_required = False
        self._last_error: BaseException | None = None
        # transactions (see the module docstring), under self._lock
        self.coordinator: Node | None = None
        self._transaction_version = 1
        self._in_transaction: set[TopicPartition] = set()
        self._new_partitions: set[TopicPartition] = set()
        self._pending_partitions: set[TopicPartition] = set()
        self._transaction_started = False
        self._end_committed: bool | None = None  # the EndTxn to send: commit (True) or abort
        self._txn_epoch_bump_required = False
        self._result: TransactionalResult | None = None
        self.resumed = False                     # completing a transaction handed out elsewhere

    # --- producer id state machine --------------------------------------------------------------

    @property
    def state(self) -> TransactionState:
        return self._state

    @property
    def producer_id_and_epoch(self) -> ProducerIdAndEpoch:
        return self._producer_id_and_epoch

    @property
    def has_producer_id(self) -> bool:
        return self._producer_id_and_epoch.is_valid

    @property
    def has_fatal_error(self) -> bool:
        return self._state is TransactionState.FATAL_ERROR

    @property
    def last_error(self) -> BaseException | None:
        """The fatal error, if any: sends fail with it."""
        return self._last_error

    @property
    def epoch_bump_required(self) -> bool:
        return self._epoch_bump_required

    def _transition(self, event: str) -> None:
        target = next_state(self._state, event)
        log.debug("Transaction state %s -> %s (%s)", self._state.name, target.name, event)
        self._state = target

    def begin_init(self) -> None:
        """InitProducerId is being sent."""
        self._transition("begin_init")

    def set_producer_id_and_epoch(self, producer_id: int, epoch: int) -> None:
        """InitProducerId answered: sequences of every partition restart under this id at drain."""
        self._transition("producer_id_received")
        if self._discard_next_id:
            self._discard_next_id = False
            log.info("ignoring producer id %d from InitProducerId sent before the cluster changed; "
                     "asking the new cluster", producer_id)
            self._transition("reset_producer_id")
            return
        log.info("ProducerId set to %d with epoch %d", producer_id, epoch)
        self._producer_id_and_epoch = pid_epoch = ProducerIdAndEpoch(producer_id, epoch)
        self._epoch_bump_required = False
        self._to_rewrite.clear()
        for tp in self._rewrite_on_new_id:
            self._partitions.start_sequences_at_beginning(tp, pid_epoch)
        self._rewrite_on_new_id.clear()

    def init_failed(self) -> None:
        """InitProducerId failed retriably; it will be sent again."""
        self._transition("init_failed")
        self._discard_next_id = False

    def fatal_error(self, exception: BaseException) -> None:
        with self._lock:
            log.info("Transiting to fatal error state due to %r", exception)
            self._state = TransactionState.FATAL_ERROR
            self._last_error = exception
            self._complete_result(exception)

    def cluster_changed(self, previous: str, current: str) -> None:
        """The cluster behind ``bootstrap.servers`` was replaced (cluster id ``previous``, now
        ``current``): see the module docstring. Batches with ``in_flight`` set (a request still
        out) stop being tracked: the sender fails them when they are answered."""
        if self.has_fatal_error:
            return
        acknowledged = self._partitions.acknowledged_offsets()
        if acknowledged:
            shown = ", ".join(f"{tp.topic}-{tp.partition} up to offset {offset}"
                              for tp, offset in sorted(acknowledged.items())[:5])
            more = f" and {len(acknowledged) - 5} more" if len(acknowledged) > 5 else ""
            log.warning("the cluster changed (cluster id %s, now %s): the records cluster %s "
                        "acknowledged stay in %s and are not in %s (%s%s)", previous, current,
                        previous, previous, current, shown, more)
        if self.transactional_id is not None:
            self.fatal_error(ClusterChangedError(
                f"transactional.id {self.transactional_id!r}: the cluster behind bootstrap.servers "
                f"changed (cluster id {previous}, now {current}). The producer's id and epoch, its "
                f"coordinator and its open transaction were cluster {previous}'s: the records of "
                f"that transaction are not committed, and none is written to {current}. Close this "
                "producer; a new one registers its transactional.id with the new cluster"))
            return
        waiting = self._partitions.restart_all(keep=lambda batch: not batch.in_flight)
        log.warning("the cluster changed (cluster id %s, now %s): the producer id %s was cluster "
                    "%s's; asking %s for a new one. %d partition(s) have batches to send again, "
                    "re-sequenced under the new id", previous, current,
                    self._producer_id_and_epoch.producer_id, previous, current, len(waiting))
        self._rewrite_on_new_id = set(waiting)
        self._unresolved.clear()
        self._to_rewrite.clear()
        self._epoch_bump_required = False
        if self._state is TransactionState.READY:
            self.reset_producer_id()
        elif self._state is TransactionState.INITIALIZING:
            self._discard_next_id = True

    def reset_producer_id(self) -> None:
        """Forget the producer id (epoch exhausted): a new InitProducerId is needed."""
        log.debug("Resetting idempotent producer ID. ID and epoch before reset are %s",
                  self._producer_id_and_epoch)
        self._transition("reset_producer_id")
        self._producer_id_and_epoch = NONE

    def bump_epoch(self) -> None:
        """Raise the epoch by one (or reset the id at the last epoch) and re-sequence, from 0,
        the in-flight batches of every partition that requested the bump."""
        current = self._producer_id_and_epoch
        if current.epoch >= MAX_EPOCH:
            self.reset_producer_id()
        else:
            self._transition("bump_epoch")
            self._producer_id_and_epoch = ProducerIdAndEpoch(current.producer_id, current.epoch + 1)
            log.debug("Incremented producer epoch, producer ID and epoch are now %s",
                      self._producer_id_and_epoch)
        for tp in self._to_rewrite:
            self._partitions.start_sequences_at_beginning(tp, self._producer_id_and_epoch)
            self._unresolved.pop(tp, None)
        self._to_rewrite.clear()
        self._epoch_bump_required = False

    def request_epoch_bump(self, tp: TopicPartition) -> None:
        """Ask for a bump at the sender's next loop; ``tp``'s in-flight batches get re-sequenced.
        In a transaction the coordinator owns the epoch: the abort bumps it instead."""
        if self.transactional_id is not None:
            self._txn_epoch_bump_required = True
            return
        self._epoch_bump_required = True
        self._to_rewrite.add(tp)

    def bump_epoch_and_reset_id_if_needed(self) -> bool:
        """Called by the sender each loop: perform a requested bump; ``True`` when an
        InitProducerId must now be sent (``InitProducerIdHandler`` calls :meth:`begin_init` when it
        goes out). Never for a transactional producer: ``init_transactions()`` starts that."""
        if self.transactional_id is not None:
            return False
        if self._epoch_bump_required and self._state is TransactionState.READY:
            self.bump_epoch()
        return self._state is TransactionState.UNINITIALIZED

    # --- sequences and in-flight batches (the partition map's) ---------------------------------

    @property
    def partitions(self) -> TxnPartitionMap:
        return self._partitions

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
        return self.producer_id_and_epoch_for(tp) != self._producer_id_and_epoch

    def maybe_update_producer_id_and_epoch(self, tp: TopicPartition) -> None:
        """Move ``tp`` to the current id/epoch (sequences from 0) once nothing is in flight."""
        if self.has_stale_producer_id_and_epoch(tp) and not self.has_in_flight(tp):
            self._partitions.start_sequences_at_beginning(tp, self._producer_id_and_epoch)
            log.debug("ProducerId of partition %s set to %s. Reinitialize sequence at beginning.",
                      tp, self._producer_id_and_epoch)

    def reset_sequence_for_partition(self, tp: TopicPartition) -> None:
        """Forget ``tp``'s sequences (the broker lost this producer's state for it)."""
        self._partitions.remove(tp)
        self._unresolved.pop(tp, None)

    # --- drain ----------------------------------------------------------------------------------

    def can_drain(self, first: ProducerBatch, link: int = -1) -> bool:
        """Whether the head batch of its partition may be drained now, to go out on connection
        ``link`` (see the module doc: drain gate, pipelining)."""
        tp = first.topic_partition
        if self.has_fatal_error or not self.has_producer_id:
            return False
        if self.transactional_id is not None and tp not in self._in_transaction \
                and not self._enrol(tp):
            return False
        entry = self._partitions.get(tp)
        in_flight = entry.in_flight if entry is not None else None
        if not first.has_sequence:
            if tp in self._unresolved:
                return False  # an expired batch may or may not have been written
            if not in_flight:
                return True
            if entry.producer_id_and_epoch != self._producer_id_and_epoch:
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
        pid_epoch = self._producer_id_and_epoch
        batch.set_producer_state(pid_epoch.producer_id, pid_epoch.epoch, self.next_sequence(tp),
                                 self.transactional_id is not None)
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
        sent, and the error was not one that proves it was not written)."""
        code = getattr(exception, "code", None)
        if code in _FATAL_CODES or isinstance(exception, errors.UnsupportedVersionError) or (
                code == ErrorCode.INVALID_PRODUCER_EPOCH and self.transactional_id is not None):
            self.fatal_error(fenced_error(self, exception, f"Produce to {batch.topic_partition}")
                             if code in _FENCED_CODES else exception)
        self.remove_in_flight(batch)
        if self.has_fatal_error:
            return
        tp = batch.topic_partition
        if errors.is_record_error(exception) and batch.has_sequence and self._partitions.close_gap(batch):
            # the broker refused the batch on its own and wrote none of it: the partition's later
            # batches take its sequences, no epoch bump (beyond Java, which bumps the epoch). A
            # transaction still becomes abortable, as in Java, unless the sender kept the refused
            # records to handle them (a tally with keep_refused: the sink's dead letters)
            log.debug("batch %s refused on its own (%r): sequences after %d moved down by %d", batch,
                      exception, batch.base_sequence, batch.record_count)
            if self.transactional_id is not None and not batch.refusal_kept(exception):
                self.abortable_error(exception)
            return
        if self.transactional_id is not None:
            if adjust_sequence_numbers or code in (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                                   ErrorCode.UNKNOWN_PRODUCER_ID):
                self._txn_epoch_bump_required = True   # it may have left a sequence gap
            self.abortable_error(exception)
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
            if self.transactional_id is not None:
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
                if self.transactional_id is not None:
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

    # --- transactions: the caller's steps ------------------------------------------------------

    @property
    def is_transactional(self) -> bool:
        return self.transactional_id is not None

    @property
    def transaction_version(self) -> int:
        """1, or 2 (KIP-890) when the cluster finalized ``transaction.version`` >= 2 at the start
        of the current transaction."""
        return self._transaction_version

    @property
    def partitions_in_transaction(self) -> frozenset[TopicPartition]:
        with self._lock:
            return frozenset(self._in_transaction)

    @property
    def end_committed(self) -> bool | None:
        """The EndTxn the current completion sends: commit (True), abort (False), None."""
        return self._end_committed

    @property
    def is_completing(self) -> bool:
        return self._state in (TransactionState.COMMITTING_TRANSACTION,
                               TransactionState.ABORTING_TRANSACTION)

    def initialize_transactions(self) -> TransactionalResult:
        """``init_transactions()``: the producer id for the transactional id (fencing older
        producers and aborting what they left open). Called again while it is pending (a timed
        out wait), it returns the same result."""
        with self._lock:
            self._ensure_transactional("init_transactions")
            pending = self._resumable_result("init_transactions")
            if pending is not None:
                return pending
            self._raise_if_fatal()
            if self._state is not TransactionState.UNINITIALIZED:
                raise IllegalStateError(f"init_transactions() was already called (state "
                                        f"{self._state.name}): call it once per producer")
            self._transition("begin_init")
            return self._new_result("init_transactions")

    def begin_transaction(self, transaction_version: int = 1) -> None:
        """``begin_transaction()``: READY to IN_TRANSACTION, no request. ``transaction_version``:
        the cluster's finalized ``transaction.version`` as the client knows it now."""
        with self._lock:
            self._ensure_transactional("begin_transaction")
            self._raise_if_step_pending("begin_transaction")
            self._raise_if_fatal()
            if self._state is TransactionState.ABORTABLE_ERROR:
                raise self._abortable("begin_transaction")
            if self._state is TransactionState.UNINITIALIZED:
                raise IllegalStateError("begin_transaction() before init_transactions(): call "
                                        "init_transactions() once first")
            if self._state is TransactionState.IN_TRANSACTION:
                raise IllegalStateError("begin_transaction() while a transaction is open: commit "
                                        "or abort it first")
            self._transition("begin_transaction")
            self._transaction_version = 2 if transaction_version >= 2 else 1

    def begin_commit(self) -> TransactionalResult:
        """``commit_transaction()``: the sender flushes, then sends EndTxn(commit)."""
        with self._lock:
            self._ensure_transactional("commit_transaction")
            pending = self._resumable_result("commit_transaction")
            if pending is not None:
                return pending
            self._raise_if_step_pending("commit_transaction")
            self._raise_if_fatal()
            if self._state is TransactionState.ABORTABLE_ERROR:
                raise self._abortable("commit_transaction")
            if self._state is not TransactionState.IN_TRANSACTION:
                raise IllegalStateError(f"commit_transaction() with no open transaction (state "
                                        f"{self._state.name}): call begin_transaction() first")
            self._transition("begin_commit")
            self._end_committed = True
            return self._new_result("commit_transaction")

    def begin_abort(self) -> TransactionalResult:
        """``abort_transaction()``: queued records fail, then EndTxn(abort) once nothing is in
        flight."""
        with self._lock:
            self._ensure_transactional("abort_transaction")
            pending = self._resumable_result("abort_transaction")
            if pending is not None:
                return pending
            self._raise_if_step_pending("abort_transaction")
            self._raise_if_fatal()
            if self._state not in (TransactionState.IN_TRANSACTION,
                                   TransactionState.ABORTABLE_ERROR):
                raise IllegalStateError(f"abort_transaction() with no open transaction (state "
                                        f"{self._state.name})")
            self._transition("begin_abort")
            self._last_error = None
            self._end_committed = False
            self._new_partitions.clear()         # their batches are failed before they drain
            return self._new_result("abort_transaction")

    def open_transaction(self) -> tuple[ProducerIdAndEpoch, frozenset[TopicPartition], int]:
        """The open transaction as it stands (id/epoch, partitions enrolled, transaction
        version), for a resumable value; ``IllegalStateError`` unless a transaction is open
        with every partition enrolled."""
        with self._lock:
            self._ensure_transactional("resumable_transaction")
            self._raise_if_fatal()
            if self._state is TransactionState.ABORTABLE_ERROR:
                raise self._abortable("resumable_transaction")
            if self._state is not TransactionState.IN_TRANSACTION:
                raise IllegalStateError(f"no open transaction to hand out (state "
                                        f"{self._state.name})")
            if self._new_partitions or self._pending_partitions:
                raise IllegalStateError("partitions are still being added to the transaction: "
                                        "flush() first")
            return (self._producer_id_and_epoch, frozenset(self._in_transaction),
                    self._transaction_version)

    def resume_transaction(self, producer_id: int, epoch: int, partitions: frozenset[TopicPartition],
                           transaction_version: int) -> None:
        """Take over an open transaction another producer handed out, to commit or abort it
        (no records are sent: the partitions are already enrolled)."""
        with self._lock:
            self._ensure_transactional("resume_transaction")
            self._transition("resume_transaction")
            self.resumed = True
            self._producer_id_and_epoch = ProducerIdAndEpoch(producer_id, epoch)
            self._in_transaction = set(partitions)
            self._transaction_started = bool(partitions)
            self._transaction_version = 2 if transaction_version >= 2 else 1

    def check_can_send(self) -> None:
        """A send is allowed only inside a transaction (Java's ``failIfNotReadyForSend``)."""
        state = self._state
        if state is TransactionState.IN_TRANSACTION:
            return
        if state is TransactionState.FATAL_ERROR:
            raise self._fatal_copy("send")
        if state is TransactionState.ABORTABLE_ERROR:
            raise self._abortable("send")
        raise IllegalStateError(
            f"cannot send with transactional.id {self.transactional_id!r} outside a transaction "
            f"(state {state.name}): call begin_transaction() first")

    # --- transactions: the sender's side --------------------------------------------------------

    def undrained_batch_error(self) -> BaseException | None:
        """The error to fail queued batches with now (the transaction is aborting, or abortable),
        or None."""
        state = self._state
        if state is TransactionState.ABORTING_TRANSACTION:
            return TransactionAbortedError("Failing batch since transaction was aborted")
        if state is TransactionState.ABORTABLE_ERROR:
            error = TransactionAbortedError(
                f"Failing batch since the transaction became abortable: {self._last_error!r}; "
                "call abort_transaction()")
            error.__cause__ = self._last_error
            return error
        return None

    def next_transactional_step(self, has_incomplete_batches: bool) -> str | None:
        """Which transactional request goes next (FIND_COORDINATOR, INIT_PRODUCER_ID,
        ADD_PARTITIONS, END_TXN), or None. Completes a transaction that enrolled no partition
        locally, as Java does: there is nothing to end on the broker."""
        with self._lock:
            state = self._state
            if state is TransactionState.FATAL_ERROR:
                return None
            enrolling = bool(self._new_partitions) and state in (
                TransactionState.IN_TRANSACTION, TransactionState.COMMITTING_TRANSACTION)
            ending = (self._end_committed is not None and self.is_completing
                      and not has_incomplete_batches and not self._new_partitions
                      and not self._pending_partitions)
            if ending and not self._transaction_started:
                self._complete_transaction()
                return None
            if not (state is TransactionState.INITIALIZING or enrolling or ending):
                return None
            if self.coordinator is None:
                return FIND_COORDINATOR
            if state is TransactionState.INITIALIZING:
                return INIT_PRODUCER_ID
            return ADD_PARTITIONS if enrolling else END_TXN

    def maybe_add_partition(self, tp: TopicPartition) -> None:
        """A new batch for ``tp`` was queued (Java's ``maybeAddPartition``, per batch here): note
        the partition for the next AddPartitionsToTxn, so the partitions of a transaction are
        enrolled together rather than node by node as their batches become drainable."""
        if self.transactional_id is None or tp in self._in_transaction or tp in self._new_partitions:
            return
        self._enrol(tp)

    def _enrol(self, tp: TopicPartition) -> bool:
        """The drain gate's part (see the module docstring): whether ``tp`` may drain now."""
        with self._lock:
            if tp in self._in_transaction:
                return True
            if self._state not in (TransactionState.IN_TRANSACTION,
                                   TransactionState.COMMITTING_TRANSACTION):
                return False
            if self._transaction_version >= 2:   # Produce v12 enrols it
                self._in_transaction.add(tp)
                self._transaction_started = True
                return True
            if tp not in self._pending_partitions:
                self._new_partitions.add(tp)
            return False

    def set_coordinator(self, node: Node | None) -> None:
        """FindCoordinator's answer, or None when the coordinator moved (find it again)."""
        with self._lock:
            if node is None and self.coordinator is not None:
                log.info("transactional.id %r: coordinator %s moved or is unavailable; looking it "
                         "up again", self.transactional_id, self.coordinator)
            self.coordinator = node

    def take_new_partitions(self) -> frozenset[TopicPartition]:
        """The partitions an AddPartitionsToTxn now being sent carries (moved to pending)."""
        with self._lock:
            taken = frozenset(self._new_partitions)
            self._pending_partitions |= taken
            self._new_partitions.clear()
            return taken

    def partitions_added(self, partitions: frozenset[TopicPartition]) -> None:
        with self._lock:
            self._pending_partitions -= partitions
            self._in_transaction |= partitions
            self._transaction_started = True
            log.debug("Successfully added partitions %s to transaction", sorted(partitions))

    def partitions_not_added(self, partitions: frozenset[TopicPartition], retry: bool) -> None:
        """AddPartitionsToTxn failed: send them again (``retry``) or give up on them (the
        transaction is then abortable or fatal, and their batches fail)."""
        with self._lock:
            self._pending_partitions -= partitions
            if retry and self._state in (TransactionState.IN_TRANSACTION,
                                         TransactionState.COMMITTING_TRANSACTION):
                self._new_partitions |= partitions

    def transactional_init_done(self, producer_id: int, epoch: int) -> None:
        """InitProducerId answered for the transactional id: READY (an epoch bump after an abort
        completes that abort)."""
        with self._lock:
            self._transition("producer_id_received")
            log.info("ProducerId set to %d with epoch %d (transactional.id %r)", producer_id,
                     epoch, self.transactional_id)
            self._producer_id_and_epoch = ProducerIdAndEpoch(producer_id, epoch)
            self._txn_epoch_bump_required = False
            self._last_error = None
            self._complete_result(None)

    def end_txn_done(self, producer_id: int = -1, epoch: int = -1) -> None:
        """EndTxn answered: the transaction is complete. Transaction version 2 returns the
        bumped id and epoch the next transaction uses."""
        with self._lock:
            if producer_id >= 0 and epoch >= 0:
                self._producer_id_and_epoch = ProducerIdAndEpoch(producer_id, epoch)
                self._txn_epoch_bump_required = False
            self._complete_transaction()

    def _complete_transaction(self) -> None:
        aborting = self._state is TransactionState.ABORTING_TRANSACTION
        self._in_transaction.clear()
        self._new_partitions.clear()
        self._pending_partitions.clear()
        self._transaction_started = False
        self._end_committed = None
        if aborting and self._txn_epoch_bump_required and self._transaction_version < 2:
            self._transition("begin_epoch_bump")      # InitProducerId completes the abort
            return
        self._transition("transaction_completed")
        self._complete_result(None)

    def abortable_error(self, exception: BaseException) -> None:
        """An error the transaction cannot commit through: the caller must abort it. A commit
        in progress fails with it."""
        with self._lock:
            state = self._state
            if state is TransactionState.ABORTING_TRANSACTION:
                log.debug("error while the transaction aborts (ignored): %r", exception)
                return
            if state not in (TransactionState.IN_TRANSACTION, TransactionState.COMMITTING_TRANSACTION,
                             TransactionState.ABORTABLE_ERROR):
                log.warning("error outside a transaction (state %s): %r", state.name, exception)
                return
            if state is not TransactionState.ABORTABLE_ERROR:
                log.info("Transiting to abortable error state due to %r", exception)
                self._last_error = exception
            self._transition("abortable_error")
            self._end_committed = None
            self._new_partitions.clear()
            if self._result is not None and not self._result.is_done:
                self._result.done(self._abortable("commit_transaction"))

    # --- transactions: helpers ------------------------------------------------------------------

    def _new_result(self, operation: str) -> TransactionalResult:
        self._result = TransactionalResult(operation)
        return self._result

    def _complete_result(self, error: BaseException | None) -> None:
        if self._result is not None:
            self._result.done(error)

    def _resumable_result(self, operation: str) -> TransactionalResult | None:
        """The same step's result, if the caller has not seen it complete yet (its wait timed
        out): Java lets the call be repeated to wait again."""
        result = self._result
        if result is not None and result.operation == operation and not result.consumed:
            return result
        return None

    def _raise_if_step_pending(self, operation: str) -> None:
        result = self._result
        if result is not None and not result.consumed and result.operation != operation:
            raise IllegalStateError(
                f"{operation}() while {result.operation}() has not completed (its wait timed "
                f"out): call {result.operation}() again until it returns")

    def _ensure_transactional(self, operation: str) -> None:
        if self.transactional_id is None:
            raise IllegalStateError(f"{operation}() needs a transactional.id in the producer's "
                                    "configuration")

    def _raise_if_fatal(self) -> None:
        if self._state is TransactionState.FATAL_ERROR:
            raise self._fatal_copy("transactional call")

    def _fatal_copy(self, operation: str) -> KafkaError:
        cause = self._last_error
        if isinstance(cause, errors.ProducerFencedError):
            error: KafkaError = errors.ProducerFencedError(str(cause))
        else:
            error = KafkaError(f"Cannot perform {operation}: the producer hit a fatal error and "
                               f"must be closed: {cause!r}")
        error.__cause__ = cause
        return error

    def _abortable(self, operation: str) -> KafkaError:
        error = KafkaError(f"Cannot perform {operation}: the transaction hit an error and can "
                           f"only be aborted; call abort_transaction(): {self._last_error!r}")
        error.__cause__ = self._last_error
        return error

    def __repr__(self) -> str:
        return (f"TransactionManager(state={self._state.name}, "
                f"producer_id_and_epoch={self._producer_id_and_epoch})")
