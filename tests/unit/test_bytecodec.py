"""The one scalar codec (``bytecodec``): the protocol's checked encoders and the record builder's
fast path write the same bytes, one decoder reads both, and the vectorised (numpy) variant in
``record/arrow.py`` agrees with it value for value."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_kafka_sink.bytecodec import (
    INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, UINT32_MAX, UINT64_MAX, VARINT_MAX_BYTES,
    VARLONG_MAX_BYTES, VarintError, encode_uvarint, encode_varint, encode_varlong, read_uvarint,
    size_of_varint, unzigzag, write_varint, zigzag,
)
from spark_kafka_sink.record.arrow import _varint_sizes, _zigzag

int64s = st.integers(INT64_MIN, INT64_MAX)


@settings(max_examples=300, deadline=None)
@given(int64s)
def test_the_builder_fast_path_writes_what_the_protocol_encoder_writes(value):
    out = bytearray()
    write_varint(out, value)
    assert bytes(out) == encode_varlong(value) and len(out) == size_of_varint(value)
    if INT32_MIN <= value <= INT32_MAX:
        assert bytes(out) == encode_varint(value)
    z, end = read_uvarint(out, 0, len(out), VARLONG_MAX_BYTES, UINT64_MAX)
    assert (unzigzag(z), end) == (value, len(out)) and z == zigzag(value) & UINT64_MAX


@settings(max_examples=100, deadline=None)
@given(st.lists(int64s, min_size=1, max_size=50))
def test_the_vectorised_zigzag_and_sizes_agree_with_the_scalar_ones(values):
    array = np.array(values, dtype=np.int64)
    assert _zigzag(array).tolist() == [zigzag(v) & UINT64_MAX for v in values]
    assert _varint_sizes(_zigzag(array)).tolist() == [size_of_varint(v) for v in values]


@pytest.mark.parametrize("data, max_bytes, max_value, message, truncated", [
    (b"", VARINT_MAX_BYTES, UINT32_MAX, "runs past the end", True),
    (b"\x80\x80", VARINT_MAX_BYTES, UINT32_MAX, "runs past the end", True),
    (b"\x80\x80\x80\x80\x80\x01", VARINT_MAX_BYTES, UINT32_MAX, "longer than 5 bytes", False),
    (b"\x80\x80\x80\x80\x10", VARINT_MAX_BYTES, UINT32_MAX, "does not fit in 32 bits", False),
    (b"\xff" * 10 + b"\x01", VARLONG_MAX_BYTES, UINT64_MAX, "longer than 10 bytes", False),
])
def test_one_decoder_refuses_what_no_reader_may_accept(data, max_bytes, max_value, message, truncated):
    with pytest.raises(VarintError, match=message) as info:
        read_uvarint(data, 0, len(data), max_bytes, max_value)
    assert info.value.truncated is truncated


def test_the_decoder_stops_at_its_limit_not_at_the_buffer_end():
    data = encode_uvarint(300) + b"\x00"
    assert read_uvarint(data, 0, len(data)) == (300, 2)
    with pytest.raises(VarintError, match="runs past the end"):
        read_uvarint(data, 0, 1)
