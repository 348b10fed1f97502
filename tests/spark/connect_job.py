"""KafkaSink over Spark Connect, run in its own process (``test_spark_connect.py``).

``python -m tests.spark.connect_job BOOTSTRAP ARROW_TOPIC ROWS_TOPIC EOS_TOPIC AVRO_TOPIC REGISTRY
ROWS OUT`` from the
repository root, with ``session.SPARK_ENV`` and ``SPARK_CONF_DIR`` set (Spark Connect's local
server reads its static settings, loopback included, from that directory's spark-defaults.conf:
they cannot be changed once it runs). ``SparkSession.builder.remote("local[2]")`` starts a local
Spark Connect server; the session it returns has no ``sparkContext``, so no accumulators.

Writes ROWS rows with ``KafkaSink`` in arrow mode to ARROW_TOPIC, in rows mode to ROWS_TOPIC and
exactly once (arrow mode) to EOS_TOPIC, and stores the sinks' ``last_metrics`` (and the session's
type) in OUT as JSON; rows mode's error instead where this PySpark's Spark Connect cannot run it
(before 4.0), and the error of exactly-once rows mode (it needs ``df.rdd``). Then it writes the rows
as Avro values (a struct; the schema derived on the client, registered in the REGISTRY URL) to
AVRO_TOPIC, a ``topic`` column naming it (the driver reads the distinct topics first).
"""

from __future__ import annotations

import json
import sys

from spark_kafka_sink import KafkaSink
from spark_kafka_sink.errors import ConfigError


def main(bootstrap: str, arrow_topic: str, rows_topic: str, eos_topic: str, avro_topic: str,
         registry: str, rows: int, out: str) -> None:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote("local[2]").getOrCreate()
    try:
        df = spark.range(0, rows, 1, 2).selectExpr("cast(id as string) as key",
                                                   "concat('v', cast(id as string)) as value")
        arrow = KafkaSink(**{"kafka.bootstrap.servers": bootstrap, "topic": arrow_topic})
        arrow.write(df)
        plain = KafkaSink(**{"kafka.bootstrap.servers": bootstrap, "topic": rows_topic, "mode": "rows"})
        try:
            plain.write(df)
            rows_error = None
        except ConfigError as error:  # rows mode before PySpark 4.0: no foreachPartition on Connect
            rows_error = str(error)
        exactly_once = {"kafka.bootstrap.servers": bootstrap, "topic": eos_topic,
                        "delivery.guarantee": "exactly-once",
                        "transactional.id.prefix": f"connect-{eos_topic}"}
        eos = KafkaSink(**exactly_once)
        eos.write(df)
        eos.close()
        try:
            KafkaSink(**exactly_once, mode="rows").write(df)
            eos_rows_error = None
        except ConfigError as error:
            eos_rows_error = str(error)
        avro = KafkaSink(**{"kafka.bootstrap.servers": bootstrap, "value.format": "avro",
                            "schema.registry.url": registry})
        avro.write(df.selectExpr("key", f"'{avro_topic}' AS topic",
                                 "named_struct('id', CAST(key AS BIGINT), 'value', value) AS value"))
        with open(out, "w") as handle:
            json.dump({"session": type(spark).__module__, "arrow": arrow.last_metrics,
                       "rows": plain.last_metrics, "rows_error": rows_error,
                       "eos": eos.last_metrics, "eos_rows_error": eos_rows_error,
                       "avro": avro.last_metrics}, handle)
    finally:
        spark.stop()


if __name__ == "__main__":
    *arguments, row_count, out_path = sys.argv[1:]
    main(*arguments, int(row_count), out_path)
