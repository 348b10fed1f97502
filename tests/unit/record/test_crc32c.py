"""CRC-32C: check vectors on both paths, pure/wheel parity, incremental use, path selection."""

from __future__ import annotations

import importlib
import sys

import crc32c as crc32c_wheel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_kafka_sink.record.crc32c import PURE_ENV_VAR, crc32c, crc32c_pure

crc_module = sys.modules["spark_kafka_sink.record.crc32c"]  # the module itself, for reloads
wheel = crc32c_wheel.crc32c

# Standard CRC-32C check values (RFC 3720 appendix B.4 for the 32-byte patterns; the
# "123456789" check value of the Castagnoli parameter set; "a" from kafka-python's test_util.py).
VECTORS = [
    (b"", 0x00000000),
    (b"a", 0xC1D04330),
    (b"123456789", 0xE3069283),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
]

IMPLEMENTATIONS = {"public": crc32c, "pure": crc32c_pure, "wheel": wheel}


@pytest.mark.parametrize("impl", sorted(IMPLEMENTATIONS))
@pytest.mark.parametrize(("data", "expected"), VECTORS)
def test_check_vectors(impl, data, expected):
    fn = IMPLEMENTATIONS[impl]
    assert fn(data) == expected
    assert fn(bytearray(data)) == expected
    assert fn(memoryview(b"xx" + data + b"yy")[2:2 + len(data)]) == expected


@pytest.mark.parametrize("impl", sorted(IMPLEMENTATIONS))
def test_incremental_matches_whole(impl):
    fn = IMPLEMENTATIONS[impl]
    assert fn(b"56789", fn(b"1234")) == 0xE3069283
    assert fn(b"56789", value=fn(b"1234")) == 0xE3069283


def test_pure_handles_non_byte_memoryview():
    import array

    words = array.array("I", [1, 2, 3])
    assert crc32c_pure(memoryview(words)) == wheel(words.tobytes())


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300), st.binary(max_size=300))
def test_pure_matches_wheel_and_is_incremental(head, tail):
    assert crc32c_pure(head + tail) == wheel(head + tail)
    assert crc32c_pure(tail, crc32c_pure(head)) == wheel(head + tail)
    assert crc32c_pure(tail, wheel(head)) == wheel(tail, crc32c_pure(head))


@settings(max_examples=30, deadline=None)
@given(st.binary(max_size=100), st.integers(0, 0xFFFFFFFF))
def test_seed_parity(data, seed):
    assert crc32c_pure(data, seed) == wheel(data, seed)


@pytest.fixture
def reload_crc(monkeypatch):
    """Reload the crc32c module under a patched environment; restore it afterwards."""
    yield lambda: importlib.reload(crc_module)
    monkeypatch.undo()
    importlib.reload(crc_module)


def test_wheel_is_live_by_default(monkeypatch, reload_crc):
    monkeypatch.delenv(PURE_ENV_VAR, raising=False)
    assert reload_crc().IMPLEMENTATION == "wheel"


@pytest.mark.parametrize("value", ["1", "true", "yes"])
def test_env_var_forces_pure(monkeypatch, reload_crc, value):
    monkeypatch.setenv(PURE_ENV_VAR, value)
    module = reload_crc()
    assert module.IMPLEMENTATION == "pure"
    assert module.crc32c(b"123456789") == 0xE3069283


@pytest.mark.parametrize("value", ["", "0"])
def test_env_var_off_values_keep_wheel(monkeypatch, reload_crc, value):
    monkeypatch.setenv(PURE_ENV_VAR, value)
    assert reload_crc().IMPLEMENTATION == "wheel"


def test_missing_wheel_falls_back_to_pure(monkeypatch, reload_crc):
    monkeypatch.delenv(PURE_ENV_VAR, raising=False)
    monkeypatch.setitem(sys.modules, "crc32c", None)
    assert reload_crc().IMPLEMENTATION == "pure"
