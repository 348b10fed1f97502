"""Avro schemas parsed, refused and written back (spark_kafka_sink/avro/schema.py).

- Every kind parses to its value; logical types are read when valid and kept as plain
  attributes when unknown or invalid, as the specification asks.
- What the specification forbids is refused with the field's path: bad JSON, unknown types and
  names, repeated fields, symbols and union branches, nested unions, recursion, a name defined
  twice.
- ``to_json`` writes the compact form Java's ``Schema.toString()`` gives (namespaces only where
  they change, a named type used again by its name), and parsing it gives the same value back.
"""

from __future__ import annotations

import json

import pytest

from spark_kafka_sink.avro.schema import (AvroArray, AvroEnum, AvroField, AvroFixed, AvroMap, AvroPrimitive,
                                          AvroRecord, AvroUnion, decimal_bytes_for_precision, max_decimal_precision,
                                          parse_schema, to_json)
from spark_kafka_sink.errors import AvroSchemaError, ConfigError


@pytest.mark.parametrize("name", ["null", "boolean", "int", "long", "float", "double", "bytes", "string"])
def test_primitives_parse_from_a_name_a_json_string_or_an_object(name):
    assert parse_schema(name) == AvroPrimitive(name)
    assert parse_schema(json.dumps(name)) == AvroPrimitive(name)
    assert parse_schema({"type": name}) == AvroPrimitive(name)
    assert to_json(AvroPrimitive(name)) == json.dumps(name)


def test_a_record_with_every_kind_of_field():
    schema = parse_schema({
        "type": "record", "name": "Order", "namespace": "shop", "doc": "an order",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "when", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
            {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 16}},
            {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"], "default": "NEW"}},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "attrs", "type": {"type": "map", "values": ["null", "string"]}, "default": {}},
            {"name": "note", "type": ["null", "string"], "default": None, "doc": "free text", "order": "ignore"},
        ]})
    assert isinstance(schema, AvroRecord) and schema.fullname == "shop.Order" and schema.doc == "an order"
    by_name = {field.name: field.type for field in schema.fields}
    assert by_name["id"] == AvroPrimitive("long")
    assert by_name["when"] == AvroPrimitive("long", "timestamp-micros")
    assert by_name["day"] == AvroPrimitive("int", "date")
    assert by_name["price"] == AvroPrimitive("bytes", "decimal", 10, 2)
    assert by_name["hash"] == AvroFixed("Hash", "shop", 16)
    assert by_name["state"] == AvroEnum("State", "shop", ("NEW", "PAID"), "NEW")
    assert by_name["tags"] == AvroArray(AvroPrimitive("string"))
    assert by_name["attrs"] == AvroMap(AvroUnion((AvroPrimitive("null"), AvroPrimitive("string"))))
    assert by_name["note"] == AvroUnion((AvroPrimitive("null"), AvroPrimitive("string")))
    note = schema.fields[-1]
    assert (note.default, note.doc, note.order) == ("null", "free text", "ignore")
    assert schema.fields[7].default == "{}"


def test_unions_know_their_null_branch():
    assert parse_schema(["string", "null"]).null_index == 1
    assert parse_schema(["null", "string"]).null_index == 0
    assert parse_schema(["int", "string"]).null_index is None


def test_a_named_type_used_again_is_the_same_value_and_is_written_again_by_name():
    schema = parse_schema({"type": "record", "name": "R", "namespace": "a", "fields": [
        {"name": "home", "type": {"type": "record", "name": "Address", "fields": [{"name": "zip", "type": "string"}]}},
        {"name": "work", "type": "Address"},
        {"name": "other", "type": "a.Address"},
    ]})
    home, work, other = (field.type for field in schema.fields)
    assert home is work is other
    assert json.loads(to_json(schema))["fields"][1] == {"name": "work", "type": "Address"}


def test_names_resolve_against_the_enclosing_namespace_then_the_null_one():
    schema = parse_schema({"type": "record", "name": "R", "namespace": "x.y", "fields": [
        {"name": "a", "type": {"type": "fixed", "name": "F", "size": 2}},
        {"name": "b", "type": {"type": "fixed", "name": "G", "namespace": "", "size": 1}},
        {"name": "c", "type": "F"},
        {"name": "d", "type": "G"},
        {"name": "e", "type": {"type": "enum", "name": "other.E", "symbols": ["A"]}},
    ]})
    a, b, c, d, e = (field.type for field in schema.fields)
    assert (a.fullname, b.fullname, e.fullname) == ("x.y.F", "G", "other.E")
    assert c is a and d is b


@pytest.mark.parametrize("node, logical, precision, scale", [
    ({"type": "bytes", "logicalType": "decimal", "precision": 5}, "decimal", 5, 0),
    ({"type": "long", "logicalType": "local-timestamp-millis"}, "local-timestamp-millis", None, None),
    ({"type": "string", "logicalType": "uuid"}, "uuid", None, None),
    ({"type": "int", "logicalType": "time-millis"}, "time-millis", None, None),
])
def test_known_logical_types(node, logical, precision, scale):
    schema = parse_schema(node)
    assert (schema.logical, schema.precision, schema.scale, schema.props) == (logical, precision, scale, ())


@pytest.mark.parametrize("node", [
    {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 5},  # scale above precision
    {"type": "bytes", "logicalType": "decimal", "precision": 0},
    {"type": "bytes", "logicalType": "decimal"},  # no precision
    {"type": "int", "logicalType": "timestamp-micros"},  # on the wrong type
    {"type": "long", "logicalType": "my-own-type"},
    {"type": "fixed", "name": "F", "size": 2, "logicalType": "decimal", "precision": 5},  # 2 bytes hold 4 digits
    {"type": "fixed", "name": "F", "size": 4, "logicalType": "duration"},
])
def test_unknown_or_invalid_logical_types_are_ignored_but_kept(node):
    schema = parse_schema(node)
    assert schema.logical is None
    written = json.loads(to_json(schema))
    assert written == node


def test_decimal_sizes_match_spark():
    # Spark's Decimal.minBytesForPrecision for 1..38 digits
    assert [decimal_bytes_for_precision(p) for p in (1, 2, 3, 9, 10, 18, 19, 38)] == [1, 1, 2, 4, 5, 8, 9, 16]
    assert [max_decimal_precision(size) for size in (1, 2, 4, 8, 16)] == [2, 4, 9, 18, 38]


@pytest.mark.parametrize("source, path, fragment", [
    ("{not json", "", "not valid JSON"),
    ("strin", "", "not valid JSON"),
    ({"type": "record", "name": "R", "fields": [{"name": "a", "type": "strin"}]}, "a", 'unknown type "strin"'),
    ({"type": "record", "name": "R", "fields": [{"name": "a"}]}, "a", 'needs a "type"'),
    ({"type": "record", "name": "R"}, "", 'needs a "fields" list'),
    ({"type": "record", "name": "1R", "fields": []}, "", "not a valid Avro name"),
    ({"type": "record", "name": "R", "namespace": "a.-b", "fields": []}, "", "namespace 'a.-b'"),
    ({"type": "record", "name": "R", "fields": [{"name": "a-b", "type": "int"}]}, "", "no valid name"),
    ({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, {"name": "a", "type": "int"}]},
     "", "two fields named 'a'"),
    ({"type": "record", "name": "R", "fields": [{"name": "a", "type": {"type": "array"}}]}, "a", 'needs "items"'),
    ({"type": "record", "name": "R", "fields": [
        {"name": "m", "type": {"type": "map", "values": {"type": "array", "items": "nope"}}}]},
     "m{}[]", "unknown type"),
    ({"type": "record", "name": "R", "fields": [{"name": "o", "type": "int", "order": "up"}]}, "o", "order must be"),
    ({"type": "enum", "name": "E", "symbols": ["A", "A"]}, "", "repeats a symbol"),
    ({"type": "enum", "name": "E", "symbols": ["A", "b-c"]}, "", "a list of names"),
    ({"type": "enum", "name": "E", "symbols": ["A"], "default": "B"}, "", "is not one of its symbols"),
    ({"type": "fixed", "name": "F", "size": -1}, "", 'a "size"'),
    ({"type": "fixed", "name": "F"}, "", 'a "size"'),
    ({"type": "fixed", "size": 1}, "", 'needs a "name"'),
    (["int", "int"], "", "'int' only once"),
    (["null", ["int", "string"]], "", "may not hold another union"),
    ([], "", "at least one branch"),
    ({"type": "record", "name": "R", "fields": [{"name": "f", "type": {"type": "fixed", "name": "R", "size": 1}}]},
     "", "defined twice"),
    ({"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]},
     "next", "recursive schemas are not supported"),
    ({"type": "record", "name": "int", "fields": []}, "", "primitive type's name"),
    (42, "", "a schema is a JSON string, object or array"),
])
def test_what_the_specification_forbids_is_refused_naming_the_field(source, path, fragment):
    with pytest.raises(AvroSchemaError) as raised:
        parse_schema(source)
    assert raised.value.path == path
    assert fragment in raised.value.detail
    assert isinstance(raised.value, ConfigError)
    assert str(raised.value) == (f"{path}: {raised.value.detail}" if path else raised.value.detail)


def test_the_error_pickles():
    import pickle

    error = AvroSchemaError("value.a", "bad")
    again = pickle.loads(pickle.dumps(error))
    assert (type(again), again.path, again.detail, str(again)) == (AvroSchemaError, "value.a", "bad", "value.a: bad")


def test_to_json_writes_what_java_writes():
    # the Java form of this schema: record attributes in the order type, name, namespace, doc,
    # fields; a field's name, type, doc, default, order, aliases, then other properties; a
    # nested named type's namespace only where it differs from the enclosing one
    text = ('{"type":"record","name":"R","namespace":"a","doc":"d","fields":['
            '{"name":"f","type":{"type":"fixed","name":"F","namespace":"b","size":5,'
            '"logicalType":"decimal","precision":10,"scale":2},"doc":"x","default":"\\u0000","order":"descending",'
            '"aliases":["g"],"custom":{"k":[1]}},'
            '{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"],"aliases":["E0"],"default":"A"}},'
            '{"name":"n","type":["null",{"type":"array","items":{"type":"map","values":"long"}}]},'
            '{"name":"again","type":"b.F"}],"aliases":["R0"]}')
    schema = parse_schema(text)
    assert to_json(schema) == text
    assert parse_schema(to_json(schema)) == schema


def test_to_json_writes_the_null_namespace_where_the_enclosing_one_is_not():
    schema = AvroRecord("R", "a", (AvroField("f", AvroFixed("F", "", 1)),))
    written = json.loads(to_json(schema))["fields"][0]["type"]
    assert written == {"type": "fixed", "name": "F", "namespace": "", "size": 1}


def test_to_json_refuses_two_different_types_of_one_name():
    schema = AvroRecord("R", "", (AvroField("a", AvroFixed("F", "", 1)), AvroField("b", AvroFixed("F", "", 2))))
    with pytest.raises(AvroSchemaError, match="two different types are both named F"):
        to_json(schema)


def test_a_schema_given_as_bytes_or_as_a_nested_type_object():
    assert parse_schema(b'"int"') == AvroPrimitive("int")
    assert parse_schema({"type": {"type": "array", "items": "int"}}) == AvroArray(AvroPrimitive("int"))
    with pytest.raises(AvroSchemaError, match="may have no other attribute"):
        parse_schema({"type": {"type": "array", "items": "int"}, "doc": "x"})


def test_the_package_and_its_schemas_load_without_pyarrow_or_numpy():
    import subprocess
    import sys

    code = ("import sys, spark_kafka_sink.avro as avro; avro.parse_schema('\"int\"'); "
            "assert not {'pyarrow', 'numpy'} & set(sys.modules), sorted({'pyarrow', 'numpy'} & set(sys.modules))")
    subprocess.run([sys.executable, "-c", code], check=True)
