"""The streaming latency benchmark (bench/README.md, "Streaming"): ``python -m bench.streaming``.

What a micro-batch costs each sink at a steady rate: Spark's ``rate`` source (``rowsPerSecond``
of ``--rates``, 4 partitions), ``key`` = the rate's value as a string and ``value`` = a short JSON
of it, ``trigger(processingTime="1 second")``, Spark ``local[2]`` and one embedded broker. Each
contender runs one streaming query for ``--duration`` seconds, into a fresh topic of 4 partitions
with a fresh checkpoint:

- ``builtin``: Spark's ``writeStream.format("kafka")`` (its connector from ``spark.jars.packages``,
  as in bench/spark.py);
- ``floor-count``: ``foreachBatch`` doing ``df.count()``, a plain Spark job;
- ``floor-arrow``: ``foreachBatch`` running a no-op ``mapInArrow`` and collecting it;
- ``ours``: ``foreachBatch(KafkaSink(...))``, at-least-once, arrow mode;
- ``ours-eos``: the same with ``delivery.guarantee=exactly-once`` and a fresh
  ``transactional.id.prefix``.

The figure is Spark's own ``durationMs.addBatch`` from ``query.recentProgress``: the median and
p90 of the warm batches (:func:`warm`: the first ``--skip`` batches and any before the first that
read rows are dropped), with how many were counted and their median ``numInputRows``. Producer
settings are bench/spark.py's, for ours and the built-in sink alike. After each query the topic
is counted (``read_committed`` for exactly-once; the floors count what their jobs saw) and must
hold at least every row of the batches Spark reported, or the row says ``short``. The CPU split
(``bench/cpu.py``) is per micro-batch over the whole query, start and stop included.

Per rate: one table, then the comparisons the issue's targets use (:func:`comparisons`), all from
the same run: ours / builtin, ours-eos minus ours, and the floors.

    python -m bench.streaming --rates 2000 --duration 12 --contenders ours,builtin
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import admin
from .cpu import CpuMeter, CpuSplit, spark_jvm
from .peers import SETTINGS
from .table import cell

CONTENDERS = ("builtin", "floor-count", "floor-arrow", "ours", "ours-eos")
LABELS = {"builtin": "Spark built-in format(kafka)", "floor-count": "floor: df.count()",
          "floor-arrow": "floor: no-op mapInArrow", "ours": "KafkaSink at-least-once",
          "ours-eos": "KafkaSink exactly-once"}
WRITES_TO_KAFKA = ("builtin", "ours", "ours-eos")
DEFAULT_RATES = (2_000, 20_000, 200_000)
SOURCE_PARTITIONS = 4
TOPIC_PARTITIONS = 4
TRIGGER = "1 second"
SKIP = 3
"""Warm batches: the first ``SKIP`` batches are dropped (and any before the first with rows)."""
TARGET_RATIO = 1.3   # ours / builtin, addBatch median
TARGET_EOS_MS = 40.0  # ours-eos minus ours, addBatch median
_POLL_S = 0.25
_STOP_TIMEOUT = "60s"  # spark.sql.streaming.stopTimeout: how long query.stop() waits for a batch


# --- the pure part: progress -> warm batches -> figures -> comparisons ---------------------------

@dataclass(frozen=True)
class Batch:
    """One micro-batch as ``recentProgress`` reports it."""

    batch_id: int
    add_batch_ms: float
    rows: int


def batches(progress: Iterable[Mapping[str, Any]]) -> list[Batch]:
    """The micro-batches of ``progress`` (dicts, as ``query.recentProgress`` gives them) that
    report ``durationMs.addBatch``; the others (no-data progress events) ran no batch."""
    found = []
    for entry in progress:
        add_batch = (entry.get("durationMs") or {}).get("addBatch")
        if add_batch is not None:
            found.append(Batch(int(entry["batchId"]), float(add_batch), int(entry.get("numInputRows") or 0)))
    return sorted(found, key=lambda b: b.batch_id)


def warm(found: Sequence[Batch], skip: int = SKIP) -> list[Batch]:
    """``found`` without its first ``skip`` batches and without any batch before the first that
    read rows (the ``rate`` source's first batch is empty); none if no batch read rows."""
    first_with_rows = next((i for i, b in enumerate(found) if b.rows > 0), None)
    if first_with_rows is None:
        return []
    return list(found[max(skip, first_with_rows):])


def quantile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile of ``values``, interpolated between the two nearest ranks (``0.5``: the
    median); ``None`` when empty."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile q must be within [0, 1], not {q}")
    if not values:
        return None
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Latency:
    """``addBatch`` over the warm batches: ``counted`` of ``batches`` (all that ran)."""

    batches: int
    counted: int
    median_ms: float | None
    p90_ms: float | None
    rows_median: float | None
    batch_ids: tuple[int, ...] = ()


def latency(progress: Iterable[Mapping[str, Any]], skip: int = SKIP) -> Latency:
    """The figures of the module docstring from one query's ``recentProgress``."""
    found = batches(progress)
    kept = warm(found, skip)
    times = [b.add_batch_ms for b in kept]
    return Latency(len(found), len(kept), quantile(times, 0.5), quantile(times, 0.9),
                   quantile([b.rows for b in kept], 0.5), tuple(b.batch_id for b in kept))


@dataclass(frozen=True)
class Comparison:
    """One closing line: ``value`` (a ratio, or a difference in ms) against its ``target`` (at
    most; ``None``: shown, no target); ``value`` is ``None`` when a side did not measure."""

    what: str
    value: float | None
    unit: str  # "x" | "ms"
    target: float | None = None

    @property
    def met(self) -> bool | None:
        if self.value is None or self.target is None:
            return None
        return self.value <= self.target

    def line(self) -> str:
        if self.value is None:
            shown = "n/a"
        elif self.unit == "x":
            shown = f"{self.value:.2f}x"
        else:
            shown = f"{self.value:+.0f} ms"
        if self.target is None:
            return f"{self.what}: {shown}"
        bound = f"{self.target:g}x" if self.unit == "x" else f"{self.target:g} ms"
        verdict = {True: "met", False: "NOT met", None: "not measured"}[self.met]
        return f"{self.what}: {shown} (target at most {bound}: {verdict})"


def comparisons(medians: Mapping[str, float | None]) -> list[Comparison]:
    """The issue's two targets and the floors, from the ``addBatch`` medians of one run, by
    contender (a contender not run or not counted: absent or ``None``)."""
    def ratio(a: str, b: str) -> float | None:
        top, bottom = medians.get(a), medians.get(b)
        return top / bottom if top is not None and bottom else None

    def minus(a: str, b: str) -> float | None:
        left, right = medians.get(a), medians.get(b)
        return left - right if left is not None and right is not None else None

    return [Comparison("ours / builtin", ratio("ours", "builtin"), "x", TARGET_RATIO),
            Comparison("ours-eos - ours", minus("ours-eos", "ours"), "ms", TARGET_EOS_MS),
            Comparison("floor-count / builtin", ratio("floor-count", "builtin"), "x"),
            Comparison("floor-arrow / builtin", ratio("floor-arrow", "builtin"), "x"),
            Comparison("ours - floor-arrow", minus("ours", "floor-arrow"), "ms")]


def per_batch_ms(cpu: CpuSplit, count: int) -> CpuSplit | None:
    """``cpu`` (seconds) as milliseconds per micro-batch; ``None`` without a batch."""
    if count <= 0:
        return None
    scale = 1000.0 / count
    return CpuSplit(cpu.broker * scale, cpu.jvm * scale, cpu.python * scale)


def shortfall(delivered: int | None, reported: int, allowance: int = 0) -> str:
    """Why a contender's count of delivered rows is wrong, or ``""``: it must be at least the rows
    of the batches Spark reported (a batch cut by the stop may add more), less ``allowance``, and
    not zero. ``allowance``: rows Spark counted twice (KafkaSink's collection of a micro-batch
    that then went to a job: Spark's ``numInputRows`` counts both reads)."""
    if delivered is None:
        return "not counted"
    if delivered == 0:
        return "nothing delivered"
    if delivered < reported - allowance:
        return f"{delivered:,} delivered, fewer than the {reported:,} rows of the reported batches"
    return ""


def collection_allowance(contender: str, driver_max_rows: int) -> int:
    """What ``numInputRows`` may count twice for ``contender``: KafkaSink collects at most
    ``driver_max_rows + 1`` rows a source partition before a micro-batch it then writes as a
    job, which a stream at a steady rate does once (its first micro-batch, when it is big)."""
    if contender not in ("ours", "ours-eos") or driver_max_rows <= 0:
        return 0
    return (driver_max_rows + 1) * SOURCE_PARTITIONS


# --- the streaming queries (driver side) --------------------------------------------------------

def rate_stream(spark: Any, rate: int) -> Any:
    """The ``rate`` source at ``rate`` rows/s over :data:`SOURCE_PARTITIONS`, as ``key`` (the value
    as a string) and ``value`` (``{"value":N,"timestamp":...}``)."""
    return (spark.readStream.format("rate").option("rowsPerSecond", rate)
            .option("numPartitions", SOURCE_PARTITIONS).load()
            .selectExpr("CAST(value AS STRING) AS key", "to_json(struct(value, timestamp)) AS value"))


class CountFloor:
    """``foreachBatch``: ``df.count()``, summing what the batches held."""

    def __init__(self) -> None:
        self.seen = 0

    def __call__(self, df: Any, batch_id: int) -> None:
        self.seen += df.count()


class ArrowFloor:
    """``foreachBatch``: a no-op ``mapInArrow`` (bench/spark.py's ``count_batches``), collected."""

    def __init__(self) -> None:
        self.seen = 0

    def __call__(self, df: Any, batch_id: int) -> None:
        from .spark import count_batches

        self.seen += sum(row.rows for row in df.mapInArrow(count_batches, "rows long").collect())


@dataclass
class Started:
    """A running contender: its query, what counts its rows afterwards, and what to close."""

    query: Any
    count: Callable[[], int]
    close: Callable[[], None] = lambda: None
    note: Callable[[Latency], str] = lambda _: ""


def _eos_note(sink: Any) -> Callable[[Latency], str]:
    def note(figures: Latency) -> str:
        warm_ids = set(figures.batch_ids)
        commits = [float(m.get("transaction-commit-time-ms", 0.0)) for b, m in sink.metrics_history
                   if b in warm_ids]
        median = quantile(commits, 0.5)
        return "" if median is None else f"driver's transaction commit median {median:.0f} ms"
    return note


def start(contender: str, stream: Any, bootstrap: str, topic: str, checkpoint: str,
          driver_max_rows: int) -> Started:
    """Start ``contender``'s query on ``stream`` (see the module docstring); KafkaSink's with
    ``driver.write.max.rows=driver_max_rows``."""
    from .spark import kafka_options

    options = kafka_options(SETTINGS)
    writer = stream.writeStream.option("checkpointLocation", checkpoint).trigger(processingTime=TRIGGER)
    if contender == "builtin":
        writer = writer.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
        for name, value in options.items():
            writer = writer.option(name, value)
        return Started(writer.start(), lambda: admin.landed(bootstrap, topic, TOPIC_PARTITIONS))
    if contender in ("floor-count", "floor-arrow"):
        floor = CountFloor() if contender == "floor-count" else ArrowFloor()
        return Started(writer.foreachBatch(floor).start(), lambda: floor.seen)
    from spark_kafka_sink import KafkaSink

    base = {"kafka.bootstrap.servers": bootstrap, "topic": topic, **options,
            "driver.write.max.rows": driver_max_rows}
    if contender == "ours":
        return Started(writer.foreachBatch(KafkaSink(**base)).start(),
                       lambda: admin.landed(bootstrap, topic, TOPIC_PARTITIONS))
    sink = KafkaSink(**base, **{"delivery.guarantee": "exactly-once",
                                "transactional.id.prefix": f"bench-stream-{uuid.uuid4().hex[:8]}"})
    return Started(writer.foreachBatch(sink).start(), lambda: admin.committed(bootstrap, topic, TOPIC_PARTITIONS),
                   sink.close, _eos_note(sink))


@dataclass(frozen=True)
class Run:
    """One contender at one rate. ``delivered``: landed on the broker (exactly-once: what a
    ``read_committed`` reader sees; floors: what their jobs counted); ``reported``: the rows of
    every batch ``recentProgress`` reported."""

    contender: str
    rate: int
    status: str  # ok | short | no warm batches | error | not available
    latency: Latency | None = None
    delivered: int | None = None
    reported: int = 0
    seconds: float | None = None
    cpu_ms_per_batch: CpuSplit | None = None
    detail: str = ""
    driver_ms_per_batch: float | None = None
    """This process's CPU (the driver's Python: the sink's own writes of small micro-batches, the
    commits, and the bench's polling) per micro-batch."""


def _plain(progress: Iterable[Any]) -> list[dict[str, Any]]:
    """``recentProgress`` entries as the plain dicts :func:`batches` reads (Spark 3.4 gives dicts,
    4.x a dict subclass)."""
    return [{"batchId": p["batchId"], "numInputRows": p["numInputRows"], "durationMs": dict(p["durationMs"])}
            for p in progress]


def measure(ctx: Context, contender: str, rate: int, args: argparse.Namespace) -> Run:
    """Run ``contender`` at ``rate`` for ``args.duration`` seconds; stop it; count what it wrote."""
    topic = f"bench-stream-{contender}-{rate}-{uuid.uuid4().hex[:8]}"
    if contender in WRITES_TO_KAFKA:
        admin.create_topic(ctx.bootstrap, topic, TOPIC_PARTITIONS)
    checkpoint = str(Path(ctx.work) / f"checkpoint-{topic}")
    cpu_before = ctx.cpu.read()
    driver_before = time.process_time()
    began = time.monotonic()
    error: BaseException | None = None
    progress: list[dict[str, Any]] = []
    started: Started | None = None
    try:
        started = start(contender, rate_stream(ctx.spark, rate), ctx.bootstrap, topic, checkpoint,
                        args.driver_max_rows)
        query = started.query
        ends = began + args.duration
        while time.monotonic() < ends and query.isActive and query.exception() is None:
            time.sleep(_POLL_S)
        failed = query.exception()
        query.stop()
        progress = _plain(query.recentProgress)
        if failed is not None:
            error = failed
    except Exception as exc:  # noqa: BLE001 - reported in this contender's row
        error = exc
    finally:
        if started is not None:
            started.close()
    seconds = time.monotonic() - began
    cpu = ctx.cpu.read() - cpu_before
    driver_s = time.process_time() - driver_before
    figures = latency(progress, args.skip)
    reported = sum(b.rows for b in batches(progress))
    delivered = started.count() if started is not None else None
    if error is not None:
        first = (str(error).strip().splitlines() or [""])[0]
        status, detail = "error", f"{type(error).__name__}: {first[:300]}"
    elif figures.counted == 0:
        status, detail = "no warm batches", f"{figures.batches} batches ran; raise --duration or lower --skip"
    else:
        detail = shortfall(delivered, reported, collection_allowance(contender, args.driver_max_rows))
        status = "short" if detail else "ok"
    note = started.note(figures) if started is not None else ""
    return Run(contender, rate, status, figures, delivered, reported, seconds,
               per_batch_ms(cpu, figures.batches), "; ".join(filter(None, [detail, note])),
               driver_s * 1000 / figures.batches if figures.batches else None)


# --- set-up, report, main -----------------------------------------------------------------------

@dataclass(frozen=True)
class Context:
    spark: Any
    bootstrap: str
    work: str
    cpu: CpuMeter


def table(runs: Sequence[Run]) -> str:
    """One rate's runs as a table, notes below."""
    head = (f"{'contender':<30}{'addBatch median ms':>20}{'p90 ms':>8}{'counted':>9}{'rows/batch':>12}"
            f"{'delivered':>11}{'CPU ms/batch: broker':>22}{'JVM':>6}{'Python':>8}{'driver':>8}  status")
    lines = [head, "-" * len(head)]
    for run in runs:
        if run.status == "not available":
            lines.append(f"{LABELS[run.contender]:<30}not available: {run.detail}")
            continue
        lat, cpu = run.latency, run.cpu_ms_per_batch
        counted = f"{lat.counted}/{lat.batches}" if lat else "-"
        lines.append(f"{LABELS[run.contender]:<30}{cell(lat and lat.median_ms, '.0f'):>20}"
                     f"{cell(lat and lat.p90_ms, '.0f'):>8}{counted:>9}{cell(lat and lat.rows_median, ',.0f'):>12}"
                     f"{cell(run.delivered, ',d'):>11}{cell(cpu and cpu.broker, '.0f'):>22}"
                     f"{cell(cpu and cpu.jvm, '.0f'):>6}{cell(cpu and cpu.python, '.0f'):>8}"
                     f"{cell(run.driver_ms_per_batch, '.0f'):>8}  {run.status}")
    notes = [f"  {LABELS[r.contender]}: {r.detail}" for r in runs if r.detail and r.status != "not available"]
    return "\n".join(lines + (["notes:"] + notes if notes else []))


def medians(runs: Iterable[Run]) -> dict[str, float | None]:
    """The ``addBatch`` median of each run that completed (``ok``), by contender."""
    return {r.contender: r.latency.median_ms for r in runs if r.status == "ok" and r.latency}


@dataclass(frozen=True)
class RateReport:
    rate: int
    runs: list[Run]
    comparisons: list[Comparison]


@dataclass(frozen=True)
class Report:
    """Everything one run found, as ``--json`` writes it."""

    duration_s: float
    skip: int
    trigger: str
    source_partitions: int
    topic_partitions: int
    settings: dict[str, str]
    connector: dict[str, Any] | None
    rates: list[RateReport] = field(default_factory=list)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from spark_kafka_sink.spark.options import DEFAULT_DRIVER_WRITE_MAX_ROWS

    from .spark import FALLBACK_CONNECTOR

    parser = argparse.ArgumentParser(prog="python -m bench.streaming", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default=",".join(str(r) for r in DEFAULT_RATES),
                        help="comma list of rowsPerSecond, one table each (2000,20000,200000)")
    parser.add_argument("--contenders", default=",".join(CONTENDERS), help=f"comma list of {', '.join(CONTENDERS)}")
    parser.add_argument("--duration", type=float, default=25.0, help="seconds per contender and rate (25)")
    parser.add_argument("--skip", type=int, default=SKIP, help=f"first batches not counted ({SKIP})")
    parser.add_argument("--driver-max-rows", type=int, default=DEFAULT_DRIVER_WRITE_MAX_ROWS,
                        help="KafkaSink's driver.write.max.rows: micro-batches of at most this many "
                             f"rows are written by the driver ({DEFAULT_DRIVER_WRITE_MAX_ROWS}; 0: never)")
    parser.add_argument("--json", metavar="OUT", help="also write the results to this JSON file")
    parser.add_argument("--connector-version", metavar="V[,V...]", default=None,
                        help="Spark Kafka connector version(s) to try for the built-in sink, in order "
                             f"(pyspark's own, then {FALLBACK_CONNECTOR})")
    args = parser.parse_args(argv)
    try:
        args.rates = list(dict.fromkeys(int(r) for r in args.rates.split(",") if r.strip()))
    except ValueError:
        parser.error(f"--rates must be a comma list of whole numbers, not {args.rates!r}")
    args.contenders = list(dict.fromkeys(c.strip() for c in args.contenders.split(",") if c.strip()))
    unknown = sorted(set(args.contenders) - set(CONTENDERS))
    if unknown:
        parser.error(f"unknown contender(s) {unknown}; choose from {list(CONTENDERS)}")
    if not args.rates or min(args.rates) < 1 or not args.contenders:
        parser.error("--rates needs at least one rate >= 1 and --contenders at least one contender")
    if args.duration <= 0 or args.skip < 0 or args.driver_max_rows < 0:
        parser.error("--duration must be > 0, --skip >= 0 and --driver-max-rows >= 0")
    if args.connector_version is None:
        import pyspark

        args.connector_version = f"{pyspark.__version__},{FALLBACK_CONNECTOR}"
    versions = (v.strip() for v in args.connector_version.split(","))
    args.connector_versions = list(dict.fromkeys(v for v in versions if v))
    return args


def run(args: argparse.Namespace, bootstrap: str, broker_pid: int | None) -> Report:
    """Start Spark (with the connector when ``builtin`` runs), run every contender at every rate,
    print each rate's table as it completes; stop Spark in ``finally``."""
    from .spark import start_session, stop_session, warm_up

    spark, connector = start_session(args.connector_versions if "builtin" in args.contenders else [])
    if connector is not None:
        print(connector.summary(), flush=True)
    report = Report(args.duration, args.skip, TRIGGER, SOURCE_PARTITIONS, TOPIC_PARTITIONS,
                    SETTINGS.as_properties(), asdict(connector) if connector else None)
    try:
        spark.conf.set("spark.sql.streaming.stopTimeout", _STOP_TIMEOUT)
        spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", str(max(100, int(args.duration * 4))))
        warm_up(spark)
        with tempfile.TemporaryDirectory(prefix="bench-streaming-") as work:
            ctx = Context(spark, bootstrap, work, CpuMeter(broker_pid, spark_jvm()))
            for rate in args.rates:
                runs = []
                for contender in args.contenders:
                    if contender == "builtin" and connector is not None and not connector.available:
                        runs.append(Run(contender, rate, "not available", detail=connector.reason))
                        continue
                    one = measure(ctx, contender, rate, args)
                    print(f"  {rate:,} rows/s, {LABELS[contender]}: addBatch median "
                          f"{cell(one.latency and one.latency.median_ms, '.0f')} ms ({one.status})", flush=True)
                    runs.append(one)
                rate_report = RateReport(rate, runs, comparisons(medians(runs)))
                report.rates.append(rate_report)
                print_rate(rate_report, args)
    finally:
        stop_session(spark)
    return report


def print_rate(rate_report: RateReport, args: argparse.Namespace) -> None:
    print(f"\nrate {rate_report.rate:,} rows/s ({SOURCE_PARTITIONS} source partitions, trigger {TRIGGER}, "
          f"{args.duration:g} s per contender, first {args.skip} batches not counted)")
    print(table(rate_report.runs))
    for comparison in rate_report.comparisons:
        print(comparison.line())
    print(flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from spark_kafka_sink.embedded import EmbeddedKafka

    print(f"rate source at {', '.join(f'{r:,}' for r in args.rates)} rows/s, {SOURCE_PARTITIONS} partitions, "
          f"trigger {TRIGGER}, Spark local[2]; one embedded broker, a fresh {TOPIC_PARTITIONS}-partition topic "
          f"per contender; producer settings: "
          + " ".join(f"{k}={v}" for k, v in SETTINGS.as_properties().items())
          + f"; {args.duration:g} s per contender", flush=True)
    with EmbeddedKafka(1) as kafka:
        report = run(args, kafka.bootstrap_servers, kafka.nodes[0].pid)
    if args.json:
        Path(args.json).write_text(json.dumps(asdict(report), indent=2))
    return 0


if __name__ == "__main__":
    # Re-import under the package name: what runs in the workers then pickles by reference.
    from bench.streaming import main as _main

    sys.exit(_main())
