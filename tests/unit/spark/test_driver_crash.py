"""The driver crashes of tests/spark/test_exactly_once.py, every one, in the fast layer.

``KafkaSink`` writes micro-batches exactly once with ``foreachBatch``, in arrow and in rows mode,
over the in-memory transactional brokers of ``txn_cluster.py`` (a coordinator per transactional
id, data partitions read at ``read_committed``, the commit-log topic); only Spark is replaced: a
micro-batch's tasks write their rows, each in its own transaction, and hand it back (arrow: in
the stats row each task yields, as JSON; rows: as the value of ``rdd.mapPartitions``). The driver
is killed at the points ``tests/spark/crash_job.py`` kills a real one at, around the sink's own
calls to the cluster:

- ``before-record``: the tasks have written, the batch's ``prepared`` record is not written;
- ``after-record``: recorded ``prepared``, no transaction committed;
- ``between-commits``: after the first of its transactions is committed;
- ``after-commits``: every transaction committed and the batch recorded ``committed``, before
  ``foreachBatch`` returns (so Spark's checkpoint lacks the batch).

Modes: ``arrow`` and ``rows`` as distributed writes (``driver.write.max.rows=0``), and
``driver``: arrow mode whose micro-batches are small enough for the driver to collect and write
itself, in one transaction as task 0 (``spark/driver_write.py``).

As the end-to-end test runs the query, the first driver dies in micro-batch 1; a new one (a new
process and sink) restarts the query from the batch it died in, and dies in micro-batch 2; a
third runs batches 2 and 3. The end-to-end test runs two points per mode; here each mode runs
every pair of points, with the tasks' transactions at version 1 and at version 2 (KIP-890: EndTxn
bumps the epoch, so the next driver's repeated commit is a retry). Then every row is visible
once, no transaction of the prefix is open, and the figures each driver published
(``metrics_history``) say what it did: a replayed batch the driver before had recorded is
skipped (``batch-replay-total`` 1, nothing committed, nothing sent), one it had not recorded is
written again (every task's transaction committed), and the last batch is a normal one.
"""
from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pyarrow as pa
import pytest

from spark_kafka_sink.producer.transactions.resumable import ResumableTransaction
from spark_kafka_sink.spark import sink as sink_module
from spark_kafka_sink.spark.arrow_writer import stats_batch
from spark_kafka_sink.spark.commit_log import COMMITTED
from spark_kafka_sink.spark.exactly_once import ExactlyOnceDriver
from spark_kafka_sink.spark.metrics import SinkTaskMetrics
from spark_kafka_sink.spark.schema import Column, Kind, WriteSchema
from spark_kafka_sink.spark.task import TaskStats
from spark_kafka_sink.spark.sink import KafkaSink

from tests.spark.crash_job import REPLAYED, dies_after_append, dies_before_append, is_handover

from .txn_cluster import Cluster, DriverKilled, MemoryCommitLog, Process

PREFIX = "q"
QUERY_ID = "5d0a7c9e-0000-4000-8000-000000000002"
TXN_TIMEOUT_MS, MAX_TIMEOUT_MS, EXPIRATION_MS = 60_000, 900_000, 3_600_000
BATCHES, ROWS, TASKS = 4, 6, 2


def rows_of(batch: int) -> list[tuple[str, int]]:
    return [(str(batch), i) for i in range(ROWS)]


class Driver(Process):
    """One driver process, which dies (``DriverKilled``; nothing it does afterwards reaches the
    cluster) at ``point`` of micro-batch ``batch``, if given; the points are hooks around the
    commit log's appends and the transactions' commits, as ``crash_job`` installs them."""

    def __init__(self, cluster: Cluster, name: str, point: str | None = None, batch: int = -1):
        super().__init__(cluster, name, transaction_timeout_ms=TXN_TIMEOUT_MS)
        self.point, self.batch = point, str(batch)
        self.commits: int | None = None          # commits since the batch's prepared record

    def die(self) -> None:
        self.killed = True
        raise DriverKilled(f"{self.name} dies at {self.point} in micro-batch {self.batch}")

    def commit(self, transaction: ResumableTransaction) -> None:
        super().commit(transaction)
        if self.commits is not None:
            self.commits += 1
            if self.point == "between-commits" and self.commits == 1:
                self.die()


class CrashingLog(MemoryCommitLog):
    """The in-memory commit log, with the driver's record-point crashes (``crash_job``'s own
    rules)."""

    def append(self, record) -> None:
        driver = self.process
        if dies_before_append(driver.point, driver.batch, record):
            driver.die()
        super().append(record)
        if record.batch_id == driver.batch and is_handover(record):
            driver.commits = 0
        if dies_after_append(driver.point, driver.batch, record):
            driver.die()


class Frame:
    """The DataFrame of one micro-batch as ``KafkaSink``'s exactly-once write uses it: its
    session (the streaming query's id; no speculation), its partition count (rows mode), and the
    job (arrow: ``mapInArrow`` over the sink's frame, which is this frame; rows:
    ``rdd.mapPartitions``), whose ``TASKS`` tasks write the batch's rows on the cluster."""

    schema = None

    def __init__(self, query: Query, batch: int):
        self._query, self._batch = query, batch
        conf = SimpleNamespace(get=lambda key, default=None: default)
        self.sparkSession = SimpleNamespace(sparkContext=SimpleNamespace(
            getConf=lambda: conf, getLocalProperty=lambda key: QUERY_ID))
        self.rdd = SimpleNamespace(getNumPartitions=lambda: TASKS, mapPartitions=lambda fn: (
            SimpleNamespace(collect=lambda: [
                TaskStats(p, 0, metrics.records_sent, 0, 0, 1, transaction=t, metrics=metrics)
                for p, (metrics, t) in enumerate(self._tasks())])))

    def limit(self, rows: int) -> Frame:
        assert rows > ROWS, "the driver collects more rows than a batch has, to see it is small"
        return self

    def _collect_as_arrow(self) -> list[pa.RecordBatch]:
        """The batch's rows, collected on the driver (``driver`` mode)."""
        rows = rows_of(self._batch)
        if self._batch in self._query.big:            # more rows than the bound: the job writes
            rows = rows + [("more", ROWS)]
        keys, values = zip(*rows)
        return [pa.RecordBatch.from_pydict({"key": list(keys), "value": list(values)})]

    def mapInArrow(self, writer, schema):
        return SimpleNamespace(collect=lambda: [
            stats_batch(p, 0, 1, metrics, t).to_pylist()[0]
            for p, (metrics, t) in enumerate(self._tasks())])

    def _tasks(self) -> list[tuple[SinkTaskMetrics, ResumableTransaction]]:
        """Each task: ``init_transactions()`` with its id (fencing what an earlier attempt left
        open), its rows written in a transaction, handed back open."""
        cluster = self._query.cluster
        self._query.runs += 1
        handed = []
        for p in range(TASKS):
            tid = self._query.config.transactional_id(p)
            mine = [row for row in rows_of(self._batch) if row[1] % TASKS == p]
            fenced = cluster.init_producer_id(tid, TXN_TIMEOUT_MS)
            enrolled = cluster.write(tid, fenced.producer_id, fenced.producer_epoch, mine,
                                     self._query.runs)
            handed.append((SinkTaskMetrics(records_sent=len(mine), tasks=1),
                           ResumableTransaction(tid, fenced.producer_id, fenced.producer_epoch,
                                                enrolled, self._query.version)))
        return handed


class DriverProducer:
    """The driver's transactional producer for ``<prefix>-0`` (``driver`` mode), kept by the
    sink between micro-batches: ``init_transactions()`` once (it fences what the id left open),
    then a transaction per micro-batch, committed by the producer itself (through the driver
    process, whose calls may be the one it dies at). Under version 2 EndTxn bumps its epoch."""

    def __init__(self, query: Query):
        self.query = query
        query.producers += 1
        self.tid = query.config.transactional_id(0)
        fenced = query.cluster.init_producer_id(self.tid, TXN_TIMEOUT_MS)
        self.producer_id, self.epoch = fenced.producer_id, fenced.producer_epoch
        self.open: ResumableTransaction | None = None
        self.closed = False

    def write(self, rows) -> ResumableTransaction:
        assert not self.closed and self.open is None
        self.query.runs += 1
        enrolled = self.query.cluster.write(self.tid, self.producer_id, self.epoch, rows,
                                            self.query.runs)
        self.open = ResumableTransaction(self.tid, self.producer_id, self.epoch, enrolled,
                                         self.query.version)
        return self.open

    def commit_transaction(self) -> None:
        transaction, self.open = self.open, None
        self.query.driver.commit(transaction)
        if self.query.version >= 2 and transaction.partitions:
            self.epoch += 1

    def close(self, timeout=None) -> None:
        self.closed = True


class DriverWrite:
    """The driver's write of a collected micro-batch (``driver`` mode), as
    ``ArrowWriter.run_in_transaction`` does it as task 0: the rows written in a transaction of the
    driver's producer, handed back open with the task's figures."""

    def __init__(self, query: Query):
        self._query = query

    def run_in_transaction(self, producer: DriverProducer, batches, *, created: bool) -> SimpleNamespace:
        rows = [(key, value) for batch in batches
                for key, value in zip(batch.column("key").to_pylist(), batch.column("value").to_pylist())]
        transaction = producer.write(rows)
        metrics = SinkTaskMetrics(records_sent=len(rows), tasks=1, producers_created=int(created))
        return SimpleNamespace(metrics=lambda: metrics, transaction=transaction)


class Query:
    """One streaming query (its checkpoint: the next batch id Spark runs) over one cluster; each
    run is a driver process with a sink of its own. ``version``: the tasks' transaction version
    (2: EndTxn bumps the epoch, and a commit repeated by the next driver is a retry)."""

    def __init__(self, mode: str, version: int):
        self.version = version
        self.cluster = Cluster(max_timeout_ms=MAX_TIMEOUT_MS, expiration_ms=EXPIRATION_MS)
        self.options = {"kafka.bootstrap.servers": "127.0.0.1:9092",
                        "mode": "arrow" if mode == "driver" else mode,
                        "delivery.guarantee": "exactly-once", "transactional.id.prefix": PREFIX,
                        "driver.write.max.rows": ROWS if mode == "driver" else 0}
        self.config = KafkaSink(self.options).config
        self.next_batch = 0                      # Spark's checkpoint: the batches it recorded
        self.runs = 0                            # the tasks' runs of a batch, in order
        self.producers = 0                       # driver mode: the driver producers made
        self.big: set[int] = set()               # driver mode: batches too big for the driver
        self.drivers = 0
        self.driver: Driver | None = None

    def run(self, point: str | None = None, batch: int = -1) -> dict[int, dict[str, float]]:
        """A driver process runs the query from its checkpoint up to the last batch, or until it
        dies at ``point`` of ``batch``; its published figures by batch id."""
        self.drivers += 1
        self.driver = Driver(self.cluster, f"driver-{self.drivers}", point, batch)
        sink = KafkaSink(self.options)
        try:
            while self.next_batch < BATCHES:
                sink(Frame(self, self.next_batch), self.next_batch)
                self.next_batch += 1
        except DriverKilled:
            assert point is not None and self.next_batch == batch, f"died in {self.next_batch}"
        else:
            assert point is None, f"{self.driver.name} did not die at {point} in batch {batch}"
        return {batch_id: figures for batch_id, figures in sink.metrics_history}


@pytest.fixture
def start_query(monkeypatch):
    """A new query (``start_query(mode, version)``), with what Spark and the cluster's I/O do
    for the sink replaced: the running driver process's cluster calls, no preflight, no schema
    to check, and the sink's frame the batch's own."""
    monkeypatch.setattr(sink_module, "preflight", lambda config: SimpleNamespace(
        applied=lambda options: options))
    monkeypatch.setattr(sink_module, "validate_schema", lambda schema, config: WriteSchema(
        Column("value", 0, Kind.BINARY)))
    monkeypatch.setattr(sink_module, "sink_frame", lambda df, write_schema, **_: df)
    monkeypatch.setattr(sink_module, "PartitionWriter", lambda *args, **kwargs: None)

    def start(mode: str, version: int) -> Query:
        query = Query(mode, version)
        monkeypatch.setattr(sink_module, "ArrowWriter", lambda *args, **kwargs: DriverWrite(query))
        monkeypatch.setattr(sink_module, "transactional_producer",
                            lambda config, task: DriverProducer(query))
        monkeypatch.setattr(sink_module, "ExactlyOnceDriver", lambda config, **_: ExactlyOnceDriver(
            config, commit_log=CrashingLog(query.driver, config), transactions=query.driver))
        return query
    return start


@pytest.mark.parametrize("second", list(REPLAYED))
@pytest.mark.parametrize("first", list(REPLAYED))
@pytest.mark.parametrize("version", [1, 2], ids=["tv1", "tv2"])
@pytest.mark.parametrize("mode", ["arrow", "rows", "driver"])
def test_drivers_killed_at_each_point_then_restarted_write_every_row_once(start_query, mode,
                                                                         version, first, second):
    query = start_query(mode, version)
    crashes = [(first, 1), (second, 2)]
    histories = [query.run(point, batch) for point, batch in crashes] + [query.run()]

    tasks = 1 if mode == "driver" else TASKS
    assert query.producers == (len(histories) if mode == "driver" else 0), "one per driver process"
    seen = Counter(record.row for record in query.cluster.visible())
    expected = [row for batch in range(BATCHES) for row in rows_of(batch)]
    assert sorted(seen) == sorted(expected), "rows missing"
    assert set(seen.values()) == {1}, f"rows written twice: {[r for r, n in seen.items() if n > 1]}"
    assert query.cluster.open_ids(PREFIX) == []
    assert [sorted(h) for h in histories] == [[0], [1], [2, 3]]
    for (point, batch), restarted in zip(crashes, histories[1:]):
        replayed = restarted[batch]
        assert replayed["batch-replay-total"] == int(REPLAYED[point]), point
        assert replayed["transaction-commit-total"] == (0 if REPLAYED[point] else tasks), point
        assert replayed["transaction-abort-total"] == 0
        assert replayed["record-send-total"] == (0 if REPLAYED[point] else ROWS), point
    last = histories[-1][BATCHES - 1]
    assert last["batch-replay-total"] == 0 and last["transaction-commit-total"] == tasks
    assert last["record-send-total"] == ROWS and last["transaction-commit-time-ms"] > 0
    log = [(r.batch_id, r.state) for r in query.cluster.appended]
    assert log[-1] == (str(BATCHES - 1), COMMITTED), log


def test_a_micro_batch_too_big_for_the_driver_goes_to_the_job_and_the_driver_makes_its_producer_again(
        start_query):
    """Driver mode, batch 1 over the bound: its job's task 0 fences ``<prefix>-0``, so the sink
    closes its producer before the job and makes a new one for batch 2 (a kept one would be
    fenced there); every row once."""
    query = start_query("driver", 2)
    query.big = {1}
    history = query.run()
    seen = Counter(record.row for record in query.cluster.visible())
    assert sorted(seen) == sorted(row for batch in range(BATCHES) for row in rows_of(batch))
    assert set(seen.values()) == {1} and query.cluster.open_ids(PREFIX) == []
    assert [history[b]["transaction-commit-total"] for b in range(BATCHES)] == [1, TASKS, 1, 1]
    assert query.producers == 2
