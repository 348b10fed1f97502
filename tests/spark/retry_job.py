"""KafkaSink writes whose one task fails once, all in one process on ``local[2,3]``.

``python -m tests.spark.retry_job BOOTSTRAP ROWS FAIL_AT OUT CASE...`` (from the repository
root, with ``session.SPARK_ENV`` set). Each ``CASE`` is ``MODE,TOPIC`` or ``MODE,TOPIC,PREFIX``:
``MODE`` is the sink's ``arrow`` or ``rows``; with ``PREFIX`` the sink writes exactly once, with
that ``transactional.id.prefix``. A SparkSession allows up to 3 attempts per task only when it is
started that way, and a process holds one SparkContext, hence the separate process; the cases are
written one after another by one session.

Each case writes ``ROWS`` rows (``id``, key ``str(id)``, value ``v<id>``) in 2 partitions to its
own topic. In attempt 0 of partition 1 the ``topic`` column turns null at the row ``FAIL_AT`` of
that partition: the task sends (and flushes) the rows before it, then fails with the sink's
null-topic error. Spark retries it (attempt 1), which sends the whole partition again. A Python
UDF reports the attempt number: it runs in the same task, so it sees the same ``TaskContext`` (in
arrow mode too: the UDF's batch-eval node and the sink's ``mapInArrow`` are in the same stage, so
in the same task).

Each case's sink has its own ``client.id`` (the case's topic), so its producer config is its own:
the Python workers, reused across the writes, hold no pooled producer of an earlier case that the
case's first attempts could take, and each case's producers are created as in a process of its
own. Before each case the job prints ``retry_job: case TOPIC`` (flushed), so the output can be cut
into the cases' parts. ``OUT`` gets a JSON object, by topic: the sink's metrics (``last_metrics``)
or the error that ended the case's write (the other cases still run).
"""

from __future__ import annotations

import json
import sys
import tempfile
import traceback

from spark_kafka_sink import KafkaSink

from .session import build_session

CASE_MARK = "retry_job: case "


def parse_case(case: str) -> tuple[str, str, str | None]:
    """``MODE,TOPIC[,PREFIX]`` -> ``(mode, topic, prefix or None)``."""
    mode, topic, *rest = case.split(",")
    return mode, topic, (rest[0] if rest else None)


def write_case(spark, bootstrap: str, rows: int, fail_at: int, mode: str, topic: str,
               prefix: str | None) -> dict:
    """One case's write, with its failure injected; the sink's metrics."""
    from pyspark import TaskContext
    from pyspark.sql import functions as F

    attempt = F.udf(lambda: TaskContext.get().attemptNumber(), "int").asNondeterministic()
    failing_row = rows // 2 + fail_at  # partition 1 starts at rows // 2
    df = (spark.range(0, rows, 1, 2)
          .withColumn("attempt", attempt())
          .selectExpr("cast(id as string) as key", "concat('v', id) as value",
                      f"case when attempt = 0 and id = {failing_row} then null "
                      f"else '{topic}' end as topic"))
    options = {"kafka.bootstrap.servers": bootstrap, "mode": mode, "kafka.client.id": topic}
    if prefix:
        options.update({"delivery.guarantee": "exactly-once", "transactional.id.prefix": prefix})
    sink = KafkaSink(**options)
    try:
        sink.write(df)
    finally:
        sink.close()
    return sink.last_metrics


def main(bootstrap: str, rows: int, fail_at: int, out: str, cases: list[str]) -> None:
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as warehouse:
        spark = build_session("local[2,3]", warehouse, "spark-kafka-sink-retry-test", quick_start=True)
        try:
            for case in cases:
                mode, topic, prefix = parse_case(case)
                print(f"{CASE_MARK}{topic}", flush=True)
                try:
                    results[topic] = {"metrics": write_case(spark, bootstrap, rows, fail_at, mode,
                                                            topic, prefix), "error": None}
                except Exception:  # noqa: BLE001 - the case's test reports it
                    error = traceback.format_exc()
                    print(error, flush=True)
                    results[topic] = {"metrics": None, "error": error[-4000:]}
        finally:
            with open(out, "w") as handle:
                json.dump(results, handle)
            spark.stop()


if __name__ == "__main__":
    bootstrap_servers, row_count, fail_position, out_path = sys.argv[1:5]
    main(bootstrap_servers, int(row_count), int(fail_position), out_path, sys.argv[5:])
