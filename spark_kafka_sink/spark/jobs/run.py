"""Running a job: :func:`run_stream` / :func:`run_batch` write through
:class:`~spark_kafka_sink.KafkaSink` (``foreachBatch(sink)`` for the stream) and return a
:class:`JobResult`: rows written, seconds, and the sink's metrics, which :func:`summary` prints
and :func:`write_metrics_json` saves. :func:`main` is the scripts' entry point.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Mapping, Sequence

from ...errors import JobError
from .args import JobSpec, Trigger, parse_job_args
from .frame import read_source_batch, read_source_stream, to_kafka_frame

_POLL_S = 1.0


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
    from ..sink import KafkaSink

    return KafkaSink(dict(spec.sink_options))


def run_batch(spark: Any, spec: JobSpec) -> JobResult:
    """Read the source once and write it with ``KafkaSink.write``."""
    sink = _sink(spec)
    frame = to_kafka_frame(read_source_batch(spark, spec.source), spec.columns)
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
    frame = to_kafka_frame(read_source_stream(spark, spec.source), spec.columns)
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
