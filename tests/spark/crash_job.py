"""Streaming queries whose driver dies at chosen points of their micro-batches, run in a process
of their own.

``python -m tests.spark.crash_job SPEC`` (from the repository root, with ``session.SPARK_ENV``
set). ``SPEC`` is a JSON file: ``{"bootstrap": ..., "queries": [...]}``, each query ``{"topic",
"input", "checkpoint", "mode", "prefix", "point", "batch", "out"}``. Every query reads the JSON
files of its ``input`` (one per micro-batch: ``maxFilesPerTrigger=1``, rows ``{"id": n}``) with
``trigger(availableNow=True)`` and writes them with ``foreachBatch(KafkaSink)`` to its ``topic``
(key and value ``str(id)``), exactly once with ``transactional.id.prefix`` ``prefix``, at least
once when ``prefix`` is ``-``. Mode ``driver`` is arrow mode with its small micro-batches written
by the driver (``driver.write.max.rows``); ``arrow`` and ``rows`` write every micro-batch as a
Spark job (``driver.write.max.rows=0``). The queries run at the same time in one driver (one Spark session),
each on its own checkpoint; a test runs the job again on the same checkpoints to restart them.

Each query takes one crash point per run, in its micro-batch ``batch``; either every query of a
run has one or none has. A query that reaches its point waits there until every query of the run
has reached its own, then the process exits at once (``os._exit``, as a killed driver: no
``finally``, no Spark shutdown), so each query dies in the state its point names:

- ``before-record``: the tasks have written, the batch is not recorded in the commit log;
- ``after-record``: recorded ``prepared``, no transaction committed;
- ``between-commits``: after the first of its transactions is committed;
- ``after-commits``: every transaction committed and the batch recorded ``committed``, before
  ``foreachBatch`` returns, so before Spark records the batch in its checkpoint;
- ``after-write``: at least once, after the tasks wrote the batch;
- ``none``: no crash; the query runs to the end.

After each micro-batch a sink publishes, its ``metrics_history`` so far goes to the query's
``out`` as JSON (replaced whole), so a run that dies later leaves the figures of the batches it
finished (the replayed batch of a restarted run, say).

The crash points, and the history written to ``out``, are hooks around the sink's own calls (the
commit log's ``append``, the transactions' commits (resumable or, the driver's own write, by its
live producer), the sink's publishing), installed here and
told apart per query by its transactional id prefix or topic: the sink has no test code.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from dataclasses import dataclass

from spark_kafka_sink import KafkaSink
from spark_kafka_sink.spark import commit_log, exactly_once, sink as sink_module

from .session import build_session
from .streaming import start_available_now

CRASH_EXIT_CODE = 17
STRANDED_EXIT_CODE = 18
"""The exit code when a query waited at its crash point and another never reached its own."""
BARRIER_TIMEOUT_S = 150
POINTS = ("before-record", "after-record", "between-commits", "after-commits", "after-write", "none")
REPLAYED = {"before-record": False, "after-record": True, "between-commits": True,
            "after-commits": True}
"""The exactly-once points: whether the restarted driver finds the batch its predecessor died in
already committed (its commits finished from the commit log), so skips it as a replay."""


def is_handover(record) -> bool:
    """Whether ``record`` is the batch's ``prepared`` record naming its tasks' transactions (not
    the count-only record some writes make before the job)."""
    return record.state == commit_log.PREPARED and bool(record.transactions)


def dies_before_append(point: str, batch: str, record) -> bool:
    """Whether the driver dying at ``point`` of micro-batch ``batch`` dies before the commit log
    takes ``record``."""
    return point == "before-record" and record.batch_id == batch and is_handover(record)


def dies_after_append(point: str, batch: str, record) -> bool:
    """Whether it dies once the commit log took ``record``."""
    return record.batch_id == batch and (
        (point == "after-record" and is_handover(record))
        or (point == "after-commits" and record.state == commit_log.COMMITTED))


@dataclass(frozen=True)
class Query:
    """One query of the run (see the module docstring)."""

    topic: str
    input: str
    checkpoint: str
    mode: str
    prefix: str
    point: str
    batch: str
    out: str

    @property
    def exactly_once(self) -> bool:
        return self.prefix != "-"


class Crashes:
    """The run's crash points: a query at its point waits for the others, and the last one to
    arrive ends the process (``CRASH_EXIT_CODE``); ``STRANDED_EXIT_CODE`` after
    ``BARRIER_TIMEOUT_S`` if one never arrives."""

    def __init__(self, queries: list[Query]):
        self._expected = {q.topic for q in queries if q.point != "none"}
        self._arrived: set[str] = set()
        self._changed = threading.Condition()

    def arrive(self, query: Query) -> None:
        sys.stdout.write(f"crash_job: {query.topic} reached {query.point} in micro-batch "
                         f"{query.batch}\n")
        sys.stdout.flush()
        with self._changed:
            self._arrived.add(query.topic)
            if self._arrived == self._expected:
                sys.stdout.write("crash_job: the driver dies\n")
                sys.stdout.flush()
                os._exit(CRASH_EXIT_CODE)
            if not self._changed.wait_for(lambda: self._arrived == self._expected,
                                          BARRIER_TIMEOUT_S):
                sys.stdout.write(f"crash_job: only {sorted(self._arrived)} of "
                                 f"{sorted(self._expected)} reached their crash points\n")
                sys.stdout.flush()
                os._exit(STRANDED_EXIT_CODE)


def _prefix_of(transactional_id: str) -> str:
    return transactional_id.rsplit("-", 1)[0]


def _install_crashes(queries: list[Query]) -> None:
    crashes = Crashes(queries)
    by_prefix = {q.prefix: q for q in queries if q.exactly_once}
    by_topic = {q.topic: q for q in queries}
    append = commit_log.CommitLog.append

    def hooked_append(self, record):
        query = by_prefix[self.prefix]
        if dies_before_append(query.point, query.batch, record):
            crashes.arrive(query)
        append(self, record)
        if dies_after_append(query.point, query.batch, record):
            crashes.arrive(query)

    commit_log.CommitLog.append = hooked_append
    commit = exactly_once.commit_resumable
    done: dict[str, int] = {}
    current: dict[str, str] = {}

    def committed(transaction) -> None:
        query = by_prefix[_prefix_of(transaction.transactional_id)]
        done[query.prefix] += 1
        if (query.point == "between-commits" and current[query.prefix] == query.batch
                and done[query.prefix] == 1):
            crashes.arrive(query)

    def hooked_commit(transaction, config, timeout=None):
        commit(transaction, config, timeout)
        committed(transaction)

    commit_live = exactly_once.commit_live

    def hooked_commit_live(producer, transaction):  # the driver's own write
        commit_live(producer, transaction)
        committed(transaction)

    exactly_once.commit_resumable = hooked_commit
    exactly_once.commit_live = hooked_commit_live
    begin = exactly_once.ExactlyOnceDriver.begin_batch

    def hooked_begin(self, batch_id, partitions=None, *args, **kwargs):
        prefix = self._config.transactional_id_prefix
        current[prefix], done[prefix] = batch_id, 0
        return begin(self, batch_id, partitions, *args, **kwargs)

    exactly_once.ExactlyOnceDriver.begin_batch = hooked_begin
    publish = sink_module.KafkaSink._publish

    def hooked_publish(self, batch_id, metrics, seconds):
        query = by_topic[self.config.topic]
        if query.point == "after-write" and str(batch_id) == query.batch:
            crashes.arrive(query)
        publish(self, batch_id, metrics, seconds)

    sink_module.KafkaSink._publish = hooked_publish


def _install_history(queries: list[Query]) -> None:
    publish = sink_module.KafkaSink._publish_figures
    outs = {q.topic: q.out for q in queries}

    def hooked_publish_figures(self, batch_id, figures, seconds):
        publish(self, batch_id, figures, seconds)
        out = outs[self.config.topic]
        partial = f"{out}.partial"
        with open(partial, "w") as handle:
            json.dump(self.metrics_history, handle)
        os.replace(partial, out)

    sink_module.KafkaSink._publish_figures = hooked_publish_figures


def main(spec_path: str) -> None:
    with open(spec_path) as handle:
        spec = json.load(handle)
    queries = [Query(**query) for query in spec["queries"]]
    if any(q.point not in POINTS for q in queries):
        raise SystemExit(f"crash points must be among {POINTS}, got {[q.point for q in queries]}")
    if len({q.point == "none" for q in queries}) > 1:
        raise SystemExit("either every query of a run has a crash point or none has")
    _install_crashes(queries)
    _install_history(queries)
    with tempfile.TemporaryDirectory() as warehouse:
        spark = build_session("local[2]", warehouse, "spark-kafka-sink-crash-test", quick_start=True)
        try:
            running = []
            for query in queries:
                options = {"kafka.bootstrap.servers": spec["bootstrap"], "topic": query.topic,
                           "mode": "arrow" if query.mode == "driver" else query.mode}
                if query.mode != "driver":
                    options["driver.write.max.rows"] = 0
                if query.exactly_once:
                    options.update({"delivery.guarantee": "exactly-once",
                                    "transactional.id.prefix": query.prefix})
                stream = (spark.readStream.schema("id long").option("maxFilesPerTrigger", 1)
                          .json(query.input).repartition(2)
                          .selectExpr("cast(id as string) as key", "cast(id as string) as value"))
                sink = KafkaSink(**options)
                running.append((sink, start_available_now(stream, sink, query.checkpoint)))
            for sink, handle in running:
                handle.wait(timeout_s=180)
                sink.close()
        finally:
            spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
