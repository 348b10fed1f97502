"""The producer id and epoch, the state table's walk and the transactional producer's lifecycle,
sans I/O (the locked half of Java's ``TransactionManager``).

**Owner: no single thread; every change under one lock.** The caller's threads start the
transactional steps (:meth:`~TransactionManager.initialize_transactions`,
:meth:`~TransactionManager.begin_transaction`, :meth:`~TransactionManager.begin_commit`,
:meth:`~TransactionManager.begin_abort`, :meth:`~TransactionManager.open_transaction`) and wait on
the :class:`~.states.TransactionalResult` they return; an append notes the partitions a
transaction needs (:meth:`~TransactionManager.maybe_add_partition`). The sender thread carries
the steps out: it asks :meth:`~TransactionManager.next_transactional_step` which request goes
next, and the handlers of :mod:`.requests` report the answers. It also walks the idempotent
producer's rows of the state table, for :class:`~.idempotence.Idempotence`: InitProducerId
(:meth:`~TransactionManager.begin_init`, :meth:`~TransactionManager.set_producer_id_and_epoch`,
:meth:`~TransactionManager.init_failed`), local epoch bumps
(:meth:`~TransactionManager.bump_epoch`) and resets. Nothing here sends, sleeps or reads a clock.

The lock (``TransactionManager._lock``, a plain ``threading.Lock``): every method that changes
the manager's fields takes it; the private helpers it calls run with it held, and never take it
again. While holding it the manager calls nothing outside itself but the state table
(:func:`~.states.next_state`), :meth:`TransactionalResult.done <.states.TransactionalResult.done>`
(an ``Event``) and logging: never the sequence bookkeeping, the accumulator, the sender or the
network client, which hold no reference it could use (``tests/unit/producer/test_lock_order.py``
checks both, on the source and at run time). It may be taken under a partition's deque lock (an
append noting its partition, the drain gate of a transaction), never the other way round.
Single-attribute reads need no lock and take none (``state``, ``producer_id_and_epoch``,
``has_fatal_error``, ``last_error``, ``transaction_version``, :meth:`check_can_send` on every
send). The sequence bookkeeping calls this manager, never the reverse
(:mod:`.idempotence`): where a lifecycle event concerns the sequences (a new producer id, an
epoch bump, a replaced cluster), the bookkeeping asks for it and then re-sequences its own
partitions.

Transactions (a ``transactional.id``; the state table is :mod:`.states`): the sender asks for
FindCoordinator, InitProducerId, AddPartitionsToTxn for partitions about to get their first
batch (:meth:`~TransactionManager.may_drain` holds a partition back until it is enrolled; under
transaction version 2, KIP-890, Produce v12 enrols it), and EndTxn once nothing is in flight.
Fencing, authorization, an invalid producer epoch and an unknown error are fatal; a failed batch
makes the transaction abortable. The coordinator owns the epoch: no local bump in a transaction.
"""

from __future__ import annotations

import logging
import threading

from ... import errors
from ...errors import IllegalStateError, KafkaError, TransactionAbortedError
from ...bytecodec import INT16_MAX
from ...structs import Node, TopicPartition
from .partition_map import ProducerIdAndEpoch
from .states import TransactionalResult, TransactionalStep, TransactionState, next_state

NONE = ProducerIdAndEpoch.NONE  # type: ignore[attr-defined]

log = logging.getLogger(__name__)

MAX_EPOCH = INT16_MAX



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


class TransactionManager:
    """The producer id/epoch state machine and the transaction lifecycle, behind one lock; see
    the module docstring."""

    def __init__(self, transactional_id: str | None = None, transaction_timeout_ms: int = 60_000) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self._lock = threading.Lock()
        self._state = TransactionState.UNINITIALIZED
        self._producer_id_and_epoch: ProducerIdAndEpoch = NONE
        self._discard_next_id = False    # an InitProducerId in flight went to a replaced cluster
        self._last_error: BaseException | None = None
        # transactions (see the module docstring)
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

    # --- reads, any thread, no lock (single attributes) -----------------------------------------

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
    def is_transactional(self) -> bool:
        return self.transactional_id is not None

    @property
    def transaction_version(self) -> int:
        """1, or 2 (KIP-890) when the cluster finalized ``transaction.version`` >= 2 at the start
        of the current transaction."""
        return self._transaction_version

    @property
    def is_completing(self) -> bool:
        return self._state in (TransactionState.COMMITTING_TRANSACTION,
                               TransactionState.ABORTING_TRANSACTION)

    @property
    def partitions_in_transaction(self) -> frozenset[TopicPartition]:
        with self._lock:
            return frozenset(self._in_transaction)

    # --- the producer id state machine (sender thread) ------------------------------------------

    def _transition(self, event: str) -> None:
        """Walk the state table (lock held)."""
        target = next_state(self._state, event)
        log.debug("Transaction state %s -> %s (%s)", self._state.name, target.name, event)
        self._state = target

    def begin_init(self) -> None:
        """InitProducerId is being sent (idempotent producer)."""
        with self._lock:
            self._transition("begin_init")

    def set_producer_id_and_epoch(self, producer_id: int, epoch: int) -> bool:
        """The idempotent producer's InitProducerId answered: READY under this id. ``False`` when
        the answer is not used: it came from a cluster that was replaced since it was sent
        (:meth:`forget_producer_id`), and a new InitProducerId is due."""
        with self._lock:
            self._transition("producer_id_received")
            if self._discard_next_id:
                self._discard_next_id = False
                log.info("ignoring producer id %d from InitProducerId sent before the cluster "
                         "changed; asking the new cluster", producer_id)
                self._transition("reset_producer_id")
                return False
            log.info("ProducerId set to %d with epoch %d", producer_id, epoch)
            self._producer_id_and_epoch = ProducerIdAndEpoch(producer_id, epoch)
            return True

    def init_failed(self) -> None:
        """InitProducerId failed retriably; it will be sent again."""
        with self._lock:
            self._transition("init_failed")
            self._discard_next_id = False

    def fatal_error(self, exception: BaseException) -> None:
        """The producer cannot go on: FATAL_ERROR, and a step waited on fails with it."""
        with self._lock:
            log.info("Transiting to fatal error state due to %r", exception)
            self._state = TransactionState.FATAL_ERROR
            self._last_error = exception
            self._complete_result(exception)

    def forget_producer_id(self) -> None:
        """The cluster was replaced (idempotent producer): the id it gave is not ours on the new
        one. READY: forget it (a new InitProducerId); INITIALIZING: the answer of the
        InitProducerId out is not used (:meth:`set_producer_id_and_epoch`)."""
        with self._lock:
            if self._state is TransactionState.READY:
                self._reset_producer_id()
            elif self._state is TransactionState.INITIALIZING:
                self._discard_next_id = True

    def _reset_producer_id(self) -> None:
        """Forget the producer id (epoch exhausted, or the cluster replaced): a new
        InitProducerId is needed."""
        log.debug("Resetting idempotent producer ID. ID and epoch before reset are %s",
                  self._producer_id_and_epoch)
        self._transition("reset_producer_id")
        self._producer_id_and_epoch = NONE

    def bump_epoch(self) -> ProducerIdAndEpoch:
        """Raise the epoch by one, no request (the broker accepts a higher epoch from the same
        producer id), or reset the id at the last epoch; the id/epoch now (``NONE`` after a
        reset)."""
        with self._lock:
            current = self._producer_id_and_epoch
            if current.epoch >= MAX_EPOCH:
                self._reset_producer_id()
            else:
                self._transition("bump_epoch")
                self._producer_id_and_epoch = ProducerIdAndEpoch(current.producer_id,
                                                                 current.epoch + 1)
                log.debug("Incremented producer epoch, producer ID and epoch are now %s",
                          self._producer_id_and_epoch)
            return self._producer_id_and_epoch

    def require_epoch_bump(self) -> None:
        """A batch of the transaction may have left a sequence gap: under transaction version 1
        its abort bumps the epoch (InitProducerId) before the producer is READY again."""
        with self._lock:
            self._txn_epoch_bump_required = True

    # --- transactions: the caller's steps (any thread) -----------------------------------------

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

    def maybe_add_partition(self, tp: TopicPartition) -> None:
        """A new batch for ``tp`` was queued (Java's ``maybeAddPartition``, per batch here; on the
        appending thread, under the partition's deque lock): note the partition for the next
        AddPartitionsToTxn, so the partitions of a transaction are enrolled together rather than
        node by node as their batches become drainable."""
        if self.transactional_id is None or tp in self._in_transaction or tp in self._new_partitions:
            return
        with self._lock:
            self._enrol(tp)

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

    def next_transactional_step(self, has_incomplete_batches: bool) -> TransactionalStep | None:
        """Which transactional request goes next (a :class:`~.states.TransactionalStep`: the
        EndTxn ones say commit or abort), or None. Completes a transaction that enrolled no partition
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
                return TransactionalStep.FIND_COORDINATOR
            if state is TransactionState.INITIALIZING:
                return TransactionalStep.INIT_PRODUCER_ID
            if enrolling:
                return TransactionalStep.ADD_PARTITIONS
            return TransactionalStep.COMMIT if self._end_committed else TransactionalStep.ABORT

    def may_drain(self, tp: TopicPartition) -> bool:
        """The drain gate's transactional part (sender thread, under the partition's deque lock):
        whether ``tp``'s batches may drain now, that is, ``tp`` is in the transaction (enrolled
        now under transaction version 2; noted for AddPartitionsToTxn otherwise)."""
        if tp in self._in_transaction:
            return True
        with self._lock:
            return self._enrol(tp)

    def _enrol(self, tp: TopicPartition) -> bool:
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
