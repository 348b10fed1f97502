"""A streaming query whose driver dies at a chosen point of a micro-batch, run in its own process.

``python -m tests.spark.crash_job BOOTSTRAP TOPIC INPUT CHECKPOINT MODE PREFIX CRASH BATCH OUT``
(from the repository root, with ``session.SPARK_ENV`` set). The query reads the JSON files of
``INPUT`` (one per micro-batch: ``maxFilesPerTrigger=1``, rows ``{"id": n}``) with
``trigger(availableNow=True)`` and writes them with ``foreachBatch(KafkaSink)`` (key and value
``str(id)``), exactly once with ``transactional.id.prefix`` ``PREFIX``, at least once when
``PREFIX`` is ``-``. One run takes one crash point; a test runs the job again on the same
checkpoint to restart the query (and may give that run a crash point of its own, in a later
batch). In micro-batch ``BATCH`` the process exits at once (``os._exit``, as a killed driver: no
``finally``, no Spark shutdown) at point ``CRASH``:

- ``before-record``: the tasks have written, the batch is not recorded in the commit log;
- ``after-record``: recorded ``prepared``, no transaction committed;
- ``between-commits``: after the first of its transactions is committed;
- ``after-commits``: every transaction committed and the batch recorded ``committed``, before
  ``foreachBatch`` returns, so before Spark records the batch in its checkpoint;
- ``after-write``: at least once, after the tasks wrote the batch;
- ``none``: no crash; the query runs to the end.

After each micro-batch the sink publishes, its ``metrics_history`` so far goes to ``OUT`` as JSON
(replaced whole), so a run that dies later leaves the figures of the batches it finished (the
replayed batch of a restarted run, say).

The crash points, and the history written to ``OUT``, are hooks around the sink's own calls (the
commit log's ``append``, the transactions' commits, the sink's publishing), installed here: the
sink has no test code.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

from spark_kafka_sink import KafkaSink
from spark_kafka_sink.spark import commit_log, exactly_once, sink as sink_module

from .session import build_session
from .streaming import run_available_now

CRASH_EXIT_CODE = 17
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


def _install_crash(point: str, batch: str) -> None:
    def crash() -> None:
        sys.stdout.write(f"crash_job: the driver dies at {point} in micro-batch {batch}\n")
        sys.stdout.flush()
        os._exit(CRASH_EXIT_CODE)

    append = commit_log.CommitLog.append

    def hooked_append(self, record):
        if dies_before_append(point, batch, record):
            crash()
        append(self, record)
        if dies_after_append(point, batch, record):
            crash()

    commit_log.CommitLog.append = hooked_append
    commit = exactly_once.commit_resumable
    done = []

    def hooked_commit(transaction, config, timeout=None):
        commit(transaction, config, timeout)
        done.append(transaction)
        current = exactly_once_batch[0]
        if point == "between-commits" and current == batch and len(done) == 1:
            crash()

    exactly_once.commit_resumable = hooked_commit
    begin = exactly_once.ExactlyOnceDriver.begin_batch
    exactly_once_batch = [None]

    def hooked_begin(self, batch_id, partitions=None, *args, **kwargs):
        exactly_once_batch[0] = batch_id
        done.clear()
        return begin(self, batch_id, partitions, *args, **kwargs)

    exactly_once.ExactlyOnceDriver.begin_batch = hooked_begin
    publish = sink_module.KafkaSink._publish

    def hooked_publish(self, batch_id, metrics, seconds):
        if point == "after-write" and str(batch_id) == batch:
            crash()
        publish(self, batch_id, metrics, seconds)

    sink_module.KafkaSink._publish = hooked_publish


def _install_history(out: str) -> None:
    publish = sink_module.KafkaSink._publish_figures

    def hooked_publish_figures(self, batch_id, figures, seconds):
        publish(self, batch_id, figures, seconds)
        partial = f"{out}.partial"
        with open(partial, "w") as handle:
            json.dump(self.metrics_history, handle)
        os.replace(partial, out)

    sink_module.KafkaSink._publish_figures = hooked_publish_figures


def main(bootstrap: str, topic: str, input_dir: str, checkpoint: str, mode: str, prefix: str,
         point: str, batch: str, out: str) -> None:
    if point not in POINTS:
        raise SystemExit(f"crash point must be one of {POINTS}, got {point!r}")
    _install_crash(point, batch)
    _install_history(out)
    options = {"kafka.bootstrap.servers": bootstrap, "topic": topic, "mode": mode}
    if prefix != "-":
        options.update({"delivery.guarantee": "exactly-once", "transactional.id.prefix": prefix})
    with tempfile.TemporaryDirectory() as warehouse:
        spark = build_session("local[2]", warehouse, "spark-kafka-sink-crash-test", quick_start=True)
        try:
            stream = (spark.readStream.schema("id long").option("maxFilesPerTrigger", 1)
                      .json(input_dir).repartition(2)
                      .selectExpr("cast(id as string) as key", "cast(id as string) as value"))
            sink = KafkaSink(**options)
            run_available_now(stream, sink, checkpoint, timeout_s=180)
            sink.close()
        finally:
            spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:10])
