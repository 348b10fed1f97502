"""The producer's transaction states and their transitions, as one table (Java's
``TransactionManager.State``), and the result a caller waits on while the I/O thread completes a
transactional step (Java's ``TransactionalRequestResult``).

An idempotent producer only ever walks the first rows (UNINITIALIZED, INITIALIZING, READY and
its local epoch bumps); a transactional producer walks the rest as well::

    state                   event                       next state
    ----------------------  --------------------------  ------------------------------------------
    UNINITIALIZED           begin_init                  INITIALIZING (InitProducerId to be sent)
    UNINITIALIZED           resume_transaction          IN_TRANSACTION (another producer's open
                                                        transaction, to commit or abort)
    INITIALIZING            producer_id_received        READY
    INITIALIZING            init_failed                 UNINITIALIZED (idempotent: sent again)
    READY                   bump_epoch                  READY, epoch + 1 (idempotent, no request)
    READY                   reset_producer_id           UNINITIALIZED (idempotent, epoch exhausted)
    READY                   begin_transaction           IN_TRANSACTION
    IN_TRANSACTION          begin_commit                COMMITTING_TRANSACTION (flush, then EndTxn)
    IN_TRANSACTION          begin_abort                 ABORTING_TRANSACTION (queued records fail)
    IN_TRANSACTION          abortable_error             ABORTABLE_ERROR
    COMMITTING_TRANSACTION  abortable_error             ABORTABLE_ERROR (the commit fails)
    COMMITTING_TRANSACTION  transaction_completed       READY
    ABORTABLE_ERROR         abortable_error             ABORTABLE_ERROR (the first error is kept)
    ABORTABLE_ERROR         begin_abort                 ABORTING_TRANSACTION
    ABORTING_TRANSACTION    transaction_completed       READY
    ABORTING_TRANSACTION    begin_epoch_bump            INITIALIZING (after EndTxn, transaction
                                                        version 1, when an error needs a new epoch)
    any                     fatal_error                 FATAL_ERROR (terminal: close the producer)

Java's rules, in :data:`TRANSITIONS`; an event a state does not allow is an ``IllegalStateError``
naming both (a caller's misuse, such as ``commit_transaction()`` outside a transaction).
"""

from __future__ import annotations

import enum
import threading

from ...errors import IllegalStateError, KafkaTimeoutError


class TransactionState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"
    READY = "ready"
    IN_TRANSACTION = "in_transaction"
    COMMITTING_TRANSACTION = "committing_transaction"
    ABORTING_TRANSACTION = "aborting_transaction"
    ABORTABLE_ERROR = "abortable_error"
    FATAL_ERROR = "fatal_error"


_S = TransactionState
# (state, event) -> next state; FATAL_ERROR is reachable from anywhere and left by nothing.
TRANSITIONS: dict[tuple[TransactionState, str], TransactionState] = {
    (_S.UNINITIALIZED, "begin_init"): _S.INITIALIZING,
    (_S.UNINITIALIZED, "resume_transaction"): _S.IN_TRANSACTION,
    (_S.INITIALIZING, "producer_id_received"): _S.READY,
    (_S.INITIALIZING, "init_failed"): _S.UNINITIALIZED,
    (_S.READY, "bump_epoch"): _S.READY,
    (_S.READY, "reset_producer_id"): _S.UNINITIALIZED,
    (_S.READY, "begin_transaction"): _S.IN_TRANSACTION,
    (_S.IN_TRANSACTION, "begin_commit"): _S.COMMITTING_TRANSACTION,
    (_S.IN_TRANSACTION, "begin_abort"): _S.ABORTING_TRANSACTION,
    (_S.IN_TRANSACTION, "abortable_error"): _S.ABORTABLE_ERROR,
    (_S.COMMITTING_TRANSACTION, "abortable_error"): _S.ABORTABLE_ERROR,
    (_S.COMMITTING_TRANSACTION, "transaction_completed"): _S.READY,
    (_S.ABORTABLE_ERROR, "abortable_error"): _S.ABORTABLE_ERROR,
    (_S.ABORTABLE_ERROR, "begin_abort"): _S.ABORTING_TRANSACTION,
    (_S.ABORTING_TRANSACTION, "transaction_completed"): _S.READY,
    (_S.ABORTING_TRANSACTION, "begin_epoch_bump"): _S.INITIALIZING,
}


def next_state(state: TransactionState, event: str) -> TransactionState:
    """The state ``event`` leads to from ``state``; ``IllegalStateError`` when the table has no
    such row (``fatal_error`` is not in the table: it is allowed from every state)."""
    target = TRANSITIONS.get((state, event))
    if target is None:
        raise IllegalStateError(f"invalid transaction state transition: {event} in state "
                                f"{state.name}")
    return target


class TransactionalStep(enum.Enum):
    """The transactional request the sender sends next
    (:meth:`~.manager.TransactionManager.next_transactional_step`), in the order they take
    precedence. The two EndTxn steps carry the commit decision, so the request handler takes it
    from the step, not from the manager's state."""

    FIND_COORDINATOR = "FindCoordinator"
    INIT_PRODUCER_ID = "InitProducerId"
    ADD_PARTITIONS = "AddPartitionsToTxn"
    COMMIT = "EndTxn(commit)"
    ABORT = "EndTxn(abort)"


class TransactionalResult:
    """One transactional step a caller waits for (``init_transactions``, a commit, an abort):
    completed once by the I/O thread, with or without an error. ``operation`` names the step
    in a timeout's message."""

    def __init__(self, operation: str):
        self.operation = operation
        self._done = threading.Event()
        self._error: BaseException | None = None
        self.consumed = False

    @property
    def is_done(self) -> bool:
        return self._done.is_set()

    @property
    def error(self) -> BaseException | None:
        return self._error

    def done(self, error: BaseException | None = None) -> None:
        """Complete the step (first call wins)."""
        if not self._done.is_set():
            self._error = error
            self._done.set()

    def wait(self, timeout_ms: int | None) -> None:
        """Wait for the step; raise its error, or ``KafkaTimeoutError`` when ``timeout_ms`` runs
        out first (the step goes on: calling the operation again waits for the same step). Once
        the wait has seen the step complete, the result is ``consumed``."""
        if not self._done.wait(None if timeout_ms is None else max(0, timeout_ms) / 1000):
            raise KafkaTimeoutError(f"Timeout expired after {timeout_ms} ms while awaiting "
                                    f"{self.operation}")
        self.consumed = True
        if self._error is not None:
            raise self._error
