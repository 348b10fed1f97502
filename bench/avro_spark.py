"""Avro from Spark to Kafka, KafkaSink against Spark's own ``to_avro``: ``python -m bench.avro_spark``.

``--rows`` rows of a 10-field record (a long id, an int, two doubles, three strings, a nullable
string, a timestamp and a decimal(10, 2)), generated in Spark from ``spark.range`` and cached, are
written from Spark ``local[2]`` to one embedded Apache Kafka node, each contender into a fresh
topic of 6 partitions, as the value of each record, Avro-encoded:

- ``spark-avro``: Spark's own ``pyspark.sql.avro.functions.to_avro(struct(...))`` and the
  built-in Kafka sink (``write.format("kafka")``); the ``spark-avro`` and Kafka connector
  packages of the installed pyspark's line come from ``spark.jars.packages`` (bench/spark.py's
  resolution). The plain Avro body, no registry: what Spark can do;
- ``ours-avro``: ``KafkaSink`` in arrow mode with ``value.format=avro`` and
  ``schema.registry.url`` (a ``SchemaRegistry`` of the testing kit): the value column
  ``struct(...)`` of the same fields; the sink derives the schema, registers it under
  ``<topic>-value`` and writes Confluent-framed bodies. Until the sink takes these options its
  row reads ``not available`` and the other one is still measured;
- ``noop-arrow``: ``mapInArrow`` over the same value struct that only counts the rows: what Spark's
  Arrow export to Python costs, the floor of any Python sink of this column.

Both writers use the same producer settings as bench/spark.py (acks=all, linger 5 ms, 256 KiB
batches, idempotence, ``--codec``). Throughput is what landed on the broker (the no-op: the rows
its tasks saw) over the seconds of the action; beside it, the CPU seconds per 1M rows by process
(broker, Spark JVM, Python workers; the registry's in the notes). After the attempts, untimed,
``--sample`` records of each writer are read back with confluent-kafka: Spark's decoded with
fastavro and the schema Spark's ``to_avro`` used, ours with confluent-kafka's ``AvroDeserializer``
against the registry; every decoded record must equal the generated row of its id. The last
lines are the ratios of KafkaSink to Spark and to the no-op.

    python -m bench.avro_spark --rows 50000
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import re
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from . import admin
from .cpu import CpuMeter, proc_stat, spark_jvm
from .peers import SETTINGS, Settings
from .spark import (CODECS, CONNECTOR, DF_PARTITIONS, PROVIDED_BY_SPARK, TOPIC_PARTITIONS, Attempt, Deadline,
                    Packages, Ratio, _status, best, count_batches, kafka_options, ratios, start_session,
                    stop_session, table, warm_up)
from .table import cell
from .workers import WorkerPeaks

CONTENDERS = ("spark-avro", "ours-avro", "noop-arrow")
LABELS = {"spark-avro": "Spark to_avro + built-in", "ours-avro": "KafkaSink arrow avro",
          "noop-arrow": "no-op mapInArrow (struct)"}
WRITES_TO_KAFKA = ("spark-avro", "ours-avro")
RATIO_PAIRS = (("ours-avro", "spark-avro"), ("ours-avro", "noop-arrow"))
FIELDS = ("id", "count", "amount", "weight", "name", "city", "country", "note", "at", "price")
NULLABLE = frozenset({"note"})
WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "a longer value of some thirty bytes", "")
RECORD_NAME = "topLevelRecord"  # to_avro's default record name; the sink derives the same
SAMPLE = 1000
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_ONE_US = datetime.timedelta(microseconds=1)


# --- pure helpers ------------------------------------------------------------------------------

def default_versions(spark_version: str) -> list[str]:
    """The package versions to try: pyspark's own, then each earlier minor line of the same major,
    newest first, as Ivy dynamic revisions (``4.2.+``): a Maven repository may lag behind pyspark,
    and a package of the same major keeps Spark's internal API closest."""
    found = re.match(r"(\d+)\.(\d+)", spark_version)
    if not found:
        return [spark_version]
    major, minor = int(found.group(1)), int(found.group(2))
    return [spark_version, *(f"{major}.{m}.+" for m in range(minor - 1, -1, -1))]


def comparable(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record with its timestamps as microseconds since the epoch (Avro's ``timestamp-micros``;
    what Spark's ``unix_micros`` gives), so decoded and generated rows compare as values."""
    return {name: (value - EPOCH) // _ONE_US if isinstance(value, datetime.datetime) else value
            for name, value in record.items()}


@dataclass(frozen=True)
class Verification:
    """Decoded records compared with the generated rows of their ids: how many were read, how
    many matched, and the first difference (empty when all matched)."""

    sampled: int
    matched: int
    problem: str = ""

    @property
    def ok(self) -> bool:
        return self.sampled > 0 and self.matched == self.sampled

    def summary(self) -> str:
        if self.ok:
            return f"read back: {self.matched}/{self.sampled} sampled records decode to their generated rows"
        return f"read back FAILED: {self.matched}/{self.sampled} matched; {self.problem or 'nothing read'}"


def compare(expected: Mapping[int, Mapping[str, Any]], decoded: list[Mapping[str, Any]]) -> Verification:
    """Each decoded record against ``expected[its id]`` (both as :func:`comparable` values)."""
    matched, problem = 0, ""
    for record in decoded:
        got = comparable(record)
        want = expected.get(got.get("id"))
        if want is None:
            problem = problem or f"id {got.get('id')!r} is not a generated row"
            continue
        want = comparable(want)
        if got == want:
            matched += 1
            continue
        name = next((n for n in sorted(set(want) | set(got)) if got.get(n, ...) != want.get(n, ...)), "?")
        problem = problem or (f"id {got['id']}: field {name!r} decoded as {got.get(name, 'missing')!r}, "
                              f"generated {want.get(name, 'missing')!r}")
    return Verification(len(decoded), matched, problem)


# --- the frame ----------------------------------------------------------------------------------

def _word(index: Any) -> Any:
    from pyspark.sql import functions as F

    choice = F.when(index == 0, WORDS[0])
    for i, word in enumerate(WORDS[1:-1], 1):
        choice = choice.when(index == i, word)
    return choice.otherwise(WORDS[-1])


def record_frame(spark: Any, rows: int) -> Any:
    """``rows`` rows of the 10-field record, as plain columns, computed from the row number (so a
    record read back can be checked against its row), cached and materialised by ``count()``.
    Only ``note`` is nullable (30 % nulls), as in bench/avro_encode.py."""
    import decimal

    from pyspark.sql import functions as F

    def sure(column: Any, default: Any) -> Any:  # ``%`` and casts may give null: Spark says nullable
        return F.coalesce(column, F.lit(default))

    i = F.col("id")
    price = (((i * 7907) % 2_000_000_000 - 1_000_000_000) * 0.01).cast("decimal(10,2)")
    df = spark.range(0, rows, 1, DF_PARTITIONS).select(
        i.alias("id"),
        sure(((i * 7919) % 101_000 - 1000).cast("int"), 0).alias("count"),
        sure((i % 10_007) * 0.0137 + 100.0, 0.0).alias("amount"),
        sure(((i * 31) % 997) * (1 / 997), 0.0).alias("weight"),
        _word((i * 3) % 7).alias("name"),
        _word((i * 5 + 1) % 7).alias("city"),
        _word((i * 11 + 2) % 7).alias("country"),
        F.when(i % 10 >= 3, _word((i * 13 + 3) % 7)).alias("note"),
        F.timestamp_micros(F.lit(1_600_000_000_000_000) + i * 99_991).alias("at"),
        sure(price, decimal.Decimal("0.00")).alias("price"),
    ).cache()
    wrong = [f.name for f in df.schema.fields if f.nullable != (f.name in NULLABLE)]
    if wrong:
        raise RuntimeError(f"the generated columns {wrong} do not have the intended nullability")
    counted = df.count()
    if counted != rows:
        raise RuntimeError(f"the cached frame has {counted} rows, not {rows}")
    return df


def value_struct() -> Any:
    """The value column both contenders encode: ``struct`` of the ten fields."""
    from pyspark.sql import functions as F

    return F.struct(*FIELDS)


def spark_avro_schema(spark: Any, df: Any) -> str:
    """The Avro schema Spark's ``to_avro`` writes the value struct with (``SchemaConverters``, in
    the JVM; classic Spark only), as JSON."""
    struct = df.select(value_struct().alias("value")).schema.fields[0].dataType
    jvm = spark.sparkContext._jvm
    catalyst = jvm.org.apache.spark.sql.types.DataType.fromJson(struct.json())
    return jvm.org.apache.spark.sql.avro.SchemaConverters.toAvroType(catalyst, False, RECORD_NAME, "").toString()


def expected_rows(df: Any, ids: list[int]) -> dict[int, dict[str, Any]]:
    """The generated rows of ``ids``, with ``at`` as microseconds since the epoch."""
    from pyspark.sql import functions as F

    columns = [F.unix_micros("at").alias("at") if name == "at" else F.col(name) for name in FIELDS]
    return {row["id"]: row.asDict() for row in df.where(F.col("id").isin(ids)).select(*columns).collect()}


# --- the contenders -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Context:
    """What both contenders write with."""

    spark: Any
    df: Any
    bootstrap: str
    registry_url: str | None
    settings: Settings = SETTINGS
    cpu: CpuMeter | None = None
    registry_pid: int | None = None


def write_spark_avro(ctx: Context, topic: str) -> int | None:
    from pyspark.sql.avro.functions import to_avro

    writer = (ctx.df.select(to_avro(value_struct()).alias("value")).write.format("kafka")
              .option("kafka.bootstrap.servers", ctx.bootstrap).option("topic", topic))
    for name, value in kafka_options(ctx.settings).items():
        writer = writer.option(name, value)
    writer.save()
    return None


def sink_options(ctx: Context, topic: str) -> dict[str, str]:
    """KafkaSink's options for ``ours-avro``: arrow mode, Avro values with a registry."""
    return {"kafka.bootstrap.servers": ctx.bootstrap, "topic": topic, "mode": "arrow",
            "value.format": "avro", "schema.registry.url": ctx.registry_url or "",
            **kafka_options(ctx.settings)}


def write_ours_avro(ctx: Context, topic: str) -> int | None:
    from spark_kafka_sink.spark.sink import KafkaSink

    KafkaSink(**sink_options(ctx, topic)).write(ctx.df.select(value_struct().alias("value")))
    return None


def run_noop_arrow(ctx: Context, topic: str) -> int | None:
    """The floor of any Python sink of the value struct: ``mapInArrow`` over it that only counts
    the rows of its Arrow batches (bench/spark.py's ``count_batches``); the rows the tasks saw."""
    counts = ctx.df.select(value_struct().alias("value")).mapInArrow(count_batches, "rows long").collect()
    return sum(row.rows for row in counts)


RUNNERS: dict[str, Callable[[Context, str], int | None]] = {
    "spark-avro": write_spark_avro, "ours-avro": write_ours_avro, "noop-arrow": run_noop_arrow}
"""Each contender's action: the rows it processed itself, or ``None`` (count what landed)."""


def unavailable(contender: str, ctx: Context) -> str:
    """Why ``contender`` cannot run here ("" if it can): no registry, or a sink that refuses the
    Avro options (an unknown option: the sink does not take ``value.format`` yet)."""
    if contender != "ours-avro":
        return ""
    if ctx.registry_url is None:
        return "no schema registry"
    from spark_kafka_sink.errors import ConfigError
    from spark_kafka_sink.spark.sink import KafkaSink

    try:
        KafkaSink(**sink_options(ctx, "bench-avro-probe"))
    except ConfigError as exc:
        message = (str(exc).strip().splitlines() or [""])[0]
        if message.startswith("unknown option"):
            return f"pending: KafkaSink does not take the Avro options yet ({message.split('. ')[0][:120]})"
        raise
    return ""


def _cpu_seconds(pid: int | None) -> float:
    stat = proc_stat(pid) if pid else None
    return stat.own / os.sysconf("SC_CLK_TCK") if stat else 0.0


def measure(contender: str, ctx: Context, args: argparse.Namespace) -> tuple[Attempt, str]:
    """One write of ``contender`` into a fresh topic under the time cap; the attempt and its topic
    (``""`` for the no-op, which writes nothing)."""
    writes = contender in WRITES_TO_KAFKA
    topic = f"bench-avro-{contender}-{uuid.uuid4().hex[:8]}" if writes else ""
    if writes:
        admin.create_topic(ctx.bootstrap, topic, TOPIC_PARTITIONS)
    context = ctx.spark.sparkContext
    group = f"bench-{topic}"
    context.setJobGroup(group, LABELS[contender], interruptOnCancel=True)
    peaks = WorkerPeaks() if contender != "spark-avro" else None
    processed: int | None = None
    error: Exception | None = None
    cpu_before = ctx.cpu.read() if ctx.cpu else None
    registry_before = _cpu_seconds(ctx.registry_pid)
    began = time.monotonic()
    deadline = Deadline(context, group, args.max_seconds)
    try:
        processed = RUNNERS[contender](ctx, topic)
    except Exception as exc:  # noqa: BLE001 - reported in this contender's row
        error = exc
    finally:
        seconds = time.monotonic() - began
        cpu = ctx.cpu.read() - cpu_before if ctx.cpu and cpu_before else None
        registry_cpu = _cpu_seconds(ctx.registry_pid) - registry_before
        deadline.cancel()
        rss = peaks.stop() if peaks else None
        context.setJobGroup(f"bench-idle-{uuid.uuid4().hex[:8]}", "idle")
    rows = admin.landed(ctx.bootstrap, topic, TOPIC_PARTITIONS) if writes else processed or 0
    status, detail = _status(rows, args.rows, deadline.fired.is_set(), error, args.max_seconds, writes)
    if ctx.registry_pid and contender == "ours-avro":
        detail = "; ".join(filter(None, [f"registry CPU {registry_cpu:.2f} s", detail]))
    return Attempt(contender, status, rows, seconds, rows / seconds if seconds else None, rss, detail,
                   cpu.per_million(rows) if cpu is not None and rows else None), topic


# --- reading back -----------------------------------------------------------------------------------

def read_sample(bootstrap: str, topic: str, limit: int, timeout_s: float = 30.0) -> list[bytes]:
    """Up to ``limit`` record values of ``topic``, from the start of its partitions (confluent-kafka)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-avro-sample",
                         "enable.auto.commit": False})
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(TOPIC_PARTITIONS)])
        while len(values) < limit and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=limit - len(values), timeout=0.5):
                if message.error() is None:
                    values.append(message.value())
        return values
    finally:
        consumer.close()


def decode_spark(values: list[bytes], schema_json: str) -> list[dict[str, Any]]:
    """Plain Avro bodies, with the schema Spark wrote them with (fastavro)."""
    import fastavro

    parsed = fastavro.parse_schema(json.loads(schema_json))
    return [fastavro.schemaless_reader(io.BytesIO(value), parsed) for value in values]


def decode_registry(values: list[bytes], topic: str, registry_conf: dict[str, Any]) -> list[dict[str, Any]]:
    """Confluent-framed bodies, through confluent-kafka's ``AvroDeserializer`` and the registry."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserializer = AvroDeserializer(SchemaRegistryClient(registry_conf))
    context = SerializationContext(topic, MessageField.VALUE)
    return [deserializer(value, context) for value in values]


def registered_schema(registry_conf: dict[str, Any], subject: str) -> str | None:
    """The latest schema of ``subject`` (``None`` if the registry has none)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient, SchemaRegistryError

    try:
        return SchemaRegistryClient(registry_conf).get_latest_version(subject).schema.schema_str
    except SchemaRegistryError:
        return None


def verify(contender: str, ctx: Context, topic: str, limit: int, spark_schema: str | None,
           registry_conf: dict[str, Any] | None) -> tuple[Verification, str]:
    """Read ``limit`` records back, decode them as a consumer would, compare with the generated
    rows; with a note on the schema (ours: whether the registered one is Spark's)."""
    values = read_sample(ctx.bootstrap, topic, limit)
    note = ""
    try:
        if contender == "spark-avro":
            if spark_schema is None:
                return Verification(len(values), 0, "Spark's Avro schema could not be read"), note
            decoded = decode_spark(values, spark_schema)
        else:
            decoded = decode_registry(values, topic, registry_conf or {})
            stored = registered_schema(registry_conf or {}, f"{topic}-value")
            if stored is not None and spark_schema is not None:
                same = json.loads(stored) == json.loads(spark_schema)
                note = f"subject {topic}-value holds {'the same schema as' if same else 'a schema other than'} " \
                       "Spark's to_avro"
    except Exception as exc:  # noqa: BLE001 - reported as a failed read-back
        return Verification(len(values), 0, f"decoding failed: {type(exc).__name__}: {exc}"[:300]), note
    ids = [record["id"] for record in decoded if isinstance(record, Mapping) and "id" in record]
    return compare(expected_rows(ctx.df, ids), decoded), note


# --- set-up, report, main -----------------------------------------------------------------------------

def resolved_versions(spark: Any) -> str:
    """The versions Ivy put on the classpath (``spark.jars``), e.g. ``spark-avro 4.2.0``: a
    dynamic revision such as ``4.2.+`` says only which line was asked for."""
    jars = spark.sparkContext.getConf().get("spark.jars", "")
    found = re.findall(r"org\.apache\.spark_(spark-avro|spark-sql-kafka-0-10)_[\d.]+-([^/,]+?)\.jar", jars)
    return ", ".join(f"{name} {version}" for name, version in sorted(set(found)))


def scala_suffix() -> str:
    """The Scala line of the installed pyspark (its ``spark-core_<scala>`` jar), for the packages."""
    import pyspark

    for jar in (Path(pyspark.__file__).parent / "jars").glob("spark-core_*.jar"):
        return jar.name.split("_", 1)[1].split("-", 1)[0]
    return "2.13" if int(pyspark.__version__.split(".")[0]) >= 4 else "2.12"


def packages() -> Packages:
    """Spark's Kafka connector and ``spark-avro``, of one version and the installed Scala line;
    left out: what Spark ships of their dependencies (``spark-tags``, ``xz`` beside bench/spark.py's
    list)."""
    scala = scala_suffix()
    kafka = CONNECTOR.rsplit("_", 1)[0] + f"_{scala}"
    provided = tuple(p.replace("_2.13", f"_{scala}") for p in PROVIDED_BY_SPARK)
    return Packages((kafka, f"org.apache.spark:spark-avro_{scala}"),
                    provided + (f"org.apache.spark:spark-tags_{scala}", "org.tukaani:xz"),
                    "Spark's Kafka connector and spark-avro")


@dataclass(frozen=True)
class Report:
    """Everything one run found, as ``--json`` writes it."""

    rows: int
    settings: dict[str, str]
    packages: dict[str, Any] | None
    spark_conf: dict[str, str]
    spark_schema: str | None
    best: list[Attempt]
    attempts: list[Attempt] = field(default_factory=list)
    verifications: dict[str, dict[str, Any]] = field(default_factory=dict)
    ratios: list[Ratio] = field(default_factory=list)


def run(args: argparse.Namespace, bootstrap: str, broker_pid: int | None, registry: Any | None,
        registry_problem: str) -> Report:
    """Start Spark with the packages, cache the frame, run each contender ``--repeat`` times
    (interleaved), read a sample of each kept write back; stop Spark in ``finally``."""
    wants_spark = "spark-avro" in args.contenders
    spark, connector = start_session(args.package_versions if wants_spark else [], packages())
    for name, value in args.spark_conf.items():
        spark.conf.set(name, value)
    resolved = resolved_versions(spark) if connector is not None and connector.available else ""
    if connector is not None:
        print(connector.summary() + (f"; resolved: {resolved}" if resolved else ""), flush=True)
    attempts: dict[str, list[tuple[Attempt, str]]] = {c: [] for c in args.contenders}
    checks: dict[str, dict[str, Any]] = {}
    spark_schema = None
    settings = replace(SETTINGS, compression=args.codec)
    try:
        ctx = Context(spark, record_frame(spark, args.rows), bootstrap, registry.url if registry else None,
                      settings, CpuMeter(broker_pid, spark_jvm()), registry.pid if registry else None)
        if connector is not None and connector.available:
            try:
                spark_schema = spark_avro_schema(spark, ctx.df)
            except Exception as exc:  # noqa: BLE001 - the read-back of Spark's side says so
                print(f"Spark's Avro schema could not be read: {type(exc).__name__}: {exc}"[:300], flush=True)
        warm_up(spark)
        for round_ in range(args.repeat):
            for contender in args.contenders:
                if contender == "spark-avro" and (connector is None or not connector.available):
                    why = connector.reason if connector else "no package version to try"
                    attempts[contender].append((Attempt(contender, "not available", detail=why), ""))
                    continue
                why = registry_problem if contender == "ours-avro" and registry_problem else \
                    unavailable(contender, ctx)
                if why:
                    attempts[contender].append((Attempt(contender, "not available", detail=why), ""))
                    continue
                attempt, topic = measure(contender, ctx, args)
                if contender == "spark-avro":
                    which = f"{resolved or 'packages ' + connector.version} on Spark {connector.spark_version}"
                    attempt = replace(attempt, detail="; ".join(filter(None, [which, attempt.detail])))
                print(f"  [{round_ + 1}/{args.repeat}] {LABELS[contender]}: "
                      f"{cell(attempt.rows_per_s, ',.0f')} rows/s ({attempt.status})", flush=True)
                attempts[contender].append((attempt, topic))
        for contender in args.contenders:
            kept = best([a for a, _ in attempts[contender]])
            topic = next(t for a, t in attempts[contender] if a is kept)
            if kept.rows and topic:
                check, note = verify(contender, ctx, topic, args.sample, spark_schema,
                                     registry.client_conf() if registry else None)
                checks[contender] = {**asdict(check), "note": note}
    finally:
        stop_session(spark)
    chosen = [best([a for a, _ in attempts[c]]) for c in args.contenders]
    chosen = [replace(a, detail="; ".join(filter(None, [a.detail, _check_note(checks.get(a.contender))])))
              for a in chosen]
    return Report(args.rows, settings.as_properties(), asdict(connector) if connector else None,
                  dict(args.spark_conf), spark_schema,
                  chosen, [a for c in args.contenders for a, _ in attempts[c]], checks,
                  ratios(chosen, RATIO_PAIRS))


def _check_note(check: dict[str, Any] | None) -> str:
    if not check:
        return ""
    summary = Verification(check["sampled"], check["matched"], check["problem"]).summary()
    return "; ".join(filter(None, [summary, check.get("note", "")]))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.avro_spark", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows in the cached DataFrame (1,000,000)")
    parser.add_argument("--contenders", default=",".join(CONTENDERS), help=f"comma list of {', '.join(CONTENDERS)}")
    parser.add_argument("--max-seconds", type=float, default=180.0, help="cap per contender and attempt (180)")
    parser.add_argument("--repeat", type=int, default=3, help="attempts per contender, interleaved, the best one kept (3)")
    parser.add_argument("--codec", default="none", choices=CODECS, help="compression.type of both (none)")
    parser.add_argument("--sample", type=int, default=SAMPLE, help=f"records read back per contender ({SAMPLE})")
    parser.add_argument("--package-version", metavar="V[,V...]", default=None,
                        help="version(s) of spark-avro and the Kafka connector to try, in order (pyspark's own, "
                             "then the earlier minor lines of its major)")
    parser.add_argument("--spark-conf", metavar="KEY=VALUE", action="append", default=[],
                        help="a Spark SQL setting for the session, e.g. "
                             "spark.sql.execution.arrow.maxBytesPerBatch=2147483647 (repeatable)")
    parser.add_argument("--json", metavar="OUT", help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    pairs = [item.partition("=") for item in args.spark_conf]
    if any(not key.strip() or not sep for key, sep, _ in pairs):
        parser.error(f"--spark-conf takes KEY=VALUE, got {args.spark_conf}")
    args.spark_conf = {key.strip(): value.strip() for key, _, value in pairs}
    if args.package_version is None:
        import pyspark

        args.package_versions = default_versions(pyspark.__version__)
    else:
        args.package_versions = list(dict.fromkeys(v.strip() for v in args.package_version.split(",") if v.strip()))
    args.contenders = list(dict.fromkeys(c.strip() for c in args.contenders.split(",") if c.strip()))
    unknown = sorted(set(args.contenders) - set(CONTENDERS))
    if unknown:
        parser.error(f"unknown contender(s) {unknown}; choose from {list(CONTENDERS)}")
    if args.rows < 1 or args.repeat < 1 or args.sample < 1 or args.max_seconds <= 0:
        parser.error("--rows, --repeat and --sample must be >= 1 and --max-seconds > 0")
    return args


def start_registry(stack: ExitStack) -> tuple[Any | None, str]:
    """The testing kit's schema registry, closed with ``stack``; or ``None`` and why not."""
    from spark_kafka_sink.testing import SchemaRegistry

    try:
        return stack.enter_context(SchemaRegistry()), ""
    except Exception as exc:  # noqa: BLE001 - reported as ours-avro's row
        return None, f"the schema registry did not start: {type(exc).__name__}: " \
                     f"{(str(exc).strip().splitlines() or [''])[0][:200]}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from spark_kafka_sink.embedded import EmbeddedKafka

    settings = replace(SETTINGS, compression=args.codec).as_properties()
    print(f"{args.rows:,} rows of a 10-field record, generated in Spark and cached, {DF_PARTITIONS} partitions, "
          f"Spark local[2]; one embedded broker, a fresh {TOPIC_PARTITIONS}-partition topic per contender; "
          "producer settings: " + " ".join(f"{k}={v}" for k, v in settings.items()) +
          f"; cap {args.max_seconds:.0f} s; best of {args.repeat}; {args.sample} records read back each" +
          "".join(f"; {key}={value}" for key, value in args.spark_conf.items()),
          flush=True)
    with ExitStack() as stack:
        kafka = stack.enter_context(EmbeddedKafka(1))
        registry, problem = start_registry(stack) if "ours-avro" in args.contenders else (None, "")
        if registry is not None:
            print(f"schema registry at {registry.url}, started in {registry.start_seconds:.1f} s", flush=True)
        report = run(args, kafka.bootstrap_servers, kafka.nodes[0].pid, registry, problem)
    print()
    print(table(report.best, LABELS, reference="spark-avro"))
    print()
    for ratio in report.ratios:
        target = " (target >= 1.0)" if (ratio.ours, ratio.peer) == RATIO_PAIRS[0] else ""
        print(ratio.line(LABELS) + target)
    if args.json:
        Path(args.json).write_text(json.dumps(asdict(report), indent=2))
    failed = [c for c, check in report.verifications.items() if not Verification(
        check["sampled"], check["matched"], check["problem"]).ok]
    return 1 if failed else 0


if __name__ == "__main__":
    # Re-import under the package name: the task functions then pickle by reference, not by value.
    from bench.avro_spark import main as _main

    sys.exit(_main())
