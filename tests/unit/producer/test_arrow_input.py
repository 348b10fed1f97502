"""send_arrow's input columns, timestamps and its result object (no producer, no broker)."""

from __future__ import annotations

import datetime
import threading

import numpy as np
import pyarrow as pa
import pytest

from spark_kafka_sink.errors import NotLeaderOrFollowerError
from spark_kafka_sink.producer.arrow.input import (ArrowSendError, ArrowSendResult, OffsetRange,
                                                    resolve_columns, timestamps_ms)
from spark_kafka_sink.structs import TopicPartition

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def table(**columns):
    return pa.table(columns)


def test_conventional_columns_are_used_when_present():
    data = table(value=pa.array([b"v"]), key=pa.array(["k"]), headers=pa.array([[("h", b"x")]], HEADERS),
                 timestamp=pa.array([5], pa.int64()), partition=pa.array([0], pa.int8()), other=pa.array([1]))
    cols = resolve_columns(data)
    assert cols.rows == 1 and cols.key.to_pylist() == ["k"] and cols.partition.to_pylist() == [0]
    only_value = resolve_columns(table(value=pa.array(["v"])))
    assert only_value.key is only_value.headers is only_value.timestamp is only_value.partition is None


def test_named_columns_and_none_to_skip():
    data = table(payload=pa.array([b"v"]), user=pa.array(["u"]), key=pa.array(["ignored"]))
    cols = resolve_columns(data.to_batches()[0], value="payload", key="user")
    assert cols.value.to_pylist() == [b"v"] and cols.key.to_pylist() == ["u"]
    assert resolve_columns(data, value="payload", key=None).key is None


def test_chunked_tables_are_combined():
    data = pa.concat_tables([table(value=pa.array([b"a"])), table(value=pa.array([b"b"]))])
    assert resolve_columns(data).value.to_pylist() == [b"a", b"b"]


@pytest.mark.parametrize("kwargs, data, message", [
    ({"value": "nope"}, {"value": pa.array([b"v"])}, "the value column 'nope' is not in the input"),
    ({}, {"value": pa.array([1])}, "the value column has type int64; expected binary or string"),
    ({}, {"value": pa.array([b"v"]), "key": pa.array([1.5])}, "the key column has type double"),
    ({}, {"value": pa.array([b"v"]), "headers": pa.array([["a"]])}, "the headers column has type list<item: string>"),
    ({}, {"value": pa.array([b"v"]), "timestamp": pa.array(["x"])}, "the timestamp column has type string"),
    ({}, {"value": pa.array([b"v"]), "partition": pa.array(["1"])}, "the partition column has type string"),
])
def test_bad_columns_are_named(kwargs, data, message):
    with pytest.raises((ValueError, TypeError), match=message):
        resolve_columns(pa.table(data), **kwargs)


def test_value_is_required_and_input_must_be_arrow():
    with pytest.raises(ValueError, match="needs a value column"):
        resolve_columns(table(value=pa.array([b"v"])), value=None)
    with pytest.raises(TypeError, match="RecordBatch or Table"):
        resolve_columns([{"value": b"v"}])


def test_timestamps_in_every_unit_floor_to_ms_and_nulls_take_now():
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    stamps = [epoch + datetime.timedelta(milliseconds=1500, microseconds=999), None,
              epoch - datetime.timedelta(microseconds=1)]
    for unit in ("s", "ms", "us", "ns"):
        column = pa.array(stamps, pa.timestamp("us", tz="UTC")).cast(pa.timestamp(unit, tz="UTC"),
                                                                    safe=False)
        if unit in ("s", "ms"):                # the cast truncated -1 µs to 0
            got = timestamps_ms(column, 3, now_ms=42).tolist()
            assert got == [{"s": 1000, "ms": 1500}[unit], 42, 0]
        else:                                  # -1 µs floors to -1 ms, as Spark's sink does: refused
            with pytest.raises(ValueError, match=r"row 2: timestamp -1 ms in column 'ts' is negative"):
                timestamps_ms(column, 3, now_ms=42, name="ts")
            got = timestamps_ms(column.slice(0, 2), 2, now_ms=42).tolist()
            assert got == [1500, 42]
    assert timestamps_ms(pa.array([7, None], pa.int64()), 2, now_ms=9).tolist() == [7, 9]
    assert timestamps_ms(None, 2, now_ms=3).tolist() == [3, 3]
    assert timestamps_ms(None, 0, now_ms=3).dtype == np.int64


def test_result_counts_offsets_and_completes():
    result = ArrowSendResult(rows=10)
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    assert not result.done() and not result.wait(0)
    result.batch_completed(a, 3, None, 100)
    result.batch_completed(a, 2, None, 103)  # adjacent: merged
    result.batch_completed(b, 4, None, 7)
    result.batch_completed(a, 1, None, 200)  # someone else wrote in between
    assert result.done() and result.wait(0)
    assert result.offsets == {a: [OffsetRange(100, 104), OffsetRange(200, 200)], b: [OffsetRange(7, 10)]}
    assert result.offsets[b][0].count == 4
    assert result.raise_for_errors() is result


def test_result_failures_and_rows_never_queued():
    result = ArrowSendResult(rows=5)
    tp = TopicPartition("t", 2)
    result.batch_completed(tp, 2, NotLeaderOrFollowerError("moved"))
    result.not_queued(RuntimeError("closed"), tp, 3)
    assert result.done() and result.failed == 5 and result.offsets == {}
    with pytest.raises(ArrowSendError, match=r"5 of 5 rows failed.*t-2.*NotLeaderOrFollowerError") as info:
        result.raise_for_errors()
    assert isinstance(info.value.__cause__, NotLeaderOrFollowerError)


def test_wait_wakes_when_the_last_batch_completes():
    result = ArrowSendResult(rows=2)
    timer = threading.Timer(0.05, result.batch_completed, args=(TopicPartition("t", 0), 2, None, 0))
    timer.start()
    assert result.wait(5)
    timer.join()


def test_columns_slice_every_column_zero_copy():
    data = table(value=pa.array([b"a", b"b", b"c"]), key=pa.array(["x", "y", "z"]),
                 partition=pa.array([0, 1, 2]))
    part = resolve_columns(data).slice(1, 3)
    assert part.rows == 2 and part.value.to_pylist() == [b"b", b"c"] and part.key.to_pylist() == ["y", "z"]
    assert part.partition.to_pylist() == [1, 2] and part.headers is None and part.timestamp is None


def test_row_chunks_bound_the_bytes_of_each_pass():
    from spark_kafka_sink.producer.arrow.send import row_chunks

    sizes = np.array([4, 4, 4, 10, 1, 1, 4], dtype=np.int64)
    assert row_chunks(sizes, 8) == [(0, 2), (2, 3), (3, 4), (4, 7)]
    assert row_chunks(sizes, 100) == [(0, 7)]
    assert row_chunks(np.array([], dtype=np.int64), 8) == []


@pytest.mark.newest  # binary_view and string_view: pyarrow 16+
def test_view_columns_are_read_as_plain_binary_and_strings():
    import pyarrow as pa

    headers_type = pa.list_(pa.struct([("key", pa.string_view()), ("value", pa.binary_view())]))
    batch = pa.record_batch({
        "value": pa.array([b"v0", None, b"v2"], type=pa.binary_view()),
        "key": pa.array(["k0", "k1", None], type=pa.string_view()),
        "headers": pa.array([[{"key": "h", "value": b"1"}], [], None], type=headers_type),
    })
    columns = resolve_columns(batch)
    assert columns.value.type == pa.large_binary() and columns.value.to_pylist() == [b"v0", None, b"v2"]
    assert columns.key.type == pa.large_string() and columns.key.to_pylist() == ["k0", "k1", None]
    item = columns.headers.type.value_type
    assert (item.field(0).type, item.field(1).type) == (pa.large_string(), pa.large_binary())
    assert columns.headers.to_pylist() == [[{"key": "h", "value": b"1"}], [], None]


@pytest.mark.newest  # binary_view and string_view: pyarrow 16+
def test_view_columns_encode_byte_identical_to_plain_ones():
    import pyarrow as pa

    from spark_kafka_sink.record.arrow import encode_batches

    def encoded(value_type, key_type, header_key, header_value):
        headers_type = pa.list_(pa.struct([("key", header_key), ("value", header_value)]))
        batch = pa.record_batch({
            "value": pa.array([b"v" * i for i in range(50)], type=value_type),
            "key": pa.array([f"k{i % 7}" if i % 5 else None for i in range(50)], type=key_type),
            "headers": pa.array([[{"key": f"h{i}", "value": b"x" * i}] for i in range(50)],
                                type=headers_type)})
        cols = resolve_columns(batch)
        return [b.builder.build() for b in encode_batches(
            cols.value, cols.key, cols.headers, timestamp_ms=7, batch_size=1024)]

    plain = encoded(pa.binary(), pa.string(), pa.string(), pa.binary())
    assert len(plain) > 1
    assert encoded(pa.binary_view(), pa.string_view(), pa.string_view(), pa.binary_view()) == plain


def test_old_module_path_still_resolves_the_same_objects():
    """``producer.arrow_input`` moved to ``producer.arrow.input``; code importing the result or
    error type from the old path gets the very same classes."""
    from spark_kafka_sink.producer import arrow_input
    from spark_kafka_sink.producer.arrow import input as moved

    assert arrow_input.__all__ == moved.__all__
    for name in moved.__all__:
        assert getattr(arrow_input, name) is getattr(moved, name), name
