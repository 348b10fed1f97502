"""``send_arrow(errors_tolerance="all")``'s row check: every bad row, named by its input row."""

from __future__ import annotations

import pyarrow as pa
import pytest

from spark_kafka_sink.errors import InvalidPartitionError, RecordContentError, RecordTooLargeError
from spark_kafka_sink.producer.arrow.check import find_bad_rows
from spark_kafka_sink.producer.arrow.input import resolve_columns, timestamps_ms
from spark_kafka_sink.record import RecordBatchBuilder

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def bad_rows(data, partitions=3, limit=1000):
    columns = resolve_columns(data, check_header_keys=False)
    stamps = timestamps_ms(columns.timestamp, columns.rows, 100, negative_ok=True)
    return [(r.row, type(r.error), str(r.error)) for r in
            find_bad_rows("t", columns, stamps, partitions, limit, "max.request.size")]


@pytest.mark.parametrize("lister", [pa.list_, pa.large_list], ids=["list", "large_list"])
def test_every_kind_of_bad_row_is_named_by_its_input_row(lister):
    data = pa.table({
        "value": pa.array(["a", "b", "c" * 5000, "d", "e", "f"], pa.string()),
        "key": [b"k", None, b"k", b"k", b"k", b"k"],
        "headers": pa.array([[("h", b"1")], [(None, b"1")], None, [], [None], []],
                            lister(HEADERS.value_type)),
        "timestamp": pa.array([1, -5, 3, 4, 5, -1], pa.int64()),
        "partition": pa.array([0, 1, None, 7, -1, 2], pa.int32())}).slice(0)
    found = bad_rows(data)
    assert [(row, kind) for row, kind, _ in found] == [
        (1, RecordContentError), (2, RecordTooLargeError), (3, InvalidPartitionError),
        (4, RecordContentError), (5, RecordContentError)]
    messages = [message for _, _, message in found]
    assert "row 1 of the input has a header with a null key" in messages[0]
    assert "row 2 of the input is" in messages[1] and "max.request.size" in messages[1]
    assert "invalid partition 7" in messages[2]
    assert "row 4 of the input has a null header" in messages[3]
    assert "timestamp -1 ms is negative" in messages[4]


def test_a_clean_batch_has_no_bad_rows_and_a_slice_counts_from_its_start():
    data = pa.table({"value": [b"x", b"y" * 3000, b"z"],
                     "headers": pa.array([[(None, b"")], [], [("k", b"v")]], HEADERS)})
    assert bad_rows(data.slice(2)) == []
    assert [row for row, _, _ in bad_rows(data.slice(1))] == [0]


def test_the_size_check_agrees_with_the_builder_at_the_limit():
    value = b"v" * 900
    exact = RecordBatchBuilder.estimate_size_upper_bound(b"k", value, [("h", b"1")])
    data = pa.table({"value": [value], "key": [b"k"], "headers": pa.array([[("h", b"1")]], HEADERS)})
    assert bad_rows(data, limit=exact) == []
    assert [row for row, _, _ in bad_rows(data, limit=exact - 1)] == [0]
