"""The sink's metrics as tables, for notebooks (see docs/notebooks.md).

``KafkaSink.last_metrics`` is a :class:`SinkMetrics` and ``KafkaSink.metrics_history`` a
:class:`MetricsHistory`. Code that reads them as before keeps working: a ``SinkMetrics`` *is* the
dict of figures by Java-style name (``metrics["record-send-total"]``), equal to a plain dict with
the same items, and a ``MetricsHistory`` *is* the list of ``(batch_id, metrics)`` tuples, equal to
a plain list. What they add:

- ``_repr_html_``: Jupyter and Databricks show them as a table (the history: one row per
  micro-batch or write; one write's metrics: a figure per row).
- ``to_pandas()``: a pandas DataFrame, one row per write (pandas is imported on the call; without
  it, an ``ImportError`` that says how to install it). ``records()``: the same rows as dicts.
- ``SinkMetrics.batch_id`` and ``SinkMetrics.seconds``: which micro-batch (``None`` for
  ``sink.write``) and how long the driver took for it, schema checks and the Spark job included
  (the figure of the sink's log line), neither of them a key of the dict.

Columns: :data:`LEAD_COLUMNS` first (``batch_id``, records sent, bytes, records failed, seconds,
records per second), then every other figure in the order the sink publishes them (per topic, per
error class, the exactly-once transaction figures). A figure one write lacks (a topic another
write did not touch) is empty in the HTML and NaN in pandas. Both classes pickle as themselves.
This module imports neither pyspark nor pandas.
"""

from __future__ import annotations

import html
import math
from typing import Any, Iterable, Mapping

__all__ = ["SinkMetrics", "MetricsHistory", "LEAD_COLUMNS", "RATE", "SECONDS", "BATCH_ID",
           "metrics_row", "format_value"]

BATCH_ID = "batch_id"
SECONDS = "seconds"
RATE = "record-send-rate"
"""Records acknowledged per second of the write (``record-send-total`` / ``seconds``)."""
LEAD_COLUMNS = (BATCH_ID, "record-send-total", "byte-total", "record-error-total", SECONDS, RATE)
"""The columns a reader wants first; the other figures follow."""


class SinkMetrics(dict):
    """One write's figures by Java-style name (a ``dict``), with the micro-batch it was
    (:attr:`batch_id`, ``None`` for ``sink.write``) and its duration (:attr:`seconds`)."""

    def __init__(self, figures: Mapping[str, float] | Iterable[tuple[str, float]] = (), /, *,
                 batch_id: int | None = None, seconds: float = math.nan):
        super().__init__(figures)
        self._batch_id = batch_id
        self._seconds = float(seconds)

    @property
    def batch_id(self) -> int | None:
        return self._batch_id

    @property
    def seconds(self) -> float:
        """The driver's time for the write, NaN where unknown."""
        return self._seconds

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (dict(self),), {"_batch_id": self._batch_id, "_seconds": self._seconds})

    def records(self) -> list[dict[str, Any]]:
        """This write as one table row (:func:`metrics_row`), in a list."""
        return [metrics_row(self._batch_id, self)]

    def to_pandas(self) -> Any:
        """A one-row pandas DataFrame (columns as :class:`MetricsHistory`'s)."""
        return _data_frame(self.records())

    def _repr_html_(self) -> str:
        row = metrics_row(self._batch_id, self)
        body = "".join(f"<tr><th>{html.escape(name)}</th><td>{_cell(name, value)}</td></tr>"
                       for name, value in row.items())
        return (f'<table class="dataframe spark-kafka-sink-metrics">'
                f"<thead><tr><th>metric</th><th>value</th></tr></thead><tbody>{body}</tbody></table>")


class MetricsHistory(list):
    """The sink's last writes, oldest first: a ``list`` of ``(batch_id, metrics)`` tuples."""

    def records(self) -> list[dict[str, Any]]:
        """One dict per write, keys in column order (:func:`metrics_row`)."""
        return [metrics_row(batch_id, metrics) for batch_id, metrics in self]

    def columns(self) -> list[str]:
        """:data:`LEAD_COLUMNS`, then every other figure in the order the writes first show it."""
        return _columns(self.records())

    def to_pandas(self) -> Any:
        """A pandas DataFrame, one row per write, in :meth:`columns` order."""
        return _data_frame(self.records())

    def _repr_html_(self) -> str:
        rows = self.records()
        columns = _columns(rows)
        head = "".join(f"<th>{html.escape(name)}</th>" for name in columns)
        body = "".join("<tr>" + "".join(f"<td>{_cell(name, row.get(name))}</td>" for name in columns)
                       + "</tr>" for row in rows)
        caption = "" if rows else "<caption>no write yet</caption>"
        return (f'<table class="dataframe spark-kafka-sink-metrics">{caption}'
                f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def metrics_row(batch_id: int | None, metrics: Mapping[str, float]) -> dict[str, Any]:
    """One write as a table row: :data:`LEAD_COLUMNS` (``seconds`` from a :class:`SinkMetrics`,
    NaN from a plain mapping; the rate NaN without a positive duration), then the other figures."""
    seconds = float(getattr(metrics, "seconds", math.nan))
    sent = metrics.get("record-send-total", math.nan)
    rate = sent / seconds if seconds > 0 and not math.isnan(seconds) else math.nan
    row: dict[str, Any] = {BATCH_ID: batch_id}
    for name in LEAD_COLUMNS[1:]:
        row[name] = seconds if name == SECONDS else rate if name == RATE else metrics.get(name, math.nan)
    row.update((name, value) for name, value in metrics.items() if name not in row)
    return row


def format_value(value: Any) -> str:
    """A figure as the sink's log line writes it: whole numbers as integers, others to 3
    decimals, ``NaN``; anything else as ``str``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3f}"
    return str(int(value))


def _cell(name: str, value: Any) -> str:
    if name == BATCH_ID:
        return "write" if value is None else html.escape(str(value))
    return "" if value is None else html.escape(format_value(value))


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    columns = dict.fromkeys(LEAD_COLUMNS)
    for row in rows:
        columns.update(dict.fromkeys(row))
    return list(columns)


def _data_frame(rows: list[dict[str, Any]]) -> Any:
    try:
        import pandas
    except ImportError as error:
        raise ImportError("to_pandas() needs pandas, which is not installed: pip install pandas "
                          "(the package's 'spark' extra brings it); the sink's metrics render as an "
                          "HTML table without it") from error
    return pandas.DataFrame(rows, columns=_columns(rows))
