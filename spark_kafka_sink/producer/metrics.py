"""Producer metrics with Java's names: sensors the sender records into, snapshots that merge.

The producer's caller records the time spent in each transactional call
(:meth:`ProducerMetrics.on_transaction_step`, Java's ``txn-*-time-ns-total``). The sender reports
what happened, once per request or per failed/retried batch and never per record, through six
hooks (``on_produce_request``, ``on_drain``, ``on_response``, ``on_retry``, ``on_error``,
``on_split``). State the producer already keeps (free buffer memory, in-flight requests, metadata
age) is read by gauges at snapshot time. :meth:`ProducerMetrics.snapshot` returns a frozen,
picklable :class:`MetricsSnapshot` (:mod:`.metrics_snapshot`); the Spark layer ships them from
executors and merges them on the driver. The stats themselves live in :mod:`.stats`.

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
- ``produce-throttle-time-avg`` / ``-max``: the ``throttle_time_ms`` of every response the
  producer's network client receives that has one (Java's sensor, recorded the same way);
  :meth:`ProducerMetrics.on_throttle`.
- ``successful-authentication-total``, ``failed-authentication-total`` and their
  ``-reauthentication-`` twins (KIP-368) count SASL logins, as Java's selector metrics do;
  :meth:`ProducerMetrics.on_authentication`.
- Not reported: ``bufferpool-wait-ratio`` (needs the pool to record each wait into a sensor),
  the selector's network metrics.

Thread safety: :class:`ProducerMetrics` guards all its stats with one lock; hooks and snapshots
may be called from any thread. The stat classes on their own are not thread safe.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Mapping, Protocol, Sequence

from ..clock import Clock
from ..record.layout import HEADER_SIZE
from .metrics_snapshot import NAN, MetricsSnapshot
from .stats import DEFAULT_SAMPLES, DEFAULT_WINDOW_MS, Avg, Gauge, Max, Rate, Sensor, Total

log = logging.getLogger(__name__)


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
    "throttle-time": {"produce-throttle-time-avg": Avg, "produce-throttle-time-max": Max},
    # SASL logins, Java's Selector names (KIP-368 for the re-authentications)
    "authentication": {"successful-authentication-total": Total},
    "authentication-failed": {"failed-authentication-total": Total},
    "reauthentication": {"successful-reauthentication-total": Total},
    "reauthentication-failed": {"failed-reauthentication-total": Total},
    # time the caller spent in each transactional call, Java's KafkaProducerMetrics names
    "txn-init": {"txn-init-time-ns-total": Total},
    "txn-begin": {"txn-begin-time-ns-total": Total},
    "txn-commit": {"txn-commit-time-ns-total": Total},
    "txn-abort": {"txn-abort-time-ns-total": Total},
}
TRANSACTION_STEPS = ("init", "begin", "commit", "abort")
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

    def on_throttle(self, api: Any, throttle_ms: int, now_ms: int) -> None:
        """A response's ``throttle_time_ms`` (the network client's throttle observer)."""
        with self._lock:
            self._global.sensors["throttle-time"].record(throttle_ms, now_ms)

    def on_authentication(self, reauthentication: bool, succeeded: bool) -> None:
        """A SASL login (or, KIP-368, a login again on a live connection) completed or failed."""
        sensor = ("re" if reauthentication else "") + "authentication" + ("" if succeeded else "-failed")
        now_ms = self._clock.monotonic_ms()
        with self._lock:
            self._global.sensors[sensor].record(1, now_ms)

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

    def on_transaction_step(self, step: str, elapsed_ns: int) -> None:
        """A transactional call (``init``, ``begin``, ``commit`` or ``abort``) returned after
        ``elapsed_ns`` (``txn-<step>-time-ns-total``)."""
        if step not in TRANSACTION_STEPS:
            raise ValueError(f"unknown transaction step {step!r}; one of {TRANSACTION_STEPS}")
        now_ms = self._clock.monotonic_ms()
        with self._lock:
            self._global.sensors[f"txn-{step}"].record(elapsed_ns, now_ms)

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


class SenderMetrics(Protocol):
    """The hooks the sender reports through: once per request, drain or failed/retried batch,
    never per record. :class:`ProducerMetrics` implements them."""

    def on_produce_request(self, node_id: int, batches: Sequence[Any], now_ms: int) -> None: ...

    def on_drain(self, now_ms: int) -> None: ...

    def on_response(self, node_id: int, latency_ms: float) -> None: ...

    def on_retry(self, topic: str, record_count: int) -> None: ...

    def on_error(self, topic: str, record_count: int) -> None: ...

    def on_split(self, topic: str) -> None: ...


class GuardedMetrics:
    """The sender's view of its metrics: each hook forwards to ``metrics`` (nothing when None),
    and an error in a hook is logged, never raised: a metrics bug must not stop the sender."""

    __slots__ = ("_metrics",)

    def __init__(self, metrics: SenderMetrics | None):
        self._metrics = metrics

    def _call(self, hook: str, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("error in producer metrics (%s)", hook)

    def on_produce_request(self, node_id: int, batches: Sequence[Any], now_ms: int) -> None:
        if self._metrics is not None:
            self._call("on_produce_request", self._metrics.on_produce_request, node_id, batches, now_ms)

    def on_drain(self, now_ms: int) -> None:
        if self._metrics is not None:
            self._call("on_drain", self._metrics.on_drain, now_ms)

    def on_response(self, node_id: int, latency_ms: float) -> None:
        if self._metrics is not None:
            self._call("on_response", self._metrics.on_response, node_id, latency_ms)

    def on_retry(self, topic: str, record_count: int) -> None:
        if self._metrics is not None:
            self._call("on_retry", self._metrics.on_retry, topic, record_count)

    def on_error(self, topic: str, record_count: int) -> None:
        if self._metrics is not None:
            self._call("on_error", self._metrics.on_error, topic, record_count)

    def on_split(self, topic: str) -> None:
        if self._metrics is not None:
            self._call("on_split", self._metrics.on_split, topic)
