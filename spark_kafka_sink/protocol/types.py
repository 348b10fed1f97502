"""Field types of message schemas: the scalar types, strings, bytes, records, uuid and arrays.

Every type has the same small interface, used by ``schema.Schema`` (which is itself the struct
type):

    write(w, value, version, flexible, nullable)   append the value to a Writer
    read(r, version, flexible, nullable)           read a value from a Reader
    zero(nullable)                                 the default when the JSON spec gives none
    is_default(value, default)                     whether a value equals the default

``flexible`` selects the compact forms (see primitives.py for the wire formats).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from ..bytecodec import INT16_MAX, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from ..errors import EncodeError, ProtocolError
from . import primitives as p
from .primitives import Reader, Writer

_BUFFERS = (bytes, bytearray, memoryview)


def located(exc: Exception, part: str) -> Exception:
    """A copy of an EncodeError/ProtocolError whose message names one more enclosing field.

    Paths read ``topics[0].partitions[1].records: truncated: ...``.
    """
    path = getattr(exc, "field_path", "")
    reason = getattr(exc, "reason", str(exc))
    if path and not path.startswith("["):
        path = "." + path
    path = part + path
    new = type(exc)(f"{path}: {reason}")
    new.field_path, new.reason = path, reason
    return new


class _Scalar:
    """Shared behaviour of non-nullable fixed-size types."""

    name = "?"
    default: Any = 0

    def zero(self, nullable: bool) -> Any:
        return self.default

    def is_default(self, value: Any, default: Any) -> bool:
        return value == default

    def __repr__(self) -> str:
        return self.name


class IntType(_Scalar):
    """A signed or unsigned fixed-width integer."""

    def __init__(self, name: str, packer: struct.Struct, low: int, high: int):
        self.name, self._packer, self._low, self._high = name, packer, low, high

    def write(self, w: Writer, value: Any, version: int, flexible: bool, nullable: bool) -> None:
        if not isinstance(value, int) or not self._low <= value <= self._high:
            raise EncodeError(f"expected {self.name} in [{self._low}, {self._high}], got {value!r}")
        w.raw(self._packer.pack(value))

    def read(self, r: Reader, version: int, flexible: bool, nullable: bool) -> int:
        return r.unpack(self._packer)


class Float64Type(_Scalar):
    name = "float64"
    default = 0.0

    def write(self, w: Writer, value: Any, version: int, flexible: bool, nullable: bool) -> None:
        if not isinstance(value, (int, float)):
            raise EncodeError(f"expected float64, got {value!r}")
        w.pack(p.FLOAT64, float(value))

    def read(self, r: Reader, version: int, flexible: bool, nullable: bool) -> float:
        return r.float64()


class BoolType(_Scalar):
    name = "bool"
    default = False

    def write(self, w: Writer, value: Any, version: int, flexible: bool, nullable: bool) -> None:
        if not isinstance(value, bool):
            raise EncodeError(f"expected bool, got {value!r}")
        w.boolean(value)

    def read(self, r: Reader, version: int, flexible: bool, nullable: bool) -> bool:
        return r.boolean()


class UuidType(_Scalar):
    name = "uuid"
    default = uuid.UUID(int=0)

    def write(self, w: Writer, value: Any, version: int, flexible: bool, nullable: bool) -> None:
        if not isinstance(value, uuid.UUID):
            raise EncodeError(f"expected uuid.UUID, got {value!r}")
        w.uuid(value)

    def read(self, r: Reader, version: int, flexible: bool, nullable: bool) -> uuid.UUID:
        return r.uuid()


class StringType:
    """STRING / NULLABLE_STRING, compact in flexible versions."""

    name = "string"

    def zero(self, nullable: bool) -> str | None:
        return None if nullable else ""

    def is_default(self, value: Any, default: Any) -> bool:
        return value == default

    def write(self, w: Writer, value: Any, version: int, flexible: bool, nullable: bool) -> None:
        if value is None and not nullable:
            raise EncodeError("null is not allowed for this string at this version")
        if value is not None and not isinstance(value, str):
            raise EncodeError(f"expected str, got {type(value).__name__}")
        w.nullable_string(value, flexible)

    def read(self, r: Reader, version: int, flexible: bool, nullable: bool) -> str | None:
        return r.nullable_string(flexible) if nullable else r.string(flexible)

    def __repr__(self) -> str:
        return self.name


class BytesType(StringType):
    """BYTES / NULLABLE_BYTES, compact in flexible versions. Decodes to ``bytes``."""

    name = "bytes"

    def zero(self, nullable: bool) -> bytes | None:
        return None if nullable else b""

    def write(self, w: Writer, value: Any, version: int, flexible: bool, nullable: bool) -> None:
        if value is None and not nullable:
            raise EncodeError(f"null is not allowed for this {self.name} field at this version")
        if value is not None and not isinstance(value, _BUFFERS):
            raise EncodeError(f"expected bytes-like, got {type(value).__name__}")
        w.nullable_bytes(value, flexible)

    def read(self, r: Reader, version: int, flexible: bool, nullable: bool) -> Any:
        start = r.offset
        view = r.nullable_bytes(flexible)
        if view is None and not nullable:
            raise ProtocolError(f"null {self.name} at offset {start} where null is not allowed")
        return self._wrap(view)

    def _wrap(self, view: memoryview | None) -> Any:
        return None if view is None else bytes(view)


class RecordsType(BytesType):
    """RECORDS: record batches as nullable bytes. Decodes to a read-only memoryview (no copy)
    when the input was immutable, else to bytes."""

    name = "records"

    def zero(self, nullable: bool) -> None:
        return None

    def _wrap(self, view: memoryview | None) -> Any:
        if view is None or view.readonly:
            return view
        return bytes(view)


class Array:
    """ARRAY / COMPACT_ARRAY of an element type (a scalar type or a Schema)."""

    def __init__(self, element: Any):
        self.element = element
        self.name = f"[]{getattr(element, 'name', element)}"

    def zero(self, nullable: bool) -> tuple:
        return ()

    def is_default(self, value: Any, default: Any) -> bool:
        if default is None:
            return value is None
        return value is not None and len(value) == 0

    def write(self, w: Writer, value: Any, version: int, flexible: bool, nullable: bool) -> None:
        if value is None:
            if not nullable:
                raise EncodeError("null is not allowed for this array at this version")
            w.length(-1, flexible, wide=True)
            return
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__len__"):
            raise EncodeError(f"expected a list, got {type(value).__name__}")
        w.length(len(value), flexible, wide=True)
        element = self.element
        for index, item in enumerate(value):
            try:
                element.write(w, item, version, flexible, False)
            except (EncodeError, ProtocolError) as exc:
                raise located(exc, f"[{index}]") from None

    def read(self, r: Reader, version: int, flexible: bool, nullable: bool) -> tuple | None:
        start = r.offset
        count = r.array_length(flexible)
        if count < 0:
            if not nullable:
                raise ProtocolError(f"null array at offset {start} where null is not allowed")
            return None
        element, items = self.element, []
        try:
            for _ in range(count):
                items.append(element.read(r, version, flexible, False))
        except ProtocolError as exc:
            raise located(exc, f"[{len(items)}]") from None
        return tuple(items)

    def __repr__(self) -> str:
        return self.name


INT8 = IntType("int8", p.INT8, -0x80, 0x7F)
INT16 = IntType("int16", p.INT16, -INT16_MAX - 1, INT16_MAX)
INT32 = IntType("int32", p.INT32, INT32_MIN, INT32_MAX)
INT64 = IntType("int64", p.INT64, INT64_MIN, INT64_MAX)
UINT16 = IntType("uint16", p.UINT16, 0, 0xFFFF)
UINT32 = IntType("uint32", p.UINT32, 0, 0xFFFFFFFF)
FLOAT64 = Float64Type()
BOOL = BoolType()
UUID = UuidType()
STRING = StringType()
BYTES = BytesType()
RECORDS = RecordsType()
