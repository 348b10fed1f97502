"""Schemas derived from Arrow types by Spark's rules (spark_kafka_sink/avro/derive.py).

The expected JSON is what Spark's ``to_avro`` gives the same Spark type, worked out from
``SchemaConverters.toAvroType`` (Spark 3.4 to 4.x): the top-level record ``topLevelRecord``, a
nested struct a record named after its field in the namespace of its parent's full name, an
array's or a map's record named after the array's or map's field, a decimal a ``fixed`` named
``<namespace>.<field>.fixed`` of ``minBytesForPrecision`` bytes, and a nullable type the union
``[T, "null"]``; written as Java's ``Schema.toString()`` writes it.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from spark_kafka_sink.avro.derive import derive_schema
from spark_kafka_sink.avro.schema import parse_schema, to_json
from spark_kafka_sink.errors import AvroSchemaError

ADDRESS = pa.struct([pa.field("zip", pa.string()), pa.field("geo", pa.struct([pa.field("lat", pa.float64())]))])

SPARK_ROW = pa.schema([
    pa.field("id", pa.int32(), nullable=False),
    pa.field("name", pa.string()),
    pa.field("price", pa.decimal128(10, 2)),
    pa.field("tags", pa.list_(pa.string())),
    pa.field("address", ADDRESS),
    pa.field("attrs", pa.map_(pa.string(), pa.int32())),
    pa.field("lines", pa.list_(pa.field("element", pa.struct([pa.field("sku", pa.string(), nullable=False)]),
                                        nullable=False)), nullable=False),
    pa.field("amounts", pa.list_(pa.decimal128(5, 1))),
    pa.field("at", pa.timestamp("us", tz="UTC"), nullable=False),
    pa.field("local", pa.timestamp("us"), nullable=False),
    pa.field("day", pa.date32(), nullable=False),
    pa.field("raw", pa.binary(), nullable=False),
    pa.field("ratio", pa.float32(), nullable=False),
    pa.field("ok", pa.bool_(), nullable=False),
    pa.field("tiny", pa.int8(), nullable=False),
    pa.field("small", pa.int16(), nullable=False),
    pa.field("big", pa.int64(), nullable=False),
    pa.field("nothing", pa.null()),
])

SPARK_JSON = (
    '{"type":"record","name":"topLevelRecord","fields":['
    '{"name":"id","type":"int"},'
    '{"name":"name","type":["string","null"]},'
    '{"name":"price","type":[{"type":"fixed","name":"fixed","namespace":"topLevelRecord.price","size":5,'
    '"logicalType":"decimal","precision":10,"scale":2},"null"]},'
    '{"name":"tags","type":[{"type":"array","items":["string","null"]},"null"]},'
    '{"name":"address","type":[{"type":"record","name":"address","namespace":"topLevelRecord","fields":['
    '{"name":"zip","type":["string","null"]},'
    '{"name":"geo","type":[{"type":"record","name":"geo","namespace":"topLevelRecord.address","fields":['
    '{"name":"lat","type":["double","null"]}]},"null"]}]},"null"]},'
    '{"name":"attrs","type":[{"type":"map","values":["int","null"]},"null"]},'
    '{"name":"lines","type":{"type":"array","items":{"type":"record","name":"lines","namespace":"topLevelRecord",'
    '"fields":[{"name":"sku","type":"string"}]}}},'
    '{"name":"amounts","type":[{"type":"array","items":[{"type":"fixed","name":"fixed",'
    '"namespace":"topLevelRecord.amounts","size":3,"logicalType":"decimal","precision":5,"scale":1},"null"]},"null"]},'
    '{"name":"at","type":{"type":"long","logicalType":"timestamp-micros"}},'
    '{"name":"local","type":{"type":"long","logicalType":"local-timestamp-micros"}},'
    '{"name":"day","type":{"type":"int","logicalType":"date"}},'
    '{"name":"raw","type":"bytes"},'
    '{"name":"ratio","type":"float"},'
    '{"name":"ok","type":"boolean"},'
    '{"name":"tiny","type":"int"},'
    '{"name":"small","type":"int"},'
    '{"name":"big","type":"long"},'
    '{"name":"nothing","type":"null"}]}'
)


def test_a_spark_row_derives_what_to_avro_gives():
    schema = derive_schema(SPARK_ROW)
    assert to_json(schema) == SPARK_JSON
    assert parse_schema(SPARK_JSON) == schema


def test_a_record_name_and_namespace_name_every_nested_type():
    kind = pa.struct([pa.field("price", pa.decimal128(3, 0), nullable=False),
                      pa.field("address", pa.struct([pa.field("zip", pa.string(), nullable=False)]), nullable=False)])
    schema = derive_schema(kind, record_name="Order", namespace="com.shop")
    assert to_json(schema) == (
        '{"type":"record","name":"Order","namespace":"com.shop","fields":['
        '{"name":"price","type":{"type":"fixed","name":"fixed","namespace":"com.shop.Order.price","size":2,'
        '"logicalType":"decimal","precision":3,"scale":0}},'
        '{"name":"address","type":{"type":"record","name":"address","namespace":"com.shop.Order",'
        '"fields":[{"name":"zip","type":"string"}]}}]}')


@pytest.mark.parametrize("kind, nullable, expected", [
    (pa.string(), True, '["string","null"]'),  # to_avro of a nullable string column
    (pa.int64(), False, '"long"'),
    (pa.decimal128(38, 10), False,
     '{"type":"fixed","name":"fixed","namespace":"topLevelRecord","size":16,"logicalType":"decimal",'
     '"precision":38,"scale":10}'),
    (pa.map_(pa.string(), pa.list_(pa.field("e", pa.int32(), nullable=False))), False,
     '{"type":"map","values":[{"type":"array","items":"int"},"null"]}'),
    (pa.null(), True, '"null"'),
])
def test_a_top_level_column_of_another_type(kind, nullable, expected):
    assert to_json(derive_schema(kind, nullable=nullable)) == expected


@pytest.mark.parametrize("kind, expected", [
    (pa.large_string(), '"string"'),
    (pa.large_binary(), '"bytes"'),
    (pa.binary(4), '"bytes"'),
    (pa.uint8(), '"int"'),
    (pa.uint16(), '"int"'),
    (pa.uint32(), '"long"'),
    (pa.dictionary(pa.int32(), pa.string()), '"string"'),
    (pa.timestamp("ns", tz="Europe/Paris"), '{"type":"long","logicalType":"timestamp-micros"}'),
    (pa.timestamp("ms"), '{"type":"long","logicalType":"local-timestamp-micros"}'),
    (pa.large_list(pa.field("item", pa.bool_(), nullable=False)), '{"type":"array","items":"boolean"}'),
    (pa.list_(pa.field("item", pa.int16(), nullable=False), 2), '{"type":"array","items":"int"}'),
])
def test_arrow_types_spark_does_not_have(kind, expected):
    assert to_json(derive_schema(kind)) == expected


@pytest.mark.parametrize("kind, path, fragment", [
    (pa.struct([pa.field("bad-name", pa.int32())]), "value.bad-name", "not a valid Avro name"),
    (pa.struct([pa.field("a", pa.struct([pa.field("1st", pa.int32())]))]), "value.a.1st", "not a valid Avro name"),
    (pa.struct([pa.field("a", pa.int32()), pa.field("a", pa.int64())]), "value.a", "two fields of this name"),
    (pa.struct([pa.field("m", pa.map_(pa.int32(), pa.string()))]), "value.m", "with int32 keys"),
    (pa.list_(pa.uint64()), "value[]", "uint64"),
    (pa.struct([pa.field("t", pa.time64("us"))]), "value.t", "time64[us]"),
    (pa.struct([pa.field("i", pa.duration("us"))]), "value.i", "duration[us]"),
    (pa.decimal256(40, 2), "value", "more than 38 digits"),
])
def test_types_without_an_avro_type_are_refused_naming_the_field(kind, path, fragment):
    with pytest.raises(AvroSchemaError) as raised:
        derive_schema(kind)
    assert raised.value.path == path and fragment in raised.value.detail


def test_a_bad_record_name_or_namespace_is_refused():
    with pytest.raises(AvroSchemaError, match="'my-record' is not a valid Avro name"):
        derive_schema(pa.int32(), record_name="my-record")
    with pytest.raises(AvroSchemaError, match="'1x' is not a valid Avro name"):
        derive_schema(pa.int32(), namespace="a.1x")

