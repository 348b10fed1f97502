"""The column-wise Avro encoder's bytes, worked out by hand (spark_kafka_sink/avro/encoding.py).

- Each type's bytes against a one-value-at-a-time reference written here from the Avro
  specification: zig-zag varints over the whole int and long ranges, IEEE floats little-endian,
  lengths before strings and bytes, decimals as the shortest two's complement (``bytes``) or
  sign-extended (``fixed``), union branches in either order, array and map blocks.
- The Confluent wire format: magic byte 0, the id's 4 bytes big-endian, then the body.
- Inputs as Arrow gives them: sliced, chunked, dictionaries, record batches and tables, large
  and view types; null input rows stay null.
- Rows that cannot be encoded (decimal overflow, a string outside an enum, a null the schema does
  not allow, a null map key or entry, a fixed of the wrong size, a timestamp out of range) fail
  alone, each named by row, field path and reason; their bodies are null, the others encoded.
"""

from __future__ import annotations

import decimal
import pickle
import struct

import numpy as np
import pyarrow as pa
import pytest

from spark_kafka_sink.avro import encode
from spark_kafka_sink.avro.encoding import EncodeResult, FailedRow, confluent_header
from spark_kafka_sink.errors import ConfigError, SerializationError, is_record_error

D = decimal.Decimal


def varint(value: int) -> bytes:
    """The reference: one zig-zag varint, from the specification."""
    z = (value << 1) ^ (value >> 63)
    out = b""
    while True:
        byte, z = z & 0x7F, z >> 7
        if not z:
            return out + bytes([byte])
        out += bytes([byte | 0x80])


def text(value: bytes | str) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return varint(len(data)) + data


def two_complement(value: int) -> bytes:
    """Java's ``BigInteger.toByteArray``: the shortest big-endian two's complement."""
    length = (value if value >= 0 else ~value).bit_length() // 8 + 1
    return value.to_bytes(length, "big", signed=True)


def bodies(data, schema, schema_id=None) -> list:
    result = encode(data, schema, schema_id)
    assert result.failures == ()
    return result.bodies.to_pylist()


INTS = [0, -1, 1, 63, -64, 64, -65, 8191, 8192, 2 ** 31 - 1, -2 ** 31]
LONGS = INTS + [2 ** 35, -2 ** 35, 2 ** 56 - 1, 2 ** 56, 2 ** 62, 2 ** 63 - 1, -2 ** 63]


@pytest.mark.parametrize("kind", [pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()])
def test_ints_are_zigzag_varints(kind):
    info = np.iinfo(kind.to_pandas_dtype())
    values = sorted({v for v in INTS if info.min <= v <= info.max} | {int(info.min), int(info.max)})
    assert bodies(pa.array(values, kind), "int") == [varint(v) for v in values]
    assert bodies(pa.array(values, kind), "long") == [varint(v) for v in values]  # long for an int column


@pytest.mark.parametrize("kind", [pa.int64(), pa.uint32()])
def test_longs_are_zigzag_varints_over_the_whole_range(kind):
    info = np.iinfo(kind.to_pandas_dtype())
    values = sorted({v for v in LONGS if info.min <= v <= info.max} | {int(info.min), int(info.max)})
    assert bodies(pa.array(values, kind), "long") == [varint(v) for v in values]


def test_booleans_floats_and_doubles():
    assert bodies(pa.array([True, False, True]).slice(1), "boolean") == [b"\x00", b"\x01"]
    floats = [0.0, -1.5, 3.4e38, float("inf"), float("-inf")]
    assert bodies(pa.array(floats, pa.float32()), "float") == [struct.pack("<f", v) for v in floats]
    doubles = [0.0, -0.0, 1e-300, 2.5, float("inf")]
    assert bodies(pa.array(doubles), "double") == [struct.pack("<d", v) for v in doubles]
    nan = bodies(pa.array([float("nan")]), "double")[0]
    assert np.isnan(struct.unpack("<d", nan)[0])


@pytest.mark.parametrize("build", [lambda values: pa.array(values),
                                   lambda values: pa.array(values, pa.large_string()),
                                   lambda values: pa.array(values).dictionary_encode()])
def test_strings_are_a_length_then_utf8(build):
    values = ["", "a", "héllo", "x" * 200, "a"]
    assert bodies(build(values), "string") == [text(v) for v in values]


@pytest.mark.parametrize("kind", [pa.binary(), pa.large_binary()])
def test_bytes_are_a_length_then_the_bytes(kind):
    values = [b"", b"\x00\xff", b"y" * 130]
    assert bodies(pa.array(values, kind), "bytes") == [text(v) for v in values]


@pytest.mark.newest
def test_view_types_are_read_like_the_others():
    assert bodies(pa.array(["ab", "c"], pa.string_view()), "string") == [text("ab"), text("c")]
    assert bodies(pa.array([b"ab"], pa.binary_view()), "bytes") == [text(b"ab")]


DECIMALS = [0, 1, -1, 127, 128, -128, -129, 255, 256, -256, 32767, -32768, 10 ** 18, -10 ** 18,
            2 ** 63, -2 ** 63 - 1, 10 ** 38 - 1, -(10 ** 38 - 1)]


def test_decimals_as_bytes_are_the_shortest_twos_complement():
    column = pa.array([D(v) for v in DECIMALS], pa.decimal128(38, 0))
    schema = {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 0}
    assert bodies(column, schema) == [text(two_complement(v)) for v in DECIMALS]


@pytest.mark.parametrize("precision, size", [(2, 1), (10, 5), (38, 16), (38, 20)])
def test_decimals_as_fixed_are_sign_extended_to_its_size(precision, size):
    values = [v for v in DECIMALS if abs(v) < 10 ** precision]
    column = pa.array([D(v) for v in values], pa.decimal128(precision, 0))
    schema = {"type": "fixed", "name": "F", "size": size, "logicalType": "decimal", "precision": precision,
              "scale": 0}
    assert bodies(column, schema) == [v.to_bytes(size, "big", signed=True) for v in values]


def test_a_decimal_widens_to_the_schemas_larger_scale():
    column = pa.array([D("1.5"), D("-0.25")], pa.decimal128(5, 2))
    schema = {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 4}
    assert bodies(column, schema) == [text(two_complement(15000)), text(two_complement(-2500))]


def test_a_decimal256_column_of_at_most_38_digits():
    column = pa.array([D("12.34")], pa.decimal256(20, 2))
    assert bodies(column, {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 2}) == \
        [text(two_complement(1234))]


def test_dates_and_timestamps():
    assert bodies(pa.array([0, -1, 19000], pa.date32()), {"type": "int", "logicalType": "date"}) == \
        [varint(0), varint(-1), varint(19000)]
    micros = {"type": "long", "logicalType": "timestamp-micros"}
    millis = {"type": "long", "logicalType": "timestamp-millis"}
    utc_s = pa.array([1, -1], pa.timestamp("s", tz="UTC"))
    assert bodies(utc_s, micros) == [varint(1_000_000), varint(-1_000_000)]
    utc_ns = pa.array([1999, -1], pa.timestamp("ns", tz="UTC"))
    assert bodies(utc_ns, micros) == [varint(1), varint(-1)]  # rounded down, as Spark's floorDiv
    utc_us = pa.array([1_500, -1_500], pa.timestamp("us", tz="UTC"))
    assert bodies(utc_us, millis) == [varint(1), varint(-2)]
    assert bodies(utc_us, "long") == [varint(1), varint(-2)]  # Spark: a plain long holds milliseconds
    assert bodies(utc_us, {"type": "long", "logicalType": "timestamp-nanos"}) == \
        [varint(1_500_000), varint(-1_500_000)]
    local = pa.array([7], pa.timestamp("us"))
    assert bodies(local, {"type": "long", "logicalType": "local-timestamp-micros"}) == [varint(7)]
    assert bodies(local, {"type": "long", "logicalType": "local-timestamp-millis"}) == [varint(0)]


def test_enums_are_the_symbols_index():
    schema = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}
    assert bodies(pa.array(["BLUE", "RED", "GREEN"]), schema) == [varint(2), varint(0), varint(1)]


def test_fixed_from_binary_and_from_fixed_size_binary():
    schema = {"type": "fixed", "name": "Pair", "size": 2}
    assert bodies(pa.array([b"ab", b"\x00\x01"]), schema) == [b"ab", b"\x00\x01"]
    assert bodies(pa.array([b"ab", b"cd", b"ef"], pa.binary(2)).slice(1), schema) == [b"cd", b"ef"]


@pytest.mark.parametrize("schema, null, value", [(["null", "string"], b"\x00", b"\x02"),
                                                 (["string", "null"], b"\x02", b"\x00")])
def test_nullable_unions_in_either_order(schema, null, value):
    record = {"type": "record", "name": "R", "fields": [{"name": "s", "type": schema}]}
    data = pa.RecordBatch.from_pydict({"s": pa.array(["a", None])})
    assert bodies(data, record) == [value + text("a"), null]


def test_a_column_goes_to_the_branch_of_its_own_type():
    assert bodies(pa.array([5], pa.int64()), ["int", "long"]) == [varint(1) + varint(5)]
    assert bodies(pa.array([5], pa.int32()), ["null", "long", "int"]) == [varint(2) + varint(5)]
    assert bodies(pa.array([2.0]), ["float", "double"]) == [varint(1) + struct.pack("<d", 2.0)]
    assert bodies(pa.array([b"x"]), ["string", "bytes"]) == [varint(1) + text(b"x")]
    assert bodies(pa.array([5], pa.int32()), ["string", "long"]) == [varint(1) + varint(5)]  # the one it fits


def test_a_struct_of_members_is_a_union_of_several_types():
    schema = {"type": "record", "name": "R", "fields": [{"name": "u", "type": ["null", "int", "string"]}]}
    members = pa.array([{"member0": 3, "member1": None}, {"member0": None, "member1": "x"},
                        {"member0": None, "member1": None}, {"member0": 4, "member1": "y"}, None],
                       pa.struct([("member0", pa.int32()), ("member1", pa.string())]))
    data = pa.StructArray.from_arrays([members], ["u"])
    assert bodies(data, schema) == [varint(1) + varint(3), varint(2) + text("x"), varint(0),
                                    varint(1) + varint(4), varint(0)]


def test_arrays_are_blocks_of_items():
    column = pa.array([[1, 2], [], None, [3]], pa.list_(pa.int64())).slice(1)
    schema = ["null", {"type": "array", "items": "long"}]
    assert bodies(column, schema) == [b"\x02" + b"\x00", None, b"\x02" + varint(1) + varint(3) + b"\x00"]
    nested = pa.array([[[1], []], [[2, 3]]], pa.large_list(pa.list_(pa.int32())))
    inner = {"type": "array", "items": "int"}
    assert bodies(nested, {"type": "array", "items": inner}) == [
        varint(2) + (varint(1) + varint(1) + b"\x00") + b"\x00" + b"\x00",
        varint(1) + (varint(2) + varint(2) + varint(3) + b"\x00") + b"\x00"]
    fixed_lists = pa.array([[1, 2], [3, 4]], pa.list_(pa.int16(), 2)).slice(1)
    assert bodies(fixed_lists, {"type": "array", "items": "int"}) == [varint(2) + varint(3) + varint(4) + b"\x00"]


def test_maps_are_blocks_of_keys_and_values():
    column = pa.array([[("a", 1), ("bc", None)], []], pa.map_(pa.string(), pa.int32()))
    schema = {"type": "map", "values": ["null", "int"]}
    assert bodies(column, schema) == [
        varint(2) + text("a") + b"\x02" + varint(1) + text("bc") + b"\x00" + b"\x00", b"\x00"]
    entries = pa.array([[{"value": 5, "key": "k"}]], pa.list_(pa.struct([("value", pa.int64()), ("key", pa.string())])))
    assert bodies(entries, {"type": "map", "values": "long"}) == [varint(1) + text("k") + varint(5) + b"\x00"]


def test_records_write_fields_in_the_schemas_order_and_null_for_the_missing_ones():
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "b", "type": "string"},
        {"name": "gone", "type": ["long", "null"]},
        {"name": "A", "type": {"type": "record", "name": "In", "fields": [{"name": "x", "type": "int"}]}},
    ]}
    data = pa.RecordBatch.from_pydict({"a": pa.array([{"x": 1}, {"x": -1}], pa.struct([("x", pa.int32())])),
                            "b": pa.array(["p", "q"])})
    assert bodies(data, schema) == [text("p") + b"\x02" + varint(1), text("q") + b"\x02" + varint(-1)]


def test_confluent_framing():
    assert confluent_header(258) == b"\x00\x00\x00\x01\x02"
    assert bodies(pa.array([1, None, 2], pa.int32()), "int", schema_id=2 ** 31 - 1) == [
        b"\x00\x7f\xff\xff\xff" + varint(1), None, b"\x00\x7f\xff\xff\xff" + varint(2)]
    for bad in (-1, 2 ** 31, True, "7", None.__class__):
        with pytest.raises(ConfigError, match="a schema id is an int from 0 to 2147483647"):
            encode(pa.array([1], pa.int32()), "int", bad)


def test_null_rows_stay_null_and_are_not_errors():
    data = pa.array([{"x": 1}, None, {"x": 2}], pa.struct([pa.field("x", pa.int32(), nullable=False)]))
    schema = {"type": "record", "name": "R", "fields": [{"name": "x", "type": "int"}]}
    result = encode(data, schema, 9)
    assert result.failures == () and result.bodies.to_pylist() == [
        b"\x00\x00\x00\x00\x09" + varint(1), None, b"\x00\x00\x00\x00\x09" + varint(2)]


def test_every_input_shape_gives_the_same_bodies():
    batch = pa.RecordBatch.from_pydict({"n": pa.array([1, 2, 3], pa.int64()), "s": pa.array(["a", "b", "c"])})
    schema = {"type": "record", "name": "R", "fields": [{"name": "n", "type": "long"}, {"name": "s", "type": "string"}]}
    expected = [varint(n) + text(s) for n, s in ((1, "a"), (2, "b"), (3, "c"))]
    table = pa.Table.from_batches([batch.slice(0, 1), batch.slice(1)])
    struct_array = pa.StructArray.from_arrays(batch.columns, fields=list(batch.schema))
    chunked = pa.chunked_array([struct_array.slice(0, 2), struct_array.slice(2)])
    for data in (batch, table, struct_array, chunked):
        assert bodies(data, schema) == expected
    assert bodies(struct_array.slice(1), schema) == expected[1:]
    with pytest.raises(TypeError, match="not list"):
        encode([1, 2], "long")


def test_empty_input_and_empty_records():
    assert encode(pa.array([], pa.int64()), "long").bodies.to_pylist() == []
    empty = pa.StructArray.from_arrays([pa.array([None, None], pa.null())], ["nothing"])
    schema = {"type": "record", "name": "R", "fields": [{"name": "nothing", "type": "null"}]}
    assert bodies(empty, schema) == [b"", b""]
    assert bodies(empty, schema, 1) == [b"\x00\x00\x00\x00\x01", b"\x00\x00\x00\x00\x01"]


def test_a_derived_schema_when_none_is_given():
    data = pa.RecordBatch.from_pydict({"n": pa.array([1, None], pa.int64())})
    assert bodies(data, None) == [b"\x00" + varint(1), b"\x02"]  # ["long", "null"]


# --- rows that cannot be encoded ----------------------------------------------------------------

def failures(result: EncodeResult) -> list[tuple[int, str, str]]:
    return [(error.row, error.path, error.reason) for error in result.failures]


def test_a_decimal_with_more_digits_than_the_schemas_precision_fails_its_row():
    column = pa.array([D("12.34"), D("123.45"), None, D("-99.99"), D("-100.00")], pa.decimal128(10, 2))
    schema = {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}
    result = encode(column, schema)
    assert failures(result) == [(1, "value", "123.45 has more digits than decimal(4, 2) holds"),
                                (4, "value", "-100.00 has more digits than decimal(4, 2) holds")]
    assert result.bodies.to_pylist() == [text(two_complement(1234)), None, None, text(two_complement(-9999)), None]


def test_a_string_outside_the_enum_fails_its_row():
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "color", "type": ["null", {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}]}]}
    data = pa.RecordBatch.from_pydict({"color": pa.array(["RED", "purple", None, "GREEN"])})
    result = encode(data, schema, 1)
    assert failures(result) == [(1, "value.color", '"purple" is not a symbol of enum Color (RED, GREEN)')]
    assert result.bodies.to_pylist()[1] is None and result.bodies.to_pylist()[2] == b"\x00\x00\x00\x00\x01\x00"


def test_a_null_where_the_schema_has_none_fails_its_row_naming_the_field():
    address = pa.struct([pa.field("zip", pa.string()), pa.field("city", pa.string())])
    data = pa.RecordBatch.from_pydict({"address": pa.array([{"zip": "1", "city": "a"}, {"zip": None, "city": "b"},
                                                 None, {"zip": None, "city": None}], address)})
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "address", "type": ["null", {"type": "record", "name": "Address", "fields": [
            {"name": "zip", "type": "string"}, {"name": "city", "type": "string"}]}]}]}
    result = encode(data, schema)
    reason = "null, but the Avro schema has no null here"
    assert failures(result) == [(1, "value.address.zip", reason), (3, "value.address.zip", reason)]
    assert result.bodies.to_pylist()[:3] == [b"\x02" + text("1") + text("a"), None, b"\x00"]


def test_an_item_or_a_map_value_that_fails_names_its_place_in_the_row():
    line = pa.struct([pa.field("price", pa.decimal128(6, 2))])
    data = pa.RecordBatch.from_pydict({
        "lines": pa.array([[{"price": D("1.00")}], [{"price": D("2.00")}, {"price": None}, {"price": D("9999.99")}]],
                          pa.list_(line)),
        "attrs": pa.array([[("ok", 1), ("bad", None)], []], pa.map_(pa.string(), pa.int32())),
    })
    price = {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line",
                                                              "fields": [{"name": "price", "type": price}]}}},
        {"name": "attrs", "type": {"type": "map", "values": "int"}}]}
    result = encode(data, schema)
    assert failures(result) == [
        (0, 'value.attrs["bad"]', "null, but the Avro schema has no null here"),
        (1, "value.lines[1].price", "null, but the Avro schema has no null here")]
    assert result.bodies.null_count == 2


def test_items_of_nested_arrays_are_named_at_every_level():
    data = pa.array([[[1]], [[2], [None, 3]]], pa.list_(pa.list_(pa.int64())))
    result = encode(data, {"type": "array", "items": {"type": "array", "items": "long"}})
    assert failures(result) == [(1, "value[1][0]", "null, but the Avro schema has no null here")]


def test_a_null_map_key_or_entry_fails_its_row():
    entry = pa.struct([("key", pa.string()), ("value", pa.int32())])
    data = pa.array([[{"key": "a", "value": 1}], [{"key": None, "value": 2}], [None]], pa.list_(entry))
    result = encode(data, {"type": "map", "values": ["null", "int"]})
    assert failures(result) == [(1, "value[null]", "a map key is null"), (2, "value[null]", "a map entry is null")]


def test_a_binary_of_the_wrong_size_for_a_fixed_fails_its_row():
    result = encode(pa.array([b"ab", b"abc", None]), ["null", {"type": "fixed", "name": "Two", "size": 2}])
    assert failures(result) == [(1, "value", "3 bytes do not fit fixed Two of 2 bytes")]


def test_a_timestamp_out_of_range_for_its_unit_fails_its_row():
    column = pa.array([1, 10 ** 14, -10 ** 14], pa.timestamp("s", tz="UTC"))
    result = encode(column, {"type": "long", "logicalType": "timestamp-micros"})
    assert [(row, path) for row, path, _ in failures(result)] == [(1, "value"), (2, "value")]
    assert failures(result)[0][2] == "100000000000000 does not fit timestamp-micros in a long"


def test_a_union_of_members_with_none_set_and_no_null_fails_its_row():
    members = pa.array([{"member0": 1, "member1": None}, {"member0": None, "member1": None}],
                       pa.struct([("member0", pa.int32()), ("member1", pa.string())]))
    result = encode(members, ["int", "string"])
    assert failures(result) == [(1, "value", "no member of the union is set, and the Avro union has no null")]


def test_a_row_failing_twice_is_named_by_its_first_fault():
    data = pa.RecordBatch.from_pydict({"a": pa.array([None], pa.int32()), "b": pa.array([None], pa.int32())})
    schema = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "int"}]}
    assert failures(encode(data, schema)) == [(0, "value.a", "null, but the Avro schema has no null here")]


def test_check_raises_a_record_error_for_the_first_failed_row():
    column = pa.array(["RED", "x", "y"])
    result = encode(column, {"type": "enum", "name": "C", "symbols": ["RED"]}, column="key")
    assert list(result.failed_rows) == [1, 2]
    with pytest.raises(SerializationError) as raised:
        result.check()
    error = raised.value
    assert (error.row, error.path) == (1, "key") and is_record_error(error)
    assert str(error) == 'row 1: key: "x" is not a symbol of enum C (RED) (1 more row(s) failed too)'
    again = pickle.loads(pickle.dumps(error))
    assert (again.row, again.path, again.reason, str(again)) == (error.row, error.path, error.reason, str(error))
    assert FailedRow(3, "value.a", "why").error().args == SerializationError(3, "value.a", "why").args
    assert encode(pa.array(["RED"]), {"type": "enum", "name": "C", "symbols": ["RED"]}).check().to_pylist() == [b"\x00"]


def test_many_failed_rows_leave_the_others_intact():
    n = 5_000
    values = np.arange(n) % 7
    data = pa.RecordBatch.from_pydict({"n": pa.array(np.where(values == 3, None, values).tolist(), pa.int64())})
    result = encode(data, {"type": "record", "name": "R", "fields": [{"name": "n", "type": "long"}]})
    assert list(result.failed_rows) == [i for i in range(n) if i % 7 == 3]
    assert result.bodies.to_pylist() == [None if i % 7 == 3 else varint(i % 7) for i in range(n)]
