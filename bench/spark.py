"""The Spark sink benchmark (bench/README.md): ``python -m bench.spark``.

Rows/s writing a cached DataFrame of ``--rows`` rows (string keys ``k0..k99``, string values of
``--value-size`` bytes) from Spark ``local[2]`` to one embedded Apache Kafka node. Every contender
runs in the same SparkSession, against the same broker, each into a fresh topic of 6 partitions:

- ``ours-arrow``: ``KafkaSink(...).write(df)`` in its default mode (``mapInArrow``, whole Arrow
  batches to ``send_arrow``); ``ours-rows``: the same with ``mode="rows"`` (``foreachPartition``,
  one ``send`` per row). ``ours`` on the command line means ``ours-arrow``;
- ``ours-eos``: ``ours-arrow`` with ``delivery.guarantee=exactly-once`` (a fresh
  ``transactional.id.prefix`` per attempt): each task writes in a transaction, the driver
  records and commits them; the rows counted are those a ``read_committed`` reader sees, and the
  note gives the driver's commit time (``transaction-commit-time-ms``);
- ``ours-tolerant``: ``ours-arrow`` with the per-record error policy on
  (``errors.tolerance=all`` and a dead-letter topic): what leaving it on costs when no row is bad;
- ``builtin``: Spark's own Kafka sink, ``df.write.format("kafka").save()``; its connector comes
  from ``spark.jars.packages``, resolved by Spark's Ivy into a cache directory;
- ``ours-defaults`` / ``builtin-defaults``: the same two with each side's own defaults (no
  ``kafka.*`` producer settings but the codec): what a user gets without tuning;
- ``confluent``: a confluent-kafka ``Producer`` per task in ``foreachPartition``;
- ``noop-foreach`` / ``noop-arrow``: the floors, which only iterate the rows (``foreachPartition``)
  or the Arrow batches (``mapInArrow``).

Throughput is what landed on the broker (for the no-ops: the rows their tasks saw) over the
seconds of the write action. Beside it, the CPU seconds per 1M rows that the write cost the
broker, the Spark JVM and the Python workers (``bench/cpu.py``, from ``/proc``). ``--codec`` sets
``compression.type`` for every contender. The last lines printed are the ratios of KafkaSink
(arrow mode) to its peers, each with both sides' CPU split.

    python -m bench.spark --rows 100000 --contenders ours-arrow,ours-rows,builtin,confluent
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from . import admin
from .cpu import CpuMeter, CpuSplit, spark_jvm
from .peers import SETTINGS, Settings
from .table import cell
from .workers import WorkerPeaks

CONTENDERS = ("ours-arrow", "ours-tolerant", "ours-eos", "ours-rows", "builtin", "ours-defaults",
              "builtin-defaults", "confluent", "noop-foreach", "noop-arrow")
ALIASES = {"ours": "ours-arrow"}
LABELS = {"ours-arrow": "KafkaSink arrow (ours)", "ours-rows": "KafkaSink rows (ours)",
          "ours-eos": "KafkaSink arrow exactly-once",
          "ours-tolerant": "KafkaSink arrow errors.tolerance=all",
          "builtin": "Spark built-in sink", "ours-defaults": "KafkaSink arrow, defaults",
          "builtin-defaults": "Spark built-in, defaults",
          "confluent": "confluent foreachPartition", "noop-foreach": "no-op foreachPartition",
          "noop-arrow": "no-op mapInArrow"}
WRITES_TO_KAFKA = ("ours-arrow", "ours-tolerant", "ours-eos", "ours-rows", "builtin", "ours-defaults",
                   "builtin-defaults", "confluent")
USES_CONNECTOR = ("builtin", "builtin-defaults")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
TOPIC_PARTITIONS = 6
DF_PARTITIONS = 2  # one per local[2] core
DRIVER_MEMORY = "1g"
CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13"
# Tried when pyspark's own version of the connector does not resolve (a Maven mirror lagging
# behind pyspark): the first 4.x release, same Scala 2.13 and the same DataSource V2 write path.
FALLBACK_CONNECTOR = "4.0.0"
REPO = Path(__file__).resolve().parents[1]
LOG4J2 = REPO / "conf" / "log4j2.properties"

_FULL_WAIT_S = 0.005  # confluent: poll this long when librdkafka's queue is full, then retry
_MAX_FULL_WAITS = 10_000
_FLUSH_TIMEOUT_S = 120.0


# --- what runs in the Python workers (module-level, so they pickle by reference) ---------------

@dataclass(frozen=True)
class ConfluentJob:
    """What a confluent-kafka task needs: plain values, so it pickles small."""

    bootstrap: str
    topic: str
    compression: str = "none"

    def config(self) -> dict[str, str]:
        return {"bootstrap.servers": self.bootstrap,
                **replace(SETTINGS, compression=self.compression).as_properties()}


def confluent_task(job: ConfluentJob, sent: Any, full_waits: Any, rows: Iterable[Any]) -> None:
    """One Producer per task, bench/peers.py's produce loop (``poll(0)`` after each record; on
    ``BufferError`` poll 5 ms and retry), then flush. Fails the task if anything stayed unsent."""
    from confluent_kafka import Producer

    producer = Producer(job.config())
    produce, poll, topic = producer.produce, producer.poll, job.topic
    count = waits = 0
    for key, value in rows:
        for _ in range(_MAX_FULL_WAITS):
            try:
                produce(topic, value, key)
                break
            except BufferError:
                waits += 1
                poll(_FULL_WAIT_S)
        else:
            raise TimeoutError("librdkafka's queue stayed full for 50 s")
        poll(0)
        count += 1
    left = producer.flush(_FLUSH_TIMEOUT_S)
    if left:
        raise RuntimeError(f"{left} records still undelivered after a {_FLUSH_TIMEOUT_S:.0f} s flush")
    sent.add(count)
    full_waits.add(waits)


def count_rows_task(seen: Any, rows: Iterable[Any]) -> None:
    """The ``foreachPartition`` floor: iterate the rows (Spark builds each ``Row``), nothing else."""
    count = 0
    for _ in rows:
        count += 1
    seen.add(count)


def count_batches(batches: Iterator[Any]) -> Iterator[Any]:
    """The ``mapInArrow`` floor: iterate the Arrow batches; yield one 1-row batch with the count,
    so the driver can check that every row went through Python."""
    import pyarrow as pa

    count = 0
    for batch in batches:
        count += batch.num_rows
    yield pa.RecordBatch.from_pydict({"rows": [count]})


def _nothing(rows: Iterable[Any]) -> None:
    """Warm-up: starts the ``foreachPartition`` worker pool."""
    for _ in rows:
        pass


# --- the SparkSession, with Spark's Kafka connector (and others) from spark.jars.packages --------

class StderrTap:
    """Captures what the Spark JVM writes to stderr while it starts (Ivy's report, or why it
    failed), then forwards everything it writes later to the real stderr.

    The JVM inherits file descriptor 2 when pyspark spawns it, so fd 2 points at a pipe during
    start-up only; a daemon thread drains the pipe for the JVM's whole life (a full pipe would
    block the JVM).
    """

    def __init__(self) -> None:
        sys.stderr.flush()
        self._saved = os.dup(2)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
        self._chunks: list[bytes] = []
        self._forward = False
        self._thread = threading.Thread(target=self._drain, args=(read_end,), name="jvm-stderr", daemon=True)
        self._thread.start()

    def _drain(self, read_end: int) -> None:
        while chunk := os.read(read_end, 65536):
            if self._forward:
                os.write(self._saved, chunk)
            else:
                self._chunks.append(chunk)
        os.close(read_end)

    def release(self) -> str:
        """Give this process its stderr back, forward the JVM's from now on; what was captured."""
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        self._forward = True
        return b"".join(self._chunks).decode("utf-8", "replace")


@dataclass(frozen=True)
class Connector:
    """How Spark's Kafka connector (with ``what``: other Spark packages beside it, all of one
    version) got on the classpath via ``spark.jars.packages``, or why not. ``coordinate``: the
    comma-separated Maven coordinates."""

    coordinate: str
    available: bool
    cache: str  # cold | warm: whether the Ivy cache held the connector's jar before this start
    session_start_s: float  # getOrCreate with the package: JVM start plus Ivy
    resolve_ms: int | None = None  # Ivy's own "resolve ... ms :: artifacts dl ... ms" report
    download_ms: int | None = None
    reason: str = ""
    spark_version: str = ""
    what: str = "Spark's Kafka connector"

    @property
    def version(self) -> str:
        return self.coordinate.rsplit(":", 1)[1]

    def summary(self) -> str:
        if not self.available:
            return f"{self.what} not available: {self.reason}"
        ivy = "" if self.resolve_ms is None else \
            f"; Ivy: resolve {self.resolve_ms} ms, artifacts download {self.download_ms} ms"
        mismatch = f" (on Spark {self.spark_version})" if self.version != self.spark_version else ""
        tried = f"; {self.reason}" if self.reason else ""
        return (f"{self.what} {self.coordinate}{mismatch} via spark.jars.packages, "
                f"{self.cache} Ivy cache: session started in {self.session_start_s:.1f} s{ivy}{tried}")


# What the Spark runtime (pyspark/jars) already ships, as a cluster would: left out of the
# resolution so that no second copy of them lands on the classpath (and no 60 MB Hadoop download).
PROVIDED_BY_SPARK = ("org.slf4j:slf4j-api", "org.apache.hadoop:hadoop-client-api",
                     "org.apache.hadoop:hadoop-client-runtime", "org.lz4:lz4-java", "at.yawk.lz4:lz4-java",
                     "org.xerial.snappy:snappy-java", "com.github.luben:zstd-jni",
                     "com.google.code.findbugs:jsr305",
                     "org.scala-lang.modules:scala-parallel-collections_2.13")


def ivy_dir() -> Path:
    """Spark's Ivy home for the connector, next to the broker jars' cache (offline once filled)."""
    from spark_kafka_sink.embedded.jars import default_cache_root

    return default_cache_root() / "ivy"


def _builder(coordinate: str | None, excludes: tuple[str, ...] = PROVIDED_BY_SPARK) -> Any:
    """A SparkSession builder with the local settings of conf/spark-defaults.conf (as
    tests/spark/conftest.py; docs/ARCHITECTURE.md, "Spark in tests and local runs")."""
    from pyspark.sql import SparkSession

    builder = (SparkSession.Builder().master("local[2]").appName("spark-kafka-sink-bench")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", DRIVER_MEMORY)
               .config("spark.driver.extraJavaOptions", f"-Xss16m -Dlog4j2.configurationFile=file:{LOG4J2}")
               .config("spark.python.worker.reuse", "true"))
    if coordinate:
        builder = (builder.config("spark.jars.packages", coordinate)
                   .config("spark.jars.excludes", ",".join(excludes))
                   .config("spark.jars.ivy", str(ivy_dir())))
    return builder


def _coordinate(version: str, artifacts: tuple[str, ...] = (CONNECTOR,)) -> str:
    """``group:artifact:version`` of each of ``artifacts``, comma-separated (``spark.jars.packages``)."""
    return ",".join(f"{artifact}:{version}" for artifact in artifacts)


def _ivy_cache_state(coordinate: str) -> str:
    """``warm`` when Ivy's jar directory holds every package's jar (a dynamic revision such as
    ``4.2.+`` matches any of that line), else ``cold``."""
    jars = ivy_dir() / "jars"
    for one in coordinate.split(","):
        group, artifact, version = one.split(":")
        if not any(jars.glob(f"{group}_{artifact}-{version.replace('+', '*')}.jar")):
            return "cold"
    return "warm"


def _failure_reason(captured: str, exc: BaseException) -> str:
    """One line on why the JVM did not start with the connector, from Ivy's output if it said."""
    unresolved = re.search(r"(unresolved dependency|download failed): ([^\]\n]+)", captured)
    if unresolved:
        where = "repositories unreachable" if re.search(
            r"Server access error|UnknownHost|Connection refused|timed out", captured) else \
            "not in the repositories Ivy tried"
        return f"Ivy: {unresolved.group(1)} {unresolved.group(2).strip()} ({where})"
    for line in captured.splitlines():
        if "Exception" in line or "ERROR" in line:
            return line.strip(" :")[:300]
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


@dataclass(frozen=True)
class Packages:
    """The Spark packages a benchmark puts on the classpath, all of one version: their
    ``group:artifact`` names, what Spark already ships of their dependencies (left out), and what
    to call them in the report."""

    artifacts: tuple[str, ...] = (CONNECTOR,)
    excludes: tuple[str, ...] = PROVIDED_BY_SPARK
    what: str = "Spark's Kafka connector"


def _start_with_connector(version: str, spark_version: str,
                          packages: Packages = Packages()) -> tuple[Any | None, Connector]:
    """A session with the packages of ``version`` on its classpath, or ``None`` and why not."""
    coordinate = _coordinate(version, packages.artifacts)
    cache = _ivy_cache_state(coordinate)
    tap = StderrTap()
    began = time.monotonic()
    try:
        spark = _builder(coordinate, packages.excludes).getOrCreate()
    except Exception as exc:  # noqa: BLE001 - reported as the built-in sink's row
        seconds = time.monotonic() - began
        return None, Connector(coordinate, False, cache, seconds, reason=_failure_reason(tap.release(), exc),
                               spark_version=spark_version, what=packages.what)
    seconds = time.monotonic() - began
    report = re.search(r"resolve (\d+)ms :: artifacts dl (\d+)ms", tap.release())
    return spark, Connector(coordinate, True, cache, seconds, int(report.group(1)) if report else None,
                            int(report.group(2)) if report else None, spark_version=spark_version,
                            what=packages.what)


def start_session(connector_versions: list[str],
                  packages: Packages = Packages()) -> tuple[Any, Connector | None]:
    """The benchmark's SparkSession, with ``packages`` (Spark's Kafka connector by default) of the
    first of ``connector_versions`` that resolves (one already in the Ivy cache is tried first, so
    a later run needs no network); without them if none does (the rows that need them then say
    why)."""
    import pyspark

    python_path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    os.environ.update({"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                       "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": python_path})
    failed: list[Connector] = []
    warm_first = sorted(connector_versions,
                        key=lambda v: _ivy_cache_state(_coordinate(v, packages.artifacts)) != "warm")
    for version in warm_first:
        spark, connector = _start_with_connector(version, pyspark.__version__, packages)
        if spark is not None:
            earlier = "; ".join(f"{c.version} failed first: {c.reason}" for c in failed)
            return spark, replace(connector, reason=earlier)
        failed.append(connector)
    spark = _builder(None).getOrCreate()
    if not failed:
        return spark, None
    reason = "; ".join(f"{c.version}: {c.reason}" for c in failed)
    return spark, replace(failed[-1], reason=reason)


def stop_session(spark: Any) -> None:
    """Stop Spark, then its JVM: the JVM outlives ``SparkContext.stop()``, and Spark's cached
    Kafka producer in it would keep reconnecting to the broker being stopped. The gateway exits
    when its stdin closes (PythonGatewayServer); it is the process pyspark started for us."""
    import subprocess

    from pyspark import SparkContext

    gateway = SparkContext._gateway
    spark.stop()
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    SparkContext._gateway = SparkContext._jvm = None
    if proc is not None:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# --- the contenders -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Context:
    """What every contender writes with: the session, the cached frame and the broker."""

    spark: Any
    df: Any
    bootstrap: str
    settings: Settings = SETTINGS
    cpu: CpuMeter | None = None


@dataclass(frozen=True)
class Outcome:
    """What a write action says itself: rows its tasks saw (``None``: count the broker) and a note."""

    processed: int | None = None
    detail: str = ""


def kafka_options(settings: Settings, defaults: bool = False) -> dict[str, str]:
    """The producer settings as Spark-style ``kafka.*`` options (ours and the built-in sink);
    with ``defaults``, only the codec (each side keeps its own defaults for the rest)."""
    properties = settings.as_properties()
    if defaults:
        properties = {"compression.type": properties["compression.type"]} \
            if settings.compression != "none" else {}
    return {f"kafka.{name}": value for name, value in properties.items()}


def write_ours(mode: str, ctx: Context, topic: str, defaults: bool = False, **options: str) -> Outcome:
    from spark_kafka_sink.spark.sink import KafkaSink

    KafkaSink(**{"kafka.bootstrap.servers": ctx.bootstrap, "topic": topic, "mode": mode,
                 **kafka_options(ctx.settings, defaults), **options}).write(ctx.df)
    return Outcome()


def dead_letter_topic(topic: str) -> str:
    """``ours-tolerant``'s dead-letter topic, created with the contender's topic (untimed)."""
    return f"{topic}-dlq"


def write_ours_tolerant(ctx: Context, topic: str) -> Outcome:
    """``ours-arrow`` with ``errors.tolerance=all`` and a dead-letter topic; no row is bad, so it
    must stay empty (:func:`measure` counts it)."""
    return write_ours("arrow", ctx, topic, **{"errors.tolerance": "all",
                                              "errors.deadletterqueue.topic.name": dead_letter_topic(topic)})


def write_ours_exactly_once(ctx: Context, topic: str) -> Outcome:
    from spark_kafka_sink.spark.sink import KafkaSink

    sink = KafkaSink(**{"kafka.bootstrap.servers": ctx.bootstrap, "topic": topic, "mode": "arrow",
                        "delivery.guarantee": "exactly-once",
                        "transactional.id.prefix": f"bench-{uuid.uuid4().hex[:8]}",
                        **kafka_options(ctx.settings)})
    try:
        sink.write(ctx.df)
    finally:
        sink.close()
    figures = sink.last_metrics or {}
    return Outcome(None, f"{figures.get('transaction-commit-total', 0):.0f} transactions committed "
                         f"in {figures.get('transaction-commit-time-ms', float('nan')):.0f} ms "
                         "(record, commit, record)")


def write_builtin(ctx: Context, topic: str, defaults: bool = False) -> Outcome:
    writer = (ctx.df.write.format("kafka")
              .option("kafka.bootstrap.servers", ctx.bootstrap).option("topic", topic))
    for name, value in kafka_options(ctx.settings, defaults).items():
        writer = writer.option(name, value)
    writer.save()
    return Outcome()


def write_confluent(ctx: Context, topic: str) -> Outcome:
    context = ctx.spark.sparkContext
    sent, waits = context.accumulator(0), context.accumulator(0)
    ctx.df.foreachPartition(partial(confluent_task, ConfluentJob(ctx.bootstrap, topic, ctx.settings.compression),
                                    sent, waits))
    return Outcome(None, f"{waits.value} BufferError waits")


def run_noop_foreach(ctx: Context, topic: str | None) -> Outcome:
    seen = ctx.spark.sparkContext.accumulator(0)
    ctx.df.foreachPartition(partial(count_rows_task, seen))
    return Outcome(seen.value)


def run_noop_arrow(ctx: Context, topic: str | None) -> Outcome:
    counts = ctx.df.mapInArrow(count_batches, "rows long").collect()
    return Outcome(sum(row.rows for row in counts))


RUNNERS: dict[str, Callable[[Context, Any], Outcome]] = {
    "ours-arrow": partial(write_ours, "arrow"), "ours-rows": partial(write_ours, "rows"),
    "ours-eos": write_ours_exactly_once, "ours-tolerant": write_ours_tolerant,
    "builtin": write_builtin, "confluent": write_confluent,
    "ours-defaults": partial(write_ours, "arrow", defaults=True),
    "builtin-defaults": partial(write_builtin, defaults=True),
    "noop-foreach": run_noop_foreach, "noop-arrow": run_noop_arrow,
}


@dataclass(frozen=True)
class Attempt:
    """One contender's run. ``rows``: landed on the broker (no-ops: processed); ``seconds``: the
    write action; ``worker_rss_mb``: the largest busy Python worker's peak (built-in: none)."""

    contender: str
    status: str  # ok | partial | capped | error | not available
    rows: int = 0
    seconds: float | None = None
    rows_per_s: float | None = None
    worker_rss_mb: float | None = None
    detail: str = ""
    cpu: CpuSplit | None = None  # CPU seconds per 1M rows: broker, Spark JVM, Python workers


class Deadline:
    """Cancels the running Spark job group after ``seconds`` (the per-contender cap)."""

    def __init__(self, context: Any, group: str, seconds: float):
        self.fired = threading.Event()
        self._timer = threading.Timer(seconds, self._fire, args=(context, group))
        self._timer.daemon = True
        self._timer.start()

    def _fire(self, context: Any, group: str) -> None:
        self.fired.set()
        context.cancelJobGroup(group)

    def cancel(self) -> None:
        self._timer.cancel()


def measure(contender: str, ctx: Context, args: argparse.Namespace) -> Attempt:
    """Run one contender once, into a fresh topic, under the time cap; count what landed."""
    topic = f"bench-spark-{contender}-{uuid.uuid4().hex[:8]}"
    if contender in WRITES_TO_KAFKA:
        admin.create_topic(ctx.bootstrap, topic, TOPIC_PARTITIONS)
    if contender == "ours-tolerant":
        admin.create_topic(ctx.bootstrap, dead_letter_topic(topic), 1)
    context = ctx.spark.sparkContext
    group = f"bench-{topic}"
    context.setJobGroup(group, LABELS[contender], interruptOnCancel=True)
    peaks = WorkerPeaks() if contender not in USES_CONNECTOR else None
    error: Exception | None = None
    cpu_before = ctx.cpu.read() if ctx.cpu else None
    began = time.monotonic()
    deadline = Deadline(context, group, args.max_seconds)
    try:
        outcome = RUNNERS[contender](ctx, topic)
    except Exception as exc:  # noqa: BLE001 - reported in this contender's row
        outcome, error = Outcome(), exc
    finally:
        seconds = time.monotonic() - began
        cpu = ctx.cpu.read() - cpu_before if ctx.cpu and cpu_before else None
        deadline.cancel()
        rss = peaks.stop() if peaks else None
        context.setJobGroup(f"bench-idle-{uuid.uuid4().hex[:8]}", "idle")
    if contender == "ours-eos":                  # the end offsets count commit markers too
        rows = admin.committed(ctx.bootstrap, topic, TOPIC_PARTITIONS)
    elif contender in WRITES_TO_KAFKA:
        rows = admin.landed(ctx.bootstrap, topic, TOPIC_PARTITIONS)
    else:
        rows = outcome.processed or 0
    status, detail = _status(rows, args.rows, deadline.fired.is_set(), error, args.max_seconds,
                             contender in WRITES_TO_KAFKA)
    if contender == "ours-tolerant":
        outcome = replace(outcome, detail=f"{admin.landed(ctx.bootstrap, dead_letter_topic(topic), 1)} "
                                          "dead letters")
    return Attempt(contender, status, rows, seconds, rows / seconds if seconds else None, rss,
                   "; ".join(filter(None, [outcome.detail, detail])),
                   cpu.per_million(rows) if cpu is not None and rows else None)


def _status(rows: int, wanted: int, capped: bool, error: Exception | None, cap_s: float,
            writes: bool) -> tuple[str, str]:
    if capped:
        counted = "the rate counts what landed by then" if writes else "a cancelled no-op counts no rows"
        return "capped", f"exceeded the {cap_s:g} s cap and was cancelled; {counted}"
    if error is not None:
        first = (str(error).strip().splitlines() or [""])[0]
        return "error", f"{type(error).__name__}: {first[:300]}"
    if rows != wanted:
        return "partial", f"only {rows} of {wanted} rows"
    return "ok", ""


def best(attempts: list[Attempt]) -> Attempt:
    """The fastest complete attempt of a contender (``--repeat``), else its last one."""
    complete = [a for a in attempts if a.status == "ok" and a.rows_per_s]
    return max(complete, key=lambda a: a.rows_per_s) if complete else attempts[-1]


# --- set-up, report, main -----------------------------------------------------------------------

def cached_frame(spark: Any, rows: int, value_size: int) -> Any:
    """``rows`` rows of (key string ``k0..k99``, value string of ``value_size`` ``x``), cached and
    materialised by ``count()`` so no contender pays for building it."""
    from pyspark.sql import functions as F

    df = spark.range(0, rows, 1, DF_PARTITIONS).select(
        F.concat(F.lit("k"), (F.col("id") % 100).cast("string")).alias("key"),
        F.lit("x" * value_size).alias("value")).cache()
    counted = df.count()
    if counted != rows:
        raise RuntimeError(f"the cached frame has {counted} rows, not {rows}")
    return df


def warm_up(spark: Any) -> None:
    """Start both Python worker pools (``foreachPartition``'s and ``mapInArrow``'s) untimed, so the
    first contender does not pay for forking the pyspark daemons."""
    small = spark.range(0, 1000, 1, DF_PARTITIONS)
    small.foreachPartition(_nothing)
    small.mapInArrow(count_batches, "rows long").collect()


def table(rows: list[Attempt], labels: dict[str, str] = LABELS, reference: str = "builtin") -> str:
    """The kept attempts as a table; ``vs built-in`` divides by the ``reference`` contender's rows/s."""
    builtin = next((r.rows_per_s for r in rows if r.contender == reference and r.status == "ok"), None)
    head = f"{'contender':<28}{'rows':>10}{'seconds':>9}{'rows/s':>11}{'vs built-in':>13}" \
           f"{'worker RSS MB':>15}{'CPU s/1M: broker':>18}{'JVM':>6}{'Python':>8}{'total':>7}  status"
    lines = [head, "-" * len(head)]
    for row in rows:
        if row.status == "not available":
            lines.append(f"{labels[row.contender]:<28}not available: {row.detail}")
            continue
        vs = row.rows_per_s / builtin if builtin and row.rows_per_s else None
        cpu = row.cpu
        lines.append(f"{labels[row.contender]:<28}{row.rows:>10}{cell(row.seconds, '.2f'):>9}"
                     f"{cell(row.rows_per_s, ',.0f'):>11}{cell(vs, '.2f'):>13}"
                     f"{cell(row.worker_rss_mb, '.0f'):>15}{cell(cpu and cpu.broker, '.2f'):>18}"
                     f"{cell(cpu and cpu.jvm, '.2f'):>6}{cell(cpu and cpu.python, '.2f'):>8}"
                     f"{cell(cpu and cpu.total, '.2f'):>7}  {row.status}")
    notes = [f"  {labels[r.contender]}: {r.detail}" for r in rows if r.detail and r.status != "not available"]
    return "\n".join(lines + (["notes:"] + notes if notes else []))


@dataclass(frozen=True)
class Ratio:
    """A contender's rows/s over a peer's, from the same run (``None`` if either is missing), with
    both sides' CPU seconds per 1M rows."""

    ours: str
    peer: str
    value: float | None
    ours_cpu: CpuSplit | None = None
    peer_cpu: CpuSplit | None = None

    def line(self, labels: dict[str, str] = LABELS) -> str:
        shown = cell(self.value, '.2f') if self.value else 'n/a'
        text = f"{labels[self.ours]} / {labels[self.peer]}: {shown}"
        if self.ours_cpu and self.peer_cpu:
            a, b = self.ours_cpu, self.peer_cpu
            text += (f"; CPU s per 1M rows {a.total:.2f} vs {b.total:.2f} (broker {a.broker:.2f} vs "
                     f"{b.broker:.2f}, Spark JVM {a.jvm:.2f} vs {b.jvm:.2f}, Python {a.python:.2f} vs "
                     f"{b.python:.2f})")
        return text


RATIO_PAIRS = (("ours-arrow", "builtin"), ("ours-defaults", "builtin-defaults"), ("ours-arrow", "confluent"),
               ("ours-arrow", "noop-arrow"), ("ours-eos", "ours-arrow"))
"""(contender, peer) pairs the closing lines compare: equal settings, both sides' defaults, ..."""


def ratios(rows: list[Attempt], pairs: tuple[tuple[str, str], ...] = RATIO_PAIRS) -> list[Ratio]:
    done = {r.contender: r for r in rows if r.status == "ok" and r.rows_per_s}
    present = {r.contender for r in rows}
    return [Ratio(ours, peer, done[ours].rows_per_s / done[peer].rows_per_s
                  if ours in done and peer in done else None,
                  done[ours].cpu if ours in done else None, done[peer].cpu if peer in done else None)
            for ours, peer in pairs if ours in present and peer in present]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.spark", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000,
                        help="rows in the cached DataFrame (1,000,000)")
    parser.add_argument("--value-size", type=int, default=100, help="value bytes (100)")
    parser.add_argument("--contenders", default=",".join(CONTENDERS),
                        help=f"comma list of {', '.join(CONTENDERS)} ('ours' is 'ours-arrow')")
    parser.add_argument("--max-seconds", type=float, default=180.0,
                        help="cap per contender and attempt (180)")
    parser.add_argument("--repeat", type=int, default=1, help="attempts per contender, the best one kept (1)")
    parser.add_argument("--json", metavar="OUT", help="also write the results to this JSON file")
    parser.add_argument("--codec", default="none", choices=CODECS,
                        help="compression.type of every contender (none)")
    parser.add_argument("--connector-version", metavar="V[,V...]", default=None,
                        help="Spark Kafka connector version(s) to try for the built-in sink, in order "
                             f"(pyspark's own, then {FALLBACK_CONNECTOR})")
    args = parser.parse_args(argv)
    if args.connector_version is None:
        import pyspark

        args.connector_version = f"{pyspark.__version__},{FALLBACK_CONNECTOR}"
    versions = (v.strip() for v in args.connector_version.split(","))
    args.connector_versions = list(dict.fromkeys(v for v in versions if v))
    named = (ALIASES.get(c.strip(), c.strip()) for c in args.contenders.split(",") if c.strip())
    args.contenders = list(dict.fromkeys(named))
    unknown = sorted(set(args.contenders) - set(CONTENDERS))
    if unknown:
        parser.error(f"unknown contender(s) {unknown}; choose from {list(CONTENDERS)}")
    if args.rows < 1 or args.value_size < 0 or args.max_seconds <= 0 or args.repeat < 1:
        parser.error("--rows and --repeat must be >= 1, --value-size >= 0 and --max-seconds > 0")
    return args


@dataclass(frozen=True)
class Report:
    """Everything one run found, as ``--json`` writes it."""

    rows: int
    value_size: int
    df_partitions: int
    topic_partitions: int
    settings: dict[str, str]
    connector: dict[str, Any] | None
    best: list[Attempt]
    attempts: list[Attempt] = field(default_factory=list)
    ratios: list[Ratio] = field(default_factory=list)


def run(args: argparse.Namespace, bootstrap: str, broker_pid: int | None = None) -> Report:
    """Start Spark, cache the frame, run every contender ``--repeat`` times (interleaved, so load
    drift hits all alike); stop Spark in ``finally``."""
    uses_connector = any(c in USES_CONNECTOR for c in args.contenders)
    spark, connector = start_session(args.connector_versions if uses_connector else [])
    if connector is not None:
        print(connector.summary(), flush=True)
    try:
        ctx = Context(spark, cached_frame(spark, args.rows, args.value_size), bootstrap,
                      replace(SETTINGS, compression=args.codec), CpuMeter(broker_pid, spark_jvm()))
        warm_up(spark)
        attempts: dict[str, list[Attempt]] = {c: [] for c in args.contenders}
        for round_ in range(args.repeat):
            for contender in args.contenders:
                if contender in USES_CONNECTOR and connector is not None and not connector.available:
                    attempt = Attempt(contender, "not available", detail=connector.reason)
                else:
                    attempt = measure(contender, ctx, args)
                    if contender in USES_CONNECTOR and connector is not None:
                        which = f"connector {connector.version} on Spark {connector.spark_version}"
                        attempt = replace(attempt, detail="; ".join(filter(None, [which, attempt.detail])))
                    print(f"  [{round_ + 1}/{args.repeat}] {LABELS[contender]}: "
                          f"{cell(attempt.rows_per_s, ',.0f')} rows/s ({attempt.status})", flush=True)
                attempts[contender].append(attempt)
    finally:
        stop_session(spark)
    chosen = [best(attempts[c]) for c in args.contenders]
    return Report(args.rows, args.value_size, DF_PARTITIONS, TOPIC_PARTITIONS, ctx.settings.as_properties(),
                  asdict(connector) if connector else None, chosen,
                  [a for c in args.contenders for a in attempts[c]], ratios(chosen))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from spark_kafka_sink.embedded import EmbeddedKafka

    print(f"{args.rows:,} rows x {args.value_size} B (string key k0..k99, string value), cached, "
          f"{DF_PARTITIONS} partitions, Spark local[2]; one embedded broker, a fresh {TOPIC_PARTITIONS}-"
          f"partition topic per contender; producer settings: " +
          " ".join(f"{k}={v}" for k, v in replace(SETTINGS, compression=args.codec).as_properties().items()) +
          f"; cap {args.max_seconds:.0f} s; best of {args.repeat}", flush=True)
    with EmbeddedKafka(1) as kafka:
        report = run(args, kafka.bootstrap_servers, kafka.nodes[0].pid)
    print()
    print(table(report.best))
    print()
    for ratio in report.ratios:
        print(ratio.line())
    if args.json:
        Path(args.json).write_text(json.dumps(asdict(report), indent=2))
    return 0


if __name__ == "__main__":
    # Re-import under the package name: the task functions then pickle by reference, not by value.
    from bench.spark import main as _main

    sys.exit(_main())
