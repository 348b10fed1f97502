"""A model-based (stateful property) test of the exactly-once commit protocol: hypothesis drives
the real ``ExactlyOnceDriver`` and commit-log records, called as Spark calls them (``KafkaSink``'s
``foreachBatch`` write in arrow and rows mode, or the Data Source's ``commit`` / ``abort`` on a
fresh driver each), through its ``TransactionOps`` and commit-log seams over in-memory
transactional brokers (``txn_cluster.py``: a coordinator per transactional id with epochs,
timeouts and id expiry; data partitions read at ``read_committed``; a compacted commit-log topic).
Tasks write their Spark partition in a transaction, flush and hand it back; they fail and retry,
and a lost one writes after its job was given up on. The driver is killed before or after any
call it makes to the cluster (a new driver then starts from the log), its commit-log writes,
reads, fences and commits time out, the same driver object is restarted after a failed step,
Spark replays the batch that just succeeded, a job fails after some tasks handed back their
transactions, and time jumps past ``transaction.timeout.ms`` and
``transactional.id.expiration.ms``. Where the commit log fences older drivers' writers, a driver
cut off from Spark wakes up later and finishes its batch (a stale second driver). After every
step:

- each row of a batch Spark saw succeed is visible once at ``read_committed``; no row is visible
  twice unless an error said that the rows of its transaction appear twice;
- a run whose abort returned left nothing open, and committed nothing the log would let a rerun
  write again; a lost task's late transaction never commits;
- recovery leaves no transaction of the prefix open, and a ``transaction.timeout.ms`` above the
  brokers' maximum is refused before any task runs;
- a batch is never recorded ``aborted`` after ``committed``;
- an error that says rows were lost or appear twice names every transaction of the batch that is
  committed; with no fault injected, nothing fails at all.

Profiles: ``make test`` runs ``commit-ci`` (a few seconds); ``make fuzz`` sets ``SKS_FUZZ=1`` for
``commit-fuzz``. A failure prints the shortest sequence of steps that shows it: add it to
``FOUND`` (replayed by ``test_what_the_model_found``).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test,
)

from spark_kafka_sink.errors import KafkaError, KafkaTimeoutError
from spark_kafka_sink.producer.transactions.resumable import ResumableTransaction
from spark_kafka_sink.spark import sink as sink_module
from spark_kafka_sink.spark.commit_log import (
    ABORTED, COMMITTED, PREPARED, DriverFencedError, OlderBatchError,
)
from spark_kafka_sink.spark.compat import has_data_source_api
from spark_kafka_sink.spark.exactly_once import ExactlyOnceDriver
from spark_kafka_sink.spark.metrics import SinkTaskMetrics
from spark_kafka_sink.spark.options import SinkConfig
from spark_kafka_sink.spark.sink import KafkaSink

from .txn_cluster import FENCING_LOG, Cluster, DriverKilled, MemoryCommitLog, Process

if has_data_source_api():
    from spark_kafka_sink.spark import datasource
else:                                    # older PySpark: the foreachBatch flavour only
    datasource = None

PREFIX = "q"
QUERY_ID = "9b1c6c1e-0000-4000-8000-000000000001"     # the streaming query's id (kept in its checkpoint)
TXN_TIMEOUT_MS = 60_000
MAX_TIMEOUT_MS = 900_000
EXPIRATION_MS = 3_600_000
FLAVOURS = ("foreachBatch-arrow", "foreachBatch-rows") + (("datasource",) if datasource is not None else ())
"""How Spark calls the driver: ``KafkaSink`` in ``foreachBatch`` (arrow mode: the partition count is
known after the job; rows mode: before it), or the Data Source's ``commit`` / ``abort``."""

PHASES = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink]  # no explain:
# it traces every line of every shrunk run, minutes for a failure found here
settings.register_profile("commit-ci", max_examples=120, stateful_step_count=25, deadline=None,
                          phases=PHASES, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("commit-fuzz", max_examples=20_000, stateful_step_count=50,
                          deadline=None, phases=PHASES, suppress_health_check=[HealthCheck.too_slow])
FUZZ = bool(os.environ.get("SKS_FUZZ"))
PROFILE = settings.get_profile("commit-fuzz" if FUZZ else "commit-ci")


class JobFailed(RuntimeError):
    """The Spark job failed (a task ran out of attempts)."""


def rows_of(batch: str) -> list[tuple[str, int]]:
    """Batch ``batch``'s rows: the same whichever run writes them (Spark replays the same data)."""
    return [(batch, i) for i in range(2 + int(batch) % 4)]


@dataclass
class Run:
    """One run of a batch: the transactions its tasks handed back."""

    number: int
    batch: str
    transactions: list[ResumableTransaction]


class _Acting:
    """The process whose driver is running now (the driver's cluster calls go to it)."""

    process: Process | None = None


ACTING = _Acting()


class ModelDriver(ExactlyOnceDriver):
    """The real driver, telling the model when a ``begin_batch`` / ``prepare_query`` recovered (it
    read the log), so that it checks what recovery left open before any task runs."""

    recovered = staticmethod(lambda where: None)

    def begin_batch(self, batch_id, *args, **kwargs):
        before = len(ACTING.process.calls)
        start = super().begin_batch(batch_id, *args, **kwargs)
        if "latest" in ACTING.process.calls[before:]:
            ModelDriver.recovered(f"begin_batch({batch_id!r})")
        return start

    def prepare_query(self, *args, **kwargs):
        start = super().prepare_query(*args, **kwargs)
        ModelDriver.recovered("prepare_query()")
        return start


def make_driver(config: SinkConfig, **_: object) -> ExactlyOnceDriver:
    process = ACTING.process
    return ModelDriver(config, commit_log=MemoryCommitLog(process, config),
                       transactions=process)


class _Frame:
    """The DataFrame ``KafkaSink._write_exactly_once`` sees: its partition count, and the job
    (``job()``: the tasks' transactions), as ``rdd.mapPartitions`` (rows mode) or ``mapInArrow``
    of the sink's frame (arrow mode) runs it."""

    def __init__(self, partitions: int, job):
        conf = SimpleNamespace(get=lambda key, default=None: default)
        self.sparkSession = SimpleNamespace(sparkContext=SimpleNamespace(
            getConf=lambda: conf, getLocalProperty=lambda key: QUERY_ID))
        self.rdd = SimpleNamespace(getNumPartitions=lambda: partitions, mapPartitions=lambda fn: (
            SimpleNamespace(collect=lambda: [SimpleNamespace(metrics=SinkTaskMetrics(), transaction=t)
                                             for t in job()])))
        self.arrow = SimpleNamespace(mapInArrow=lambda writer, schema: SimpleNamespace(
            collect=lambda: [{"partition_id": p, "transaction": t} for p, t in enumerate(job())]))


class CommitModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.cluster: Cluster | None = None
        self.problems: list[str] = []
        self.errors: list[logging.LogRecord] = []
        self.handler = _ListHandler(self.errors, self._check_names)
        logging.getLogger("spark_kafka_sink").addHandler(self.handler)
        ModelDriver.recovered = self._check_nothing_open
        self.logger = logging.getLogger("spark_kafka_sink")
        self.propagate = self.logger.propagate
        self.logger.propagate = False          # thousands of runs: keep them out of pytest's capture

    def teardown(self) -> None:
        self.logger.removeHandler(self.handler)
        self.logger.propagate = self.propagate
        ModelDriver.recovered = staticmethod(lambda where: None)

    # --- set-up -----------------------------------------------------------------------------------

    @initialize(flavour=st.sampled_from(FLAVOURS), version=st.sampled_from([1, 2]),
                timeout_ok=st.sampled_from([True, True, True, True, True, False]))
    def start(self, flavour, version, timeout_ok):
        self.flavour = flavour
        self.version = version
        self.timeout_ms = TXN_TIMEOUT_MS if timeout_ok else MAX_TIMEOUT_MS + 1
        self.options = {
            "kafka.bootstrap.servers": "127.0.0.1:9092", "delivery.guarantee": "exactly-once",
            "transactional.id.prefix": PREFIX, "mode": "arrow" if flavour.endswith("arrow") else "rows",
            "kafka.transaction.timeout.ms": str(self.timeout_ms),
            "driver.write.max.rows": 0}  # the distributed write (test_driver_crash: the driver's)
        self.config = SinkConfig.from_options(self.options)
        self.cluster = Cluster(max_timeout_ms=MAX_TIMEOUT_MS, expiration_ms=EXPIRATION_MS)
        self.processes = 0
        self.runs: list[Run] = []
        self.next_batch = 0                   # the batch id Spark runs next
        self.completed: set[str] = set()      # batch ids Spark saw succeed
        self.excused: set[tuple[int, int]] = set()   # (producer id, epoch) an error said appear twice
        self.aborted_runs: list[Run] = []
        self.late_runs: list[Run] = []
        self.zombie: tuple | None = None
        self.older: str | None = None         # the older batch id Spark runs now
        self.mid_batch = None                 # what happens while the tasks' transactions are open
        self.disturbed = False                # a stale driver acted: errors are not unexpected
        self.last_step_succeeded = False
        self._new_process()
        self.running = False
        self._start_query()

    # --- helpers ----------------------------------------------------------------------------------

    def _new_process(self) -> None:
        self.processes += 1
        self.process = Process(self.cluster, f"driver-{self.processes}",
                               transaction_timeout_ms=self.timeout_ms)
        self.sink = KafkaSink(self.options)

    def _armed(self) -> bool:
        return self.process.crash_in is not None or bool(self.process.faults)

    def _start_query(self) -> None:
        """Spark starts (or restarts) the query; the Data Source recovers where Spark plans the
        write."""
        self.running = False
        if self.flavour == "datasource":
            armed = self._armed()
            if not self._call(lambda: datasource._recover_at_planning(self.config), None, armed):
                return
        self.running = True

    def _call(self, fn, run: Run | None, expected: bool, *, job_failed: bool = False) -> bool:
        """Run ``fn`` as the current process; False (and the query stopped) if it raised. Checks
        the error: expected (a fault or crash was injected, or the job failed), and naming what it
        lost."""
        ACTING.process = self.process
        try:
            fn()
            ok = True
        except DriverKilled:
            self.running = False
            ok = False
        except BaseException as error:        # noqa: BLE001 - everything is checked below
            self.running = False
            ok = False
            if isinstance(error, JobFailed) and job_failed:
                pass
            elif isinstance(error, OlderBatchError) and self.older is not None:
                self._check_older(str(error))
            elif not (expected or self.disturbed or self._timeout_problem(error)):
                self.problems.append(f"unexpected error with no fault injected: "
                                     f"{type(error).__name__}: {error}")
            if isinstance(error, KafkaError) and not isinstance(error, KafkaTimeoutError):
                self._check_names(str(error))
        return ok

    def _check_older(self, message: str) -> None:
        """The refusal of an older batch id names it, the log's last one, the prefix and topic,
        and what to do."""
        last = self.cluster.appended[-1].batch_id if self.cluster.appended else None
        for part in (f"micro-batch {self.older} ", f"micro-batch {last} ", repr(PREFIX),
                     repr(self.config.commit_topic), "It was not written", "checkpoint",
                     "transactional.id.prefix"):
            if part not in message:
                self.problems.append(f"the refusal of older micro-batch {self.older} does not "
                                     f"name {part!r}: {message}")

    def _timeout_problem(self, error: BaseException) -> bool:
        return self.timeout_ms > MAX_TIMEOUT_MS and "transaction.timeout.ms" in str(error)

    def _check_nothing_open(self, where: str) -> None:
        open_ids = self.cluster.open_ids(PREFIX)
        if open_ids:
            self.problems.append(f"after the recovery in {where}: transactions still open: {open_ids}")

    def _check_names(self, message: str) -> None:
        """An error about batch b that says its rows are lost or appear twice must say "twice" and
        name every transaction of b's last prepared record that is committed (the rerun writes
        their rows again); those are excused from the exactly-once count."""
        if "lost" not in message and "twice" not in message:
            return
        for batch in set(re.findall(r"micro-batch (\S+?)[ :;,]", message)):
            prepared = [r for r in self.cluster.appended if r.batch_id == batch and r.state == PREPARED]
            committed = [t for t in (prepared[-1].transactions if prepared else ())
                         if self._is_committed(t)]
            for transaction in committed:
                if "twice" not in message or not re.search(
                        rf"\b{re.escape(transaction.transactional_id)}\b", message):
                    self.problems.append(f"error about micro-batch {batch} does not say that the "
                                         f"rows of committed {transaction.transactional_id} "
                                         f"appear twice: {message}")
                self.excused.add((transaction.producer_id, transaction.producer_epoch))

    def _is_committed(self, transaction: ResumableTransaction) -> bool:
        return any(r.status == "committed" and r.producer_id == transaction.producer_id
                   and r.producer_epoch == transaction.producer_epoch
                   and r.transactional_id == transaction.transactional_id
                   for r in self.cluster.records)

    def _tasks(self, run: Run, partitions: int, failures: dict[int, int], fail_job: bool):
        """The job's tasks: each writes its rows in a transaction (retrying a failed attempt,
        whose transaction is left open); the transactions handed back, None for a task that ran
        out of attempts."""
        if self.timeout_ms > MAX_TIMEOUT_MS:
            self.problems.append("a task ran although transaction.timeout.ms is more than the "
                                 "brokers' maximum: the driver did not check it first")
        rows = rows_of(run.batch)
        handed: list[ResumableTransaction | None] = []
        for p in range(partitions):
            tid = self.config.transactional_id(p)
            mine = [row for row in rows if row[1] % partitions == p]
            transaction = None
            failing = 2 if fail_job and p == partitions - 1 else failures.get(p, 0)
            for attempt in range(2):               # Spark's attempts (spark.task.maxFailures=2)
                try:
                    fenced = self.cluster.init_producer_id(tid, self.timeout_ms)
                    enrolled = self.cluster.write(tid, fenced.producer_id, fenced.producer_epoch,
                                                  mine, run.number)
                except KafkaError:
                    break
                if attempt < failing:
                    continue                     # this attempt died after writing: left open
                transaction = ResumableTransaction(tid, fenced.producer_id, fenced.producer_epoch,
                                                   enrolled, self.version)
                break
            handed.append(transaction)
        run.transactions = [t for t in handed if t is not None]
        return handed

    def _run_batch(self, batch: str, partitions: int, failures: dict[int, int], fail_job: bool,
                   delay_ms: int) -> bool:
        self.runs.append(run := Run(len(self.runs), batch, []))
        expected = self._armed() or delay_ms > TXN_TIMEOUT_MS
        if self.flavour.startswith("foreachBatch"):
            def job():
                handed = self._tasks(run, partitions, dict(failures), fail_job)
                if any(t is None for t in handed):
                    raise JobFailed(f"micro-batch {batch}: a task failed 2 times")
                if self.mid_batch is not None:
                    self.mid_batch(run)
                self.cluster.advance(delay_ms)
                return handed

            ok = self._call(lambda: self.sink._write_exactly_once(_Frame(partitions, job), None,
                                                                 int(batch)),
                            run, expected, job_failed=fail_job)
            if not ok and fail_job and not self.process.killed and not any(
                    "could not be aborted" in r.getMessage() for r in self.errors[-3:]):
                self._aborted(run)
            return ok
        handed = self._tasks(run, partitions, dict(failures), fail_job)
        fail_job = fail_job or None in handed
        self.cluster.advance(delay_ms)
        writer = datasource.KafkaStreamWriter(self.config, None)
        messages = [None if t is None else datasource.KafkaCommitMessage(
            SinkTaskMetrics(), p, 0, 0.0, 0.0, t) for p, t in enumerate(handed)]

        def commit_or_abort():
            if fail_job:
                writer.abort(messages, int(batch))
                self._aborted(run)
                raise JobFailed(f"micro-batch {batch}: a task failed 2 times")
            try:
                writer.commit(messages, int(batch))
            except DriverKilled:
                raise
            except BaseException:
                writer.abort(messages, int(batch))          # Spark aborts a write whose commit failed
                self._aborted(run)
                raise

        return self._call(commit_or_abort, run, expected, job_failed=fail_job)

    def _aborted(self, run: Run) -> None:
        self.aborted_runs.append(run)
        left_open = [r.transactional_id for r in self.cluster.records
                     if r.run == run.number and r.status == "open"]
        if left_open:
            self.problems.append(f"run {run.number} of micro-batch {run.batch} aborted, but its "
                                 f"transactions of {sorted(set(left_open))} are still open")

    # --- rules ------------------------------------------------------------------------------------

    @precondition(lambda self: self.running and not self.process.killed)
    @rule(partitions=st.integers(1, 4),
          failures=st.dictionaries(st.integers(0, 3), st.integers(1, 1), max_size=2),
          fail_job=st.sampled_from([False, False, False, True]),
          delay_ms=st.sampled_from([0, 0, 0, 1_000, TXN_TIMEOUT_MS + 1]))
    def run_batch(self, partitions, failures, fail_job, delay_ms):
        batch = str(self.next_batch)
        self.last_step_succeeded = False
        if self._run_batch(batch, partitions, failures, fail_job, delay_ms):
            self.completed.add(batch)
            self.next_batch += 1
            self.last_step_succeeded = True

    @precondition(lambda self: self.running and not self.process.killed and self.last_step_succeeded)
    @rule(partitions=st.integers(1, 4))
    def spark_replays_the_last_batch(self, partitions):
        """Spark runs the batch that just succeeded again (its checkpoint did not record it), in
        the same driver, with another partition count. Only the last: an older batch id means a
        checkpoint restored from an older copy, which a log of each prefix's last record cannot
        tell from new data (refused: ``spark_runs_an_older_batch``)."""
        self.last_step_succeeded = self._run_batch(str(self.next_batch - 1), partitions, {}, False, 0)

    @precondition(lambda self: self.running and not self.process.killed and self.next_batch >= 2)
    @rule(back=st.integers(1, 3), partitions=st.integers(1, 4))
    def spark_runs_an_older_batch(self, back, partitions):
        """The checkpoint was restored from an older copy (or, for the Data Source, whose query
        id is unknown, reset): Spark runs a batch id older than the last one. It is refused,
        naming what happened, and nothing of it is written (its rows would appear twice)."""
        batch = str(max(0, self.next_batch - 1 - back))
        self.older = batch
        armed = self._armed()
        try:
            ok = self._run_batch(batch, partitions, {}, False, 0)
        finally:
            self.older = None
        if ok and not armed:
            self.problems.append(f"micro-batch {batch}, older than the log's last, was not refused")
        self.running = False                     # the user restores the newest checkpoint
        self.last_step_succeeded = False

    @precondition(lambda self: self.runs)
    @rule(partition=st.integers(0, 5))
    def a_lost_task_writes_late(self, partition):
        """A task of an earlier job that Spark gave up on (a lost executor, a cancelled task not
        yet killed) initializes its producer and writes after the driver moved on: its
        transaction must never be committed (the next task with that id, or recovery, fences it;
        or the coordinator aborts it after transaction.timeout.ms)."""
        run = Run(len(self.runs), self.runs[-1].batch, [])
        self.runs.append(run)
        self.late_runs.append(run)
        tid = self.config.transactional_id(partition)
        try:
            fenced = self.cluster.init_producer_id(tid, self.timeout_ms)
        except KafkaError:
            return
        self.cluster.write(tid, fenced.producer_id, fenced.producer_epoch, rows_of(run.batch), run.number)

    @precondition(lambda self: not self.running or self.process.killed)
    @rule(new_process=st.booleans())
    def restart_query(self, new_process):
        """The query starts again: in a new driver process, or (unless it died) in the same one,
        with the same sink object."""
        if new_process or self.process.killed:
            self._new_process()
        self._start_query()

    @precondition(lambda self: self.last_step_succeeded and self.running)
    @rule()
    def driver_dies_before_spark_records_the_batch(self):
        """The driver died after the write returned but before Spark's checkpoint recorded the
        batch: the new driver runs the same batch id again."""
        self.process.killed = True
        self.running = False
        self.next_batch -= 1
        self.last_step_succeeded = False

    @precondition(lambda self: not self.process.killed)
    @rule(calls=st.integers(1, 8), when=st.sampled_from(["before", "after"]))
    def driver_will_be_killed(self, calls, when):
        """The driver process dies at its ``calls``-th next call to the cluster."""
        self.process.crash_in, self.process.crash_when = calls, when

    @precondition(lambda self: not self.process.killed)
    @rule(kind=st.sampled_from(["append", "append", "commit", "fence", "latest",
                                "begin_log", "reread"]),
          when=st.sampled_from(["before", "after"]))
    def a_call_will_time_out(self, kind, when):
        self.process.faults[kind] = when

    @rule(ms=st.sampled_from([1_000, TXN_TIMEOUT_MS + 1, EXPIRATION_MS + 1]))
    def time_passes(self, ms):
        self.cluster.advance(ms)

    @rule()
    def the_log_is_compacted(self):
        self.cluster.compact()

    @precondition(lambda self: FENCING_LOG and self.flavour.startswith("foreachBatch")
                  and self.running
                  and not self.process.killed and self.zombie is None and not self._armed())
    @rule(partitions=st.integers(1, 4))
    def the_driver_is_cut_off_mid_batch(self, partitions):
        """The driver runs a batch's tasks, then Spark loses it and starts another driver; this
        one lives on, holding the transactions, and finishes later (``a_stale_driver_commits``)."""
        batch = str(self.next_batch)
        self.runs.append(run := Run(len(self.runs), batch, []))
        ACTING.process = self.process
        try:
            driver = self.sink._exactly_once or make_driver(self.config)
            self.sink._exactly_once = driver
            known = None if self.flavour.endswith("arrow") else partitions
            if driver.begin_batch(batch, known).replay:
                return
        except KafkaError:
            return
        handed = self._tasks(run, partitions, {}, False)
        self.zombie = (self.process, driver, batch, partitions, handed)
        self._new_process()
        self.running = False
        self.last_step_succeeded = False

    @precondition(lambda self: self.zombie is not None and self.running
                  and not self.process.killed and self.flavour.startswith("foreachBatch")
                  and not self._armed())
    @rule(partitions=st.integers(1, 4))
    def a_stale_driver_aborts_during_a_batch(self, partitions):
        """The stale driver's job fails while the new driver's batch runs, its tasks'
        transactions open: the stale driver learns it is fenced before it fences any id, so the
        new driver's batch is not aborted."""
        process, driver, batch, stale_partitions, _ = self.zombie
        self.zombie = None

        def stale_abort(run: Run) -> None:
            self.mid_batch = None
            self.disturbed = True
            ACTING.process = process
            try:
                driver.abort_batch(batch, stale_partitions)
                self.problems.append("the stale driver's abort_batch returned: it was not told "
                                     "that another driver took over")
            except DriverFencedError:
                pass
            except KafkaError as error:
                self._check_names(str(error))
            finally:
                ACTING.process = self.process
            aborted = sorted({r.transactional_id for r in self.cluster.records
                              if r.run == run.number and r.status == "aborted"})
            if aborted:
                self.problems.append(f"the stale driver aborted the transactions {aborted} of "
                                     f"the new driver's micro-batch {run.batch}")

        self.mid_batch = stale_abort
        self.last_step_succeeded = False
        next_batch = str(self.next_batch)
        try:
            if self._run_batch(next_batch, partitions, {}, False, 0):
                self.completed.add(next_batch)
                self.next_batch += 1
                self.last_step_succeeded = True
        finally:
            self.mid_batch = None

    @precondition(lambda self: self.zombie is not None)
    @rule()
    def a_stale_driver_commits(self):
        process, driver, batch, partitions, handed = self.zombie
        self.zombie = None
        self.disturbed = True
        ACTING.process = process
        try:
            driver.commit_batch(batch, handed, partitions)
        except KafkaError as error:
            self._check_names(str(error))

    # --- invariants -------------------------------------------------------------------------------

    @invariant()
    def nothing_went_wrong_in_a_step(self):
        assert not self.problems, self.problems

    @invariant()
    def every_row_of_a_batch_spark_saw_succeed_is_visible_once(self):
        if self.cluster is None:
            return
        seen: dict[tuple[str, int], int] = {}
        excused: dict[tuple[str, int], int] = {}
        for record in self.cluster.visible():
            seen[record.row] = seen.get(record.row, 0) + 1
            if (record.producer_id, record.producer_epoch) in self.excused:
                excused[record.row] = excused.get(record.row, 0) + 1
        for row, count in seen.items():
            assert count <= 1 + excused.get(row, 0), (
                f"row {row} is visible {count} times at read_committed")
        for batch in self.completed:
            missing = [row for row in rows_of(batch) if row not in seen]
            assert not missing, f"micro-batch {batch} succeeded but rows {missing} are not visible"

    @invariant()
    def an_aborted_run_commits_nothing_a_rerun_would_write_again(self):
        if self.cluster is None:
            return
        for run in self.aborted_runs:
            committed = {r.transactional_id for r in self.cluster.records
                         if r.run == run.number and r.status == "committed"
                         and (r.producer_id, r.producer_epoch) not in self.excused}
            if not committed:
                continue
            last = self.cluster.appended[-1] if self.cluster.appended else None
            ours = [r for r in self.cluster.appended if r.batch_id == run.batch]
            assert ours and ours[-1].state in (PREPARED, COMMITTED), (
                f"run {run.number} of micro-batch {run.batch} was aborted, but {sorted(committed)} "
                f"committed, and the log says {ours[-1].state if ours else 'nothing'} "
                f"(last record: {last and (last.batch_id, last.state)}): a rerun writes them again")

    @invariant()
    def a_late_task_never_commits(self):
        if self.cluster is None:
            return
        late = {run.number for run in self.late_runs}
        committed = [r for r in self.cluster.records if r.run in late and r.status == "committed"]
        assert not committed, f"a task that wrote after its job was given up on committed {committed[0]}"

    @invariant()
    def a_batch_is_never_recorded_aborted_after_committed(self):
        if self.cluster is None:
            return
        committed: set[str] = set()
        for record in self.cluster.appended:
            if record.state == COMMITTED:
                committed.add(record.batch_id)
            elif record.state == ABORTED:
                assert record.batch_id not in committed, (
                    f"micro-batch {record.batch_id} recorded aborted after committed: "
                    f"{[(r.batch_id, r.state) for r in self.cluster.appended]}")


class _ListHandler(logging.Handler):
    """Keeps the errors the sink logs, and checks each as it is logged (what it must name
    depends on the log at that moment)."""

    def __init__(self, records: list, check):
        super().__init__(logging.ERROR)
        self.records = records
        self.check = check

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.check(record.getMessage())


def install(monkeypatch) -> None:
    """Spark's side of the sink and the driver's I/O, replaced by the model's."""
    monkeypatch.setattr(sink_module, "ExactlyOnceDriver", make_driver)
    monkeypatch.setattr(sink_module, "PartitionWriter", lambda *args, **kwargs: None)
    monkeypatch.setattr(sink_module, "ArrowWriter", lambda *args, **kwargs: None)
    monkeypatch.setattr(sink_module, "sink_frame", lambda df, write_schema, **_: df.arrow)
    monkeypatch.setattr(sink_module, "merge_stats", lambda rows: SinkTaskMetrics())
    monkeypatch.setattr(sink_module, "stats_transactions", lambda rows: [r["transaction"] for r in rows])
    if datasource is not None:
        monkeypatch.setattr(datasource, "ExactlyOnceDriver", make_driver)


@pytest.fixture
def model_cluster(monkeypatch):
    install(monkeypatch)


@pytest.mark.timeout(0 if FUZZ else 120)
def test_the_commit_protocol_keeps_its_invariants(model_cluster):
    run_state_machine_as_test(CommitModel, settings=PROFILE)


INVARIANTS = [name for name, value in vars(CommitModel).items()
              if hasattr(value, "hypothesis_stateful_invariant")]


def run_steps(start: dict, steps: list[tuple[str, dict]]) -> CommitModel:
    """One sequence the model found, replayed with every invariant checked after each step (a
    step whose precondition does not hold is left out, as the model would)."""
    machine = CommitModel()
    try:
        machine.start(**start)
        for name, arguments in steps:
            rule_ = getattr(CommitModel, name).hypothesis_stateful_rule
            if all(check(machine) for check in rule_.preconditions):
                getattr(machine, name)(**arguments)      # else hypothesis would not run it here
            for invariant_name in INVARIANTS:
                getattr(machine, invariant_name)()
    finally:
        machine.teardown()
    return machine


BATCH = {"delay_ms": 0, "fail_job": False, "failures": {}, "partitions": 1}
FB = {"flavour": "foreachBatch-rows", "version": 1, "timeout_ok": True}
DS = {**FB, "flavour": "datasource"}
RESTART, NEW_PROCESS = ("restart_query", {"new_process": False}), ("restart_query", {"new_process": True})

FOUND = {
    # The Data Source's commit() timed out after a commit took effect; Spark's abort() then
    # recorded the batch aborted, and the rerun wrote its rows again.
    "a commit that timed out after committing is not recorded aborted by abort()": (DS, [
        ("a_call_will_time_out", {"kind": "commit", "when": "after"}), ("run_batch", BATCH)]),
    # A replay's commit() failed (its fence timed out); abort() recorded the committed batch aborted.
    "a failed replay stays committed": (DS, [
        ("run_batch", BATCH), ("driver_dies_before_spark_records_the_batch", {}), NEW_PROCESS,
        ("a_call_will_time_out", {"kind": "fence", "when": "before"}), ("run_batch", BATCH)]),
    # The Data Source fenced no id on a fresh log, so nothing checked transaction.timeout.ms.
    "the data source checks transaction.timeout.ms before any task": (
        {**DS, "timeout_ok": False}, [("run_batch", BATCH)]),
    # A run crashed with 2 partitions before recording any; recovery fenced only <prefix>-0.
    "ids above the recorded maximum are fenced": (FB, [
        ("a_call_will_time_out", {"kind": "append", "when": "before"}),
        ("run_batch", {**BATCH, "partitions": 2}), NEW_PROCESS, ("run_batch", BATCH)]),
    # A commit timed out after taking effect; the same driver object ran the batch again without
    # reading the log, and wrote its rows twice.
    "the same driver recovers after a step that failed": (FB, [
        ("a_call_will_time_out", {"kind": "commit", "when": "after"}), ("run_batch", BATCH),
        RESTART, ("run_batch", BATCH)]),
    # The driver died after recording the batch; the ids expired before the next one started:
    # INVALID_PRODUCER_ID_MAPPING failed every recovery from then on.
    "an expired id in a prepared batch does not wedge recovery": (FB, [
        ("driver_will_be_killed", {"calls": 4, "when": "after"}), ("run_batch", BATCH),
        ("time_passes", {"ms": EXPIRATION_MS + 1}), ("time_passes", {"ms": EXPIRATION_MS + 1}),
        NEW_PROCESS, ("run_batch", BATCH)]),
    # Recovery committed a prepared batch, fenced, then failed to record it committed; the next
    # recovery's repeated commit was fenced by that fence, and the committed batch was declared
    # lost ("every row once") and written again.
    "a recovered commit is recorded before any fence": (FB, [
        ("a_call_will_time_out", {"kind": "commit", "when": "before"}), ("run_batch", BATCH),
        RESTART, ("a_call_will_time_out", {"kind": "append", "when": "before"}),
        ("run_batch", BATCH), RESTART, ("run_batch", BATCH)]),
    # The driver died after committing, before recording it; a lost attempt of the task then
    # initialized its id. Recovery's repeated commit was refused (PRODUCER_FENCED), and the error
    # said "every row once" while the rerun wrote the committed rows twice.
    "a recovered commit refused as fenced is named as possibly twice": (FB, [
        ("driver_will_be_killed", {"calls": 7, "when": "after"}), ("run_batch", BATCH),
        ("a_lost_task_writes_late", {"partition": 0}), NEW_PROCESS, ("run_batch", BATCH)]),
    # Recovery committed q-0, found q-1 fenced, and recording the batch aborted timed out after
    # the write: the error saying q-0's rows appear twice was never raised, only the timeout.
    "a lost transaction is said when recording the batch aborted fails": (
        {**FB, "flavour": "foreachBatch-arrow"}, [
            ("a_call_will_time_out", {"kind": "commit", "when": "before"}),
            ("run_batch", {**BATCH, "partitions": 2}), ("a_lost_task_writes_late", {"partition": 1}),
            RESTART, ("a_call_will_time_out", {"kind": "append", "when": "after"}),
            ("run_batch", BATCH), RESTART, ("run_batch", BATCH)]),
    # Recovery found q-0 fenced (a lost task attempt re-initialized it after the stopped driver's
    # commit) and was killed right after recording the batch aborted: nothing said that q-0's
    # rows may appear twice, and the next driver reran the batch and wrote them again.
    "the loss is said before the batch is recorded aborted": (
        {**FB, "flavour": "foreachBatch-arrow"}, [
            ("driver_will_be_killed", {"calls": 6, "when": "after"}),
            ("run_batch", {**BATCH, "partitions": 2}), ("a_lost_task_writes_late", {"partition": 0}),
            NEW_PROCESS, ("driver_will_be_killed", {"calls": 5, "when": "after"}),
            ("run_batch", BATCH), NEW_PROCESS, ("run_batch", BATCH)]),
    # A checkpoint restored from an older copy (or, with the Data Source, reset): Spark ran
    # micro-batch 0 after 1, and the driver wrote its rows again.
    **{f"an older batch id is refused ({start['flavour']})": (start, [
        ("run_batch", BATCH), ("run_batch", BATCH),
        ("spark_runs_an_older_batch", {"back": 1, "partitions": 1})]) for start in (FB, DS)},
    # The query was idle longer than transactional.id.expiration.ms: the commit log's writer had
    # expired, and the next batch failed with INVALID_PRODUCER_ID_MAPPING.
    "the commit log's writer is made again after its id expired": (FB, [
        ("run_batch", BATCH), ("time_passes", {"ms": EXPIRATION_MS + 1}), ("run_batch", BATCH)]),
    # A driver cut off mid-batch failed its job while its replacement ran the batch again: its
    # abort fenced the ids before its commit-log append was refused, aborting the new batch.
    "a stale driver's abort does not abort the new driver's batch": (FB, [
        ("the_driver_is_cut_off_mid_batch", {"partitions": 1}), RESTART,
        ("a_stale_driver_aborts_during_a_batch", {"partitions": 1})]),
}


@pytest.mark.parametrize("name", [name for name, (start, _) in FOUND.items()
                                  if start["flavour"] in FLAVOURS])
def test_what_the_model_found(model_cluster, name):
    start, steps = FOUND[name]
    run_steps(start, steps)
