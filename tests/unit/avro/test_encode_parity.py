"""Every body the column-wise encoder writes decodes with fastavro to the values written.

A property test draws a random Arrow type (booleans, integers, floats, strings, binaries,
decimals, dates, timestamps of every unit with and without a zone, lists, maps, structs, nested
up to three levels, any field nullable or not), random rows of it (sliced at a random offset),
and a schema: the one Spark's rules derive, or a variant of it a user could give (a nullable
union in the other order, a decimal as ``bytes`` rather than ``fixed``, ``long`` for an int).
Each body, framed or not, is read back with ``fastavro.schemaless_reader`` and compared with the
rows. Dates and timestamps are compared as the numbers Avro holds (days; micros, millis or nanos).
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
import random

import fastavro
import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_kafka_sink.avro import derive_schema, encode, to_json
from spark_kafka_sink.avro.schema import (AvroArray, AvroField, AvroFixed, AvroMap, AvroPrimitive, AvroRecord,
                                          AvroUnion)


_UNIT = {"s": 0, "ms": 3, "us": 6, "ns": 9}
_NAMES = [f"f{i}" for i in range(6)]


def reader_schema(schema) -> dict | list | str:
    """The schema's JSON for fastavro, dates and timestamps as their plain numbers."""
    def strip(node):
        if isinstance(node, list):
            return [strip(item) for item in node]
        if not isinstance(node, dict):
            return node
        node = {key: strip(value) for key, value in node.items()}
        if node.get("logicalType") in ("date",) or "timestamp" in str(node.get("logicalType", "")):
            node.pop("logicalType")
        return node
    return fastavro.parse_schema(strip(json.loads(to_json(schema))))


def decoded(result, schema, schema_id) -> list:
    parsed = reader_schema(schema)
    out = []
    for body in result.bodies.to_pylist():
        if body is None:
            out.append(None)
            continue
        if schema_id is not None:
            assert body[:5] == b"\x00" + schema_id.to_bytes(4, "big")
            body = body[5:]
        stream = io.BytesIO(body)
        out.append(fastavro.schemaless_reader(stream, parsed))
        assert stream.read() == b"", "bytes left after the value"
    return out


# --- random types and rows ----------------------------------------------------------------------

def leaf_types():
    decimals = st.integers(1, 38).flatmap(lambda p: st.integers(0, p).map(lambda s: pa.decimal128(p, s)))
    timestamps = st.builds(pa.timestamp, st.sampled_from(list(_UNIT)), st.sampled_from([None, "UTC"]))
    return st.one_of(st.sampled_from([pa.bool_(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(),
                                      pa.uint16(), pa.uint32(), pa.float32(), pa.float64(), pa.string(),
                                      pa.large_string(), pa.binary(), pa.large_binary(), pa.date32()]),
                     decimals, timestamps)


def nested_types(children):
    fields = st.lists(st.tuples(children, st.booleans()), min_size=1, max_size=4).map(
        lambda items: pa.struct([pa.field(_NAMES[i], kind, nullable=null) for i, (kind, null) in enumerate(items)]))
    lists = st.builds(lambda kind, null: pa.list_(pa.field("item", kind, nullable=null)), children, st.booleans())
    maps = st.builds(lambda kind, null: pa.map_(pa.string(), pa.field("value", kind, nullable=null)),
                     children, st.booleans())
    return st.one_of(fields, lists, maps)


arrow_types = st.recursive(leaf_types(), nested_types, max_leaves=8)


def values(kind: pa.DataType, nullable: bool):
    base = _values(kind)
    return st.one_of(st.none(), base) if nullable else base


def _values(kind: pa.DataType):
    types = pa.types
    if types.is_boolean(kind):
        return st.booleans()
    if types.is_integer(kind):
        limits = np.iinfo(kind.to_pandas_dtype())
        return st.integers(int(limits.min), int(limits.max))
    if types.is_float32(kind):
        return st.floats(width=32, allow_nan=False)
    if types.is_float64(kind):
        return st.floats(allow_nan=False)
    if types.is_string(kind) or types.is_large_string(kind):
        return st.text(max_size=8)
    if types.is_binary(kind) or types.is_large_binary(kind):
        return st.binary(max_size=8)
    if types.is_decimal(kind):
        bound = 10 ** kind.precision - 1
        return st.integers(-bound, bound).map(
            lambda v: decimal.Decimal((int(v < 0), tuple(int(c) for c in str(abs(v))), -kind.scale)))
    if types.is_date32(kind):
        return st.integers(-(2 ** 31), 2 ** 31 - 1)
    if types.is_timestamp(kind):
        return st.integers(-(2 ** 40), 2 ** 40)  # fits micros from seconds
    if types.is_list(kind):
        return st.lists(values(kind.value_type, kind.value_field.nullable), max_size=3)
    if types.is_map(kind):
        return st.lists(st.tuples(st.text(max_size=4), values(kind.item_type, kind.item_field.nullable)),
                        max_size=3, unique_by=lambda kv: kv[0])
    fields = [kind.field(i) for i in range(kind.num_fields)]
    return st.fixed_dictionaries({f.name: values(f.type, f.nullable) for f in fields})


def expected(kind: pa.DataType, value, target: str | None = None):
    """What fastavro reads back for ``value`` (dates and timestamps as numbers)."""
    if value is None:
        return None
    types = pa.types
    if types.is_float32(kind):
        return float(np.float32(value))
    if types.is_timestamp(kind):
        shift = {"millis": 3, "micros": 6, "nanos": 9}[target or "micros"] - _UNIT[kind.unit]
        return value * 10 ** shift if shift >= 0 else value // 10 ** -shift
    if types.is_list(kind):
        return [expected(kind.value_type, item) for item in value]
    if types.is_map(kind):
        return {key: expected(kind.item_type, item) for key, item in value}
    if types.is_struct(kind):
        return {kind.field(i).name: expected(kind.field(i).type, value[kind.field(i).name])
                for i in range(kind.num_fields)}
    return value


def variant(schema, kind: pa.DataType, rng: random.Random):
    """A schema a user could give for ``kind`` instead of the derived one."""
    if isinstance(schema, AvroUnion):
        branches = [variant(b, kind, rng) if not (isinstance(b, AvroPrimitive) and b.type == "null") else b
                    for b in schema.branches]
        return AvroUnion(tuple(reversed(branches)) if rng.random() < 0.5 else tuple(branches))
    if isinstance(schema, AvroFixed) and schema.logical == "decimal" and rng.random() < 0.5:
        return AvroPrimitive("bytes", "decimal", schema.precision, schema.scale)
    if isinstance(schema, AvroPrimitive) and schema.type == "int" and schema.logical is None and rng.random() < 0.5:
        return AvroPrimitive("long")
    if isinstance(schema, AvroArray):
        return AvroArray(variant(schema.items, kind.value_type, rng))
    if isinstance(schema, AvroMap):
        return AvroMap(variant(schema.values, kind.item_type, rng))
    if isinstance(schema, AvroRecord):
        fields = tuple(AvroField(f.name, variant(f.type, kind.field(i).type, rng))
                       for i, f in enumerate(schema.fields))
        return AvroRecord(schema.name, schema.namespace, fields)
    return schema


@st.composite
def cases(draw):
    kind = draw(arrow_types)
    top_nullable = draw(st.booleans())
    rows = draw(st.lists(values(kind, top_nullable), max_size=12))
    skip = draw(st.integers(0, 3))
    padding = draw(st.lists(values(kind, False), min_size=skip, max_size=skip))
    array = pa.array(padding + rows, kind).slice(skip)
    schema = derive_schema(kind)
    if draw(st.booleans()):
        schema = variant(schema, kind, draw(st.randoms(use_true_random=False)))
    schema_id = draw(st.one_of(st.none(), st.integers(0, 2 ** 31 - 1)))
    return kind, rows, array, schema, schema_id


@settings(max_examples=60, deadline=None)
@given(cases())
def test_every_body_decodes_to_the_rows_written(case):
    kind, rows, array, schema, schema_id = case
    result = encode(array, schema, schema_id)
    assert result.failures == ()
    assert decoded(result, schema, schema_id) == [expected(kind, row) for row in rows]


# --- fixed cases fastavro reads with its own logical types --------------------------------------

def test_the_issues_ten_field_record_reads_back_with_logical_types():
    rows = [
        {"i": 1, "l": -(2 ** 40), "d": 0.5, "a": "x", "b": "héllo", "c": "", "n": None,
         "t": datetime.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=datetime.timezone.utc),
         "p": decimal.Decimal("-1234.56"), "day": datetime.date(1969, 12, 31)},
        {"i": -7, "l": 2 ** 62, "d": -1e300, "a": "y" * 300, "b": "b", "c": "c", "n": "set",
         "t": datetime.datetime(1900, 1, 1, tzinfo=datetime.timezone.utc),
         "p": decimal.Decimal("99999999.99"), "day": datetime.date(2262, 4, 11)},
    ]
    required = [("i", pa.int32()), ("l", pa.int64()), ("d", pa.float64()), ("a", pa.string()), ("b", pa.string()),
                ("c", pa.string()), ("t", pa.timestamp("us", tz="UTC")), ("p", pa.decimal128(10, 2)),
                ("day", pa.date32())]
    kind = pa.schema([pa.field(name, t, nullable=False) for name, t in required] + [pa.field("n", pa.string())])
    batch = pa.RecordBatch.from_pylist(rows, schema=kind)
    schema = derive_schema(kind)
    parsed = fastavro.parse_schema(json.loads(to_json(schema)))
    bodies = encode(batch, schema, 42).check().to_pylist()
    assert [fastavro.schemaless_reader(io.BytesIO(body[5:]), parsed) for body in bodies] == rows


def test_enums_fixed_and_member_unions_read_back():
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
        {"name": "f", "type": ["null", {"type": "fixed", "name": "F", "size": 3}]},
        {"name": "u", "type": ["null", "long", "string", {"type": "array", "items": "boolean"}]},
        {"name": "missing", "type": ["null", "double"]},
    ]}
    members = pa.struct([("member0", pa.int64()), ("member1", pa.string()), ("member2", pa.list_(pa.bool_()))])
    batch = pa.RecordBatch.from_pydict({
        "e": pa.array(["C", "A", "B"]),
        "f": pa.array([b"abc", None, b"\x00\x00\x00"], pa.binary(3)),
        "u": pa.array([{"member0": 5}, {"member1": "s"}, {"member2": [True, False]}], members),
    })
    parsed = fastavro.parse_schema(schema)
    bodies = encode(batch, schema).check().to_pylist()
    assert [fastavro.schemaless_reader(io.BytesIO(body), parsed) for body in bodies] == [
        {"e": "C", "f": b"abc", "u": 5, "missing": None},
        {"e": "A", "f": None, "u": "s", "missing": None},
        {"e": "B", "f": b"\x00\x00\x00", "u": [True, False], "missing": None}]


def test_large_blocks_of_items_read_back():
    items = list(range(-5000, 5000))
    column = pa.array([items, [], items[:3]], pa.list_(pa.int64()))
    parsed = fastavro.parse_schema({"type": "array", "items": "long"})
    bodies = encode(column, {"type": "array", "items": "long"}).check().to_pylist()
    assert [fastavro.schemaless_reader(io.BytesIO(body), parsed) for body in bodies] == [items, [], items[:3]]
