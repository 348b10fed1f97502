"""Representative message bodies built from the schemas, for round-trip tests.

``make_body(schema, version, style)`` walks a schema and gives every field present at
``version`` a value: in the "full" style a non-default value everywhere (tagged fields included,
arrays of two elements, unicode strings, boundary integers); in the "sparse" style nullable
fields are null and arrays empty (null if nullable). ``expected(schema, version, body)`` is the
plain dict a decode must give back: the body plus defaults for every field it leaves out.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from spark_kafka_sink.protocol import types as t
from spark_kafka_sink.protocol.schema import Schema
from spark_kafka_sink.protocol.values import Struct

_STRINGS = ("tópic-ü", "ключ", "話題-😀", "plain")


class _Values:
    """Deterministic non-default values, one counter per body."""

    def __init__(self) -> None:
        self._n = itertools.count(1)

    def scalar(self, ftype: Any, default: Any, nullable: bool, style: str) -> Any:
        n = next(self._n)
        if nullable and style == "sparse":
            return None
        if isinstance(ftype, t.IntType):
            candidates = (ftype._high, ftype._low, n, ftype._high - n, ftype._low + n)
            return next(v for v in candidates[n % 5:] + candidates if v != default)
        if ftype is t.BOOL:
            return not default
        if ftype is t.UUID:
            return uuid.UUID(int=(n * 0x9E3779B97F4A7C15) % (1 << 128) or 1)
        if ftype is t.FLOAT64:
            return n + 0.5
        if ftype is t.STRING:
            return f"{_STRINGS[n % len(_STRINGS)]}-{n}"
        if ftype is t.RECORDS:
            return bytes(range(n % 7, n % 7 + 40))
        if ftype is t.BYTES:
            return b"\x00\xff" + bytes([n % 256]) * (n % 5)
        raise TypeError(f"no generator for {ftype!r}")


def make_body(schema: Schema, version: int, style: str = "full") -> dict[str, Any]:
    return _struct(schema, version, style, _Values())


def _struct(schema: Schema, version: int, style: str, values: _Values) -> dict[str, Any]:
    body = {}
    for f in schema.fields:
        if version in f.versions:
            nullable = version in f.nullable_versions
            body[f.name] = _value(f.type, f.default, nullable, version, style, values)
    return body


def _value(ftype: Any, default: Any, nullable: bool, version: int, style: str,
           values: _Values) -> Any:
    if isinstance(ftype, Schema):
        return _struct(ftype, version, style, values)
    if isinstance(ftype, t.Array):
        if style == "sparse":
            return None if nullable else []
        element = ftype.element
        return [_value(element, getattr(element, "default", None), False, version, style, values)
                for _ in range(2)]
    return values.scalar(ftype, default, nullable, style)


def expected(schema: Schema, version: int, body: dict[str, Any]) -> dict[str, Any]:
    """The plain form of ``body`` as decoded at ``version``: defaults filled in."""
    out = {}
    for f in schema.fields:
        if version in f.versions and f.name in body:
            out[f.name] = _expected_value(f.type, version, body[f.name])
        else:
            out[f.name] = _plain_default(f.default)
    return out


def _expected_value(ftype: Any, version: int, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(ftype, Schema):
        return expected(ftype, version, value)
    if isinstance(ftype, t.Array):
        return [_expected_value(ftype.element, version, item) for item in value]
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def _plain_default(default: Any) -> Any:
    if isinstance(default, Struct):
        return default.to_dict()
    if isinstance(default, tuple):
        return list(default)
    return default
