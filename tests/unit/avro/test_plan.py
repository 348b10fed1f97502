"""A user's schema checked against an Arrow type before anything is encoded
(spark_kafka_sink/avro/plan.py), and the formats the sink picks by name (format.py).

- What Spark's ``to_avro`` accepts is accepted, with the issue's extras (enums from strings,
  fixed from binary, ``long`` for an int, unions of several types, a widening decimal scale).
- Anything else is refused with an ``AvroSchemaError`` naming the field path and both types.
- The formats: ``bytes`` passes the column through, ``avro`` checks or derives its schema where
  the type is known, pickles, and encodes each batch; a name that is no format is refused.
"""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from spark_kafka_sink.avro import AvroFormat, BytesFormat, compile_plan, derive_schema, format_named
from spark_kafka_sink.avro.schema import parse_schema
from spark_kafka_sink.errors import AvroSchemaError, ConfigError


def record(*fields) -> dict:
    return {"type": "record", "name": "R", "fields": [{"name": name, "type": kind} for name, kind in fields]}


def refusal(schema, kind: pa.DataType) -> AvroSchemaError:
    with pytest.raises(AvroSchemaError) as raised:
        compile_plan(parse_schema(schema), kind)
    return raised.value


def test_the_field_that_does_not_fit_is_named_with_both_types():
    kind = pa.struct([pa.field("address", pa.struct([pa.field("zip", pa.int64())]))])
    schema = record(("address", {"type": "record", "name": "Address", "fields": [{"name": "zip", "type": "string"}]}))
    error = refusal(schema, kind)
    assert str(error) == 'value.address.zip: an Arrow int64 column cannot be written as Avro "string"'
    assert error.path == "value.address.zip"
    with pytest.raises(AvroSchemaError, match='^key.address.zip: '):
        compile_plan(parse_schema(schema), kind, "key")


@pytest.mark.parametrize("schema, kind", [
    ("int", pa.int8()), ("int", pa.uint16()), ("long", pa.int32()), ("long", pa.uint32()),
    ({"type": "int", "logicalType": "date"}, pa.date32()), ("int", pa.date32()),
    ({"type": "long", "logicalType": "timestamp-millis"}, pa.timestamp("ms", tz="UTC")),
    ({"type": "long", "logicalType": "local-timestamp-micros"}, pa.timestamp("ns")),
    ("long", pa.timestamp("us")),
    ({"type": "enum", "name": "E", "symbols": ["A"]}, pa.large_string()),
    ({"type": "fixed", "name": "F", "size": 3}, pa.binary()),
    ({"type": "fixed", "name": "F", "size": 3}, pa.binary(3)),
    ({"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}, pa.decimal128(20, 2)),
    ({"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 5}, pa.decimal128(20, 2)),
    ({"type": "fixed", "name": "F", "size": 8, "logicalType": "decimal", "precision": 18, "scale": 0},
     pa.decimal256(10, 0)),
    ({"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}, pa.binary()),  # Spark: raw bytes
    ("null", pa.null()), (["null", "string"], pa.null()), (["string", "null"], pa.string()),
    (["int", "long"], pa.int64()), (["null", "string", "long"], pa.int32()),
    ({"type": "map", "values": "int"}, pa.map_(pa.large_string(), pa.int32())),
    ({"type": "array", "items": "int"}, pa.list_(pa.int16(), 3)),
])
def test_what_spark_and_the_issue_accept(schema, kind):
    compile_plan(parse_schema(schema), kind)


@pytest.mark.parametrize("schema, kind, detail", [
    ("int", pa.int64(), 'an Arrow int64 column cannot be written as Avro "int": its values may not fit an int'),
    ("int", pa.uint32(), "its values may not fit an int"),
    ("long", pa.uint64(), 'an Arrow uint64 column cannot be written as Avro "long"'),
    ("double", pa.float32(), 'an Arrow float column cannot be written as Avro "double"'),
    ("bytes", pa.string(), 'an Arrow string column cannot be written as Avro "bytes"'),
    ("string", pa.binary(), 'an Arrow binary column cannot be written as Avro "string"'),
    ("long", pa.date32(), 'an Arrow date32[day] column cannot be written as Avro "long"'),
    ({"type": "long", "logicalType": "local-timestamp-micros"}, pa.timestamp("us", tz="UTC"),
     "a timestamp with a time zone is written as timestamp-*"),
    ({"type": "long", "logicalType": "timestamp-micros"}, pa.timestamp("us"),
     "a timestamp without a time zone is written as local-timestamp-*"),
    ({"type": "long", "logicalType": "time-micros"}, pa.timestamp("us", tz="UTC"), "written as timestamp-*"),
    ({"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 1}, pa.decimal128(10, 2),
     "the column has scale 2, the schema 1: its values would lose digits"),
    ({"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 20}, pa.decimal128(38, 2),
     "scale 20 needs 56 digits for this column, more than 38"),
    ("bytes", pa.decimal128(10, 2), 'an Arrow decimal128(10, 2) column cannot be written as Avro "bytes"'),
    ({"type": "fixed", "name": "F", "size": 4}, pa.binary(3), "the fixed has 4 bytes"),
    ({"type": "enum", "name": "E", "symbols": ["A"]}, pa.int32(), "cannot be written as Avro enum E"),
    ("string", pa.null(), "the column is always null"),
    (["string", "int"], pa.null(), "the union has no null"),
    (["null"], pa.string(), "the union holds only null"),
    (["int", "string"], pa.float64(),
     'no branch of the union holds it (an Arrow double column cannot be written as Avro "int"; '
     'an Arrow double column cannot be written as Avro "string")'),
    ({"type": "map", "values": "int"}, pa.map_(pa.int32(), pa.int32()),
     "its keys are int32; an Avro map's keys are strings"),
    ({"type": "map", "values": "int"}, pa.list_(pa.struct([("k", pa.string()), ("value", pa.int32())])),
     "an Arrow list column cannot be written as Avro map"),
    ({"type": "array", "items": "int"}, pa.int32(), "an Arrow int32 column cannot be written as Avro array"),
    (record(("a", "int")), pa.int32(), "an Arrow int32 column cannot be written as Avro record R"),
])
def test_what_does_not_fit_is_refused(schema, kind, detail):
    error = refusal(schema, kind)
    assert error.path == "value"
    assert detail in error.detail


def test_items_values_and_members_are_named_in_the_path():
    assert refusal({"type": "array", "items": "string"}, pa.list_(pa.int32())).path == "value[]"
    assert refusal({"type": "map", "values": "string"}, pa.map_(pa.string(), pa.int32())).path == "value{}"
    members = pa.struct([("member0", pa.int32()), ("member1", pa.int64())])
    assert refusal(["int", "string"], members).path == "value.member1"


def test_record_fields_match_by_name_then_ignoring_case():
    kind = pa.struct([("ID", pa.int32()), ("name", pa.string())])
    compile_plan(parse_schema(record(("name", "string"), ("id", "int"))), kind)
    compile_plan(parse_schema(record(("id", "int"), ("name", "string"), ("extra", ["null", "int"]))), kind)
    error = refusal(record(("id", "int"), ("Id", "int"), ("name", "string")), kind)
    assert (error.path, error.detail) == ("value.ID", "record R has 2 fields of this name when case is ignored")
    error = refusal(record(("id", "int")), kind)
    assert (error.path, error.detail) == ("value.name", "record R has no field 'name'")
    error = refusal(record(("id", "int"), ("name", "string"), ("extra", "int")), kind)
    assert error.path == "value.extra" and "has no null to write instead" in error.detail
    twice = pa.struct([("a", pa.int32()), ("A", pa.int32())])
    assert "written to the record's field 'a' already" in refusal(record(("a", "int")), twice).detail
    same = pa.struct([("a", pa.int32()), ("a", pa.int32())])
    assert refusal(record(("a", "int")), same).detail == "the struct has two fields of the same name"


def test_a_plan_is_cached_per_schema_type_and_column():
    schema = parse_schema(record(("a", "int")))
    kind = pa.struct([("a", pa.int32())])
    assert compile_plan(schema, kind) is compile_plan(parse_schema(record(("a", "int"))), kind)
    assert compile_plan(schema, kind, "key") is not compile_plan(schema, kind)


# --- formats ------------------------------------------------------------------------------------

def test_the_bytes_format_passes_the_column_through():
    result = BytesFormat().encode(pa.array(["a", None]))
    assert result.bodies.to_pylist() == [b"a", None] and result.failures == ()
    assert BytesFormat().encode(pa.chunked_array([[b"x"]])).bodies.to_pylist() == [b"x"]
    assert BytesFormat().encode(pa.nulls(2)).bodies.to_pylist() == [None, None]
    with pytest.raises(TypeError, match="the key column must be binary or string for format bytes, got int32"):
        BytesFormat("key").encode(pa.array([1], pa.int32()))


def test_the_avro_format_derives_or_checks_its_schema_and_pickles():
    kind = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
    derived = AvroFormat.for_type(kind, record_name="User", namespace="com.example")
    assert derived.schema == derive_schema(kind, record_name="User", namespace="com.example")
    assert derived.schema_json.startswith('{"type":"record","name":"User","namespace":"com.example"')
    framed = pickle.loads(pickle.dumps(derived.with_schema_id(3)))
    assert framed == AvroFormat(derived.schema, pa.struct(list(kind)), 3)
    batch = pa.RecordBatch.from_pydict({"id": pa.array([1], pa.int64()), "name": pa.array(["x"])})
    assert framed.encode(batch).bodies.to_pylist() == [b"\x00\x00\x00\x00\x03\x02\x00\x02x"]
    given = AvroFormat.for_type(pa.int64(), '"long"', schema_id=1, column="key")
    assert given.encode(pa.array([1])).bodies.to_pylist() == [b"\x00\x00\x00\x00\x01\x02"]
    with pytest.raises(AvroSchemaError, match='^key: an Arrow int64 column cannot be written as Avro "int"'):
        AvroFormat.for_type(pa.int64(), "int", column="key")
    with pytest.raises(ConfigError, match="a schema id is an int"):
        AvroFormat.for_type(pa.int64(), "long", schema_id=-5)


def test_formats_by_name():
    assert format_named("avro") is AvroFormat and format_named("bytes") is BytesFormat
    assert (AvroFormat.name, BytesFormat.name) == ("avro", "bytes")
    with pytest.raises(ConfigError, match="unknown format 'protobuf': the formats are avro, bytes"):
        format_named("protobuf")
