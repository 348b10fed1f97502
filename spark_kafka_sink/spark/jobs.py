"""The shared body of ``jobs/stream_to_kafka.py`` and ``jobs/batch_to_kafka.py``.

The two scripts are thin so that everything here can be tested without ``spark-submit``:

- :func:`parse_job_args` turns the command line into a :class:`JobSpec`. Every mistake that needs
  no data (a bad trigger, a missing Kafka address, an unknown producer option) fails here, before
  a JVM starts, with an error naming the argument.
- :func:`resolve_columns` checks ``--key-column`` / ``--value-column`` against the source's columns
  (again before anything is written); :func:`to_kafka_frame` then shapes any DataFrame into the
  sink's ``key`` / ``value`` columns (default value: the whole row as JSON, ``to_json(struct(*))``).
- :func:`run_stream` / :func:`run_batch` write through :class:`~spark_kafka_sink.KafkaSink`
  (``foreachBatch(sink)`` for the stream) and return a :class:`JobResult`: rows written, seconds,
  and the sink's metrics, which :func:`summary` prints and :func:`write_metrics_json` saves.
- :func:`spark_submit_command` is how the demo and the tests launch the scripts: Spark as in
  DESIGN.md §7 (the venv's Python for workers, loopback, ``conf/spark-defaults.conf`` and the
  quiet ``conf/log4j2.properties`` added to the driver's Java options already set there).

Sink options come from three places, later ones winning: the producer properties file
(``conf/producer.properties``; key ``K`` becomes ``kafka.K``), then ``--option key=value``, then
``--bootstrap`` / ``--topic``. pyspark is imported inside the functions that need it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any, Mapping, Sequence

from ..errors import ConfigError, JobError
from ..properties import PropertiesError, load_properties
from .options import KAFKA_PREFIX, TOPIC, SinkConfig

__all__ = [
    "BOOTSTRAP_ENV", "FORMATS", "BatchReport", "Columns", "JobError", "JobResult", "JobSpec",
    "Source", "SparkSubmit", "Trigger", "main", "parse_job_args", "parse_trigger",
    "resolve_columns", "run_batch", "run_stream", "spark_submit_command", "summary",
    "to_kafka_frame", "total_metrics", "write_metrics_json",
]

BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP"
FORMATS = ("json", "csv", "parquet")
AVAILABLE_NOW = "availableNow"
_POLL_S = 1.0

# Spark's interval syntax for processingTime triggers: "10 seconds", "1 minute 30 seconds".
_INTERVAL = re.compile(r"(\s*[0-9]+\s+(millisecond|second|minute|hour|day)s?)+\s*", re.IGNORECASE)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


# --- what the command line asks for -------------------------------------------------------------

@dataclass(frozen=True)
class Trigger:
    """When micro-batches run: ``availableNow`` (everything there now, then stop) or every
    ``interval`` (Spark's ``processingTime``, e.g. ``"10 seconds"``; runs until stopped)."""

    interval: str | None = None

    @property
    def available_now(self) -> bool:
        return self.interval is None

    def writer_kwargs(self) -> dict[str, Any]:
        """The keywords of ``DataStreamWriter.trigger``."""
        return {"availableNow": True} if self.available_now else {"processingTime": self.interval}

    def __str__(self) -> str:
        return AVAILABLE_NOW if self.available_now else self.interval or ""


def parse_trigger(text: str) -> Trigger:
    """``availableNow`` (any case) or an interval such as ``10 seconds``; ``JobError`` otherwise."""
    if text.strip().lower() == AVAILABLE_NOW.lower():
        return Trigger()
    if _INTERVAL.fullmatch(text):
        return Trigger(" ".join(text.split()))
    raise JobError(f"--trigger {text!r}: use {AVAILABLE_NOW!r} or an interval such as '10 seconds' "
                   f"or '1 minute'")


@dataclass(frozen=True)
class Source:
    """The files to read: a directory (or any Spark path) of ``format`` files. ``schema`` is a
    DDL string (``"id INT, name STRING"``) or ``None`` to infer it; ``max_files_per_trigger``
    caps the files per micro-batch (streaming only)."""

    path: str
    format: str
    schema: str | None = None
    max_files_per_trigger: int | None = None

    def reader_options(self) -> dict[str, str]:
        """Options for every read of this source: CSV files have a header line."""
        return {"header": "true"} if self.format == "csv" else {}


@dataclass(frozen=True)
class Columns:
    """Which source columns become the record key and value (``None``: no key / the whole row
    as JSON)."""

    key: str | None = None
    value: str | None = None


@dataclass(frozen=True)
class JobSpec:
    """Everything one run of a job needs, validated. ``sink_options`` are complete
    ``KafkaSink`` options (bootstrap servers and topic included)."""

    job: str
    source: Source
    topic: str
    columns: Columns
    sink_options: Mapping[str, str]
    checkpoint: str | None = None
    trigger: Trigger | None = None
    metrics_json: str | None = None
    timeout_s: float | None = None

    @property
    def streaming(self) -> bool:
        return self.checkpoint is not None

    @property
    def bootstrap(self) -> str:
        return self.sink_options[KAFKA_PREFIX + "bootstrap.servers"]


def _parser(job: str, streaming: bool, default_properties: Path | None) -> argparse.ArgumentParser:
    what = ("Stream the files of a directory to a Kafka topic (Structured Streaming, foreachBatch)"
            if streaming else "Write the files of a directory to a Kafka topic (one batch job)")
    parser = argparse.ArgumentParser(prog=job, description=f"{what} with spark-kafka-sink's KafkaSink.")
    parser.add_argument("--source", required=True, metavar="DIR", help="directory of input files")
    parser.add_argument("--format", default="json", choices=FORMATS,
                        help="input file format (default json: JSON lines; csv has a header line)")
    parser.add_argument("--schema", metavar="DDL",
                        help="input schema as DDL, e.g. 'id INT, name STRING' (default: inferred "
                             "once from the files there)")
    parser.add_argument("--topic", required=True, help="the Kafka topic to write to")
    parser.add_argument("--bootstrap", metavar="HOST:PORT[,...]",
                        help=f"Kafka bootstrap servers (default: ${BOOTSTRAP_ENV})")
    parser.add_argument("--key-column", metavar="COL", help="column for the record key (default: no key)")
    parser.add_argument("--value-column", metavar="COL",
                        help="column for the record value (default: the whole row as JSON)")
    if streaming:
        parser.add_argument("--checkpoint", required=True, metavar="DIR",
                            help="the query's checkpoint directory (where a restart resumes)")
        parser.add_argument("--trigger", default=AVAILABLE_NOW, metavar="WHEN",
                            help=f"{AVAILABLE_NOW!r} (default: what is there now, then stop) or an "
                                 f"interval such as '10 seconds' (run until Ctrl-C)")
        parser.add_argument("--max-files-per-trigger", type=int, metavar="N",
                            help="at most N files per micro-batch (default: Spark's, no limit)")
        parser.add_argument("--timeout", type=float, metavar="SECONDS",
                            help="stop the query and fail after this long (default: no limit)")
    shown = default_properties if default_properties is not None else "none"
    parser.add_argument("--producer-properties", metavar="PATH",
                        help=f"Java properties file of producer settings, each becoming a "
                             f"kafka.<name> sink option (default: {shown})")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra sink option, e.g. kafka.linger.ms=10 (repeatable; "
                             "overrides the properties file)")
    parser.add_argument("--metrics-json", metavar="PATH",
                        help="write rows, seconds and the sink metrics there as JSON at the end")
    return parser


def parse_job_args(argv: Sequence[str], *, streaming: bool, default_properties: Path | None = None,
                   environ: Mapping[str, str] | None = None) -> JobSpec:
    """The :class:`JobSpec` for a command line. Usage errors exit as argparse does (status 2);
    everything else is a :class:`JobError` naming the argument."""
    job = "stream_to_kafka" if streaming else "batch_to_kafka"
    args = _parser(job, streaming, default_properties).parse_args(list(argv))
    environ = os.environ if environ is None else environ
    source = _source(args, streaming)
    trigger = parse_trigger(args.trigger) if streaming else None
    if streaming and args.timeout is not None and args.timeout <= 0:
        raise JobError(f"--timeout must be more than 0 seconds, got {args.timeout}")
    properties = _producer_properties(args.producer_properties, default_properties)
    bootstrap = (args.bootstrap or environ.get(BOOTSTRAP_ENV, "").strip()
                 or properties.pop("bootstrap.servers", None))
    if not bootstrap:
        raise JobError(f"no Kafka address: pass --bootstrap HOST:PORT[,HOST:PORT...] or set "
                       f"{BOOTSTRAP_ENV}")
    options = _sink_options(properties, args.option, bootstrap, args.topic)
    return JobSpec(
        job=job, source=source, topic=options[TOPIC],
        columns=Columns(_blank_is_none(args.key_column, "--key-column"),
                        _blank_is_none(args.value_column, "--value-column")),
        sink_options=MappingProxyType(options),
        checkpoint=args.checkpoint if streaming else None, trigger=trigger,
        metrics_json=args.metrics_json, timeout_s=args.timeout if streaming else None)


def _blank_is_none(value: str | None, flag: str) -> str | None:
    if value is not None and not value.strip():
        raise JobError(f"{flag} must name a column, got an empty name")
    return value


def _source(args: argparse.Namespace, streaming: bool) -> Source:
    path = args.source
    if not _SCHEME.match(path) and not Path(path).exists():
        raise JobError(f"--source {path!r}: no such directory")
    max_files = getattr(args, "max_files_per_trigger", None)
    if max_files is not None and max_files < 1:
        raise JobError(f"--max-files-per-trigger must be at least 1, got {max_files}")
    schema = args.schema.strip() if args.schema else None
    return Source(path, args.format, schema or None, max_files if streaming else None)


def _producer_properties(given: str | None, default: Path | None) -> dict[str, str]:
    """The properties file's settings: the given file (which must exist), else the default one
    if it exists, else none."""
    if given is None and (default is None or not default.is_file()):
        return {}
    path = Path(given) if given is not None else default
    try:
        loaded = load_properties(path)
    except FileNotFoundError:
        raise JobError(f"--producer-properties {str(path)!r}: no such file") from None
    except (OSError, PropertiesError) as error:
        raise JobError(f"--producer-properties: {error}") from None
    for key in loaded:
        if key.lower().startswith(KAFKA_PREFIX):
            raise JobError(f"--producer-properties {str(path)!r}: key {key!r}: write producer "
                           f"properties without the {KAFKA_PREFIX!r} prefix (it is added)")
    return dict(loaded)


_OWN_FLAGS = {TOPIC: "--topic", KAFKA_PREFIX + "bootstrap.servers": "--bootstrap",
              "checkpointlocation": "--checkpoint"}


def _sink_options(properties: Mapping[str, str], extra: Sequence[str], bootstrap: str,
                  topic: str) -> dict[str, str]:
    options = {KAFKA_PREFIX + key.lower(): value for key, value in properties.items()}
    for item in extra:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise JobError(f"--option {item!r}: write it as KEY=VALUE, e.g. kafka.linger.ms=10")
        lower = name.lower()
        if lower in _OWN_FLAGS:
            raise JobError(f"--option {name}: use {_OWN_FLAGS[lower]} instead")
        options[lower if lower.startswith(KAFKA_PREFIX) else name] = value.strip()
    options[KAFKA_PREFIX + "bootstrap.servers"] = bootstrap
    options[TOPIC] = topic
    try:
        config = SinkConfig.from_options(options)
    except ConfigError as error:
        raise JobError(f"sink options (--producer-properties, --option): {error}") from None
    options[TOPIC] = config.topic or topic  # trimmed, as the sink uses it
    return options


# --- shaping the DataFrame ---------------------------------------------------------------------

def resolve_columns(columns: Columns, available: Sequence[str]) -> Columns:
    """``columns`` with each name as the source spells it (Spark matches names without case);
    ``JobError`` naming the flag and listing the source's columns for a name it lacks."""

    def find(flag: str, name: str | None) -> str | None:
        if name is None:
            return None
        if name in available:
            return name
        matches = [col for col in available if col.lower() == name.lower()]
        if len(matches) == 1:
            return matches[0]
        listed = ", ".join(available) if available else "(none)"
        raise JobError(f"{flag} {name!r}: the source has no such column; its columns are: {listed}")

    return Columns(find("--key-column", columns.key), find("--value-column", columns.value))


def to_kafka_frame(df: Any, columns: Columns) -> Any:
    """``df`` as the sink's ``key`` (if a key column is given) and ``value`` columns.

    Text and binary columns are written as they are; structs, arrays and maps as JSON; anything
    else cast to string. Without a value column, the value is the whole row as JSON
    (``to_json(struct(*))``, with the key column still in it).
    """
    from pyspark.sql import functions as F

    resolved = resolve_columns(columns, df.columns)
    types = {f.name: f.dataType for f in df.schema.fields}
    if resolved.value is None:
        value = F.to_json(F.struct(*[_col(name) for name in df.columns]))
    else:
        value = _as_text_or_bytes(resolved.value, types[resolved.value])
    selected = [value.alias("value")]
    if resolved.key is not None:
        selected.insert(0, _as_text_or_bytes(resolved.key, types[resolved.key]).alias("key"))
    return df.select(*selected)


def _col(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")  # names with dots or spaces stay one column


def _as_text_or_bytes(name: str, data_type: Any) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructType

    column = _col(name)
    if isinstance(data_type, (StringType, BinaryType)):
        return column
    if isinstance(data_type, (StructType, ArrayType, MapType)):
        return F.to_json(column)
    return column.cast("string")


# --- reading the source ------------------------------------------------------------------------

def read_batch(spark: Any, source: Source) -> Any:
    """The source as a batch DataFrame (CSV with a header line and inferred column types)."""
    reader = spark.read.format(source.format).options(**source.reader_options())
    if source.schema:
        reader = reader.schema(source.schema)
    elif source.format == "csv":
        reader = reader.option("inferSchema", "true")
    return reader.load(source.path)


def read_stream(spark: Any, source: Source) -> Any:
    """The source as a streaming DataFrame. A file stream needs its schema up front: the given
    DDL, or the one a batch read of the files there now infers."""
    schema = source.schema or _inferred_schema(spark, source)
    reader = spark.readStream.format(source.format).options(**source.reader_options()).schema(schema)
    if source.max_files_per_trigger is not None:
        reader = reader.option("maxFilesPerTrigger", str(source.max_files_per_trigger))
    return reader.load(source.path)


def _inferred_schema(spark: Any, source: Source) -> Any:
    local = Path(source.path)
    if not _SCHEME.match(source.path) and local.is_dir() and not any(
            not p.name.startswith(("_", ".")) for p in local.iterdir()):
        raise JobError(f"--source {source.path!r} has no files to infer the schema from; add files "
                       f"or pass --schema 'col TYPE, ...'")
    return read_batch(spark, source).schema


# --- running ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BatchReport:
    """One micro-batch as the job saw it: rows Spark read and rows the sink wrote."""

    batch_id: int
    input_rows: int
    rows_written: int | None
    seconds: float


@dataclass(frozen=True)
class JobResult:
    """What a job did. ``rows_written`` is the sink's ``record-send-total`` over the run (``None``
    where the sink collects no metrics, e.g. Spark Connect); ``seconds`` is the writing time
    (Spark session start-up excluded); ``metrics_history`` holds ``(batch_id, metrics)`` as the
    sink published them (``batch_id`` ``None`` for a batch write)."""

    job: str
    topic: str
    rows_written: int | None
    seconds: float
    batches: int
    last_metrics: Mapping[str, float] | None
    metrics_history: tuple[tuple[int | None, Mapping[str, float]], ...]
    input_rows: int | None = None
    stopped_by_user: bool = False

    @property
    def rows_per_second(self) -> float | None:
        if self.rows_written is None or self.seconds <= 0:
            return None
        return self.rows_written / self.seconds

    @property
    def metrics_total(self) -> dict[str, float] | None:
        return total_metrics([m for _, m in self.metrics_history]) if self.metrics_history else None

    def to_json_dict(self) -> dict[str, Any]:
        """A JSON-ready view (NaN, e.g. the latency of a batch without requests, becomes null)."""
        return _json_safe({
            "job": self.job, "topic": self.topic, "rows_written": self.rows_written,
            "input_rows": self.input_rows, "seconds": round(self.seconds, 3),
            "rows_per_second": self.rows_per_second, "batches": self.batches,
            "stopped_by_user": self.stopped_by_user,
            "metrics_total": self.metrics_total,
            "last_metrics": dict(self.last_metrics) if self.last_metrics is not None else None,
            "metrics_history": [{"batch_id": b, "metrics": dict(m)} for b, m in self.metrics_history],
        })


def total_metrics(history: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The sink metrics of several writes combined: ``*-total`` figures add, ``*-max`` take the
    largest, and ``*-avg`` figures are weighted by each write's ``request-total`` (for
    ``request-*``) or ``record-send-total`` (others); a NaN average (no requests) weighs nothing."""
    out: dict[str, float] = {}
    weighted: dict[str, list[float]] = {}  # name -> [sum of value * weight, sum of weights]
    for metrics in history:
        for name, value in metrics.items():
            if name.endswith("-avg"):
                weight = float(metrics.get("request-total" if name.startswith("request-")
                                           else "record-send-total", 0) or 0)
                acc = weighted.setdefault(name, [0.0, 0.0])
                if weight and not math.isnan(value):
                    acc[0] += value * weight
                    acc[1] += weight
            elif name.endswith("-max"):
                out[name] = max(out.get(name, value), value)
            else:
                out[name] = out.get(name, 0) + value
    for name, (total, weight) in weighted.items():
        out[name] = total / weight if weight else math.nan
    return out


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _sink(spec: JobSpec) -> Any:
    from .sink import KafkaSink

    return KafkaSink(dict(spec.sink_options))


def run_batch(spark: Any, spec: JobSpec) -> JobResult:
    """Read the source once and write it with ``KafkaSink.write``."""
    sink = _sink(spec)
    frame = to_kafka_frame(read_batch(spark, spec.source), spec.columns)
    started = time.monotonic()
    sink.write(frame)
    seconds = time.monotonic() - started
    last = sink.last_metrics
    return JobResult(spec.job, spec.topic, _sent(last), seconds, 1, last, tuple(sink.metrics_history))


def run_stream(spark: Any, spec: JobSpec, progress: IO[str] | None = None) -> JobResult:
    """Run the streaming query with ``foreachBatch(KafkaSink(...))`` until it ends (availableNow)
    or is interrupted (Ctrl-C, for an interval trigger), printing one line per micro-batch to
    ``progress`` (default stderr). ``JobError`` if ``--timeout`` runs out first."""
    progress = sys.stderr if progress is None else progress
    sink = _sink(spec)
    frame = to_kafka_frame(read_stream(spark, spec.source), spec.columns)
    trigger = spec.trigger or Trigger()
    started = time.monotonic()
    query = (frame.writeStream.foreachBatch(sink).option("checkpointLocation", spec.checkpoint)
             .trigger(**trigger.writer_kwargs()).start())
    watcher = _BatchWatcher(query, sink, progress)
    stopped_by_user = False
    try:
        watcher.await_end(spec.timeout_s, started)
    except KeyboardInterrupt:
        stopped_by_user = True
        print(f"{spec.job}: interrupted; stopping the query", file=progress, flush=True)
    finally:
        _stop(query, stopped_by_user)
    seconds = time.monotonic() - started
    if stopped_by_user:
        watcher.collect_sink_only()  # Ctrl-C reached the JVM too: Spark may be gone already
    else:
        watcher.collect()
    reports = watcher.reports
    history = tuple(watcher.metrics.items())
    if history:
        rows: int | None = sum(_sent(m) or 0 for _, m in history)
    else:  # no batch had rows (nothing written), or the sink collects no metrics (Spark Connect)
        rows = 0 if not reports else None
    return JobResult(spec.job, spec.topic, rows, seconds, len(reports), sink.last_metrics, history,
                     input_rows=sum(r.input_rows for r in reports), stopped_by_user=stopped_by_user)


def _stop(query: Any, interrupted: bool) -> None:
    """Stop the query; after Ctrl-C the JVM (which got the signal too) may already be gone, and
    the run's figures, kept on the Python side, are still worth printing."""
    if not interrupted:
        query.stop()
        return
    try:
        query.stop()
    except Exception:  # noqa: BLE001 - Py4J errors from a JVM shutting down
        pass


def _sent(metrics: Mapping[str, float] | None) -> int | None:
    return None if metrics is None else int(metrics.get("record-send-total", 0))


class _BatchWatcher:
    """Follows a running query: reports each micro-batch with rows once, and keeps the sink's
    metrics per batch id (the sink itself keeps only its last 100)."""

    def __init__(self, query: Any, sink: Any, out: IO[str]):
        self.query = query
        self.sink = sink
        self.out = out
        self.reports: list[BatchReport] = []
        self.metrics: dict[int | None, Mapping[str, float]] = {}
        self._seen: set[int] = set()

    def await_end(self, timeout_s: float | None, started: float) -> None:
        deadline = None if timeout_s is None else started + timeout_s
        while True:
            wait = _POLL_S if deadline is None else max(0.05, min(_POLL_S, deadline - time.monotonic()))
            ended = self.query.awaitTermination(wait)  # raises the query's error, if it failed
            self.collect()
            if ended:
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise JobError(f"--timeout {timeout_s:g} s ran out before the query ended; stopped it")

    def collect_sink_only(self) -> None:
        for batch_id, metrics in self.sink.metrics_history:
            self.metrics.setdefault(batch_id, metrics)

    def collect(self) -> None:
        self.collect_sink_only()
        for entry in self.query.recentProgress:
            batch_id, rows = int(entry["batchId"]), int(entry["numInputRows"])
            if batch_id in self._seen or rows == 0:
                continue
            self._seen.add(batch_id)
            seconds = float(entry["durationMs"].get("triggerExecution", 0)) / 1000
            report = BatchReport(batch_id, rows, _sent(self.metrics.get(batch_id)), seconds)
            self.reports.append(report)
            written = "?" if report.rows_written is None else f"{report.rows_written:,}"
            print(f"micro-batch {batch_id}: {rows:,} rows read, {written} written in {seconds:.2f} s",
                  file=self.out, flush=True)


def summary(result: JobResult) -> str:
    """The job's closing lines: rows, time, rate, and the sink metrics over the whole run."""
    rows = "an unknown number of" if result.rows_written is None else f"{result.rows_written:,}"
    if result.job.startswith("stream"):
        count = f"{result.batches} micro-batch{'' if result.batches == 1 else 'es'}"
    else:
        count = "one write"
    rate = f" ({result.rows_per_second:,.0f} rows/s)" if result.rows_per_second else ""
    stopped = " (stopped by Ctrl-C)" if result.stopped_by_user else ""
    lines = [f"{result.job}: {rows} rows to topic {result.topic!r} in {count}, "
             f"{result.seconds:.1f} s{rate}{stopped}"]
    totals = result.metrics_total
    if totals is None:
        lines.append("sink metrics: none collected (no SparkContext, e.g. Spark Connect)")
    else:
        lines.append("sink metrics: " + " ".join(f"{name}={_figure(value)}" for name, value in
                                                 totals.items() if not name.startswith("topic.")))
    return "\n".join(lines)


def _figure(value: float) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "n/a"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.2f}"
    return str(int(value))


def write_metrics_json(path: str | Path, result: JobResult) -> None:
    Path(path).write_text(json.dumps(result.to_json_dict(), indent=2) + "\n", encoding="utf-8")


def main(argv: Sequence[str], *, streaming: bool, default_properties: Path | None = None) -> int:
    """A job's entry point: parse, start Spark, run, print the summary; the exit status."""
    job = "stream_to_kafka" if streaming else "batch_to_kafka"
    try:
        spec = parse_job_args(argv, streaming=streaming, default_properties=default_properties)
    except JobError as error:
        print(f"{job}: error: {error}", file=sys.stderr)
        return 2
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName(job).getOrCreate()
    result = None
    try:
        result = run_stream(spark, spec) if streaming else run_batch(spark, spec)
    except JobError as error:
        print(f"{job}: error: {error}", file=sys.stderr)
        return 2
    finally:
        if result is not None and result.stopped_by_user:
            _stop(spark, True)
        else:
            spark.stop()
    if spec.metrics_json:
        write_metrics_json(spec.metrics_json, result)
    print(summary(result), flush=True)
    return 0


# --- launching the scripts ---------------------------------------------------------------------

@dataclass(frozen=True)
class SparkSubmit:
    """A ``spark-submit`` command line and the environment variables to add for it."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)

    def environ(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with :attr:`env` on top."""
        return {**(os.environ if base is None else base), **self.env}


def spark_submit_command(script: str | Path, args: Sequence[str], *, conf_dir: str | Path,
                         python: str | None = None) -> SparkSubmit:
    """How to run ``script`` with ``spark-submit`` as DESIGN.md §7 says: workers and driver on
    ``python`` (default: this interpreter, which has pyarrow and this package), loopback only,
    ``conf_dir/spark-defaults.conf``, and ``conf_dir/log4j2.properties`` added to the driver
    Java options that file sets (``--driver-java-options`` replaces them, so both go in)."""
    python = python or sys.executable
    conf = Path(conf_dir).resolve()
    submit = Path(python).parent / "spark-submit"
    found = str(submit) if submit.is_file() else shutil.which("spark-submit")
    if not found:
        raise JobError(f"spark-submit is neither next to {python} nor on PATH; install pyspark")
    defaults = conf / "spark-defaults.conf"
    java_options = load_properties(defaults).get("spark.driver.extraJavaOptions", "")
    log4j = f"-Dlog4j2.configurationFile={(conf / 'log4j2.properties').as_uri()}"
    argv = (found, "--properties-file", str(defaults),
            "--driver-java-options", f"{java_options} {log4j}".strip(), str(script), *args)
    env = {"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python, "SPARK_LOCAL_IP": "127.0.0.1"}
    return SparkSubmit(argv, MappingProxyType(env))
