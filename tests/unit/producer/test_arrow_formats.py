"""``send_arrow(value_format=..., key_format=...)``: a key or value column of any Arrow type written
in an Avro format, its bad rows raised or left out as ``errors_tolerance`` says; the column step
(``resolve_columns``) alone, then a real producer over the in-memory cluster."""

from __future__ import annotations

import pyarrow as pa
import pytest

from spark_kafka_sink.avro import AvroFormat, encode
from spark_kafka_sink.errors import InvalidPartitionError, RecordContentError, SerializationError
from spark_kafka_sink.producer.arrow.check import RejectedRow, merge_rejected
from spark_kafka_sink.producer.arrow.input import resolve_columns

from .threaded_cluster import Cluster

WAIT_S = 5.0
USER = pa.struct([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
STRICT = ('{"type":"record","name":"User","fields":[{"name":"id","type":"long"},'
          '{"name":"name","type":"string"}]}')
"""A user's schema for :data:`USER` whose name may not be null: a null name cannot be encoded."""


def users(*names) -> pa.Array:
    return pa.array([None if name is ... else {"id": i, "name": name} for i, name in enumerate(names)], USER)


@pytest.fixture
def cluster():
    made = Cluster()
    yield made
    made.close_producers()


def written(cluster, topic="t") -> list:
    """The values the cluster holds for ``topic``, by row (the producer's offsets per partition
    follow the input's order; the ``id`` of each body says which row it is)."""
    return [record.value for (name, _), batches in sorted(cluster.batches.items()) if name == topic
            for batch in batches for record in batch.records]


# --- resolve_columns ---------------------------------------------------------------------------

def test_a_struct_value_column_becomes_its_avro_bodies():
    fmt = AvroFormat.for_type(USER, schema_id=3)
    data = pa.table({"value": users("a", None, "c"), "key": ["k0", "k1", "k2"]})
    columns = resolve_columns(data, value_format=fmt)
    assert columns.value.to_pylist() == encode(data.column("value"), fmt.schema, 3).bodies.to_pylist()
    assert columns.value.to_pylist()[0][:5] == b"\x00\x00\x00\x00\x03"
    assert columns.key.to_pylist() == ["k0", "k1", "k2"] and columns.unencoded == ()


def test_the_key_takes_its_own_format_and_nulls_stay_null():
    key_format = AvroFormat.for_type(pa.int64(), column="key")
    data = pa.table({"value": [b"v0", b"v1"], "key": pa.array([7, None], pa.int64())})
    columns = resolve_columns(data, key_format=key_format)
    assert columns.key.to_pylist() == [b"\x0e", None] and columns.value.to_pylist() == [b"v0", b"v1"]


def test_rows_a_format_cannot_encode_are_null_and_listed_by_row():
    value_format = AvroFormat.for_type(USER, STRICT)
    key_format = AvroFormat.for_type(USER, STRICT, column="key")
    data = pa.table({"value": users("a", "b", None, "d"), "key": users(None, "b", "c", "d")})
    columns = resolve_columns(data, value_format=value_format, key_format=key_format)
    assert [(e.row, e.path) for e in columns.unencoded] == [(0, "key.name"), (2, "value.name")]
    assert all(isinstance(e, SerializationError) for e in columns.unencoded)
    assert columns.value.to_pylist()[2] is None and columns.key.to_pylist()[0] is None
    assert columns.value.to_pylist()[0] is not None


def test_without_a_format_a_struct_column_is_still_refused():
    with pytest.raises(TypeError, match="the value column has type struct"):
        resolve_columns(pa.table({"value": users("a")}))


def test_merge_rejected_keeps_row_order_and_names_a_row_for_its_encoding():
    encoding = [SerializationError(2, "value.name", "null"), SerializationError(5, "key", "bad")]
    partition = InvalidPartitionError("t", 9, 2, row=2)
    timestamp = RecordContentError("row 0: negative")
    merged = merge_rejected(tuple(encoding), [RejectedRow(0, timestamp), RejectedRow(2, partition)])
    assert merged == [RejectedRow(0, timestamp), RejectedRow(2, encoding[0]), RejectedRow(5, encoding[1])]
    assert merge_rejected((), [RejectedRow(1, timestamp)]) == [RejectedRow(1, timestamp)]


# --- send_arrow --------------------------------------------------------------------------------

def test_send_arrow_writes_the_encoded_bodies(cluster):
    producer = cluster.producer()
    fmt = AvroFormat.for_type(USER, schema_id=12)
    key_format = AvroFormat.for_type(pa.string(), column="key")
    data = pa.table({"value": users("a", "b", "c"), "key": ["x", "y", "z"], "partition": pa.array([0] * 3, pa.int32())})
    result = producer.send_arrow("t", data, value_format=fmt, key_format=key_format)
    result.wait(WAIT_S)
    result.raise_for_errors()
    assert result.acked == 3 and result.rejected == ()
    records = [r for batch in cluster.batches[("t", 0)] for r in batch.records]
    assert [r.value for r in records] == encode(data.column("value"), fmt.schema, 12).bodies.to_pylist()
    assert [r.key for r in records] == [b"\x02x", b"\x02y", b"\x02z"]


def test_a_row_that_cannot_be_encoded_raises_with_its_row_and_nothing_is_queued(cluster):
    producer = cluster.producer()
    data = pa.table({"value": users("a", "b", None, None)})
    with pytest.raises(SerializationError) as info:
        producer.send_arrow("t", data, value_format=AvroFormat.for_type(USER, STRICT))
    assert (info.value.row, info.value.path) == (2, "value.name")
    assert str(info.value).startswith("row 2: value.name: ")
    producer.flush(WAIT_S)
    assert written(cluster) == [] and cluster.metadata_requests("t") == 0


def test_tolerant_leaves_unencodable_rows_out_merged_in_row_order_with_the_other_bad_rows(cluster):
    producer = cluster.producer()
    data = pa.table({
        "value": users("a", "b", None, "d", "e", None),
        "timestamp": pa.array([1, -5, 1, 1, 1, -5], pa.int64()),       # row 5: bad twice
        "partition": pa.array([0, 0, 0, 7, 0, 0], pa.int32()),
    })
    fmt = AvroFormat.for_type(USER, STRICT)
    result = producer.send_arrow("t", data, value_format=fmt, errors_tolerance="all")
    result.wait(WAIT_S)
    result.raise_for_errors()
    assert [(r.row, type(r.error)) for r in result.rejected] == [
        (1, RecordContentError), (2, SerializationError), (3, InvalidPartitionError), (5, SerializationError)]
    assert str(result.rejected[1].error).startswith("row 2: value.name: ")
    assert result.rejected[3].error.path == "value.name"            # named for its encoding
    assert result.acked == 2
    assert written(cluster) == encode(data.column("value").take([0, 4]), fmt.schema).bodies.to_pylist()


def test_tolerant_with_every_row_unencodable_sends_nothing(cluster):
    producer = cluster.producer()
    fmt = AvroFormat.for_type(USER, STRICT)
    result = producer.send_arrow("t", pa.table({"value": users(None, None)}), value_format=fmt,
                                 errors_tolerance="all")
    assert [r.row for r in result.rejected] == [0, 1] and result.acked == 0
    producer.flush(WAIT_S)
    assert written(cluster) == []
