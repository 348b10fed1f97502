"""The sink's metrics as notebook tables (spark_kafka_sink.spark.metrics_table): still a dict and a
list for code that reads them, an HTML table and a pandas DataFrame for people; no SparkSession."""

from __future__ import annotations

import copy
import json
import math
import pickle
import re
import sys

import pytest

from spark_kafka_sink import KafkaSink
from spark_kafka_sink.spark.metrics import SinkTaskMetrics, format_line
from spark_kafka_sink.spark.metrics_table import (
    LEAD_COLUMNS,
    MetricsHistory,
    SinkMetrics,
    format_value,
    metrics_row,
)

A = SinkTaskMetrics(records_sent=1000, records_failed=2, bytes_sent=48_000, batches=3, requests=2,
                    request_latency_sum_ms=7.5, request_latency_count=2, topics={"events": 1000},
                    tasks=2)
B = SinkTaskMetrics(records_sent=10, bytes_sent=480, batches=1, requests=1, request_latency_sum_ms=2.0,
                    request_latency_count=1, topics={"orders": 10}, tasks=1)


def published() -> KafkaSink:
    """A sink that published two writes: micro-batch 0 in 0.5 s, then a batch write in 0.25 s."""
    sink = KafkaSink(**{"kafka.bootstrap.servers": "localhost:9092", "topic": "t"})
    sink._publish(0, A, 0.5)
    sink._publish(None, B, 0.25)
    return sink


def test_they_stay_a_dict_and_a_list_equal_to_plain_ones():
    sink = published()
    last, history = sink.last_metrics, sink.metrics_history
    assert isinstance(last, dict) and isinstance(history, list)
    assert last == B.as_dict() and dict(last) == B.as_dict() and B.as_dict() == last
    assert history == [(0, A.as_dict()), (None, B.as_dict())]
    assert [batch for batch, _ in history] == [0, None] and history[-1][1] is last
    assert list(last) == list(B.as_dict())  # the published order, as format_line logs it
    assert json.loads(json.dumps(history)) == [[0, A.as_dict()], [None, B.as_dict()]]
    assert (last.batch_id, last.seconds) == (None, 0.25) and history[0][1].batch_id == 0
    assert history is not sink.metrics_history  # a copy each time, as before


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_they_pickle_and_copy_as_themselves(protocol):
    history = published().metrics_history
    again = pickle.loads(pickle.dumps(history, protocol))
    assert type(again) is MetricsHistory and again == history
    metrics = again[0][1]
    assert type(metrics) is SinkMetrics and (metrics.batch_id, metrics.seconds) == (0, 0.5)
    for twin in (copy.copy(history[0][1]), copy.deepcopy(history[0][1])):
        assert type(twin) is SinkMetrics and twin == history[0][1] and twin.seconds == 0.5


def test_a_row_leads_with_what_a_reader_wants_then_every_figure():
    row = metrics_row(0, published().metrics_history[0][1])
    assert tuple(row)[:len(LEAD_COLUMNS)] == LEAD_COLUMNS
    assert row["batch_id"] == 0 and row["record-send-total"] == 1000 and row["byte-total"] == 48_000
    assert row["record-error-total"] == 2 and row["seconds"] == 0.5 and row["record-send-rate"] == 2000
    assert row["topic.events.record-send-total"] == 1000 and row["request-latency-avg"] == 3.75
    assert set(row) == set(LEAD_COLUMNS) | set(A.as_dict())
    plain = metrics_row(None, {"record-send-total": 5})  # a plain dict: no duration, no rate
    assert math.isnan(plain["seconds"]) and math.isnan(plain["record-send-rate"])
    assert math.isnan(plain["byte-total"])
    assert math.isnan(metrics_row(1, SinkMetrics({"record-send-total": 5}, seconds=0.0))["record-send-rate"])


def cells(html: str) -> list[list[str]]:
    return [re.findall(r"<t[hd]>(.*?)</t[hd]>", row) for row in re.findall(r"<tr>(.*?)</tr>", html)]


def test_the_history_renders_as_one_html_row_per_write():
    history = published().metrics_history
    table = cells(history._repr_html_())
    header, first, second = table
    assert header == history.columns() and header[:len(LEAD_COLUMNS)] == list(LEAD_COLUMNS)
    assert "topic.events.record-send-total" in header and "topic.orders.record-send-total" in header
    by_name = [dict(zip(header, row)) for row in (first, second)]
    assert by_name[0]["batch_id"] == "0" and by_name[1]["batch_id"] == "write"
    assert by_name[0]["record-send-total"] == "1000" and by_name[0]["seconds"] == "0.500"
    assert by_name[0]["record-send-rate"] == "2000" and by_name[1]["record-send-rate"] == "40"
    assert by_name[0]["topic.orders.record-send-total"] == ""  # a figure that write lacks
    assert by_name[0]["request-latency-avg"] == "3.750" and by_name[1]["request-latency-avg"] == "2"
    assert history._repr_html_().startswith('<table class="dataframe')
    assert "no write yet" in MetricsHistory()._repr_html_()


def test_one_writes_metrics_render_a_figure_per_row_and_names_are_escaped():
    metrics = SinkMetrics({"record-send-total": 3, "error.<b>&.record-error-total": 1}, batch_id=7,
                          seconds=1.5)
    table = cells(metrics._repr_html_())
    assert table[0] == ["metric", "value"]
    assert ["batch_id", "7"] in table and ["seconds", "1.500"] in table and ["record-send-rate", "2"] in table
    assert ["error.&lt;b&gt;&amp;.record-error-total", "1"] in table


def test_format_value_is_the_log_lines():
    figures = {"a": 3, "b": 2.0, "c": 1.23456, "d": math.nan}  # NaN: no request (latency)
    assert [format_value(v) for v in figures.values()] == ["3", "2", "1.235", "NaN"]
    assert format_line(4, figures, 0.5) == "KafkaSink: micro-batch 4 written in 0.500 s: a=3 b=2 c=1.235 d=NaN"


def test_to_pandas_gives_a_frame_in_column_order():
    import pandas  # the spark extra declares it: a missing one fails, never skips
    history = published().metrics_history
    frame = history.to_pandas()
    assert isinstance(frame, pandas.DataFrame) and list(frame.columns) == history.columns()
    assert frame["record-send-total"].tolist() == [1000, 10] and frame["seconds"].tolist() == [0.5, 0.25]
    assert math.isnan(frame["topic.orders.record-send-total"][0])
    one = history[0][1].to_pandas()
    assert len(one) == 1 and one["record-send-rate"][0] == 2000


def test_to_pandas_without_pandas_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now fails
    with pytest.raises(ImportError, match="pip install pandas"):
        published().metrics_history.to_pandas()
    assert "<table" in published().metrics_history._repr_html_()  # the table needs nothing
