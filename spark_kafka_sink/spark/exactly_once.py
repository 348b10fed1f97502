"""The driver's side of exactly-once writes: recover at start, skip replays, commit or abort the
tasks' transactions (no pyspark here: ``KafkaSink`` and the Data Source call it around the job).

Each task writes its Spark partition in one Kafka transaction, id ``<prefix>-<partition id>``
(a retry fences its failed predecessor), and hands it back uncommitted. Then, on the driver:

1. :meth:`ExactlyOnceDriver.begin_batch`, before any task runs. The first call in a process (and
   the first after a call that could not record its outcome) recovers: it creates the commit log
   if needed (:mod:`.commit_log`), finishes the commits of a batch its last record shows
   ``prepared``, and fences the ids a crashed run may have left open (their transactions are
   aborted now, not after ``transaction.timeout.ms``, which the fence of ``<prefix>-0`` also
   checks against the brokers' maximum). A batch id the log shows committed is a replay: skipped.
   When the partition count is known before the job (rows mode) and above any batch's, the batch
   is first recorded ``prepared`` with no transactions, so a crash mid-job leaves that count.
2. The Spark job runs. If it fails, :meth:`ExactlyOnceDriver.abort_batch` fences the batch's ids
   (``<prefix>-0`` .. ``<prefix>-<partitions - 1>``, or the upward probe when the count is
   unknown), which aborts what its tasks left open, and records the batch ``aborted``, unless the
   log shows it committed (a failed replay: it stays ``committed``).
3. :meth:`ExactlyOnceDriver.commit_batch` records the batch ``prepared`` with every task's
   transaction, commits them one by one, then records it ``committed``. The record makes a crash
   between two commits safe: the next driver finishes the commits from it (committing twice
   succeeds). After a failed step the driver recovers from the log again before its next batch.

The Data Source runs the same steps, each with a fresh driver: recovery in ``writer()`` /
``streamWriter()`` (:meth:`~ExactlyOnceDriver.prepare_query`), replay check and commits in
``commit()`` (:meth:`~ExactlyOnceDriver.commit_written`), ``abort_batch`` in ``abort()``.

**Fencing.** Recovery fences ``<prefix>-0`` up to the log's ``max_partitions``, then, for a run
that used more (arrow mode and the Data Source learn the count after the job), upward as Flink's
``KafkaSink`` probes: :data:`FENCE_GAP` ids at a time until a whole window had nothing to abort.
The epochs the probe leaves are recorded (``probe_epochs``), so the probed range does not grow
from restart to restart. All I/O goes through :class:`TransactionOps` and the commit log.

A transaction that cannot be committed (fenced; aborted by the coordinator after
``transaction.timeout.ms``; its id forgotten after ``transactional.id.expiration.ms``) lost its
records: the batch is recorded ``aborted`` and fails, naming it and why, and the query's restart
writes the batch again. If it was the first commit the batch's other transactions are aborted
too, so every row is written once; else the error names the committed ones, whose rows appear
twice (as for a recovered transaction whose outcome EndTxn cannot tell). A commit that cannot
reach the cluster in time leaves the batch ``prepared``: the next recovery finishes it.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Protocol, Sequence

from ..clock import SYSTEM_CLOCK, Clock
from ..config import ProducerConfig
from ..errors import (
    InvalidProducerIdMappingError, InvalidTxnStateError, KafkaError, ProducerFencedError,
)
from ..producer.transactions.resumable import (
    FencedId, ResumableTransaction, commit_resumable, fence_transactional_ids,
)
from .commit_log import (
    BatchRecord, BatchState, CommitLog, OlderBatchError, check_order, is_replay,
)
from .options import SinkConfig

log = logging.getLogger(__name__)

__all__ = ["FENCE_GAP", "BatchCommit", "BatchStart", "ExactlyOnceDriver", "FencedId",
           "KafkaTransactionOps", "TransactionOps", "commit_live", "write_batch_id"]

FENCE_GAP = 8
"""How many unused ids above the highest used one the upward probe fences before it stops."""

_LOST = (ProducerFencedError, InvalidTxnStateError, InvalidProducerIdMappingError)
"""What a commit answers for a transaction it can no longer commit (see the module docstring)."""


class TransactionOps(Protocol):
    """The driver's two calls to the cluster (the seam tests replace)."""

    def commit(self, transaction: ResumableTransaction) -> None:
        """Commit ``transaction``. Raises ``ProducerFencedError`` / ``InvalidTxnStateError`` /
        ``InvalidProducerIdMappingError`` when it is lost, ``KafkaTimeoutError`` when the
        cluster did not answer in time (repeat later)."""

    def fence(self, transactional_ids: Sequence[str]) -> tuple[FencedId, ...]:
        """Fence each id (aborting what it left open); one :class:`FencedId` per distinct id."""


class KafkaTransactionOps:
    """:class:`TransactionOps` on the cluster: :func:`commit_resumable` and
    :func:`fence_transactional_ids` with the tasks' producer settings (reach the cluster, carry
    the transaction timeout)."""

    def __init__(self, config: ProducerConfig, timeout_s: float | None = None):
        self._config = config
        self._timeout_s = timeout_s

    def commit(self, transaction: ResumableTransaction) -> None:
        commit_resumable(transaction, self._config, self._timeout_s)

    def fence(self, transactional_ids: Sequence[str]) -> tuple[FencedId, ...]:
        return fence_transactional_ids(transactional_ids, self._config, self._timeout_s)


def commit_live(producer: Any, transaction: ResumableTransaction) -> None:
    """Commit ``transaction`` with the producer that holds it open: the driver's own write of a
    small micro-batch (``spark/driver_write.py``), whose producer begins the next transaction
    without InitProducerId. Its errors are a commit's (a fenced producer: ``ProducerFencedError``)."""
    producer.commit_transaction()


@dataclass(frozen=True)
class BatchStart:
    """What :meth:`ExactlyOnceDriver.begin_batch` decided: ``replay`` (the batch is already
    committed: skip it), and what recovery did first (``recovered_commits``: transactions of an
    interrupted batch committed now; ``fenced``: transactional ids fenced)."""

    batch_id: str
    replay: bool
    recovered_commits: int = 0
    fenced: int = 0


@dataclass(frozen=True)
class BatchCommit:
    """The outcome of :meth:`ExactlyOnceDriver.commit_batch` or ``abort_batch``."""

    batch_id: str
    committed: int
    aborted: int
    commit_ms: float
    replay: bool = False

    def figures(self) -> dict[str, float]:
        """The batch's transaction metrics, by the names the sink publishes."""
        return {"transaction-commit-total": self.committed, "transaction-abort-total": self.aborted,
                "transaction-commit-time-ms": self.commit_ms, "batch-replay-total": int(self.replay)}


@dataclass(frozen=True)
class _Recovery:
    recovered: int
    fenced: int


def write_batch_id() -> str:
    """A batch id for ``KafkaSink.write`` (never replayed)."""
    return f"write-{uuid.uuid4().hex}"


class ExactlyOnceDriver:
    """The driver side of one exactly-once sink; see the module docstring. ``transactions``
    (default :class:`KafkaTransactionOps`) and ``commit_log`` (default :class:`CommitLog`) carry
    all its I/O; ``clock`` stamps the records."""

    def __init__(self, config: SinkConfig, *, commit_log: CommitLog | None = None,
                 transactions: TransactionOps | None = None, timeout_s: float | None = None,
                 clock: Clock = SYSTEM_CLOCK):
        if not config.exactly_once:
            raise ValueError("ExactlyOnceDriver needs delivery.guarantee=exactly-once")
        self._config = config
        self._log = commit_log or CommitLog(config)
        self._ops = transactions or KafkaTransactionOps(config.producer_config, timeout_s)
        self._clock = clock
        self._query_id: str | None = None
        self._forget()

    # --- the protocol -------------------------------------------------------------------------

    def begin_batch(self, batch_id: str, partitions: int | None = None,
                    query_id: str | None = None) -> BatchStart:
        """Before the job: recover if needed, then skip a replay. ``partitions``: the job's
        partition count when known before it runs (rows mode), else None (arrow mode).
        ``query_id``: the streaming query's id (stable per checkpoint), recorded with the batch;
        a batch id the log shows committed by another query is refused
        (:func:`~.commit_log.is_replay`: a checkpoint reset), not skipped."""
        recovery = _Recovery(0, 0)
        self._query_id = query_id
        try:
            if not self._recovered:
                recovery = self._recover()
            check_order(self._last, batch_id, query_id, self._log.topic)
            if is_replay(self._last, batch_id, query_id, self._log.topic):
                log.info("KafkaSink: micro-batch %s was already committed (%d transactions, "
                         "recorded in %r): a replay, skipped", batch_id,
                         len(self._last.transactions), self._log.topic)
                return BatchStart(batch_id, True, recovery.recovered, recovery.fenced)
            if partitions is not None and partitions > self._used:
                self._append(self._record(batch_id, BatchState.PREPARED, partitions, ()))
        except BaseException:
            self._forget()
            raise
        return BatchStart(batch_id, False, recovery.recovered, recovery.fenced)

    def prepare_query(self) -> BatchStart:
        """The Data Source's start (``writer()`` / ``streamWriter()``, on the driver, before any
        task): recover as :meth:`begin_batch` does."""
        try:
            recovery = self._recover()
        except BaseException:
            self._forget()
            raise
        return BatchStart("", False, recovery.recovered, recovery.fenced)

    def commit_written(self, batch_id: str, transactions: Iterable[ResumableTransaction],
                       partitions: int | None = None) -> BatchCommit:
        """The Data Source's ``commit()``, in a driver worker after the tasks wrote: finish a
        batch an earlier driver left prepared (without fencing: this batch's transactions are
        open), then commit this one, unless the log shows it committed: a replay, whose
        transactions are aborted. ``partitions``: the job's task count."""
        transactions = tuple(transactions)
        started = self._clock.monotonic_ns()
        try:
            if not self._recovered:
                self._recover(fence=False)
            check_order(self._last, batch_id, self._query_id, self._log.topic)
            if self._is_committed(batch_id):
                self._owning(self._restated(), lambda: len(
                    self._ops.fence([t.transactional_id for t in transactions])))
                log.info("KafkaSink: micro-batch %s was already committed (recorded in %r): a "
                         "replay; its %d new transaction(s) were aborted", batch_id,
                         self._log.topic, len(transactions))
                return BatchCommit(batch_id, 0, len(transactions),
                                   self._ms_since(started), replay=True)
        except BaseException:
            self._forget()
            raise
        return self.commit_batch(batch_id, transactions, partitions)

    def commit_batch(self, batch_id: str, transactions: Iterable[ResumableTransaction],
                     partitions: int | None = None, *, producer: Any = None) -> BatchCommit:
        """After the job: record the batch ``prepared``, commit every transaction, record it
        ``committed``. ``partitions``: the job's task count (default: one more than the highest
        partition among the transactions' ids). ``producer``: the one open transaction is held
        by this live producer (the driver's own write), which commits it (:func:`commit_live`);
        recovery still commits it from the record, as any task's."""
        transactions = tuple(sorted(transactions, key=lambda t: t.transactional_id))
        if producer is not None and len(transactions) != 1:  # before anything is recorded
            raise ValueError(f"a live producer holds one transaction, not {len(transactions)}")
        started = self._clock.monotonic_ns()
        count = self._count(transactions) if partitions is None else partitions
        try:
            record = self._record(batch_id, BatchState.PREPARED, count, transactions)
            self._append(record)
            committed, lost = self._commit_all(record, producer)
            if lost:
                raise self._give_up(record, committed, lost, recovering=False)
            self._record_committed(record)
        except BaseException:
            self._forget()
            raise
        return BatchCommit(batch_id, len(transactions), 0, self._ms_since(started))

    def abort_batch(self, batch_id: str, partitions: int | None = None) -> BatchCommit:
        """The job failed: abort whatever its tasks left open, by fencing their ids
        (``partitions``: the job's partition count; None when unknown: the upward probe). An
        abort never replaces a ``committed`` record of the same batch id (a failed replay). A task
        still running (Spark stops the Python worker of a cancelled task only after
        ``spark.python.task.killTimeout``; a lost executor runs on until it notices) may open a
        transaction after this fence: the next batch therefore recovers again, fencing every id."""
        started = self._clock.monotonic_ns()
        try:
            if not self._recovered:
                self._recover(fence=False)
            older = self._older(batch_id)
            replay = self._is_committed(batch_id)
            first = (self._restated() if replay or older is not None else
                     self._record(batch_id, BatchState.ABORTED, partitions or 0, ()))
            fenced = self._owning(first, lambda: self._fence_batch(partitions))
            ms = self._ms_since(started)
            if older is not None:
                raise older
            if replay:
                log.warning("KafkaSink: micro-batch %s failed, but it was committed already "
                            "(recorded in %r): the failed job was a replay; its transactions "
                            "were aborted and the batch stays committed", batch_id, self._log.topic)
                return BatchCommit(batch_id, 0, fenced, ms, replay=True)
        except BaseException:
            self._forget()
            raise
        finally:
            self._recovered = False              # a late task's transaction: fenced next batch
        log.warning("KafkaSink: micro-batch %s failed; the open transactions of its task(s) were "
                    "aborted (%d transactional id(s) fenced)", batch_id, fenced)
        return BatchCommit(batch_id, 0, fenced, self._ms_since(started))

    def close(self) -> None:
        self._log.close()

    def _fence_batch(self, partitions: int | None) -> int:
        if partitions is None:
            return self._fence_upward()
        fenced = len(self._ops.fence([self._id(p) for p in range(partitions)]))
        self._grow(partitions)
        return fenced

    def _older(self, batch_id: str) -> OlderBatchError | None:
        try:
            check_order(self._last, batch_id, self._query_id, self._log.topic)
        except OlderBatchError as error:
            return error
        return None

    def _owning(self, first: BatchRecord, fence: Callable[[], int]) -> int:
        """Fence (``fence()``: how many ids) only while this driver owns the commit log: the
        writer's transaction begins with ``first`` sent and flushed (a driver another one took
        over from is refused there, :class:`~.commit_log.DriverFencedError`, before it fences any
        task of the new driver's batch); then the ids are fenced, and the transaction commits
        ``first`` with what fencing learnt (aborted if fencing fails). What remains: a driver that
        takes over between that flush and the fence, and starts a batch whose tasks write in
        that time, has those transactions aborted; that batch fails and runs again."""
        pending = self._log.begin(first)
        try:
            fenced = fence()
        except BaseException:
            try:
                pending.abort()
            except Exception as error:  # noqa: BLE001 - the fence's error is the one to raise
                log.debug("KafkaSink: aborting the commit log's transaction failed: %r", error)
            raise
        final = replace(first, max_partitions=self._used, probe_epochs=self._window)
        pending.commit(None if final == first else replace(final, written_ms=self._clock.now_ms()))
        self._last = final
        return fenced

    # --- recovery -----------------------------------------------------------------------------

    def _forget(self) -> None:
        """Know nothing: the next step reads the log again (a fresh driver, or one whose last
        step could not record its outcome)."""
        self._recovered = False
        self._last: BatchRecord | None = None
        self._used = 0
        self._window: tuple[int, ...] = ()

    def _recover(self, *, fence: bool = True) -> _Recovery:
        self._log.ensure_topic()
        last = self._log.latest()
        self._last = last
        self._used = last.max_partitions if last is not None else 0
        self._window = last.probe_epochs if last is not None else ()
        recovered = 0
        changed = False
        if last is not None and last.state is BatchState.PREPARED and last.transactions:
            log.warning("KafkaSink: micro-batch %s was recorded but its commits may not all have "
                        "run (the driver stopped); committing its %d transaction(s) now",
                        last.batch_id, len(last.transactions))
            committed, lost = self._commit_all(last)
            recovered = len(committed)
            if lost:
                self._give_up(last, committed, lost, recovering=True)     # logged there
            else:
                self._last = replace(last, state=BatchState.COMMITTED)
                self._persist()                  # before any fence: a fence raises the epochs,
                changed = True                   # and a repeated commit would then be refused
        elif last is not None and last.state is BatchState.PREPARED:
            log.warning("KafkaSink: micro-batch %s started with %d partition(s) and its driver "
                        "stopped before its tasks handed over their transactions: not committed; "
                        "their ids are fenced", last.batch_id, last.partitions)
        fenced = 0
        if fence:
            fenced = self._fence_upward()
            changed = True
        if changed:
            self._persist()
        log.info("KafkaSink: exactly-once recovery for prefix %r: %d transaction(s) committed, %d "
                 "transactional id(s) fenced", self._config.transactional_id_prefix, recovered,
                 fenced)
        self._recovered = True
        return _Recovery(recovered, fenced)

    def _fence_upward(self) -> int:
        """Fence every id a run may have used (see *Fencing* in the module docstring); returns
        how many ids were fenced, and keeps what the probe saw for the next record."""
        used, window = self._used, self._window
        end = used + FENCE_GAP
        seen = {f.transactional_id: f for f in self._ops.fence([self._id(p) for p in range(end)])}
        top, scan = used, used
        while True:
            touched = [p for p in range(scan, end) if not self._unused(p, seen[self._id(p)],
                                                                       used, window)]
            if not touched:
                break
            top = max(touched) + 1
            scan, end = end, top + FENCE_GAP
            seen.update((f.transactional_id, f) for f in
                        self._ops.fence([self._id(p) for p in range(scan, end)]))
        if top > used:
            log.warning("KafkaSink: transactional ids up to %r had been used (a run crashed in a "
                        "batch with more partitions than recorded); their transactions were "
                        "aborted", self._id(top - 1))
        self._used = top
        self._window = tuple(seen[self._id(p)].producer_epoch for p in range(top, top + FENCE_GAP))
        return end

    @staticmethod
    def _unused(partition: int, fenced: FencedId, used: int, window: tuple[int, ...]) -> bool:
        """Whether no task used the id since the last probe: fresh, or its epoch rose by one
        (our own fence) from what the last probe left on it."""
        if fenced.fresh:
            return True
        index = partition - used
        return 0 <= index < len(window) and fenced.producer_epoch <= window[index] + 1

    def _commit_all(self, record: BatchRecord, producer: Any = None) -> tuple[
            list[ResumableTransaction], list[tuple[ResumableTransaction, KafkaError]]]:
        """Commit every transaction of ``record``: (committed, lost with why). Errors other than
        a lost transaction (the cluster out of reach) propagate: the record stays prepared.
        ``producer``: the live producer holding the record's one transaction."""
        committed: list[ResumableTransaction] = []
        lost: list[tuple[ResumableTransaction, KafkaError]] = []
        for transaction in record.transactions:
            try:
                if producer is not None:
                    commit_live(producer, transaction)
                else:
                    self._ops.commit(transaction)
            except _LOST as error:
                lost.append((transaction, error))
                break                            # the rest are aborted (see _give_up)
            committed.append(transaction)
        return committed, lost

    def _record_committed(self, record: BatchRecord) -> None:
        try:
            self._append(replace(record, state=BatchState.COMMITTED,
                                 written_ms=self._clock.now_ms()))
        except Exception as error:  # noqa: BLE001 - said precisely, with the cause
            raise KafkaError(
                f"KafkaSink: micro-batch {record.batch_id}: its {len(record.transactions)} "
                f"transaction(s) are committed (read_committed readers see its records), but "
                f"recording it committed in {self._log.topic!r} failed ({error!r}); only that "
                "record is missing: the next batch reads the log again first and records it, so "
                "a replay of this batch is skipped") from error

    def _give_up(self, record: BatchRecord, committed: list[ResumableTransaction],
                 lost: list[tuple[ResumableTransaction, KafkaError]], *,
                 recovering: bool) -> KafkaError:
        """A transaction of ``record`` was lost: abort what can still be aborted, log the error
        that says what happened, record the batch aborted (so it runs again), and return the
        error.
        ``recovering``: an earlier driver may have committed some of them before it stopped."""
        first, why = lost[0]
        rest = [t.transactional_id for t in record.transactions
                if t is not first and t not in committed]
        self._ops.fence(rest)
        if recovering and isinstance(why, (InvalidProducerIdMappingError, ProducerFencedError)):
            doubt = ", ".join([first.transactional_id, *rest])
            cause = ("its id had expired (unused for longer than the brokers' "
                     "transactional.id.expiration.ms: the driver stayed down that long)"
                     if isinstance(why, InvalidProducerIdMappingError) else
                     "its epoch was fenced (a producer with that id initialized since: a lost "
                     "attempt of a task, or the coordinator after transaction.timeout.ms)")
            outcome = (f"{cause}, so whether the driver that stopped had committed it is "
                       "unknown. When the query restarts Spark writes the batch again: the rows "
                       f"of {doubt} appear twice if that driver had committed them before it "
                       "stopped; otherwise they were aborted and the rerun writes them once")
            if committed:
                outcome += (f"; the rows of {', '.join(t.transactional_id for t in committed)} "
                            "(committed) appear twice")
        elif not committed:
            outcome = (f"its other {len(rest)} transaction(s) were aborted, so when the query "
                       "restarts Spark writes the batch again, every row once")
        else:
            names = ", ".join(t.transactional_id for t in committed)
            outcome = (f"{len(committed)} of its transactions were committed already ({names}) "
                       f"and the other {len(rest)} aborted; when the query restarts Spark writes "
                       "the batch again, and the rows of the committed ones appear twice")
        message = (f"KafkaSink: micro-batch {record.batch_id} could not be committed: the "
                   f"transaction of {first.transactional_id!r} was lost ({why}); {outcome}")
        # logged before the record: once it says aborted, no later driver can tell what was lost
        log.error("%s", message)
        self._last = replace(record, state=BatchState.ABORTED)
        try:
            self._persist()
        except Exception as failure:  # noqa: BLE001 - the loss must still be said
            raise KafkaError(f"{message}. Recording the batch aborted in {self._log.topic!r} did "
                             f"not complete either ({failure!r})") from failure
        error = KafkaError(message)
        error.__cause__ = why
        return error

    # --- records ------------------------------------------------------------------------------

    def _is_committed(self, batch_id: str) -> bool:
        last = self._last
        return (last is not None and last.batch_id == batch_id
                and last.state is BatchState.COMMITTED)

    def _grow(self, partitions: int) -> None:
        """Ids below ``partitions`` were used: they leave the probe's window."""
        if partitions > self._used:
            self._window = self._window[partitions - self._used:]
            self._used = partitions

    def _record(self, batch_id: str, state: BatchState, partitions: int,
                transactions: tuple[ResumableTransaction, ...]) -> BatchRecord:
        self._grow(partitions)
        return BatchRecord(self._config.transactional_id_prefix, batch_id, state, partitions,
                           transactions, self._used, self._clock.now_ms(), self._window,
                           self._query_id)

    def _persist(self) -> None:
        """Write the last record again with what fencing learnt (the log's first record of a
        prefix, before any batch, has batch id ``""``)."""
        self._append(self._restated())

    def _restated(self) -> BatchRecord:
        """The last record with what fencing learnt (``""``, aborted, before any batch)."""
        last = self._last
        if last is None:
            return self._record("", BatchState.ABORTED, 0, ())
        return replace(last, max_partitions=self._used, probe_epochs=self._window,
                       written_ms=self._clock.now_ms())

    def _append(self, record: BatchRecord) -> None:
        self._log.append(record)
        self._last = record

    def _ms_since(self, started_ns: int) -> float:
        return (self._clock.monotonic_ns() - started_ns) / 1e6

    def _id(self, partition: int) -> str:
        return self._config.transactional_id(partition)

    def _count(self, transactions: Sequence[ResumableTransaction]) -> int:
        """One more than the highest partition among the transactions' ids."""
        start = len(self._config.transactional_id_prefix) + 1
        return max((int(t.transactional_id[start:]) + 1 for t in transactions), default=0)

    def __repr__(self) -> str:
        return f"ExactlyOnceDriver(prefix={self._config.transactional_id_prefix!r}, log={self._log!r})"
