"""Zig-zag varints (``bytecodec``) and the record Cursor: reference encodings, round trips, and
bounds-checked decoding."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_kafka_sink.bytecodec import size_of_varint, write_varint, zigzag
from spark_kafka_sink.errors import CorruptRecordError
from spark_kafka_sink.record.cursor import Cursor

# (encoding, value) pairs; the same table appears in kafka-python's test/record/test_util.py and
# follows from the zig-zag + base-128 rules in Kafka's ByteUtils.
VECTORS = [
    (b"\x00", 0), (b"\x01", -1), (b"\x02", 1), (b"\x7e", 63), (b"\x7f", -64),
    (b"\x80\x01", 64), (b"\x81\x01", -65), (b"\xfe\x7f", 8191), (b"\xff\x7f", -8192),
    (b"\x80\x80\x01", 8192), (b"\x81\x80\x01", -8193),
    (b"\xfe\xff\xff\xff\x0f", 2**31 - 1), (b"\xff\xff\xff\xff\x0f", -(2**31)),
    (b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 4611686018427387904),
    (b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01", 2**63 - 1),
    (b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", -(2**63)),
]


@pytest.mark.parametrize(("encoded", "value"), VECTORS)
def test_reference_encodings(encoded, value):
    out = bytearray()
    write_varint(out, value)
    assert out == encoded
    assert size_of_varint(value) == len(encoded)
    cursor = Cursor(b"\xaa" + encoded + b"\xbb", 1, len(encoded) + 2, "test")
    decoded = cursor.varint() if len(encoded) <= 5 else cursor.varlong()
    assert decoded == value
    assert cursor.pos == 1 + len(encoded)


def test_zigzag_order():
    assert [zigzag(n) for n in (0, -1, 1, -2, 2)] == [0, 1, 2, 3, 4]


@settings(max_examples=100, deadline=None)
@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(value):
    out = bytearray()
    write_varint(out, value)
    assert len(out) == size_of_varint(value) <= 10
    assert Cursor(bytes(out), 0, len(out), "t").varlong() == value


@pytest.mark.parametrize(("data", "message"), [
    (b"", "runs past the end"),
    (b"\x80\x80", "runs past the end"),
    (b"\x80\x80\x80\x80\x80\x01", "longer than 5 bytes"),
    (b"\x80\x80\x80\x80\x10", "does not fit in 32 bits"),
])
def test_bad_varints(data, message):
    with pytest.raises(CorruptRecordError, match=message):
        Cursor(data, 0, len(data), "t").varint()


def test_limit_is_respected():
    cursor = Cursor(b"\x06abcdef", 0, 3, "record 7")
    with pytest.raises(CorruptRecordError, match=r"record 7: key of 3 bytes overruns the 2 bytes left"):
        cursor.nullable_bytes("key")


def test_nullable_and_string_fields():
    cursor = Cursor(b"\x01\x00\x06h\xc3\xa9\x04\xff\xfe", 0, 10, "t")
    assert cursor.nullable_bytes("key") is None
    assert cursor.nullable_bytes("value") == b""
    assert cursor.string("header key") == "hé"
    with pytest.raises(CorruptRecordError, match="not valid UTF-8"):
        cursor.string("header key")
