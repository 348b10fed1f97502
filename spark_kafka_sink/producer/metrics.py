"""Producer metrics with Java's names: sensors the sender records into, snapshots that merge.

The sender reports what happened, once per request or per failed/retried batch and never per
record, through six hooks: :meth:`ProducerMetrics.on_produce_request`, :meth:`~ProducerMetrics.
on_drain`, :meth:`~ProducerMetrics.on_response`, :meth:`~ProducerMetrics.on_retry`,
:meth:`~ProducerMetrics.on_error` and :meth:`~ProducerMetrics.on_split`. State the
producer already keeps (free buffer memory, in-flight requests, metadata age) is read by gauges
at snapshot time. :meth:`ProducerMetrics.snapshot` returns a frozen, picklable
:class:`MetricsSnapshot`; the Spark layer ships them from executors and merges them on the driver.

Stats, as in Java's ``org.apache.kafka.common.metrics.stats``:

- ``Total``: a cumulative sum, from 0 (``*-total``).
- ``Avg`` / ``Max`` / ``Rate``: over a sampled window, Java's defaults ``metrics.num.samples``=2
  × ``metrics.sample.window.ms``=30 s. A sample opens at its first record and is complete
  ``window_ms`` later; the next record then starts the next sample (reusing the oldest slot).
  A sample whose start is ``samples × window_ms`` old is forgotten when measured.
  ``Avg`` and ``Max`` with no samples report NaN, as Java does. ``Rate`` is the windowed sum
  per second over the elapsed window, counted as at least ``(samples - 1)`` full windows
  (Java's ``Rate.windowSize``), so a producer that just started reports a low rate, not a spike.
- Gauges: callables of ``now_ms``, evaluated at snapshot time, outside the metrics lock.

Where this differs from Java (each for a stated reason):

- ``byte-total`` / ``byte-rate`` also exist globally (Java has them per topic only; its global
  ``outgoing-byte-*`` counts network bytes, which the sender does not report here).
- Batch sizes are the bytes sent: the built (compressed) batch, header included, as Java's
  ``estimatedSizeInBytes()`` of a closed batch. ``compression-rate`` is that size over the
  uncompressed size (``ProducerBatch.estimated_size_in_bytes``: header plus encoded records);
  both sizes include the 61-byte batch header, so a tiny batch never reports much compression.
- ``record-size-avg`` is the true mean encoded record size (each batch weighs by its record
  count); Java records each batch's largest record instead. ``record-size-max`` is not
  reported: a batch does not track its largest record.
- Per-topic retry/error counts are recorded even for a topic that never had a request sent.
- ``request-total`` / ``request-rate`` count responses received (``on_response``), globally and
  per node; acks=0 requests, which get none, are not counted.
- Ours, for checking the sender's per-leader drain (one ProduceRequest per node per drain,
  holding every sendable partition of that node): ``produce-drain-total`` counts drains that
  sent at least one request (``on_drain``); per node, ``produce-request-total`` counts the
  ProduceRequests sent and ``produce-partition-total`` the partition batches they carried.
- Not reported: ``bufferpool-wait-ratio`` (needs the pool to record each wait into a sensor),
  ``produce-throttle-time-*``, the selector's network metrics.

Thread safety: :class:`ProducerMetrics` guards all its stats with one lock; hooks and snapshots
may be called from any thread. The stat classes on their own are not thread safe.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..clock import Clock
from ..record.layout import HEADER_SIZE

DEFAULT_SAMPLES = 2
DEFAULT_WINDOW_MS = 30_000
NAN = math.nan

Gauge = Callable[[int], float]
"""A gauge: ``now_ms`` (monotonic) to its current value."""


# --- stats ------------------------------------------------------------------------------------

class Total:
    """A cumulative sum (Java's ``CumulativeSum``), from 0."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def record(self, value: float, now_ms: int, count: int = 1) -> None:
        self.value += value

    def measure(self, now_ms: int) -> float:
        return self.value


class _Sample:
    __slots__ = ("start_ms", "total", "count", "max")

    def __init__(self, start_ms: int):
        self.reset(start_ms)

    def reset(self, start_ms: int) -> None:
        self.start_ms = start_ms
        self.total = 0.0
        self.count = 0
        self.max = -math.inf


class _Sampled:
    """Java's ``SampledStat``: a ring of ``samples`` windows of ``window_ms`` each."""

    __slots__ = ("_samples", "_n", "_window_ms", "_current")

    def __init__(self, samples: int = DEFAULT_SAMPLES, window_ms: int = DEFAULT_WINDOW_MS):
        if samples < 1 or window_ms < 1:
            raise ValueError(f"need samples >= 1 and window_ms >= 1, got {samples}, {window_ms}")
        self._samples: list[_Sample] = []
        self._n = samples
        self._window_ms = window_ms
        self._current = 0

    def record(self, value: float, now_ms: int, count: int = 1) -> None:
        """Add ``value``, standing for ``count`` events (an Avg then weighs it ``count`` times)."""
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self._window_ms:
            self._current = (self._current + 1) % self._n
            if self._current == len(self._samples):
                sample = _Sample(now_ms)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.reset(now_ms)
        sample.total += value
        sample.count += count
        if value > sample.max:
            sample.max = value

    def _live(self, now_ms: int) -> list[_Sample]:
        """The samples after forgetting those ``samples × window_ms`` old (reset to ``now_ms``)."""
        expire_ms = self._n * self._window_ms
        for sample in self._samples:
            if now_ms - sample.start_ms >= expire_ms:
                sample.reset(now_ms)
        return self._samples

    def parts(self, now_ms: int) -> tuple[float, int]:
        """(sum, event count) over the live samples."""
        samples = self._live(now_ms)
        return sum(s.total for s in samples), sum(s.count for s in samples)


class Avg(_Sampled):
    """The windowed mean; NaN without samples."""

    __slots__ = ()

    def measure(self, now_ms: int) -> float:
        total, count = self.parts(now_ms)
        return total / count if count else NAN


class Max(_Sampled):
    """The windowed maximum; NaN without samples."""

    __slots__ = ()

    def measure(self, now_ms: int) -> float:
        samples = self._live(now_ms)
        if not any(s.count for s in samples):
            return NAN
        return float(max(s.max for s in samples))


class Rate(_Sampled):
    """The windowed sum per second (Java's ``Rate`` over a ``WindowedSum``); 0 without samples."""

    __slots__ = ()

    def measure(self, now_ms: int) -> float:
        total, _ = self.parts(now_ms)
        return total * 1000.0 / self.window_size_ms(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        """Elapsed time since the oldest sample, at least ``samples - 1`` windows and 1 ms."""
        samples = self._live(now_ms)
        oldest = min((s.start_ms for s in samples), default=now_ms)
        elapsed = now_ms - oldest
        missing = (self._n - 1) - elapsed // self._window_ms
        if missing > 0:
            elapsed += missing * self._window_ms
        return max(elapsed, 1)


Stat = Total | Avg | Max | Rate


class Sensor:
    """Named stats recorded together (Java's ``Sensor``): one ``record`` feeds them all."""

    __slots__ = ("stats",)

    def __init__(self, stats: Mapping[str, Stat]):
        self.stats = dict(stats)

    def record(self, value: float, now_ms: int, count: int = 1) -> None:
        for stat in self.stats.values():
            stat.record(value, now_ms, count)

    def measure_into(self, now_ms: int, values: dict[str, float],
                     averages: dict[str, tuple[float, int]], prefix: str = "") -> None:
        """Write each stat's value (and each Avg's (sum, count), under ``prefix + name``)."""
        for name, stat in self.stats.items():
            if isinstance(stat, Avg):
                total, count = stat.parts(now_ms)
                averages[prefix + name] = (total, count)
                values[name] = total / count if count else NAN
            else:
                values[name] = stat.measure(now_ms)


# --- the producer's sensors ------------------------------------------------------------------

class _Scope:
    """The sensors of one scope (the producer, a topic or a node), by sensor name."""

    __slots__ = ("sensors",)

    def __init__(self, specs: Mapping[str, Mapping[str, type]], samples: int, window_ms: int):
        self.sensors = {
            sensor: Sensor({name: kind() if kind is Total else kind(samples, window_ms)
                            for name, kind in stats.items()})
            for sensor, stats in specs.items()}

    def measure(self, now_ms: int, averages: dict[str, tuple[float, int]],
                prefix: str = "") -> dict[str, float]:
        values: dict[str, float] = {}
        for sensor in self.sensors.values():
            sensor.measure_into(now_ms, values, averages, prefix)
        return values


def _meter(name: str) -> dict[str, type]:
    """Java's ``Meter``: ``<name>-total`` and ``<name>-rate``."""
    return {f"{name}-total": Total, f"{name}-rate": Rate}


_GLOBAL = {
    "batch-size": {"batch-size-avg": Avg, "batch-size-max": Max},
    "compression-rate": {"compression-rate-avg": Avg},
    "queue-time": {"record-queue-time-avg": Avg, "record-queue-time-max": Max},
    "record-size": {"record-size-avg": Avg},
    "records-per-request": {"records-per-request-avg": Avg, **_meter("record-send")},
    "bytes": _meter("byte"),
    "request-time": {"request-latency-avg": Avg, "request-latency-max": Max},
    "requests": _meter("request"),
    "record-retries": _meter("record-retry"),
    "errors": _meter("record-error"),
    "drains": {"produce-drain-total": Total},
    "batch-splits": _meter("batch-split"),
}
_TOPIC = {
    "records": _meter("record-send"),
    "bytes": _meter("byte"),
    "compression-rate": {"compression-rate": Avg},
    "record-retries": _meter("record-retry"),
    "record-errors": _meter("record-error"),
}
_NODE = {
    "latency": {"request-latency-avg": Avg, "request-latency-max": Max},
    "requests": _meter("request"),
    "produce-requests": {"produce-request-total": Total},
    "produce-partitions": {"produce-partition-total": Total},
}

_MAX_MERGED = frozenset({"batch-size-max", "record-queue-time-max", "request-latency-max",
                         "metadata-age"})
"""Metrics whose merge is the maximum (metadata-age: the stalest producer). Averages merge by
their (sum, count); everything else (totals, rates, byte and thread gauges) adds up."""


def _topic_key(topic: str, name: str) -> str:
    return f"topic.{topic}.{name}"


def _node_key(node_id: int, name: str) -> str:
    return f"node-{node_id}.{name}"


class ProducerMetrics:
    """One producer's metrics; see the module docstring. Thread safe."""

    def __init__(self, *, clock: Clock, client_id: str, samples: int = DEFAULT_SAMPLES,
                 window_ms: int = DEFAULT_WINDOW_MS):
        self._clock = clock
        self._client_id = client_id
        self._samples = samples
        self._window_ms = window_ms
        self._lock = threading.Lock()
        self._global = _Scope(_GLOBAL, samples, window_ms)
        self._topics: dict[str, _Scope] = {}
        self._nodes: dict[int, _Scope] = {}
        self._gauges: dict[str, Gauge] = {}

    @property
    def client_id(self) -> str:
        return self._client_id

    # --- hooks (the sender) ---------------------------------------------------------------------

    def on_produce_request(self, node_id: int, batches: Sequence[Any], now_ms: int) -> None:
        """One ProduceRequest to ``node_id`` carrying ``batches`` (drained, closed)."""
        if not batches:
            return
        g = self._global.sensors
        with self._lock:
            records = 0
            for batch in batches:
                count = batch.record_count
                sent = batch.size_in_bytes
                uncompressed = batch.estimated_size_in_bytes
                ratio = sent / uncompressed if uncompressed else 1.0
                t = self._topic(batch.topic_partition.topic).sensors
                t["records"].record(count, now_ms)
                t["bytes"].record(sent, now_ms)
                t["compression-rate"].record(ratio, now_ms)
                g["batch-size"].record(sent, now_ms)
                g["bytes"].record(sent, now_ms)
                g["compression-rate"].record(ratio, now_ms)
                g["queue-time"].record(batch.queue_time_ms, now_ms)
                if count:
                    g["record-size"].record(uncompressed - HEADER_SIZE, now_ms, count)
                records += count
            g["records-per-request"].record(records, now_ms)
            node = self._node(node_id).sensors
            node["produce-requests"].record(1, now_ms)
            node["produce-partitions"].record(len(batches), now_ms)

    def on_drain(self, now_ms: int) -> None:
        """One sender drain sent at least one ProduceRequest (at most one per node)."""
        with self._lock:
            self._global.sensors["drains"].record(1, now_ms)

    def on_response(self, node_id: int, latency_ms: float) -> None:
        """A response from ``node_id``, ``latency_ms`` after its request was sent."""
        now_ms = self._clock.monotonic_ms()
        g = self._global.sensors
        with self._lock:
            node = self._node(node_id)
            g["request-time"].record(latency_ms, now_ms)
            g["requests"].record(1, now_ms)
            node.sensors["latency"].record(latency_ms, now_ms)
            node.sensors["requests"].record(1, now_ms)

    def on_retry(self, topic: str, record_count: int) -> None:
        """``record_count`` records of ``topic`` go back for another attempt."""
        self._record_topic_event("record-retries", "record-retries", topic, record_count)

    def on_error(self, topic: str, record_count: int) -> None:
        """``record_count`` records of ``topic`` failed for good (error or expiry)."""
        self._record_topic_event("errors", "record-errors", topic, record_count)

    def on_split(self, topic: str) -> None:
        """A batch of ``topic`` refused as too large was split (``batch-split-total``/``-rate``,
        global as in Java)."""
        now_ms = self._clock.monotonic_ms()
        with self._lock:
            self._global.sensors["batch-splits"].record(1, now_ms)

    def _record_topic_event(self, global_sensor: str, topic_sensor: str, topic: str,
                            record_count: int) -> None:
        now_ms = self._clock.monotonic_ms()
        with self._lock:
            self._global.sensors[global_sensor].record(record_count, now_ms)
            self._topic(topic).sensors[topic_sensor].record(record_count, now_ms)

    def _node(self, node_id: int) -> _Scope:
        """The node's sensors, created on first use. Lock held."""
        scope = self._nodes.get(node_id)
        if scope is None:
            scope = self._nodes[node_id] = _Scope(_NODE, self._samples, self._window_ms)
        return scope

    def _topic(self, topic: str) -> _Scope:
        """The topic's sensors, created on first use. Lock held."""
        scope = self._topics.get(topic)
        if scope is None:
            scope = self._topics[topic] = _Scope(_TOPIC, self._samples, self._window_ms)
        return scope

    # --- gauges ---------------------------------------------------------------------------------

    def register_gauge(self, name: str, gauge: Gauge) -> None:
        """Report ``gauge(now_ms)`` as ``name`` in every snapshot (replacing one of that name)."""
        with self._lock:
            self._gauges[name] = gauge

    def register_gauges(self, *, buffer_pool: Any = None, metadata: Any = None,
                        client: Any = None) -> None:
        """The producer's gauges, for whichever of its parts are given."""
        if buffer_pool is not None:
            self.register_gauge("buffer-available-bytes", lambda now: buffer_pool.available_memory)
            self.register_gauge("buffer-total-bytes", lambda now: buffer_pool.total_memory)
            self.register_gauge("bufferpool-wait-time-ns-total",
                                lambda now: buffer_pool.wait_time_ns_total)
            self.register_gauge("waiting-threads", lambda now: buffer_pool.queued)
        if metadata is not None:
            self.register_gauge("metadata-age", lambda now: _metadata_age_s(metadata, now))
        if client is not None:
            self.register_gauge("requests-in-flight", lambda now: client.in_flight_request_count())

    # --- snapshots ------------------------------------------------------------------------------

    def snapshot(self, now_ms: int | None = None) -> MetricsSnapshot:
        """Every metric now (``now_ms``: monotonic ms, default the clock's)."""
        if now_ms is None:
            now_ms = self._clock.monotonic_ms()
        with self._lock:
            gauges = list(self._gauges.items())
        gauge_values = {name: float(gauge(now_ms)) for name, gauge in gauges}  # not under our lock
        averages: dict[str, tuple[float, int]] = {}
        with self._lock:
            values = self._global.measure(now_ms, averages)
            topics = {topic: scope.measure(now_ms, averages, f"topic.{topic}.")
                      for topic, scope in self._topics.items()}
            nodes = {node: scope.measure(now_ms, averages, f"node-{node}.")
                     for node, scope in self._nodes.items()}
        values.update(gauge_values)
        return MetricsSnapshot(values, topics, nodes, averages)

    def __repr__(self) -> str:
        return f"ProducerMetrics(client_id={self._client_id!r}, topics={len(self._topics)})"


def _metadata_age_s(metadata: Any, now_ms: int) -> float:
    """Seconds since the last successful metadata update (Java's ``metadata-age``); NaN before."""
    last = metadata.last_successful_update_ms
    return NAN if last is None else (now_ms - last) / 1000.0


# --- snapshots ---------------------------------------------------------------------------------

def _frozen(mapping: Mapping) -> Mapping:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class MetricsSnapshot:
    """Metric values at one instant, of one producer or merged from several.

    - ``values``: the producer-level metrics, by Java name (``record-send-total`` ...).
    - ``topics``: per topic, the topic-level metrics by Java name.
    - ``nodes``: per node id, the node-level metrics (``request-latency-avg`` ...).
    - ``averages``: for every average, its (sum, count) under its flat key (see
      :meth:`as_dict`), so that :meth:`merge` weighs averages exactly.

    Averages and maxima without samples are NaN; totals start at 0. Immutable and picklable.
    """

    values: Mapping[str, float] = field(default_factory=dict)
    topics: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    nodes: Mapping[int, Mapping[str, float]] = field(default_factory=dict)
    averages: Mapping[str, tuple[float, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", _frozen(self.values))
        object.__setattr__(self, "topics", _frozen({t: _frozen(m) for t, m in self.topics.items()}))
        object.__setattr__(self, "nodes", _frozen({n: _frozen(m) for n, m in self.nodes.items()}))
        object.__setattr__(self, "averages", _frozen(self.averages))

    def __reduce__(self):
        return (MetricsSnapshot, (dict(self.values),
                                  {t: dict(m) for t, m in self.topics.items()},
                                  {n: dict(m) for n, m in self.nodes.items()},
                                  dict(self.averages)))

    def as_dict(self) -> dict[str, float]:
        """Flat Java-style keys: ``name``, ``topic.<topic>.name``, ``node-<id>.name``."""
        flat = dict(self.values)
        for topic, metrics in self.topics.items():
            flat.update((_topic_key(topic, name), value) for name, value in metrics.items())
        for node, metrics in self.nodes.items():
            flat.update((_node_key(node, name), value) for name, value in metrics.items())
        return flat

    def merge(self, other: MetricsSnapshot) -> MetricsSnapshot:
        """Both snapshots combined: totals, rates and gauges add; maxima (and ``metadata-age``)
        take the larger, ignoring NaN; averages are sum/count over both. Exact for averages."""
        averages = dict(self.averages)
        for key, (total, count) in other.averages.items():
            mine = averages.get(key, (0.0, 0))
            averages[key] = (mine[0] + total, mine[1] + count)
        values = _merge_values(self.values, other.values, averages, "")
        topics = _merge_scopes(self.topics, other.topics, averages, _topic_key)
        nodes = _merge_scopes(self.nodes, other.nodes, averages, _node_key)
        return MetricsSnapshot(values, topics, nodes, averages)


def merge_snapshots(snapshots: Iterable[MetricsSnapshot]) -> MetricsSnapshot:
    """All ``snapshots`` merged (see :meth:`MetricsSnapshot.merge`); empty for none."""
    merged = MetricsSnapshot()
    for snapshot in snapshots:
        merged = merged.merge(snapshot)
    return merged


def _merge_scopes(mine: Mapping, theirs: Mapping, averages: Mapping[str, tuple[float, int]],
                  key: Callable[[Any, str], str]) -> dict:
    merged = {}
    for scope in mine.keys() | theirs.keys():
        merged[scope] = _merge_values(mine.get(scope, {}), theirs.get(scope, {}), averages,
                                      key(scope, ""))
    return merged


def _merge_values(mine: Mapping[str, float], theirs: Mapping[str, float],
                  averages: Mapping[str, tuple[float, int]], prefix: str) -> dict[str, float]:
    merged = dict(mine)
    for name, value in theirs.items():
        if name not in merged:
            merged[name] = value
        elif name in _MAX_MERGED:
            merged[name] = _nan_max(merged[name], value)
        else:
            merged[name] = merged[name] + value
    for name in merged:
        parts = averages.get(prefix + name)
        if parts is not None:
            merged[name] = parts[0] / parts[1] if parts[1] else NAN
    return merged


def _nan_max(a: float, b: float) -> float:
    if math.isnan(a):
        return b
    if math.isnan(b):
        return a
    return max(a, b)
