"""Avro bodies for whole Arrow columns: :func:`encode`, and what it gives back.

``encode(data, schema, schema_id=None)`` writes every row of ``data`` (a ``StructArray``,
``RecordBatch`` or ``Table`` for a record schema, any ``Array`` or ``ChunkedArray`` otherwise)
with ``schema`` (a parsed :data:`~.schema.AvroSchema`, its JSON text or decoded JSON, or ``None``
to derive it from the data's type by Spark's rules, :mod:`.derive`). With ``schema_id`` each body
is framed in the Confluent wire format: the magic byte 0, the id as 4 bytes big-endian, then the
Avro body; without, the plain body.

The result (:class:`EncodeResult`) holds one binary array of bodies, one per input row, and the
rows that could not be encoded (:class:`FailedRow`: row, field path, reason), in row order. A
failed row's body is null, and so is a null input row's: as Spark's ``to_avro`` and Confluent's
serializer, a null value is not encoded (it stays null, a Kafka tombstone where the sink writes
it). ``result.check()`` gives the bodies, or raises
:class:`~spark_kafka_sink.errors.SerializationError` for the first failed row.

The schema is checked against the data's type first (:mod:`.plan`): a schema that does not fit
raises :class:`~spark_kafka_sink.errors.AvroSchemaError` before anything is encoded. All the work
is over whole columns (:mod:`.encoders`, :mod:`.columns`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import ConfigError, SerializationError
from .columns import Constant, offsets_of, validity
from .derive import derive_schema
from .encoders import Encoder, Fault, Level
from .plan import compile_plan
from .schema import SCHEMA_TYPES, AvroSchema, parse_schema

__all__ = ["EncodeResult", "FailedRow", "as_column", "confluent_header", "encode", "encode_column"]

MAGIC_BYTE = 0
SCHEMA_ID_MAX = 2 ** 31 - 1


@dataclass(frozen=True)
class FailedRow:
    """A row that could not be encoded: ``path`` names the field (``value.items[2].price``)."""

    row: int
    path: str
    reason: str

    def error(self) -> SerializationError:
        """This failure as the error the sink raises or puts in a dead letter's headers."""
        return SerializationError(self.row, self.path, self.reason)


@dataclass(frozen=True, eq=False)
class EncodeResult:
    """``bodies``: one binary (or large_binary) value per input row, null for a null input row
    and for each row of ``failures``; ``failures``: the rows that could not be encoded, by row."""

    bodies: pa.Array
    failures: tuple[FailedRow, ...] = ()

    @property
    def failed_rows(self) -> np.ndarray:
        """The rows of ``failures``, ascending (int64)."""
        return np.array([failure.row for failure in self.failures], dtype=np.int64)

    def check(self) -> pa.Array:
        """The bodies when every row was encoded; else ``SerializationError`` for the first
        failed row (the message counts the others)."""
        if not self.failures:
            return self.bodies
        first = self.failures[0]
        more = len(self.failures) - 1
        raise SerializationError(first.row, first.path,
                                 first.reason + (f" ({more} more row(s) failed too)" if more else ""))


def confluent_header(schema_id: int) -> bytes:
    """The Confluent wire format's 5 bytes before an Avro body: magic byte 0, the id big-endian."""
    if isinstance(schema_id, bool) or not isinstance(schema_id, int) or not 0 <= schema_id <= SCHEMA_ID_MAX:
        raise ConfigError(f"a schema id is an int from 0 to {SCHEMA_ID_MAX}, got {schema_id!r}")
    return bytes([MAGIC_BYTE]) + schema_id.to_bytes(4, "big")


def as_column(data: Any) -> pa.Array:
    """``data`` as one Arrow array: a record batch or table as the struct of its columns, a
    chunked array's chunks combined."""
    if isinstance(data, pa.Table):
        data = pa.StructArray.from_arrays([column.combine_chunks() for column in data.columns],
                                          fields=list(data.schema))
    elif isinstance(data, pa.RecordBatch):
        data = pa.StructArray.from_arrays(data.columns, fields=list(data.schema))
    elif isinstance(data, pa.ChunkedArray):
        data = data.chunk(0) if data.num_chunks == 1 else data.combine_chunks()
    if not isinstance(data, pa.Array):
        raise TypeError(f"Avro encodes a pyarrow Array, ChunkedArray, RecordBatch or Table, not {type(data).__name__}")
    return data


def encode(data: Any, schema: AvroSchema | str | dict | list | None = None, schema_id: int | None = None, *,
           column: str = "value") -> EncodeResult:
    """Every row of ``data`` as an Avro body (see the module docstring); ``column`` is the first
    name of every path in errors."""
    array = as_column(data)
    if schema is None:
        schema = derive_schema(array.type, column=column)
    elif not isinstance(schema, SCHEMA_TYPES):
        schema = parse_schema(schema)
    return encode_column(compile_plan(schema, array.type, column), array, schema_id)


def encode_column(plan: Encoder, array: pa.Array, schema_id: int | None = None) -> EncodeResult:
    """``array`` through a compiled plan (:func:`~.plan.compile_plan` of its type)."""
    header = None if schema_id is None else confluent_header(schema_id)
    rows = len(array)
    present = validity(array)
    level = Level(rows)
    if header is not None:
        level.add(Constant(header, present))
    plan.encode(array, present, level)
    bodies = level.parts.join()
    failures = _failed_rows(level.faults)
    keep = present
    if failures:
        keep = np.ones(rows, dtype=bool) if keep is None else keep.copy()
        keep[[failure.row for failure in failures]] = False
    if keep is not None:
        bodies = _with_validity(bodies, keep)
    return EncodeResult(bodies, failures)


def _failed_rows(faults: list[Fault]) -> tuple[FailedRow, ...]:
    """One failure per failed row (its first fault, in the order they were found), by row."""
    if not faults:
        return ()
    rows = np.concatenate([fault.rows for fault in faults])
    paths = [path for fault in faults for path in fault.paths]
    reasons = [reason for fault in faults for reason in fault.reasons]
    unique, first = np.unique(rows, return_index=True)
    return tuple(FailedRow(row, paths[at], reasons[at]) for row, at in zip(unique.tolist(), first.tolist()))


def _with_validity(bodies: pa.Array, keep: np.ndarray) -> pa.Array:
    """``bodies`` with a null wherever ``keep`` is false."""
    large = pa.types.is_large_binary(bodies.type)
    offsets = offsets_of(bodies)
    data = bodies.buffers()[2] if len(bodies) and bodies.buffers()[2] is not None else pa.py_buffer(b"")
    bitmap = pa.py_buffer(np.packbits(keep, bitorder="little"))
    return pa.Array.from_buffers(bodies.type, len(bodies),
                                 [bitmap, pa.py_buffer(offsets.astype(np.int64 if large else np.int32)), data])
