"""A KafkaSink write whose one task fails once, run in its own process on ``local[2,3]``.

``python -m tests.spark.retry_job BOOTSTRAP TOPIC ROWS FAIL_AT OUT MODE [PREFIX]`` (from the
repository root, with ``session.SPARK_ENV`` set; ``MODE`` is the sink's ``arrow`` or ``rows``;
with ``PREFIX`` the sink writes exactly once, with that ``transactional.id.prefix``). A
SparkSession allows up to 3 attempts per task only when it is started that way, and a process
holds one SparkContext, hence the separate process.

``ROWS`` rows (``id``, key ``str(id)``, value ``v<id>``) in 2 partitions. In attempt 0 of
partition 1 the ``topic`` column turns null at the row ``FAIL_AT`` of that partition: the task
sends (and flushes) the rows before it, then fails with the sink's null-topic error. Spark retries
it (attempt 1), which sends the whole partition again. A Python UDF reports the attempt number:
it runs in the same task, so it sees the same ``TaskContext`` (in arrow mode too: the UDF's
batch-eval node and the sink's ``mapInArrow`` are in the same stage, so in the same task). The
sink's metrics (``last_metrics``) go to ``OUT`` as JSON.
"""

from __future__ import annotations

import json
import sys
import tempfile

from spark_kafka_sink import KafkaSink

from .session import build_session


def main(bootstrap: str, topic: str, rows: int, fail_at: int, out: str, mode: str,
         prefix: str | None = None) -> None:
    from pyspark import TaskContext
    from pyspark.sql import functions as F

    with tempfile.TemporaryDirectory() as warehouse:
        spark = build_session("local[2,3]", warehouse, "spark-kafka-sink-retry-test")
        try:
            attempt = F.udf(lambda: TaskContext.get().attemptNumber(), "int").asNondeterministic()
            failing_row = rows // 2 + fail_at  # partition 1 starts at rows // 2
            df = (spark.range(0, rows, 1, 2)
                  .withColumn("attempt", attempt())
                  .selectExpr("cast(id as string) as key", "concat('v', id) as value",
                              f"case when attempt = 0 and id = {failing_row} then null "
                              f"else '{topic}' end as topic"))
            options = {"kafka.bootstrap.servers": bootstrap, "mode": mode}
            if prefix:
                options.update({"delivery.guarantee": "exactly-once",
                                "transactional.id.prefix": prefix})
            sink = KafkaSink(**options)
            try:
                sink.write(df)
            finally:
                sink.close()
            with open(out, "w") as handle:
                json.dump(sink.last_metrics, handle)
        finally:
            spark.stop()


if __name__ == "__main__":
    bootstrap_servers, topic_name, row_count, fail_position, out_path, sink_mode = sys.argv[1:7]
    main(bootstrap_servers, topic_name, int(row_count), int(fail_position), out_path, sink_mode,
         sys.argv[7] if len(sys.argv) > 7 else None)
