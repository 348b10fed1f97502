"""Primitives: varint bounds and golden bytes, hypothesis round trips, truncation errors."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from spark_kafka_sink.errors import EncodeError, ProtocolError
from spark_kafka_sink.protocol import primitives as p
from spark_kafka_sink.protocol.primitives import INT32, LARGE_PART_BYTES, Reader, Writer

INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1
INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def _written(fn, *args) -> bytes:
    w = Writer()
    getattr(w, fn)(*args)
    return w.getvalue()


@pytest.mark.parametrize("value, encoded", [
    (0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"),
    (2 ** 32 - 1, "ffffffff0f"),
])
def test_uvarint_golden(value, encoded):
    assert p.encode_uvarint(value).hex() == encoded
    assert Reader(bytes.fromhex(encoded)).uvarint() == value


@pytest.mark.parametrize("value, encoded", [
    (0, "00"), (-1, "01"), (1, "02"), (-64, "7f"), (64, "8001"),
    (INT32_MAX, "feffffff0f"), (INT32_MIN, "ffffffff0f"),
])
def test_varint_golden(value, encoded):
    assert p.encode_varint(value).hex() == encoded
    assert Reader(bytes.fromhex(encoded)).varint() == value


def test_varlong_bounds_golden():
    assert p.encode_varlong(INT64_MAX).hex() == "feffffffffffffffff01"
    assert p.encode_varlong(INT64_MIN).hex() == "ffffffffffffffffff01"
    assert p.encode_varlong(-1).hex() == "01"


@given(st.integers(0, 2 ** 32 - 1))
@example(0)
@example(2 ** 32 - 1)
def test_uvarint_round_trip(value):
    r = Reader(p.encode_uvarint(value))
    assert r.uvarint() == value and r.remaining == 0


@given(st.integers(INT32_MIN, INT32_MAX))
@example(0)
@example(1)
@example(-1)
@example(INT32_MIN)
@example(INT32_MAX)
def test_varint_round_trip(value):
    r = Reader(p.encode_varint(value))
    assert r.varint() == value and r.remaining == 0


@given(st.integers(INT64_MIN, INT64_MAX))
@example(0)
@example(1)
@example(-1)
@example(INT64_MIN)
@example(INT64_MAX)
@example(INT32_MIN)
@example(INT32_MAX)
def test_varlong_round_trip(value):
    r = Reader(p.encode_varlong(value))
    assert r.varlong() == value and r.remaining == 0


@pytest.mark.parametrize("encode, value", [
    (p.encode_varint, INT32_MAX + 1), (p.encode_varint, INT32_MIN - 1),
    (p.encode_varlong, INT64_MAX + 1), (p.encode_uvarint, -1), (p.encode_uvarint, 2 ** 64),
])
def test_varints_refuse_out_of_range(encode, value):
    with pytest.raises(EncodeError):
        encode(value)


def test_overlong_varints_are_protocol_errors():
    with pytest.raises(ProtocolError, match="malformed varint"):
        Reader(b"\xff\xff\xff\xff\xff\x01").uvarint()
    with pytest.raises(ProtocolError, match="malformed varint"):
        Reader(b"\xff\xff\xff\xff\x1f").uvarint()      # 2**35 - 1 does not fit 32 bits
    with pytest.raises(ProtocolError, match="malformed varint"):
        Reader(b"\xff" * 10 + b"\x01").varlong()


@given(st.text(), st.booleans())
def test_strings_round_trip(text, compact):
    data = _written("nullable_string", text, compact)
    r = Reader(data)
    assert r.string(compact) == text and r.remaining == 0


@given(st.one_of(st.none(), st.text()), st.booleans())
def test_nullable_strings_round_trip(text, compact):
    r = Reader(_written("nullable_string", text, compact))
    assert r.nullable_string(compact) == text and r.remaining == 0


@given(st.one_of(st.none(), st.binary()), st.booleans())
def test_bytes_round_trip(data, compact):
    r = Reader(_written("nullable_bytes", data, compact))
    got = r.nullable_bytes(compact)
    assert (None if got is None else bytes(got)) == data and r.remaining == 0


def test_compact_forms_golden():
    assert _written("nullable_string", "ab", True).hex() == "036162"
    assert _written("nullable_string", None, True).hex() == "00"
    assert _written("nullable_string", "ab", False).hex() == "00026162"
    assert _written("nullable_string", None, False).hex() == "ffff"
    assert _written("nullable_bytes", b"\x01", True).hex() == "0201"
    assert _written("nullable_bytes", None, False).hex() == "ffffffff"
    assert _written("nullable_bytes", memoryview(b"\x01\x02"), False).hex() == "000000020102"


def test_null_string_where_not_nullable():
    with pytest.raises(ProtocolError, match="null string at offset 0"):
        Reader(b"\xff\xff").string(False)
    with pytest.raises(ProtocolError, match="null string"):
        Reader(b"\x00").string(True)


def test_negative_lengths_other_than_null_are_rejected():
    with pytest.raises(ProtocolError, match="negative length -2 at offset 0"):
        Reader(b"\xff\xfe").nullable_string(False)
    with pytest.raises(ProtocolError, match="negative length -5"):
        Reader(p.INT32.pack(-5)).nullable_bytes(False)
    with pytest.raises(ProtocolError, match="negative length -3"):
        Reader(p.INT32.pack(-3)).array_length(False)


def test_lengths_past_the_end():
    with pytest.raises(ProtocolError, match=r"truncated: needed 5 bytes at offset 2, have 3"):
        Reader(b"\x00\x05abc").string(False)
    with pytest.raises(ProtocolError, match="array of 1000 elements at offset 0"):
        Reader(p.INT32.pack(1000) + b"\x00" * 10).array_length(False)


def test_invalid_utf8():
    with pytest.raises(ProtocolError, match="invalid UTF-8"):
        Reader(b"\x00\x02\xff\xfe").string(False)


def _encoded_primitives():
    return [
        ("int8", _written("pack", p.INT8, -3), ()),
        ("int16", _written("pack", p.INT16, 300), ()),
        ("int32", _written("pack", p.INT32, -70000), ()),
        ("int64", _written("pack", p.INT64, 2 ** 40), ()),
        ("uint16", _written("pack", p.UINT16, 65535), ()),
        ("uint32", _written("pack", p.UINT32, 2 ** 32 - 1), ()),
        ("float64", _written("pack", p.FLOAT64, 1.5), ()),
        ("boolean", _written("boolean", True), ()),
        ("uuid", _written("uuid", uuid.uuid4()), ()),
        ("uvarint", p.encode_uvarint(2 ** 31), ()),
        ("varint", p.encode_varint(INT32_MIN), ()),
        ("varlong", p.encode_varlong(INT64_MAX), ()),
        ("string", _written("nullable_string", "héllo", False), (False,)),
        ("string", _written("nullable_string", "héllo", True), (True,)),
        ("nullable_string", _written("nullable_string", "x", True), (True,)),
        ("nullable_bytes", _written("nullable_bytes", b"abc", False), (False,)),
        ("nullable_bytes", _written("nullable_bytes", b"abc", True), (True,)),
    ]


@pytest.mark.parametrize("method, data, args", _encoded_primitives(),
                         ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(_encoded_primitives())])
def test_every_truncation_is_a_protocol_error(method, data, args):
    for cut in range(len(data)):
        with pytest.raises(ProtocolError):
            getattr(Reader(data[:cut]), method)(*args)
    r = Reader(data)
    getattr(r, method)(*args)
    assert r.remaining == 0


def test_reader_respects_offset_and_end():
    r = Reader(b"\x00\x00\x00\x01\x00\x00\x00\x02", offset=4, end=8)
    assert r.int32() == 2 and r.remaining == 0
    with pytest.raises(ProtocolError, match="needed 4 bytes at offset 4, have 0"):
        Reader(b"\x00\x00\x00\x01\x00\x00\x00\x02", offset=4, end=4).int32()


def test_take_is_zero_copy():
    data = b"abcdef"
    view = Reader(data, offset=1).take(3)
    assert isinstance(view, memoryview) and view.readonly and bytes(view) == b"bcd"


def test_writer_reports_bad_values():
    with pytest.raises(EncodeError, match="cannot encode 70000"):
        Writer().pack(p.INT16, 70000)
    with pytest.raises(EncodeError, match="longer than 32767"):
        Writer().nullable_string("x" * 40000, compact=False)
    assert len(_written("nullable_string", "x" * 40000, True)) == 40003


def test_framed_parts_join_small_parts_and_pass_large_ones_through_uncopied():
    w = Writer()
    w.pack(INT32, 7)
    w.raw(b"abc")
    big = bytearray(b"\x01" * LARGE_PART_BYTES)
    w.raw(big)
    w.raw(b"tail")
    parts = w.framed_parts()
    assert len(parts) == 3
    assert parts[0] == INT32.pack(4 + 3 + len(big) + 4) + INT32.pack(7) + b"abc"
    assert isinstance(parts[1], memoryview) and parts[1].obj is big and parts[1].readonly
    assert parts[2] == b"tail"
    assert b"".join(parts) == w.framed()


def test_framed_parts_of_small_parts_is_one_buffer():
    w = Writer()
    w.raw(b"x" * (LARGE_PART_BYTES - 1))
    assert w.framed_parts() == (INT32.pack(LARGE_PART_BYTES - 1) + b"x" * (LARGE_PART_BYTES - 1),)
