"""Spark's own Kafka source as a second witness, run in its own process (``test_spark_kafka_source.py``).

``python -m tests.spark.kafka_source_job BOOTSTRAP OUT TOPIC [TOPIC...]`` from the repository root,
with ``session.SPARK_ENV`` set (``session.run_script``). The ``spark`` fixture's JVM started without
the connector, so this process starts its own ``local[2]`` session (``session.build_session``'s
settings) with Spark's Kafka connector on the classpath through ``spark.jars.packages``, resolved by
Ivy into the cache ``bench.spark`` uses. The connector tried first is pyspark's own version; when
Ivy cannot resolve it (a repository that does not serve it yet), the newest earlier one of the same
major line: the earlier patches of the same minor, then ``X.m.+`` (Ivy picks that minor's newest
release) for each earlier minor ``m``.

Reads every record of the topics with ``spark.read.format("kafka")`` (``includeHeaders``, earliest
to latest) and writes them to OUT as JSON: ``{"connector": version, "tried": [[version, why it
failed], ...], "records": [{topic, partition, offset, key, value, timestamp_ms, timestamp_type,
headers}, ...]}``, bytes as hex, ``timestamp_ms`` as Spark's ``unix_millis(timestamp)``. Exits 2
(OUT still written, ``connector`` null) when no connector version resolves.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import tempfile
from typing import Any

from bench.spark import CONNECTOR, PROVIDED_BY_SPARK, StderrTap, ivy_dir

from .session import build_session, same_minor_versions, version_parts



def candidates(own: str) -> list[str]:
    """Connector versions to try, in order: ``own`` (pyspark's), then the earlier patches of its
    minor, then each earlier minor's newest release as an Ivy dynamic revision (4.2.1 -> 4.2.1,
    4.2.0, 4.1.+, 4.0.+)."""
    major, minor, _ = version_parts(own)
    # no Ivy range for those: spark.jars.packages splits coordinates at commas
    return [*same_minor_versions(own, later=False), *(f"{major}.{m}.+" for m in range(minor - 1, -1, -1))]


def _submit_args(version: str) -> str:
    """``PYSPARK_SUBMIT_ARGS`` putting the connector of ``version`` on the classpath."""
    return " ".join(shlex.quote(arg) for arg in (
        "--conf", f"spark.jars.packages={CONNECTOR}:{version}",
        "--conf", "spark.jars.excludes=" + ",".join(PROVIDED_BY_SPARK),
        "--conf", f"spark.jars.ivy={ivy_dir()}",
        "pyspark-shell"))


def _why(captured: str, exc: BaseException) -> str:
    """One line on why the JVM did not start, from Ivy's report if it has one."""
    unresolved = re.search(r"unresolved dependency: ([^\]\n]+)", captured)
    if unresolved:
        return f"Ivy: unresolved dependency {unresolved.group(1).strip()}"
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def start(warehouse: str) -> tuple[Any | None, str | None, list[list[str]]]:
    """A session with the first connector version that resolves, that version, and the failed
    attempts ``[[version, why], ...]``; ``(None, None, failed)`` when none resolves."""
    import pyspark

    failed: list[list[str]] = []
    for version in candidates(pyspark.__version__):
        os.environ["PYSPARK_SUBMIT_ARGS"] = _submit_args(version)
        tap = StderrTap()
        try:
            spark = build_session("local[2]", warehouse, app_name="spark-kafka-source-witness",
                                  quick_start=True)
        except Exception as exc:  # noqa: BLE001 - the JVM exited: Ivy could not resolve it
            failed.append([version, _why(tap.release(), exc)])
            continue
        tap.release()
        jars = spark.sparkContext.getConf().get("spark.jars", "")
        found = re.search(re.escape(CONNECTOR.split(":")[1]) + r"-([^/,]+)\.jar", jars)
        return spark, found.group(1) if found else version, failed
    return None, None, failed


def _hex(data: bytes | bytearray | None) -> str | None:
    return None if data is None else bytes(data).hex()


def read_all(spark: Any, bootstrap: str, topics: list[str]) -> list[dict[str, Any]]:
    """Every record of ``topics`` as Spark's Kafka source reads it (batch, earliest to latest)."""
    frame = (spark.read.format("kafka")
             .option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", ",".join(topics))
             .option("startingOffsets", "earliest")
             .option("endingOffsets", "latest")
             .option("includeHeaders", "true")
             .load()
             .selectExpr("topic", "partition", "offset", "key", "value",
                         "unix_millis(timestamp) AS timestamp_ms", "timestampType", "headers"))
    return [{"topic": row.topic, "partition": row.partition, "offset": row.offset,
             "key": _hex(row.key), "value": _hex(row.value), "timestamp_ms": row.timestamp_ms,
             "timestamp_type": row.timestampType,
             "headers": None if row.headers is None else [[h.key, _hex(h.value)] for h in row.headers]}
            for row in frame.collect()]


def main(bootstrap: str, out: str, topics: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="kafka-source-warehouse-") as warehouse:
        spark, version, failed = start(warehouse)
        if spark is None:
            with open(out, "w") as handle:
                json.dump({"connector": None, "tried": failed, "records": []}, handle)
            print(f"no version of {CONNECTOR} resolved: {failed}", flush=True)
            return 2
        print(f"Spark's Kafka source: {CONNECTOR}:{version} on Spark {spark.version}"
              + "".join(f"; {v} failed first: {why}" for v, why in failed), flush=True)
        try:
            records = read_all(spark, bootstrap, topics)
        finally:
            spark.stop()
    with open(out, "w") as handle:
        json.dump({"connector": version, "tried": failed, "records": records}, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
