"""Decoding RecordBatch v2 (magic 2) buffers into records (the layout is in :mod:`.layout`).

``read_batches(data)`` walks a buffer of concatenated batches, as found in a Produce request's
``records`` field or a Fetch response, and yields one :class:`RecordBatch` per batch. Each batch
is checked in this order, and any failure raises :class:`CorruptRecordError` saying what and where:

1. framing: ``batch_length`` at least the header's 49 bytes; magic 2;
2. the CRC-32C over attributes..end (stored and computed values in the message);
3. the codec id (:class:`UnknownCodecError`), then decompression;
4. every record's length, fields and header count within its bytes; exactly ``record_count``
   records and no bytes left over.

A Fetch response may end with a partial batch (the broker cuts at ``max_bytes``). With
``allow_partial_tail=True`` (the default) iteration stops quietly before such a tail; with
``False`` it raises. A batch that claims more bytes than the buffer holds is indistinguishable from
such a tail, exactly as in Java's ``ByteBufferLogInputStream``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterator, NamedTuple, Union

from ..errors import CorruptRecordError
from .codecs import CompressionType, codec_for
from .crc32c import crc32c
from .layout import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_OFFSET,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    DELETE_HORIZON_FLAG,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
    TIMESTAMP_TYPE_FLAG,
    TRANSACTIONAL_FLAG,
    TimestampType,
)
from .cursor import Cursor

Buffer = Union[bytes, bytearray, memoryview]


class Header(NamedTuple):
    """One record header: a str key and a bytes value (``None`` for a null value).

    A named pair, so it also compares equal to a plain ``(key, value)`` tuple.
    """

    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record. ``offset`` is absolute (base_offset + offset delta).

    ``timestamp_ms`` is base_timestamp + delta, or the batch's max_timestamp for a
    LOG_APPEND_TIME batch (as Java reports it). ``key``/``value`` are ``None`` when null and
    ``b""`` when empty.
    """

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """One decoded batch: the header fields in wire order, then its records.

    Invariant: ``len(records) == record_count`` and the CRC matched.
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    records: tuple[Record, ...]

    @property
    def compression_type(self) -> CompressionType:
        """Attributes bits 0-2 (always a known codec: unknown ids fail to decode)."""
        return CompressionType(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        """Attributes bit 3."""
        return TimestampType(1 if self.attributes & TIMESTAMP_TYPE_FLAG else 0)

    @property
    def is_transactional(self) -> bool:
        """Attributes bit 4."""
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        """Attributes bit 5: the records are transaction markers, not user data."""
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_delete_horizon(self) -> bool:
        """Attributes bit 6: base_timestamp holds the log cleaner's delete horizon."""
        return bool(self.attributes & DELETE_HORIZON_FLAG)

    @property
    def last_offset(self) -> int:
        """Offset of the last record the batch was written with (base + last_offset_delta)."""
        return self.base_offset + self.last_offset_delta

    @property
    def size_in_bytes(self) -> int:
        """Bytes the batch takes in its buffer."""
        return LOG_OVERHEAD + self.batch_length


def read_batches(
    data: Buffer, *, allow_partial_tail: bool = True, check_crc: bool = True
) -> Iterator[RecordBatch]:
    """Yield the batches of ``data`` in order; see the module docstring for the checks."""
    view = _byte_view(data)
    pos = 0
    while pos < len(view):
        length = _next_batch_length(view, pos)
        if length is None or len(view) - pos < LOG_OVERHEAD + length:
            if allow_partial_tail:
                return
            raise CorruptRecordError(
                f"truncated batch at byte {pos}: {len(view) - pos} bytes left, "
                f"batch needs {'at least 12' if length is None else LOG_OVERHEAD + length}"
            )
        end = pos + LOG_OVERHEAD + length
        yield _decode_batch(view[pos:end], pos, check_crc)
        pos = end


def read_batch(data: Buffer, *, check_crc: bool = True) -> RecordBatch:
    """Decode a buffer holding exactly one complete batch."""
    view = _byte_view(data)
    batches = read_batches(view, allow_partial_tail=False, check_crc=check_crc)
    batch = next(batches, None)
    if batch is None:
        raise CorruptRecordError("empty buffer: no record batch")
    if batch.size_in_bytes != len(view):
        raise CorruptRecordError(f"{len(view) - batch.size_in_bytes} bytes follow the batch")
    return batch


def _byte_view(data: Buffer) -> memoryview:
    view = memoryview(data)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def _next_batch_length(view: memoryview, pos: int) -> int | None:
    """The batch_length at ``pos`` after the framing checks; ``None`` if too few bytes to tell."""
    remaining = len(view) - pos
    if remaining < LOG_OVERHEAD:
        return None
    length = int.from_bytes(view[pos + BATCH_LENGTH_OFFSET:pos + LOG_OVERHEAD], "big", signed=True)
    if length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at byte {pos}: batch_length {length} is shorter than the {MIN_BATCH_LENGTH}-byte header"
        )
    if remaining > MAGIC_OFFSET and view[pos + MAGIC_OFFSET] != MAGIC:
        raise CorruptRecordError(
            f"batch at byte {pos}: magic {view[pos + MAGIC_OFFSET]} is not {MAGIC} "
            "(only RecordBatch v2 is supported)"
        )
    return length


def _decode_batch(view: memoryview, pos: int, check_crc: bool) -> RecordBatch:
    """One complete batch (``view`` spans it exactly) with its records."""
    header = RecordBatch(*HEADER.unpack_from(view, 0), records=())
    what = f"batch at offset {header.base_offset} (byte {pos})"
    if check_crc:
        computed = crc32c(view[ATTRIBUTES_OFFSET:])
        if computed != header.crc:
            raise CorruptRecordError(
                f"{what}: CRC mismatch: stored 0x{header.crc:08x}, computed 0x{computed:08x}"
            )
    codec = codec_for(header.attributes & COMPRESSION_MASK)
    if header.record_count < 0:
        raise CorruptRecordError(f"{what}: negative record count {header.record_count}")
    payload = view[HEADER_SIZE:]
    if codec.type is not CompressionType.NONE:
        payload = memoryview(codec.decompress(payload))
    log_append_time = header.max_timestamp if header.timestamp_type is TimestampType.LOG_APPEND_TIME else None
    records = _decode_records(
        Cursor(payload, 0, len(payload), what),
        header.record_count,
        header.base_offset,
        header.base_timestamp,
        log_append_time,
    )
    return dataclasses.replace(header, records=records)


def _decode_records(
    cursor: Cursor, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None
) -> tuple[Record, ...]:
    """Exactly ``count`` records filling the cursor's bytes."""
    records = []
    for index in range(count):
        if cursor.remaining() <= 0:
            raise cursor.corrupt(f"record count mismatch: header says {count}, found {index}")
        records.append(_decode_record(cursor, base_offset, base_timestamp, log_append_time))
    if cursor.remaining():
        raise cursor.corrupt(f"{cursor.remaining()} bytes left after the {count} records the header declares")
    return tuple(records)


def _decode_record(
    cursor: Cursor, base_offset: int, base_timestamp: int, log_append_time: int | None
) -> Record:
    """One record; the cursor's limit is narrowed to the record's declared length meanwhile."""
    length = cursor.varint()
    if length < 0 or length > cursor.remaining():
        raise cursor.corrupt(f"record length {length} overruns the {cursor.remaining()} bytes left")
    outer_limit, cursor.limit = cursor.limit, cursor.pos + length
    cursor.int8()  # record attributes, unused
    timestamp_delta = cursor.varlong()
    offset_delta = cursor.varint()
    key = cursor.nullable_bytes("key")
    value = cursor.nullable_bytes("value")
    headers = _decode_headers(cursor)
    if cursor.remaining():
        raise cursor.corrupt(
            f"record declares {length} bytes but its fields end {cursor.remaining()} bytes early"
        )
    cursor.limit = outer_limit
    timestamp = log_append_time if log_append_time is not None else base_timestamp + timestamp_delta
    return Record(base_offset + offset_delta, timestamp, key, value, headers)


def _decode_headers(cursor: Cursor) -> tuple[Header, ...]:
    count = cursor.varint()
    if count < 0 or count > cursor.remaining():  # every header takes at least one byte
        raise cursor.corrupt(f"invalid header count {count}")
    return tuple(
        Header(cursor.string("header key"), cursor.nullable_bytes("header value")) for _ in range(count)
    )
