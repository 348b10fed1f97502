"""The producer id state machine and the idempotent producer's decisions, sans I/O (Java's
``TransactionManager``; transactions are to come, on this same table).

The sender drives it: it sends InitProducerId when told to (:mod:`.txn_requests`), reports
responses, and asks for decisions. Nothing here sends, sleeps or reads a clock. The per-partition
numbers (sequences, acknowledgements, batches in flight) are kept by a
:class:`~.txn_partition_map.TxnPartitionMap` (Java's ``TxnPartitionMap``).

Producer id states, as a transition table (:data:`TRANSITIONS`; ready to gain Java's transaction
states)::

    state          event                                      next state
    -------------  -----------------------------------------  -------------------------------
    UNINITIALIZED  begin_init()                                INITIALIZING (InitProducerId sent)
    INITIALIZING   set_producer_id_and_epoch(pid, epoch)       READY
    INITIALIZING   init_failed()                               UNINITIALIZED (sent again later)
    READY          bump_epoch(), epoch < 32767                 READY, epoch + 1 (no request)
    READY          bump_epoch() at 32767, reset_producer_id()  UNINITIALIZED (new id needed)
    any            fatal_error(exc)                            FATAL_ERROR (terminal)

- **Sequences are assigned at drain** (:meth:`TransactionManager.assign_producer_state`), never at
  append, so a batch that is never sent uses none. They wrap from int32 max to 0, as the broker
  does (:func:`increment_sequence`). A retried batch keeps its sequence.
- **Split batches** (MESSAGE_TOO_LARGE, Java's ``splitAndReenqueue``): the parts carry the
  refused batch's producer id, epoch and sequence range, consecutively; the sender stops tracking
  the refused batch and the accumulator tracks the parts in flight at once, so they are drained
  like retries (one at a time, in order) and an epoch bump re-sequences them with the rest.
- **Drain gate** (:meth:`TransactionManager.can_drain`, Java's ``shouldStopDrainBatchesForPartition``):
  nothing is drained without a producer id; a new batch waits while the partition still has
  batches in flight under an older id/epoch, or while its sequence state is unresolved; a retried
  batch goes only when it is the first in flight (retries go one at a time, in order).
- **Pipelining is earned per connection** (beyond Java). The broker checks sequences only when it
  holds state for this producer on the partition; a broker without it accepts *any* sequence.
  That happens more than one would think: right after topic creation, after a restart or a
  leader change, and whenever the records' CreateTime is older than the broker's
  ``producer.id.expiration.ms`` (a backfill of old events): such state is dropped at every log
  load. So if an earlier batch fails transiently (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, a
  disconnect) while a later one is in flight behind it, the later one can be written first, and
  the earlier one then lands behind it: reordered, and no sequence check catches it. Seen
  against Apache Kafka 4.1 after topic creation and after a whole-cluster restart, where batches
  still in flight to the old leader were overtaken by new ones sent to the new leader. Hence, in
  :meth:`~TransactionManager.can_drain` (``link`` is the connection the batch would go out on):

  - a batch never goes while a batch of its partition awaits an answer on another connection;
  - a new batch joins batches in flight only on the connection that acknowledged the
    partition's last batch under the current producer id and epoch (so after topic creation, a
    reconnect or a leader change the first batch goes alone, and once it is acknowledged the
    broker holds state and checks the rest);
  - a new batch never joins a retried batch in flight: after a refusal the partition's retries
    settle, one at a time, before new batches follow them.

  It costs one round trip per partition after each of those events and nothing in steady state.
  What it cannot prevent: two batches already in flight on one connection when the broker
  refuses the first and takes the second (a state change between two requests a few ms apart,
  say the broker's periodic expiry of old-timestamped producer state on a live connection);
  such an acknowledged gap is logged as a warning naming the partition.
- **Epoch bump** (the idempotent producer's way out of OUT_OF_ORDER_SEQUENCE_NUMBER and
  UNKNOWN_PRODUCER_ID, as Java 4.x): the sender's decision helpers (:meth:`can_retry`,
  :meth:`handle_failed_batch`, :meth:`maybe_resolve_sequences`) *request* a bump for a partition;
  the sender then calls :meth:`bump_epoch_and_reset_id_if_needed` at the top of its loop. The epoch
  goes up by one locally (the broker accepts a higher epoch from the same producer id), and the
  in-flight batches of the partitions that asked for it are re-sequenced from 0 under the new
  epoch right away, in order; they carry that new state when they are drained again. Other
  partitions keep their in-flight batches on the old epoch and restart at sequence 0 with the new
  one once those have completed. At epoch 32767 the producer id is reset and InitProducerId
  requested instead.
- **Never retry forever**: every retry stays bounded by ``delivery.timeout.ms`` (the sender
  expires batches), and beyond Java, an OUT_OF_ORDER_SEQUENCE_NUMBER on the *first* batch in
  flight that is not the next expected sequence is a gap no earlier batch can fill, so it bumps
  the epoch instead of waiting.

Thread safety: owned by the sender thread (drain, responses, expiry all run there). Other threads
may only read ``state``, ``has_fatal_error`` and ``last_error`` (single attribute reads).
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import errors
from ..bytecodec import INT16_MAX
from ..error_codes import ErrorCode
from ..record.layout import INVALID_OFFSET
from ..record.sequence import NO_SEQUENCE, increment_sequence, sequence_after
from ..structs import TopicPartition
from .txn_partition_map import NO_LAST_ACKED_SEQUENCE, ProducerIdAndEpoch, TxnPartitionMap

if TYPE_CHECKING:
    from .producer_batch import ProducerBatch

NONE = ProducerIdAndEpoch.NONE  # type: ignore[attr-defined]

log = logging.getLogger(__name__)

MAX_EPOCH = INT16_MAX

# Errors after which the producer cannot continue (Java's maybeTransitionToErrorState).
_FATAL_CODES = frozenset({ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.UNSUPPORTED_VERSION,
                          ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.PRODUCER_FENCED})


class ProducerIdState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"
    READY = "ready"
    FATAL_ERROR = "fatal_error"


_S = ProducerIdState
# (state, event) -> next state; FATAL_ERROR is reachable from anywhere and left by nothing.
TRANSITIONS: dict[tuple[ProducerIdState, str], ProducerIdState] = {
    (_S.UNINITIALIZED, "begin_init"): _S.INITIALIZING,
    (_S.INITIALIZING, "producer_id_received"): _S.READY,
    (_S.INITIALIZING, "init_failed"): _S.UNINITIALIZED,
    (_S.READY, "bump_epoch"): _S.READY,
    (_S.READY, "reset_producer_id"): _S.UNINITIALIZED,
}


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
    :class:`~.txn_partition_map.TxnPartitionMap`; see the module docstring."""

    def __init__(self) -> None:
        self._state = ProducerIdState.UNINITIALIZED
        self._producer_id_and_epoch: ProducerIdAndEpoch = NONE
        self._partitions = TxnPartitionMap()
        self._unresolved: dict[TopicPartition, int] = {}  # tp -> sequence after the expired batch
        self._to_rewrite: set[TopicPartition] = set()
        self._epoch_bump_required = False
        self._last_error: BaseException | None = None

    # --- producer id state machine --------------------------------------------------------------

    @property
    def state(self) -> ProducerIdState:
        return self._state

    @property
    def producer_id_and_epoch(self) -> ProducerIdAndEpoch:
        return self._producer_id_and_epoch

    @property
    def has_producer_id(self) -> bool:
        return self._producer_id_and_epoch.is_valid

    @property
    def has_fatal_error(self) -> bool:
        return self._state is ProducerIdState.FATAL_ERROR

    @property
    def last_error(self) -> BaseException | None:
        """The fatal error, if any: sends fail with it."""
        return self._last_error

    @property
    def epoch_bump_required(self) -> bool:
        return self._epoch_bump_required

    def _transition(self, event: str) -> None:
        target = TRANSITIONS.get((self._state, event))
        if target is None:
            raise RuntimeError(f"invalid transaction manager transition: {event} in state {self._state.name}")
        log.debug("Idempotence state %s -> %s (%s)", self._state.name, target.name, event)
        self._state = target

    def begin_init(self) -> None:
        """InitProducerId is being sent."""
        self._transition("begin_init")

    def set_producer_id_and_epoch(self, producer_id: int, epoch: int) -> None:
        """InitProducerId answered: sequences of every partition restart under this id at drain."""
        self._transition("producer_id_received")
        log.info("ProducerId set to %d with epoch %d", producer_id, epoch)
        self._producer_id_and_epoch = ProducerIdAndEpoch(producer_id, epoch)
        self._epoch_bump_required = False
        self._to_rewrite.clear()

    def init_failed(self) -> None:
        """InitProducerId failed retriably; it will be sent again."""
        self._transition("init_failed")

    def fatal_error(self, exception: BaseException) -> None:
        log.info("Transiting to fatal error state due to %r", exception)
        self._state = ProducerIdState.FATAL_ERROR
        self._last_error = exception

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
        """Ask for a bump at the sender's next loop; ``tp``'s in-flight batches get re-sequenced."""
        self._epoch_bump_required = True
        self._to_rewrite.add(tp)

    def bump_epoch_and_reset_id_if_needed(self) -> bool:
        """Called by the sender each loop: perform a requested bump; ``True`` when an
        InitProducerId must now be sent (``InitProducerIdHandler`` calls :meth:`begin_init` when it
        goes out)."""
        if self._epoch_bump_required and self._state is ProducerIdState.READY:
            self.bump_epoch()
        return self._state is ProducerIdState.UNINITIALIZED

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
        batch.set_producer_state(pid_epoch.producer_id, pid_epoch.epoch, self.next_sequence(tp), False)
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
        if getattr(exception, "code", None) in _FATAL_CODES or \
                isinstance(exception, errors.UnsupportedVersionError):
            self.fatal_error(exception)
        self.remove_in_flight(batch)
        if self.has_fatal_error:
            return
        tp = batch.topic_partition
        code = getattr(exception, "code", None)
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
        return (f"TransactionManager(state={self._state.name}, "
                f"producer_id_and_epoch={self._producer_id_and_epoch})")
