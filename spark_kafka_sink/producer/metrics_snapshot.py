"""Metric values at one instant (:class:`MetricsSnapshot`): frozen, picklable, and mergeable
exactly across producers (the Spark layer ships them from executors and merges them on the
driver). Averages merge by their (sum, count), maxima take the larger, everything else adds."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

NAN = math.nan

_MAX_MERGED = frozenset({"batch-size-max", "record-queue-time-max", "request-latency-max",
                         "metadata-age"})
"""Metrics whose merge is the maximum (metadata-age: the stalest producer). Averages merge by
their (sum, count); everything else (totals, rates, byte and thread gauges) adds up."""


def _topic_key(topic: str, name: str) -> str:
    return f"topic.{topic}.{name}"


def _node_key(node_id: int, name: str) -> str:
    return f"node-{node_id}.{name}"


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
