"""The driver's side of exactly-once writes: recover at start, skip replays, commit or abort the
tasks' transactions (no pyspark here: ``KafkaSink`` calls it around the Spark job).

Each task of a micro-batch writes its Spark partition in one Kafka transaction, with transactional
id ``<prefix>-<partition id>`` (stable across attempts: a retry's ``init_transactions()`` fences
its failed predecessor and aborts what that one left open), flushes, checks every record, and
hands its transaction back to the driver without committing it. Then, on the driver:

1. :meth:`ExactlyOnceDriver.begin_batch`, before any task runs. The first call in a process
   recovers: it creates the commit log if needed (:mod:`.commit_log`), reads the prefix's last
   record, finishes the commits of a batch recorded ``prepared`` (a driver died between its
   record and its last commit), then fences every transactional id a crashed run may have left
   open (``<prefix>-0`` up to the most partitions any batch used, or this batch's count if more):
   their transactions are aborted now instead of holding ``read_committed`` readers back until
   ``transaction.timeout.ms``. Its InitProducerId also checks ``transaction.timeout.ms`` against
   the brokers' maximum before any task runs. A batch id the log shows committed is a replay
   (Spark re-runs the last batch when its driver died before recording it in the checkpoint):
   the batch is skipped.
2. The Spark job runs. If it fails, :meth:`ExactlyOnceDriver.abort_batch` fences the batch's ids,
   which aborts every transaction its tasks left open (their values never reach the driver when
   the job fails), and records the batch ``aborted``.
3. :meth:`ExactlyOnceDriver.commit_batch`: records the batch ``prepared`` with every task's
   transaction, commits them one by one, then records it ``committed``. Committing many
   transactions is not atomic; the record is what makes a crash between two commits safe: the
   next driver finishes the commits from it (a commit repeated on a committed transaction
   succeeds).

The Python Data Source runs the same steps where Spark calls it: recovery in ``writer()`` /
``streamWriter()`` (:meth:`ExactlyOnceDriver.prepare_query`), and in ``commit()``, once the tasks
have written, the replay check and the commits (:meth:`ExactlyOnceDriver.commit_written`: a
replayed batch's new transactions are aborted).

A transaction that cannot be committed (fenced, or aborted by the coordinator after
``transaction.timeout.ms``: the driver took longer than that after the task's first record) lost
its records. Nothing is lost for good: the batch is recorded ``aborted`` and fails, naming the
transaction and why, and Spark runs it again when the query restarts. If that was the first
commit, the batch's other transactions are aborted too, so the rerun writes every row once; if
some were committed already, their rows are written again by the rerun (the error says so: the
one case where a row can appear twice). A commit that cannot reach the cluster in time raises
and leaves the batch recorded ``prepared``: the next driver finishes it.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import Iterable

from ..errors import InvalidTxnStateError, KafkaError, ProducerFencedError
from ..producer.resumable import ResumableTransaction, commit_resumable, fence_transactional_ids
from .commit_log import ABORTED, COMMITTED, PREPARED, BatchRecord, CommitLog, is_replay
from .options import SinkConfig

log = logging.getLogger(__name__)


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


def write_batch_id() -> str:
    """A batch id for ``KafkaSink.write`` (never replayed)."""
    return f"write-{uuid.uuid4().hex}"


class ExactlyOnceDriver:
    """The driver side of one exactly-once sink; see the module docstring."""

    def __init__(self, config: SinkConfig, *, commit_log: CommitLog | None = None,
                 timeout_s: float | None = None):
        if not config.exactly_once:
            raise ValueError("ExactlyOnceDriver needs delivery.guarantee=exactly-once")
        self._config = config
        self._log = commit_log or CommitLog(config)
        self._timeout_s = timeout_s
        self._recovered = False
        self._last: BatchRecord | None = None
        self._query_id: str | None = None

    def begin_batch(self, batch_id: str, partitions: int, query_id: str | None = None) -> BatchStart:
        """``query_id``: the streaming query's id (stable per checkpoint; see
        :func:`~.commit_log.is_replay`), recorded with the batch."""
        recovered = fenced = 0
        if not self._recovered:
            recovered, fenced = self._recover(partitions)
        self._query_id = query_id
        last = self._last
        if is_replay(last, batch_id, query_id, self._log.topic):
            log.info("KafkaSink: micro-batch %s was already committed (%d transactions, recorded in "
                     "%r): a replay, skipped", batch_id, len(last.transactions), self._log.topic)
            return BatchStart(batch_id, True, recovered, fenced)
        return BatchStart(batch_id, False, recovered, fenced)

    def prepare_query(self) -> BatchStart:
        """The Data Source's start (``writer()`` / ``streamWriter()``, on the driver, before any
        task): recover as :meth:`begin_batch` does, fencing as many ids as any batch used."""
        recovered, fenced = self._recover(0)
        return BatchStart("", False, recovered, fenced)

    def commit_written(self, batch_id: str,
                       transactions: Iterable[ResumableTransaction]) -> BatchCommit:
        """The Data Source's ``commit()``, in a driver worker after the tasks wrote: finish a
        batch an earlier driver left prepared (without fencing: this batch's transactions are
        open), then commit this one, unless the log shows it committed: a replay, whose
        transactions are aborted."""
        transactions = tuple(transactions)
        started = time.monotonic()
        if not self._recovered:
            self._recover(0, fence=False)
        last = self._last
        if last is not None and last.batch_id == batch_id and last.state == COMMITTED:
            fence_transactional_ids([t.transactional_id for t in transactions], self._task_config(),
                                    self._timeout_s)
            log.info("KafkaSink: micro-batch %s was already committed (recorded in %r): a replay; "
                     "its %d new transaction(s) were aborted", batch_id, self._log.topic,
                     len(transactions))
            return BatchCommit(batch_id, 0, len(transactions), (time.monotonic() - started) * 1000,
                               replay=True)
        return self.commit_batch(batch_id, len(transactions), transactions)

    def commit_batch(self, batch_id: str, partitions: int,
                     transactions: Iterable[ResumableTransaction]) -> BatchCommit:
        transactions = tuple(sorted(transactions, key=lambda t: t.transactional_id))
        started = time.monotonic()
        record = BatchRecord(self._config.transactional_id_prefix, batch_id, PREPARED, partitions,
                             transactions, max(partitions, self._max_partitions()),
                             int(time.time() * 1000), self._query_id)
        self._log.append(record)
        self._last = record
        committed, lost = self._commit_all(record)
        if lost:
            raise self._give_up(record, committed, lost)
        done = record.with_state(COMMITTED)
        self._log.append(done)
        self._last = done
        return BatchCommit(batch_id, len(transactions), 0, (time.monotonic() - started) * 1000)

    def abort_batch(self, batch_id: str, partitions: int) -> BatchCommit:
        """The job failed: abort whatever its tasks left open, by fencing their ids. A task
        still running (Spark stops the Python worker of a cancelled task only after
        ``spark.python.task.killTimeout``; a lost executor runs on until it notices) may open a
        transaction after this fence: the next batch therefore recovers again, fencing every id."""
        started = time.monotonic()
        self._recovered = False
        ids = [self._config.transactional_id(p) for p in range(partitions)]
        fence_transactional_ids(ids, self._task_config(), self._timeout_s)
        record = BatchRecord(self._config.transactional_id_prefix, batch_id, ABORTED, partitions,
                             (), max(partitions, self._max_partitions()), int(time.time() * 1000),
                             self._query_id)
        self._log.append(record)
        self._last = record
        log.warning("KafkaSink: micro-batch %s failed; the open transactions of its %d task(s) "
                    "were aborted", batch_id, partitions)
        return BatchCommit(batch_id, 0, partitions, (time.monotonic() - started) * 1000)

    def close(self) -> None:
        self._log.close()

    # --- recovery -----------------------------------------------------------------------------

    def _recover(self, partitions: int, *, fence: bool = True) -> tuple[int, int]:
        self._log.ensure_topic()
        last = self._log.latest()
        recovered = 0
        if last is not None and last.state == PREPARED:
            log.warning("KafkaSink: micro-batch %s was recorded but its commits may not all have "
                        "run (the driver stopped); committing its %d transaction(s) now",
                        last.batch_id, len(last.transactions))
            committed, lost = self._commit_all(last)
            recovered = len(committed)
            if lost:
                log.error("%s", self._give_up(last, committed, lost))
                last = self._last
            else:
                last = last.with_state(COMMITTED)
                self._log.append(last)
        self._last = last
        count = max(partitions, last.max_partitions if last is not None else 0) if fence else 0
        fenced = fence_transactional_ids([self._config.transactional_id(p) for p in range(count)],
                                         self._task_config(), self._timeout_s)
        log.info("KafkaSink: exactly-once recovery for prefix %r: %d transaction(s) committed, %d "
                 "transactional id(s) fenced", self._config.transactional_id_prefix, recovered, fenced)
        self._recovered = True
        return recovered, fenced

    def _commit_all(self, record: BatchRecord) -> tuple[list[ResumableTransaction],
                                                        list[tuple[ResumableTransaction, KafkaError]]]:
        """Commit every transaction of ``record``: (committed, lost with why). Errors other than
        a lost transaction (the cluster out of reach) propagate: the record stays prepared."""
        config = self._task_config()
        committed: list[ResumableTransaction] = []
        lost: list[tuple[ResumableTransaction, KafkaError]] = []
        for transaction in record.transactions:
            try:
                commit_resumable(transaction, config, self._timeout_s)
            except (ProducerFencedError, InvalidTxnStateError) as error:
                lost.append((transaction, error))
                break                            # the rest are aborted (see _give_up)
            committed.append(transaction)
        return committed, lost

    def _give_up(self, record: BatchRecord, committed: list[ResumableTransaction],
                 lost: list[tuple[ResumableTransaction, KafkaError]]) -> KafkaError:
        """A transaction of ``record`` was lost: abort what can still be aborted, record the
        batch aborted (so it runs again), and return the error that says what happened."""
        first, why = lost[0]
        rest = [t.transactional_id for t in record.transactions
                if t is not first and t not in committed]
        fence_transactional_ids(rest, self._task_config(), self._timeout_s)
        if not committed:
            outcome = (f"its other {len(rest)} transaction(s) were aborted, so when the query "
                       "restarts Spark writes the batch again, every row once")
        else:
            names = ", ".join(t.transactional_id for t in committed)
            outcome = (f"{len(committed)} of its transactions were committed already ({names}) "
                       f"and the other {len(rest)} aborted; when the query restarts Spark writes "
                       "the batch again, and the rows of the committed ones appear twice")
        aborted = record.with_state(ABORTED)
        self._log.append(aborted)
        self._last = aborted
        error = KafkaError(f"KafkaSink: micro-batch {record.batch_id} could not be committed: the "
                           f"transaction of {first.transactional_id!r} was lost ({why}); {outcome}")
        error.__cause__ = why
        return error

    def _max_partitions(self) -> int:
        return self._last.max_partitions if self._last is not None else 0

    def _task_config(self):
        """The tasks' producer settings without a transactional id (reach the cluster, carry the
        transaction timeout)."""
        return self._config.producer_config

    def __repr__(self) -> str:
        return f"ExactlyOnceDriver(prefix={self._config.transactional_id_prefix!r}, log={self._log!r})"
