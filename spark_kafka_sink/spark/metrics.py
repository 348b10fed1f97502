"""Sink metrics: what each Spark task wrote, merged on the driver (see docs/ARCHITECTURE.md).

Every successful task produces one :class:`SinkTaskMetrics` (its records acknowledged, failed
and retried, bytes, batches, requests, request latency as (sum, count), and records per topic),
built by :func:`task_metrics` from the task's own outcome and the delta of its producer's
:class:`~spark_kafka_sink.producer.metrics_snapshot.MetricsSnapshot` over the task.

On classic Spark the tasks add them to an accumulator (:class:`SinkMetricsParam`); a task adds
its figures only once it has flushed and checked every record, so a failed attempt adds nothing
(and PySpark sends no accumulator updates for a failed task anyway). The driver then logs one
line per micro-batch (:func:`format_line`) and keeps the figures under Java-style names
(:meth:`SinkTaskMetrics.as_dict`).

In arrow mode (the default) there is no accumulator: each successful task yields one stats row
carrying its figures as JSON (:meth:`SinkTaskMetrics.to_json`), the driver collects the rows and
merges them (:meth:`SinkTaskMetrics.from_json`). That works on Spark Connect too, which has no
``sparkContext`` and so no accumulators: there, rows mode writes but collects no metrics
(``sink.last_metrics`` stays ``None``).

Where the figures come from:

- ``task-total``, ``task-retried-total`` (tasks that succeeded on attempt > 0) and
  ``producer-create-total`` (tasks that created their producer: first use in a worker, or a
  retry, which always gets a fresh one): successful tasks only.

- ``record-send-total`` / ``record-error-total`` and the per-topic counts: the task's own
  acknowledged / failed records (exact; a retried batch is counted once). With
  ``errors.tolerance=all``, ``record-error-total`` counts the bad records, split by error class in
  ``error.<class>.record-error-total``; ``dlq-record-send-total`` counts those the dead-letter
  topic acknowledged and ``record-skip-total`` those skipped (no dead-letter topic).
- ``record-retry-total``, ``byte-total``, ``request-total``: deltas of the producer's totals
  (exact while one task at a time uses the producer, which is the case: a Python worker runs one
  task at a time).
- ``batch-total`` and ``request-latency-avg``: deltas of the producer's windowed averages'
  (sum, count) (``batch-size-avg`` counts batches). They are exact for tasks shorter than the
  producer's sample window (2 × 30 s by default); a longer task reports what the window still
  holds, never a negative figure.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from pyspark.accumulators import AccumulatorParam

from .metrics_table import format_value

__all__ = ["SinkTaskMetrics", "SinkMetricsParam", "task_metrics", "format_line"]


@dataclass(frozen=True)
class SinkTaskMetrics:
    """The figures of one task, or of several merged (``tasks`` counts them). Picklable."""

    records_sent: int = 0
    records_failed: int = 0
    records_retried: int = 0
    bytes_sent: int = 0
    batches: int = 0
    requests: int = 0
    request_latency_sum_ms: float = 0.0
    request_latency_count: int = 0
    topics: Mapping[str, int] = field(default_factory=dict)
    tasks: int = 0
    retried_tasks: int = 0
    """Tasks that succeeded on a retry (Spark attempt > 0)."""
    producers_created: int = 0
    """Tasks that created their producer rather than reusing a cached one: the first task of a
    config in a Python worker, and every retry (the pool replaces the producer on a retry)."""
    records_dead_lettered: int = 0
    """``errors.tolerance=all``: bad records the dead-letter topic acknowledged."""
    records_skipped: int = 0
    """``errors.tolerance=all`` without a dead-letter topic: bad records skipped."""
    errors_by_class: Mapping[str, int] = field(default_factory=dict)
    """Bad records by error class (``records_failed`` counts them all)."""

    def merge(self, other: SinkTaskMetrics) -> SinkTaskMetrics:
        """Both combined: every figure adds, per topic too."""
        topics = dict(self.topics)
        for topic, count in other.topics.items():
            topics[topic] = topics.get(topic, 0) + count
        by_class = dict(self.errors_by_class)
        for name, count in other.errors_by_class.items():
            by_class[name] = by_class.get(name, 0) + count
        return SinkTaskMetrics(
            self.records_sent + other.records_sent,
            self.records_failed + other.records_failed,
            self.records_retried + other.records_retried,
            self.bytes_sent + other.bytes_sent,
            self.batches + other.batches,
            self.requests + other.requests,
            self.request_latency_sum_ms + other.request_latency_sum_ms,
            self.request_latency_count + other.request_latency_count,
            topics,
            self.tasks + other.tasks,
            self.retried_tasks + other.retried_tasks,
            self.producers_created + other.producers_created,
            self.records_dead_lettered + other.records_dead_lettered,
            self.records_skipped + other.records_skipped,
            by_class,
        )

    def to_json(self) -> str:
        """The figures as a JSON object (what an arrow-mode task's stats row carries)."""
        return json.dumps(asdict(self), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> SinkTaskMetrics:
        """The figures :meth:`to_json` wrote; a field it does not know is an error (a task and
        the driver run the same version of the sink)."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"task metrics must be a JSON object, got {type(data).__name__}")
        return cls(**data)

    @property
    def request_latency_avg_ms(self) -> float:
        """Mean request latency in ms; NaN without requests."""
        if not self.request_latency_count:
            return math.nan
        return self.request_latency_sum_ms / self.request_latency_count

    def as_dict(self) -> dict[str, float]:
        """Java-style names; per topic as ``topic.<topic>.record-send-total``."""
        flat: dict[str, float] = {
            "record-send-total": self.records_sent,
            "record-error-total": self.records_failed,
            "record-retry-total": self.records_retried,
            "byte-total": self.bytes_sent,
            "batch-total": self.batches,
            "request-total": self.requests,
            "request-latency-avg": self.request_latency_avg_ms,
            "task-total": self.tasks,
            "task-retried-total": self.retried_tasks,
            "producer-create-total": self.producers_created,
            "dlq-record-send-total": self.records_dead_lettered,
            "record-skip-total": self.records_skipped,
        }
        for topic in sorted(self.topics):
            flat[f"topic.{topic}.record-send-total"] = self.topics[topic]
        for name in sorted(self.errors_by_class):
            flat[f"error.{name}.record-error-total"] = self.errors_by_class[name]
        return flat


class SinkMetricsParam(AccumulatorParam):
    """Spark accumulator parameter merging :class:`SinkTaskMetrics`."""

    def zero(self, value: SinkTaskMetrics) -> SinkTaskMetrics:
        return SinkTaskMetrics()

    def addInPlace(self, value1: SinkTaskMetrics, value2: SinkTaskMetrics) -> SinkTaskMetrics:
        return value1.merge(value2)


def task_metrics(before: Any, after: Any, *, records_sent: int, records_failed: int,
                 topics: Mapping[str, int], attempt: int = 0,
                 producer_created: bool = False,
                 bad_records: Mapping[str, Any] | None = None) -> SinkTaskMetrics:
    """One task's figures: its own counts, plus the producer deltas from snapshot ``before`` to
    ``after`` (:class:`~spark_kafka_sink.producer.metrics_snapshot.MetricsSnapshot`). ``attempt`` is the
    task's Spark attempt number; ``producer_created`` whether its lease created the producer;
    ``bad_records``: with ``errors.tolerance=all``, ``DeadLetters.figures()`` (the bad records
    count as ``record-error-total``)."""
    bad = bad_records or {}

    def total(name: str) -> float:
        return max(0.0, after.values.get(name, 0.0) - before.values.get(name, 0.0))

    def avg_parts(name: str) -> tuple[float, int]:
        s1, c1 = before.averages.get(name, (0.0, 0))
        s2, c2 = after.averages.get(name, (0.0, 0))
        if c2 >= c1 and s2 >= s1:
            return s2 - s1, c2 - c1
        return s2, c2  # the window rolled over during the task: what it still holds

    _, batches = avg_parts("batch-size-avg")
    latency_sum, latency_count = avg_parts("request-latency-avg")
    return SinkTaskMetrics(
        records_sent=records_sent,
        records_failed=records_failed + bad.get("bad", 0),
        records_retried=int(total("record-retry-total")),
        bytes_sent=int(total("byte-total")),
        batches=int(batches),
        requests=int(total("request-total")),
        request_latency_sum_ms=float(latency_sum),
        request_latency_count=int(latency_count),
        topics=dict(topics),
        tasks=1,
        retried_tasks=int(attempt > 0),
        producers_created=int(producer_created),
        records_dead_lettered=bad.get("dead_lettered", 0),
        records_skipped=bad.get("skipped", 0),
        errors_by_class=dict(bad.get("errors_by_class", {})),
    )


def format_line(batch_id: int | None, metrics: Mapping[str, float], seconds: float) -> str:
    """The driver's one log line for a micro-batch (``batch_id``) or a write (``None``)."""
    what = "write" if batch_id is None else f"micro-batch {batch_id}"
    parts = " ".join(f"{name}={format_value(value)}" for name, value in metrics.items())
    return f"KafkaSink: {what} written in {seconds:.3f} s: {parts}"
