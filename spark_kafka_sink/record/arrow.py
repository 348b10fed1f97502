"""Kafka RecordBatch v2 batches encoded straight from Arrow columns, vectorised.

For one partition's rows (``value``, optional ``key`` and ``headers`` columns, one timestamp per
row) :func:`encode_batches` returns the batches that appending the rows one by one to
``RecordBatchBuilder(batch_size=...)`` would give, byte for byte, with no Python loop over rows:

1. :func:`prepare_records` validates the columns and encodes everything about a record that does
   not depend on its batch: key and value lengths, header varints, and each row's header bytes
   (all headers of all rows joined in one pass, :func:`~.arrow_columns.interleave`; a row's
   header bytes are then a zero-copy slice of that buffer). This gives each row's *tail size*: the
   bytes after its offset delta.
2. :func:`plan_batches` splits the rows into batches with the builder's fill rule. A record's size
   depends on its batch (its timestamp and offset deltas are relative to the batch's first
   record), so the planner loops over batches and sizes a window of candidate rows at once:
   one cumulative sum and one ``searchsorted`` find where the batch ends. When every row has
   the same timestamp (no timestamp column: the usual case) a record's size depends only on
   its offset delta's varint width, so a few cumulative sums over all rows, made once, serve
   every batch (:class:`_FlatSizes`): a handful of scalar operations per batch.
3. :func:`encode_records` writes each row's head (length, attributes, timestamp delta, offset
   delta, key length and, with no key column, value length: varints, written for all rows with
   one numpy pass per varint byte position) and joins head, key, value length, value, header
   count and header bytes row by row (:func:`~.arrow_columns.interleave`). The data buffer of the result is the
   records sections of all batches, back to back; batch ``b`` is one slice of it.
4. Each slice becomes a :meth:`RecordBatchBuilder.from_records` builder, so header, CRC,
   compression and producer state (idempotent retries) are the builder's own code. Each is
   sealed at once (:meth:`RecordBatchBuilder.seal`: compressed, or copied out with room for its
   header), so a queued batch holds exactly its own bytes rather than a share of the whole
   encoding buffer, and its first ``build()`` copies nothing more.

Why an Arrow join rather than a numpy scatter of every byte into one buffer: it copies keys
and values with one ``memcpy`` per field in C++, while numpy needs an index (or a mask) per
output *byte* to interleave variable-length fields; the join is the faster of the two
(bench/README.md, "Figures behind design choices") and needs no per-byte temporary. The heads
themselves are dense numpy (see :func:`_varint_column`).

Columns: ``value`` and ``key`` are ``binary``, ``large_binary``, ``string`` or ``large_string``
arrays (or ``null``-typed), possibly sliced or chunked, nulls allowed (a null key or value is
written as length -1). ``headers`` is a ``list<struct<key: string, value: binary>>`` (``string``
values and large variants accepted); a null list means no headers; a null header or a null header
key is an error naming the row.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..bytecodec import INT32_MAX, write_varint
from .arrow_columns import as_binary, binary_offsets, byte_lengths, has_offsets, interleave
from .builder import RecordBatchBuilder
from .codecs import CompressionType, codec_for
from .layout import HEADER_SIZE, MAX_RECORD_OVERHEAD

__all__ = [
    "ArrowRecords",
    "BatchPlan",
    "EncodedBatch",
    "encode_batches",
    "encode_prepared",
    "encode_records",
    "encoder_memory_pool",
    "plan_batches",
    "prepare_records",
]

# z >= _VARINT_LIMITS[k] needs more than k + 1 bytes (z is the zig-zag form, as uint64)
_VARINT_LIMITS = tuple(np.uint64(1) << np.uint64(7 * k) for k in range(1, 10))
_MIN_WINDOW = 64
# offset deltas whose varint takes 1, 2, 3, 4 bytes (an int32 delta never needs 5: 2**27 rows of
# at least 7 bytes exceed any batch.size)
_DELTA_CLASSES = ((0, 64), (64, 1 << 13), (1 << 13, 1 << 20), (1 << 20, 1 << 27))


# --- results ------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class ArrowRecords:
    """One partition's rows, validated, with everything that does not depend on the batch.

    ``keys``/``values`` are binary (or large_binary) views of the input columns (``keys`` is
    ``None`` for no key column); ``value_lengths`` the values' lengths (-1 for a null: what the
    record's value-length varint says); ``header_counts``/``header_bytes`` the header-count varint column and each row's
    encoded headers (``None`` for no headers column). ``tail_sizes[i]`` is how many bytes row
    ``i`` takes after its offset delta: key, value and headers with their length varints.
    """

    count: int
    timestamps: np.ndarray
    keys: pa.Array | None
    key_lengths: np.ndarray  # -1 for a null key (or no key column)
    values: pa.Array
    value_lengths: np.ndarray  # -1 for a null value
    header_counts: pa.Array | None
    header_bytes: pa.Array | None
    tail_sizes: np.ndarray

    @property
    def size_upper_bounds(self) -> np.ndarray:
        """Per row, ``RecordBatchBuilder.estimate_size_upper_bound`` of the record: an upper
        bound on a batch holding only it. The producer checks it against ``max.request.size``
        and ``buffer.memory``; ``np.flatnonzero(bounds > limit)`` names the rows too large."""
        return self.tail_sizes + (HEADER_SIZE + MAX_RECORD_OVERHEAD)


@dataclass(frozen=True, eq=False)
class BatchPlan:
    """Batch boundaries: batch ``b`` holds rows ``starts[b]:stops[b]`` whose records take
    ``sizes[b]`` bytes (the records section, uncompressed, without the batch header).
    ``same_timestamp``: every row has the same timestamp, so every timestamp delta is 0."""

    starts: np.ndarray
    stops: np.ndarray
    sizes: np.ndarray
    same_timestamp: bool = False  # every row has the same timestamp (every delta is 0)

    def __len__(self) -> int:
        return len(self.starts)


@dataclass(frozen=True)
class EncodedBatch:
    """One encoded batch: rows ``start:stop`` of the input in ``builder`` (full, not yet built).

    ``size`` is the builder's ``estimated_size``: header plus records, before compression.
    Offset delta ``i - start`` belongs to row ``i``.
    """

    builder: RecordBatchBuilder
    start: int
    stop: int

    @property
    def record_count(self) -> int:
        """Rows in the batch."""
        return self.stop - self.start

    @property
    def size(self) -> int:
        """Header plus records before compression (``builder.estimated_size``)."""
        return self.builder.estimated_size


# --- public API ---------------------------------------------------------------------------------

def encode_batches(
    value: Any,
    key: Any = None,
    headers: Any = None,
    *,
    timestamp_ms: Any,
    batch_size: int,
    compression_type: CompressionType | int | str = CompressionType.NONE,
    compression_level: int | None = None,
) -> list[EncodedBatch]:
    """The batches ``RecordBatchBuilder(batch_size=...)`` would make of these rows, appended in
    order (a new builder whenever one refuses a record), each as a full builder.

    ``timestamp_ms``: an int64 array, one per row, or one int for every row. The builders carry
    no producer state; the producer sets it (``set_producer_state``) before ``build()``.
    """
    records = prepare_records(value, key, headers, timestamp_ms=timestamp_ms)
    return encode_prepared(records, batch_size=batch_size, compression_type=compression_type,
                           compression_level=compression_level)


def encode_prepared(
    records: ArrowRecords,
    *,
    batch_size: int,
    compression_type: CompressionType | int | str = CompressionType.NONE,
    compression_level: int | None = None,
    segments: Sequence[int] | None = None,
) -> list[EncodedBatch]:
    """:func:`encode_batches` for rows already prepared (:func:`prepare_records`), so a caller
    can check ``records.size_upper_bounds`` against its limits before encoding anything.

    ``segments``: rows where a new batch must start (e.g. where the next partition's rows begin
    when the rows of several partitions were prepared together); each segment is then encoded as
    if it were encoded alone, and one pass serves them all."""
    codec = codec_for(compression_type)
    codec.check_available()
    level = codec.validate_level(compression_level)
    plan = plan_batches(records, batch_size, segments=segments)
    sections = encode_records(records, plan)
    starts, stops = plan.starts.tolist(), plan.stops.tolist()
    bases = records.timestamps[plan.starts].tolist() if len(plan) else []
    maxima = np.maximum.reduceat(records.timestamps, plan.starts).tolist() if len(plan) else []
    batches = []
    for section, start, stop, base, most in zip(sections, starts, stops, bases, maxima):
        builder = RecordBatchBuilder.from_records(section, stop - start, base, most,
                                                  compression_type=codec.type, compression_level=level)
        builder.seal()  # its own bytes (compressed, or copied out): the shared buffer can go
        batches.append(EncodedBatch(builder, start, stop))
    return batches


def prepare_records(value: Any, key: Any = None, headers: Any = None, *, timestamp_ms: Any) -> ArrowRecords:
    """Validate the columns and encode the batch-independent parts (step 1, module docstring).

    Raises ``TypeError`` for a column of an unsupported type (naming the column and the type),
    ``ValueError`` for columns of different lengths or a null header key (naming the row).
    """
    values = _binary_column(value, "value")
    n = len(values)
    keys = None if key is None else _binary_column(key, "key")
    if keys is not None and len(keys) != n:
        raise ValueError(f"the key column has {len(keys)} rows but the value column has {n}")
    timestamps = _timestamps(timestamp_ms, n)
    value_lengths = byte_lengths(values, null_length=-1)
    key_lengths = np.full(n, -1, dtype=np.int64) if keys is None else byte_lengths(keys, null_length=-1)
    tail = _section_sizes(value_lengths) + _section_sizes(key_lengths)
    header_counts = header_bytes = None
    if headers is None:
        tail += 1  # a header count of 0
    else:
        header_counts, header_bytes, header_sizes = _encode_headers(headers, n)
        tail += header_sizes
    if keys is not None and keys.null_count == n:
        keys = None  # nothing to copy: every key is written as its length -1
    return ArrowRecords(n, timestamps, keys, key_lengths, values, value_lengths, header_counts, header_bytes,
                        tail)


def plan_batches(records: ArrowRecords, batch_size: int, *,
                 segments: Sequence[int] | None = None) -> BatchPlan:
    """Where the builder's fill rule splits the rows into batches (step 2, module docstring).

    The first record of a batch always fits; each further record fits while the batch header
    plus the records so far plus this record (sized with its own deltas in this batch) stay
    within ``batch_size``, and while its timestamp delta from the batch's first record fits a
    varlong (else it starts the next batch, as in the builder). ``segments``: rows where a batch
    must start anyway (no batch spans two segments).
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= INT32_MAX:
        raise ValueError(f"batch_size must be a positive int32, got {batch_size!r}")
    n = records.count
    room = batch_size - HEADER_SIZE
    ts, tail = records.timestamps, records.tail_sizes
    starts, stops, sizes = [], [], []
    start = 0
    ends = sorted({int(row) for row in segments or () if 0 < int(row) < n} | {n})
    same_timestamp = bool(n) and not (ts != ts[0]).any()
    if same_timestamp:
        flat = _FlatSizes(tail)
        for end in ends:
            while start < end:
                stop, size = flat.batch_end(start, end, room)
                starts.append(start)
                stops.append(stop)
                sizes.append(size)
                start = stop
    else:
        window = _first_window(tail, room)
        for end in ends:
            while start < end:
                stop, size = _batch_end(ts, tail, start, window, room, end)
                starts.append(start)
                stops.append(stop)
                sizes.append(size)
                window = max(_MIN_WINDOW, (stop - start) * 5 // 4 + 16)
                start = stop
    return BatchPlan(*(np.array(column, dtype=np.int64) for column in (starts, stops, sizes)),
                     same_timestamp=same_timestamp)


def encode_records(records: ArrowRecords, plan: BatchPlan) -> list[memoryview]:
    """The records section of every planned batch (step 3, module docstring), uncompressed.

    The sections are slices of one buffer, which stays alive while any of them does.
    """
    n = records.count
    if n == 0:
        return []
    first_row = np.repeat(plan.starts, plan.stops - plan.starts)
    offset_deltas = np.arange(n, dtype=np.int64) - first_row
    if plan.same_timestamp:  # every timestamp delta is 0: one byte, the same in every row
        timestamp_deltas: np.ndarray | int = 0
        timestamp_sizes: np.ndarray | int = 1
    else:
        timestamp_deltas = records.timestamps - records.timestamps[first_row]  # checked by the plan
        timestamp_sizes = _varint_sizes(_zigzag(timestamp_deltas))
    offset_sizes = _varint_sizes((offset_deltas << 1).view(np.uint64))  # deltas >= 0: zig-zag is 2x
    body_lengths = 1 + timestamp_sizes + offset_sizes + records.tail_sizes
    head_fields = [body_lengths, 0, timestamp_deltas, offset_deltas, records.key_lengths]
    if records.keys is None:  # the value's length follows the key's at once
        head_fields.append(records.value_lengths)
    heads = _varint_column(n, head_fields)
    total = int(plan.sizes.sum())
    joined = _join_rows(heads, records, large=total > INT32_MAX)
    offsets = binary_offsets(joined)
    if int(offsets[-1] - offsets[0]) != total:
        raise AssertionError(f"encoded {int(offsets[-1] - offsets[0])} bytes, planned {total}")
    data = memoryview(joined.buffers()[2])
    bounds = offsets[np.concatenate([plan.starts, plan.stops[-1:]])].tolist()
    return [data[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


# --- columns ------------------------------------------------------------------------------------

def _single_array(column: Any, name: str) -> pa.Array:
    """``column`` as one ``pyarrow.Array`` (a ChunkedArray's chunks combined); ``TypeError``
    naming the column for anything else."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if not isinstance(column, pa.Array):
        raise TypeError(f"the {name} column must be a pyarrow Array or ChunkedArray, "
                        f"got {type(column).__name__}")
    return column


def _binary_column(column: Any, name: str) -> pa.Array:
    """``column`` as one binary or large_binary array (strings viewed as their UTF-8 bytes)."""
    column = _single_array(column, name)
    kind = column.type
    if has_offsets(kind):
        return as_binary(column)
    if pa.types.is_null(kind):
        return column.cast(pa.binary())
    raise TypeError(f"the {name} column must be binary or string (or their large variants), got {kind}")


def _timestamps(timestamp_ms: Any, n: int) -> np.ndarray:
    """One int64 timestamp per row; an int is repeated for every row."""
    if isinstance(timestamp_ms, (int, np.integer)) and not isinstance(timestamp_ms, bool):
        if not -(1 << 63) <= int(timestamp_ms) < (1 << 63):
            raise ValueError(f"timestamp_ms must be an int64, got {timestamp_ms!r}")
        return np.full(n, timestamp_ms, dtype=np.int64)
    ts = np.asarray(timestamp_ms)
    if ts.dtype.kind not in "iu" or ts.ndim != 1:
        raise TypeError(f"timestamp_ms must be a 1-d integer array or an int, got {ts.dtype} "
                        f"with shape {ts.shape}")
    if len(ts) != n:
        raise ValueError(f"timestamp_ms has {len(ts)} rows but the value column has {n}")
    if ts.dtype == np.uint64 and n and int(ts.max()) > np.iinfo(np.int64).max:
        raise ValueError("timestamp_ms holds values beyond int64")
    return np.ascontiguousarray(ts, dtype=np.int64)


def _section_sizes(lengths: np.ndarray) -> np.ndarray:
    """Bytes of a nullable field: its length varint plus its bytes (a null is one byte)."""
    return _varint_sizes(_zigzag(lengths)) + np.maximum(lengths, 0)


# --- headers ------------------------------------------------------------------------------------

def _encode_headers(headers: Any, n: int) -> tuple[pa.Array, pa.Array, np.ndarray]:
    """Per row: the header-count varint column, the encoded headers column, and their sizes.

    Each header is ``varint(len(key)) key varint(len(value) or -1) value``; all headers of all
    rows are joined at once, and since a row's headers are consecutive, its header bytes are a
    zero-copy slice of that result (offsets picked at the list boundaries).
    """
    headers = _header_lists(headers, n)
    counts = pc.fill_null(pc.list_value_length(headers), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    items = headers.flatten()  # drops what null lists span and applies the slice
    keys, values = _header_fields(items, counts)
    pieces = [_varint_column(len(keys), [byte_lengths(keys, null_length=-1)]), keys,
              _varint_column(len(values), [byte_lengths(values, null_length=-1)]), values]
    joined = _join(pieces, large=False)
    row_ends = np.concatenate([[0], np.cumsum(counts)])
    item_offsets = binary_offsets(joined)
    row_offsets = item_offsets[row_ends]
    offset_type, dtype = (pa.large_binary(), np.int64) if pa.types.is_large_binary(joined.type) else (
        pa.binary(), np.int32)
    data = joined.buffers()[2]
    row_bytes = pa.Array.from_buffers(
        offset_type, n, [None, pa.py_buffer(row_offsets.astype(dtype)), data])
    count_column = _varint_column(n, [counts])
    sizes = _varint_sizes(_zigzag(counts)) + np.diff(row_offsets)
    return count_column, row_bytes, sizes


def _header_lists(headers: Any, n: int) -> pa.Array:
    """The headers column checked to be ``n`` lists of ``struct<key, value>``."""
    headers = _single_array(headers, "headers")
    kind = headers.type
    item = kind.value_type if pa.types.is_list(kind) or pa.types.is_large_list(kind) else None
    names = {item.field(i).name for i in range(item.num_fields)} if pa.types.is_struct(item) else set()
    if not {"key", "value"} <= names:
        raise TypeError(f"the headers column must be list<struct<key: string, value: binary>>, got {kind}")
    if len(headers) != n:
        raise ValueError(f"the headers column has {len(headers)} rows but the value column has {n}")
    return headers


def _header_fields(items: pa.Array, counts: np.ndarray) -> tuple[pa.Array, pa.Array]:
    """The header keys and values as binary arrays; a null header or key raises, naming the row."""
    if items.null_count:
        raise ValueError(f"headers: row {_row_of_item(items.is_null(), counts)} has a null header")
    keys = items.field("key")
    if not (pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type)):
        raise TypeError(f"the headers column's key field must be string, got {keys.type}")
    if keys.null_count:
        raise ValueError(f"headers: row {_row_of_item(keys.is_null(), counts)} has a header with a "
                         "null key (header keys must be strings)")
    return _binary_column(keys, "headers key"), _binary_column(items.field("value"), "headers value")


def _row_of_item(is_null: pa.Array, counts: np.ndarray) -> int:
    """The row holding the first flattened header where ``is_null`` is true."""
    item = int(np.flatnonzero(is_null.to_numpy(zero_copy_only=False))[0])
    return int(np.searchsorted(np.cumsum(counts), item, side="right"))


# --- planning -----------------------------------------------------------------------------------

def _first_window(tail: np.ndarray, room: int) -> int:
    """A first guess at the rows per batch: the room over the mean record size, plus a margin."""
    if not len(tail):
        return _MIN_WINDOW
    mean_record = float(tail[:4096].mean()) + 4  # length, attributes and two one-byte deltas
    return max(_MIN_WINDOW, int(max(room, 0) / mean_record * 1.25) + 16)


def _batch_end(ts: np.ndarray, tail: np.ndarray, start: int, window: int, room: int,
               n: int) -> tuple[int, int]:
    """The end row and records size of the batch that starts at ``start`` (rows before ``n``,
    the end of its segment).

    Sizes the next ``window`` rows with their deltas in this batch; when all of them fit, the
    window doubles and the sizing runs again.
    """
    while True:
        stop = min(n, start + window)
        deltas = ts[start:stop] - ts[start]
        sizes = _record_sizes(deltas, np.arange(stop - start, dtype=np.int64), tail[start:stop])
        used = np.cumsum(sizes)
        fit = max(1, int(np.searchsorted(used, room, side="right")))
        fit = min(fit, _first_wrapped(ts[start:stop], deltas))
        if fit < stop - start or stop == n:
            return start + fit, int(used[fit - 1])
        window *= 2


class _FlatSizes:
    """Batch ends for rows that all share one timestamp (every timestamp delta is 0, one byte),
    the usual case (no timestamp column): a record's size then depends only on its tail and on
    its offset delta's varint size, which is 1 byte for deltas 0..63, 2 bytes up to 8191, and
    so on (class ``c`` covers deltas ``_DELTA_CLASSES[c]``). Per class, one cumulative sum of
    every row's record size (built when a batch first reaches that class); a batch's end is then
    one ``searchsorted`` per class it reaches: a few scalar operations per batch, not per row."""

    def __init__(self, tail: np.ndarray):
        self._tail = tail
        self._sums: list[np.ndarray] = []

    def _cumulative(self, index: int) -> np.ndarray:
        """Row ``i``'s records up to ``i`` (exclusive) sized with offset deltas of class ``index``."""
        while len(self._sums) <= index:
            # attributes (1 byte), timestamp delta 0 (1 byte), offset delta (class index + 1 bytes)
            body = self._tail + (3 + len(self._sums))
            sums = np.zeros(len(body) + 1, dtype=np.int64)
            np.cumsum(_varint_sizes((body << 1).view(np.uint64)) + body, out=sums[1:])  # zig-zag of body > 0
            self._sums.append(sums)
        return self._sums[index]

    def batch_end(self, start: int, end: int, room: int) -> tuple[int, int]:
        """The end row and records size of the batch starting at ``start`` (rows before ``end``)."""
        used = 0
        for index, (low, high) in enumerate(_DELTA_CLASSES):
            first, last = start + low, min(end, start + high)
            if first >= last:
                break
            sums = self._cumulative(index)
            base = int(sums[first])
            span = int(sums[last]) - base
            if used + span <= room:
                used += span
                continue
            stop = first + int(np.searchsorted(sums[first + 1:last + 1], room - used + base, side="right"))
            if stop == start:  # the first record always fits
                stop = start + 1
            return stop, used + int(sums[stop]) - base
        return min(end, start + _DELTA_CLASSES[-1][1]), used


def _record_sizes(timestamp_deltas: np.ndarray, offset_deltas: np.ndarray, tail: np.ndarray) -> np.ndarray:
    """Whole record sizes, length varint included."""
    body = 1 + _varint_sizes(_zigzag(timestamp_deltas)) + _varint_sizes(_zigzag(offset_deltas)) + tail
    return _varint_sizes(_zigzag(body)) + body


def _first_wrapped(ts: np.ndarray, deltas: np.ndarray) -> int:
    """The first index whose delta ``ts - ts[0]`` overflowed int64 (``len(ts)`` if none): the
    batch must end before it. Never 0 (the first delta is 0).

    The subtraction wrapped exactly when the operands' signs differ and the result's sign
    differs from the minuend's.
    """
    wrapped = ((ts ^ ts[0]) & (ts ^ deltas)) < 0
    return int(np.argmax(wrapped)) if wrapped.any() else len(ts)


# --- varints ------------------------------------------------------------------------------------

def _zigzag(values: np.ndarray) -> np.ndarray:
    """The zig-zag form of int64 values, as uint64."""
    values = values.astype(np.int64, copy=False)
    return ((values << 1) ^ (values >> 63)).view(np.uint64)


def _varint_sizes(z: np.ndarray) -> np.ndarray:
    """Bytes of each varint, from zig-zag values; compares only up to the largest one."""
    sizes = np.ones(len(z), dtype=np.int64)
    most = z.max() if len(z) else np.uint64(0)
    for limit in _VARINT_LIMITS:
        if most < limit:
            break
        sizes += z >= limit
    return sizes


def _varint_column(n: int, fields: Sequence[np.ndarray | int]) -> pa.Array:
    """A binary array whose row ``i`` is the varints of ``fields[0][i]``, ``fields[1][i]``, ...
    (``n`` rows; a field given as an int has that value in every row).

    Dense numpy only, no per-row scatter: one ``n x width`` byte matrix holds every field's
    varint in its own columns (one column per byte position, as many as the field's longest
    varint). Byte ``k`` of a varint is the low byte of ``z >> 7k``, with the high bit set where
    more bytes follow (``z >> 7k > 127``); that same comparison says whether byte ``k + 1``
    exists, so a *ragged* field (some rows shorter than its widest) fills a boolean mask of the
    matrix with it, and the mask drops the unused bytes while flattening row by row. A field
    whose varints all have the same width is written without a mask, an int field is its bytes
    broadcast to every row, and without a ragged field the flattening is a plain reshape.
    Values below 2**32 are shifted as uint32, half the memory traffic of uint64.
    """
    columns = [_VarintField.of(field, n) for field in fields]
    width = sum(column.width for column in columns)
    matrix = np.empty((n, width), dtype=np.uint8)
    ragged = any(column.ragged for column in columns)
    mask = np.ones((n, width), dtype=bool) if ragged else None
    row_sizes = np.full(n, width - sum(column.width - 1 for column in columns if column.ragged),
                        dtype=np.int64) if ragged else None
    at = 0
    for column in columns:
        column.write(matrix[:, at:at + column.width], None if mask is None else mask[:, at:at + column.width],
                     row_sizes)
        at += column.width
    if ragged:
        out = matrix[mask]
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(row_sizes, out=offsets[1:])
    else:
        out = matrix.reshape(-1)
        offsets = np.arange(0, (n + 1) * width, width, dtype=np.int64)
    large = n * width > INT32_MAX
    return pa.Array.from_buffers(
        pa.large_binary() if large else pa.binary(), n,
        [None, pa.py_buffer(offsets if large else offsets.astype(np.int32)), pa.py_buffer(out)])


@dataclass(frozen=True)
class _VarintField:
    """One field of :func:`_varint_column`: its zig-zag values (``None`` for a constant, whose
    bytes are ``constant``), its width (the longest varint) and whether some varints are shorter."""

    z: np.ndarray | None
    constant: bytes
    width: int
    ragged: bool

    @classmethod
    def of(cls, field: np.ndarray | int, n: int) -> _VarintField:
        if isinstance(field, (int, np.integer)):
            data = bytearray()
            write_varint(data, int(field))
            return cls(None, bytes(data), len(data), False)
        z = _zigzag(field)
        most, least = (int(z.max()), int(z.min())) if n else (0, 0)
        width = _size_of_zigzag(most)
        if width == 1:
            z = z.astype(np.uint8)
        elif most >> 32 == 0:
            z = z.astype(np.uint32)
        return cls(z, b"", width, _size_of_zigzag(least) < width)

    def write(self, block: np.ndarray, mask: np.ndarray | None, row_sizes: np.ndarray | None) -> None:
        """Write every row's varint at the start of its row of ``block`` (``n x width``); for a
        ragged field, clear ``mask`` where a byte is unused and count used bytes in ``row_sizes``
        (which starts at one byte for this field)."""
        if self.z is None:
            block[:] = np.frombuffer(self.constant, dtype=np.uint8)
            return
        z = self.z
        kind = z.dtype.type
        for k in range(self.width):
            shifted = z >> kind(7 * k) if k else z
            byte = shifted.astype(np.uint8)
            if k < self.width - 1:
                more = shifted > kind(0x7F)
                np.bitwise_or(byte, np.uint8(0x80), out=byte, where=more)
                if self.ragged:
                    mask[:, k + 1] = more
                    row_sizes += more
            block[:, k] = byte


def _size_of_zigzag(z: int) -> int:
    """Bytes of the varint of the zig-zag value ``z``."""
    return max(1, (z.bit_length() + 6) // 7)


# --- joining ------------------------------------------------------------------------------------

def _join_rows(heads: pa.Array, records: ArrowRecords, *, large: bool) -> pa.Array:
    """Every record, whole: head, key, value length, value, header count, headers (the value's
    length is in the head when there is no key column)."""
    pieces: list[pa.Array] = [heads]
    if records.keys is not None:
        pieces += [records.keys, _varint_column(records.count, [records.value_lengths])]
    pieces.append(records.values)
    if records.header_counts is None:
        pieces.append(_no_headers(records.count))
    else:
        pieces += [records.header_counts, records.header_bytes]
    return _join(pieces, large=large)


def _join(pieces: list[pa.Array], *, large: bool) -> pa.Array:
    """``pieces`` concatenated row by row (nulls contribute nothing), in one Arrow kernel
    (:func:`~.arrow_columns.interleave`).

    The kernel wants one type throughout: binary, or large_binary when any piece is large or
    ``large`` says the result may pass 2 GiB.
    """
    large = large or any(pa.types.is_large_binary(p.type) for p in pieces)
    kind = pa.large_binary() if large else pa.binary()
    pool = encoder_memory_pool()
    pieces = [p if p.type == kind else p.cast(kind, memory_pool=pool) for p in pieces]
    return interleave(pieces, kind, memory_pool=pool)


@functools.lru_cache(maxsize=4)
def _no_headers(n: int) -> pa.Array:
    """``n`` header counts of 0: one zero byte a row."""
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32)),
                                                  pa.py_buffer(bytes(n))])


def encoder_memory_pool() -> pa.MemoryPool:
    """Where the encoder's large, short-lived Arrow buffers come from: the system allocator.

    Each send allocates and frees buffers of several MB (grouped copies of keys and values, the
    joined records sections). With pyarrow's default pool (mimalloc) the producer's Arrow path
    measured 520k msgs/s on 1M x 100 B, with the system allocator 600k-1M (same run, same broker):
    mimalloc hands freed pages back and faults them in again on the next send. Passing the pool
    per call leaves the process's default pool, which Spark and the user share, alone."""
    return pa.system_memory_pool()
