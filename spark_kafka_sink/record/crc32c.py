"""CRC-32C (Castagnoli), the checksum of Kafka record batches (magic 2).

Parameters: reflected polynomial 0x82F63B78, initial value 0xFFFFFFFF, final XOR 0xFFFFFFFF.
Check value: ``crc32c(b"123456789") == 0xE3069283``.

``crc32c(data, value=0)`` is the accelerated ``crc32c`` wheel when it imports, else
:func:`crc32c_pure`, a table-driven reference with the same signature and results. Set
``SPARK_KAFKA_SINK_PURE_CRC32C=1`` before import to force the pure path. :data:`IMPLEMENTATION`
says which one is live (``"wheel"`` or ``"pure"``).

Both accept ``bytes``, ``bytearray`` and ``memoryview``; ``value`` is a previous result, so
``crc32c(b, crc32c(a)) == crc32c(a + b)``.
"""

from __future__ import annotations

import os
from typing import Callable, Union

Buffer = Union[bytes, bytearray, memoryview]

PURE_ENV_VAR = "SPARK_KAFKA_SINK_PURE_CRC32C"

_POLYNOMIAL = 0x82F63B78  # 0x1EDC6F41 bit-reversed
_MASK = 0xFFFFFFFF


def _make_table() -> tuple[int, ...]:
    """The 256 one-byte remainders of the reflected polynomial."""
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _POLYNOMIAL if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_TABLE = _make_table()


def crc32c_pure(data: Buffer, value: int = 0) -> int:
    """CRC-32C of ``data`` continuing from ``value``, in pure Python (the reference path)."""
    table = _TABLE
    crc = (value & _MASK) ^ _MASK
    view = memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    for byte in view:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ _MASK


def _load_wheel() -> Callable[..., int] | None:
    """The wheel's function, or ``None`` when it is missing or the pure path is forced."""
    if os.environ.get(PURE_ENV_VAR, "").strip().lower() not in ("", "0", "false", "no"):
        return None
    try:
        import crc32c as wheel
    except ImportError:
        return None
    return wheel.crc32c


_IMPL: Callable[[Buffer, int], int] = _load_wheel() or crc32c_pure

IMPLEMENTATION = "pure" if _IMPL is crc32c_pure else "wheel"
"""Which implementation :func:`crc32c` uses: ``"wheel"`` or ``"pure"``."""


def crc32c(data: Buffer, value: int = 0) -> int:
    """CRC-32C of ``data`` continuing from ``value`` (0 to start), as an unsigned 32-bit int."""
    return _IMPL(data, value)
