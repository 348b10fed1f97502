"""Choosing a record's partition, as the Java producer does (see docs/ARCHITECTURE.md).

- An explicit partition wins; :func:`check_partition` rejects one the topic does not have.
- A keyed record goes to ``to_positive(murmur2(key)) % num_partitions``
  (:func:`partition_for_key`), bit-identical to Java's ``BuiltInPartitioner.partitionForKey``.
- A record with no key (or any record with ``partitioner.ignore.keys=true``) goes to the topic's
  *sticky* partition (:class:`StickyPartitioner`, KIP-794).

murmur2, as Kafka's ``Utils.murmur2`` (all arithmetic modulo 2**32, the result read as a signed
32-bit int)::

    m = 0x5bd1e995;  h = 0x9747b28c ^ len(data)
    for each whole 4-byte block k (little-endian):
        k *= m;  k ^= k >>> 24;  k *= m;  h *= m;  h ^= k
    tail of 1-3 bytes t0 [t1 [t2]] (each byte & 0xff, i.e. NOT sign-extended):
        h ^= t2 << 16;  h ^= t1 << 8;  h ^= t0;  h *= m
    h ^= h >>> 13;  h *= m;  h ^= h >>> 15

:func:`murmur2_many` / :func:`partitions_for_keys` do the same for a whole column of keys (a list
of bytes or a pyarrow binary/string array) with numpy, one 4-byte block of every key per step;
:func:`murmur2_many_pure` is the scalar loop they must equal. Set
``SPARK_KAFKA_SINK_PURE_MURMUR2=1`` before import to force the scalar loop;
:data:`MURMUR2_MANY_IMPLEMENTATION` says which is live.

The sticky partitioner keeps, per topic, the current partition and the bytes appended to it since
it was chosen. After ``batch.size`` bytes (or ``2 * batch.size`` when the caller disallows the
switch because the last batch is not full yet) it picks the next partition: uniformly among the
partitions with a leader, or, with ``partitioner.adaptive.partitioning.enable``, weighted towards
short queues using the load stats the accumulator feeds it from ``ready()``
(:meth:`StickyPartitioner.update_load_stats`, where ``partitioner.availability.timeout.ms`` also
drops partitions of slow nodes). No I/O and no clock: the accumulator passes everything in.
"""

from __future__ import annotations

import functools
import operator
import os
import random
import struct
import threading
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence, Union

import numpy as np

from ..errors import InvalidPartitionError

Buffer = Union[bytes, bytearray, memoryview]

UNKNOWN_PARTITION = -1
"""Java's ``RecordMetadata.UNKNOWN_PARTITION``: no partition chosen (a null key: sticky path)."""

PURE_ENV_VAR = "SPARK_KAFKA_SINK_PURE_MURMUR2"

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF


# --- murmur2, one key ---------------------------------------------------------------------

def murmur2(data: Buffer) -> int:
    """Kafka's ``Utils.murmur2(data)``: a signed 32-bit int, bit-identical to Java."""
    length = len(data)
    h = _SEED ^ length
    nblocks = length >> 2
    if nblocks:
        for k in struct.unpack_from(f"<{nblocks}I", data):
            k = (k * _M) & _MASK32
            k ^= k >> 24
            h = ((h * _M) & _MASK32) ^ ((k * _M) & _MASK32)
    tail = length & 3
    if tail:
        base = length - tail
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h = ((h ^ data[base]) * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``)."""
    return n & 0x7FFFFFFF


KEY_CACHE_SIZE = 4096
"""Distinct keys whose murmur2 :func:`partition_for_key` remembers (least recently used go)."""
KEY_CACHE_MAX_KEY_BYTES = 256
"""Longer keys are hashed every time: a cache entry holds its key alive."""

_murmur2_cached = functools.lru_cache(maxsize=KEY_CACHE_SIZE)(murmur2)
""":func:`murmur2` memoised for immutable ``bytes`` keys (keys repeat: user ids, device ids...).
A hit costs a C dict lookup instead of the Python loop; the value is :func:`murmur2`'s own."""


def partition_for_key(key: Buffer, num_partitions: int) -> int:
    """The partition of a keyed record: ``to_positive(murmur2(key)) % num_partitions``.

    Short ``bytes`` keys go through a bounded cache (:data:`KEY_CACHE_SIZE`); mutable buffers
    (bytearray, memoryview) and long keys are hashed each time."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    if type(key) is bytes and len(key) <= KEY_CACHE_MAX_KEY_BYTES:
        return (_murmur2_cached(key) & 0x7FFFFFFF) % num_partitions
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def check_partition(topic: str, partition: int, num_partitions: int) -> int:
    """An explicit ``partition``, checked against the topic's ``num_partitions``.

    Raises :class:`InvalidPartitionError` (naming topic, partition and count) when it is negative
    or not below the count, and ``TypeError`` when it is not an integer.
    """
    if isinstance(partition, bool):
        raise TypeError(f"partition must be an int, got {partition!r}")
    try:
        partition = operator.index(partition)
    except TypeError:
        raise TypeError(f"partition must be an int, got {type(partition).__name__}") from None
    if not 0 <= partition < num_partitions:
        raise InvalidPartitionError(topic, partition, num_partitions)
    return partition


# --- murmur2 over a column of keys --------------------------------------------------------

def murmur2_many_pure(keys: Any) -> np.ndarray:
    """:func:`murmur2` of every key (the reference path of :func:`murmur2_many`), as int32."""
    values, valid = _key_list(keys)
    if not all(valid):
        raise ValueError(f"murmur2_many: {valid.count(False)} null key(s); use partitions_for_keys")
    return np.fromiter((murmur2(v) for v in values), dtype=np.int32, count=len(values))


def _numpy_enabled() -> bool:
    return os.environ.get(PURE_ENV_VAR, "").strip().lower() in ("", "0", "false", "no")


_USE_NUMPY = _numpy_enabled()

MURMUR2_MANY_IMPLEMENTATION = "numpy" if _USE_NUMPY else "python"
"""The path of :func:`murmur2_many` and :func:`partitions_for_keys`: ``"numpy"`` or ``"python"``."""

NUMPY_MIN_KEYS = 64
"""Below this many keys the scalar loop is faster than numpy's fixed cost, and is used."""


def murmur2_many(keys: Any) -> np.ndarray:
    """:func:`murmur2` of every key, as a numpy int32 array.

    ``keys``: a sequence of bytes-like objects (a ``str`` is hashed as UTF-8), or a pyarrow
    (chunked) array of binary, string or their large/view variants (read in place from its offsets
    and data buffers). A null key is a ``ValueError``.
    """
    keys = keys if hasattr(keys, "__len__") else list(keys)
    if not _USE_NUMPY or len(keys) < NUMPY_MIN_KEYS:
        return murmur2_many_pure(keys)
    data, starts, lengths, nulls = _key_columns(keys)
    if nulls is not None:
        raise ValueError(f"murmur2_many: {int(nulls.sum())} null key(s); use partitions_for_keys")
    return _murmur2_columns(data, starts, lengths)


def partitions_for_keys(keys: Any, num_partitions: int) -> np.ndarray:
    """:func:`partition_for_key` of every key, as int32; a null key gives ``UNKNOWN_PARTITION``.

    ``keys`` as for :func:`murmur2_many`, where ``None`` (or an Arrow null) is a null key: the
    caller sends those through the sticky partitioner.
    """
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    keys = keys if hasattr(keys, "__len__") else list(keys)
    if not _USE_NUMPY or len(keys) < NUMPY_MIN_KEYS:
        values, valid = _key_list(keys)
        return np.fromiter((partition_for_key(v, num_partitions) if ok else UNKNOWN_PARTITION
                            for v, ok in zip(values, valid)), dtype=np.int32, count=len(values))
    data, starts, lengths, nulls = _key_columns(keys)
    hashes = _murmur2_columns(data, starts, lengths).view(np.uint32)
    out = ((hashes & np.uint32(0x7FFFFFFF)) % np.uint32(num_partitions)).astype(np.int32)
    if nulls is not None:
        out[nulls] = UNKNOWN_PARTITION
    return out


def _murmur2_columns(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """murmur2 of ``data[starts[i]:starts[i] + lengths[i]]`` for every i, as int32.

    The keys must lie in ``data`` in order and back to back, except that a key may be followed by
    bytes it does not hash (an Arrow null's slot: its ``length`` is 0 but its slot may not be).

    1. Every key's whole blocks are cut out of ``data`` with one boolean mask, giving all blocks
       as one contiguous little-endian uint32 array, key after key.
    2. Keys are ranked by block count, longest first, so the keys that have a block ``j`` are a
       prefix of that ranking; one gather lays the blocks out block-major in that ranking, so step
       ``j`` reads a contiguous slice.
    3. Step ``j`` mixes block ``j`` of all those keys at once; then the tails and the final mix
       run over all keys.
    """
    n = len(lengths)
    m = np.uint32(_M)
    h = np.uint32(_SEED) ^ lengths.astype(np.uint32)
    nblocks = lengths >> 2
    most = int(nblocks.max()) if n else 0
    if most:
        span = np.diff(starts, append=len(data))  # each key's slot, up to the next key
        counts = np.empty(2 * n, dtype=np.int64)
        counts[0::2] = nblocks << 2
        counts[1::2] = span - counts[0::2]
        in_block = np.repeat(np.tile(np.array([True, False]), n), counts)
        first = int(starts[0])
        blocks = data[first:first + len(in_block)][in_block].view("<u4")  # key after key
        order = np.argsort(-nblocks, kind="stable")
        # live[j]: how many keys have more than j blocks (a prefix of ``order``)
        live = np.searchsorted(-nblocks[order], -np.arange(most), side="left")
        column = np.cumsum(live) - live
        step = np.repeat(np.arange(most), live)
        rank = np.arange(len(step)) - np.repeat(column, live)
        key_first_block = (np.cumsum(nblocks) - nblocks)[order]
        words = blocks[key_first_block[rank] + step]  # block-major, keys in ranking order
        hs = h[order]
        for j in range(most):
            count = int(live[j])
            k = words[column[j]:column[j] + count]
            k *= m
            k ^= k >> np.uint32(24)
            k *= m
            hj = hs[:count]
            hj *= m
            hj ^= k
        h[order] = hs
    tail = lengths & 3
    has_tail = tail > 0
    if has_tail.any():
        last = len(data) - 1
        base = starts + (nblocks << 2)
        for i, shift in ((2, 16), (1, 8), (0, 0)):
            byte = data[np.minimum(base + i, last)].astype(np.uint32) << np.uint32(shift)
            h ^= np.where(tail > i, byte, np.uint32(0))
        h = np.where(has_tail, h * m, h)
    h ^= h >> np.uint32(13)
    h *= m
    h ^= h >> np.uint32(15)
    return h.view(np.int32)


def _key_list(keys: Any) -> tuple[list, list[bool]]:
    """``(values, valid)``: keys as a list of bytes-like (``b""`` for nulls) and a validity list."""
    if _is_arrow(keys):
        values = keys.to_pylist()
    else:
        values = list(keys)
    valid = [v is not None for v in values]
    values = [b"" if v is None else v.encode() if isinstance(v, str) else v for v in values]
    return values, valid


def _key_columns(keys: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """``(data uint8, starts int64, lengths int64, null mask or None)``; null keys have length 0."""
    if _is_arrow(keys):
        return _arrow_columns(keys)
    values = keys if isinstance(keys, (list, tuple)) else list(keys)
    nulls = None
    if any(v is None for v in values):
        nulls = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
        values = [b"" if v is None else v for v in values]
    if any(isinstance(v, str) for v in values):
        values = [v.encode() if isinstance(v, str) else v for v in values]
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    data = np.frombuffer(b"".join(values), dtype=np.uint8)
    starts = np.cumsum(lengths) - lengths
    return data, starts, lengths, nulls


def _is_arrow(keys: Any) -> bool:
    return type(keys).__module__.startswith("pyarrow")


def _arrow_columns(keys: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    import pyarrow as pa

    from ..record.arrow_columns import as_binary, binary_offsets

    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks() if keys.num_chunks != 1 else keys.chunk(0)
    keys = as_binary(keys)                        # strings viewed; views, fixed-size cast
    data_buf = keys.buffers()[2]
    n = len(keys)
    offsets = binary_offsets(keys)
    starts = offsets[:-1]
    lengths = np.diff(offsets)
    end = int(offsets[-1]) if n else 0
    data = np.frombuffer(data_buf, dtype=np.uint8)[:end] if end else np.zeros(0, dtype=np.uint8)
    nulls = None
    if keys.null_count:
        nulls = keys.is_null().to_numpy(zero_copy_only=False)
        lengths[nulls] = 0
    return data, starts, lengths, nulls


# --- the sticky partitioner (KIP-794) -----------------------------------------------------

class TopicView(Protocol):
    """What the sticky partitioner reads about a topic (see :class:`TopicPartitions`)."""

    @property
    def partitions(self) -> int: ...

    @property
    def available_partitions(self) -> Sequence[int]: ...


@dataclass(frozen=True)
class TopicPartitions:
    """A topic as the sticky partitioner sees it in one metadata snapshot.

    ``partitions`` is the partition count (>= 1); ``available_partitions`` the partitions whose
    leader is a known node (Java's ``Cluster.availablePartitionsForTopic``). Any object with these
    two attributes will do (:class:`TopicView`).
    """

    partitions: int
    available_partitions: tuple[int, ...]


@dataclass(frozen=True)
class PartitionLoad:
    """One partition's load (its queue length) as the accumulator saw it in ``ready()``; the
    adaptive partitioner weighs partitions by it (not the deque itself: that is the accumulator's
    ``_PartitionQueue``).

    ``queue_size`` is the number of batches in its deque; ``leader`` the leader node id, or
    ``None`` when it has none (the partition is then left out of the load stats).
    """

    partition: int
    queue_size: int
    leader: int | None


@dataclass(frozen=True)
class NodeLatency:
    """When a node last had a batch ready to send, and when batches were last drained to it.

    ``ready_time_ms - drain_time_ms`` over ``partitioner.availability.timeout.ms`` means the node
    has had data waiting that long without taking it (Java's ``NodeLatencyStats``).
    """

    ready_time_ms: int
    drain_time_ms: int


@dataclass(frozen=True)
class PartitionLoadStats:
    """Adaptive weights (Java's ``PartitionLoadStats``).

    ``cumulative[i]`` is the running sum of ``max_queue + 1 - queue_size`` up to
    ``partition_ids[i]``; a random ``r`` in ``[0, cumulative[-1])`` picks the first entry above it.
    """

    cumulative: tuple[int, ...]
    partition_ids: tuple[int, ...]

    def pick(self, random_int: int) -> int:
        """The partition for a non-negative random int (Java: ``binarySearch`` on ``r % total``)."""
        return self.partition_ids[bisect_right(self.cumulative, random_int % self.cumulative[-1])]


def build_load_stats(queue_sizes: Sequence[int], partition_ids: Sequence[int],
               total: int) -> PartitionLoadStats | None:
    """Java's ``updatePartitionLoadStats``: the weights, or ``None`` to stay uniform.

    ``queue_sizes``/``partition_ids`` list the partitions that may be chosen; ``total`` is how
    many partition queues were looked at (excluded ones included). Uniform (``None``) when nothing
    may be chosen, when ``total < 2``, or when nothing was excluded and all queues are equal.
    """
    length = len(queue_sizes)
    if length < 1 or total < 2:
        return None
    if length == total and min(queue_sizes) == max(queue_sizes):
        return None
    top = max(queue_sizes) + 1
    cumulative, running = [], 0
    for size in queue_sizes:
        running += top - size
        cumulative.append(running)
    return PartitionLoadStats(tuple(cumulative), tuple(partition_ids))


class StickyPartition:
    """A topic's current sticky partition: the token :meth:`StickyPartitioner.peek` returns.

    A new token is made at every switch, even back to the same partition number, so
    :meth:`StickyPartitioner.is_changed` detects a switch by identity.
    """

    __slots__ = ("partition", "produced_bytes")

    def __init__(self, partition: int):
        self.partition = partition
        self.produced_bytes = 0

    def __repr__(self) -> str:
        return f"StickyPartition(partition={self.partition}, produced_bytes={self.produced_bytes})"


class TopicState:
    """One topic's sticky state. ``current``, the token, is read without a lock (by :meth:`
    StickyPartitioner.peek`, and by the accumulator's append); it is replaced under ``lock``,
    only by :meth:`StickyPartitioner.peek` (when there is none) and by
    :meth:`StickyPartitioner.update_partition_info` (a switch), whose callers hold the deque
    lock of the current token's partition: so a token's ``produced_bytes`` changes only under
    that deque lock."""

    __slots__ = ("lock", "current", "stats")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.current: StickyPartition | None = None
        self.stats: PartitionLoadStats | None = None


class StickyPartitioner:
    """The uniform sticky partitioner of records without a key (Java's ``BuiltInPartitioner``).

    One instance serves all topics of a producer and keeps a small state per topic.

    How the accumulator uses it (as Java's ``RecordAccumulator.append``):

    1. ``sticky = peek(topic, view)``; lock the deque of ``sticky.partition``;
    2. under that lock: if ``is_changed(topic, sticky)``, unlock and start again at 1;
    3. append the record, then ``update_partition_info(topic, sticky, appended_bytes, view,
       enable_switch=<last batch of the deque is full>)``; unlock.

    From ``ready()``, per topic, ``update_load_stats(...)`` refreshes the adaptive weights.

    Thread safety: every method may be called from any thread. A lock per topic guards that
    topic's switches and stats, and ``peek`` reads without locking. Steps 2-3 under the deque lock
    are what make the byte count exact under concurrent appends, as in Java; without them a racing
    append may be counted towards the next sticky partition, which costs nothing but accuracy.
    """

    def __init__(self, batch_size: int, *, adaptive: bool = True, availability_timeout_ms: int = 0,
                 rng: random.Random | None = None):
        """``batch_size``: ``batch.size`` (bytes before a switch, >= 1); ``adaptive``:
        ``partitioner.adaptive.partitioning.enable``; ``availability_timeout_ms``:
        ``partitioner.availability.timeout.ms`` (0 = off; only used with ``adaptive``, as in
        Java); ``rng``: the source of randomness, for reproducible tests."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if availability_timeout_ms < 0:
            raise ValueError(f"availability_timeout_ms must be >= 0, got {availability_timeout_ms}")
        self.batch_size = batch_size
        self.adaptive = adaptive
        self.availability_timeout_ms = availability_timeout_ms
        self._random = rng if rng is not None else random.Random()
        self._topics: dict[str, TopicState] = {}
        self._lock = threading.Lock()

    # -- choosing ------------------------------------------------------------------------

    def partition(self, topic: str, view: TopicView) -> int:
        """The topic's current sticky partition (choosing the first one if there is none)."""
        return self.peek(topic, view).partition

    def peek(self, topic: str, view: TopicView) -> StickyPartition:
        """The topic's current sticky partition token (Java's ``peekCurrentPartitionInfo``)."""
        state = self.topic_state(topic)
        current = state.current
        if current is not None:
            return current
        with state.lock:
            if state.current is None:
                state.current = StickyPartition(self._next_partition(topic, state, view))
            return state.current

    def is_changed(self, topic: str, sticky: StickyPartition) -> bool:
        """Whether another thread switched the topic away from ``sticky`` since it was peeked."""
        return self.topic_state(topic).current is not sticky

    def update_partition_info(self, topic: str, sticky: StickyPartition, appended_bytes: int,
                              view: TopicView, *, enable_switch: bool = True) -> bool:
        """Count ``appended_bytes`` towards ``sticky``; switch when enough was produced.

        Switches after ``batch_size`` bytes if ``enable_switch`` (the caller passes "the deque's
        last batch is full", so switches line up with batch boundaries), and after
        ``2 * batch_size`` regardless. Returns whether it switched. A stale token (the topic
        already switched) changes nothing.
        """
        state = self.topic_state(topic)
        with state.lock:
            if state.current is not sticky:
                return False
            sticky.produced_bytes += appended_bytes
            produced = sticky.produced_bytes
            if produced >= 2 * self.batch_size or (enable_switch and produced >= self.batch_size):
                state.current = StickyPartition(self._next_partition(topic, state, view))
                return True
            return False

    def _next_partition(self, topic: str, state: TopicState, view: TopicView) -> int:
        """Java's ``nextPartition``: weighted by the load stats if any, else uniform."""
        r = self._random.getrandbits(31)  # = toPositive(nextInt())
        stats = state.stats
        if stats is not None:
            return stats.pick(r)
        available = view.available_partitions
        if available:
            return available[r % len(available)]
        if view.partitions < 1:
            raise ValueError(f"topic {topic!r} has no partitions in the metadata")
        return r % view.partitions

    # -- adaptive load stats -------------------------------------------------------------

    def update_load_stats(self, topic: str, queues: Sequence[PartitionLoad], num_partitions: int,
                          node_latency: Mapping[int, NodeLatency] | None = None) -> None:
        """Rebuild the topic's adaptive weights from ``ready()`` (Java's ``partitionReady``).

        ``queues``: every partition of the topic that has a deque, in any order;
        ``num_partitions``: the topic's partition count; ``node_latency``: per leader node id.
        Adaptive weights are used only when adaptive partitioning is on and every partition has a
        deque (until then the choice stays uniform). Partitions without a leader are left out, and
        with ``availability_timeout_ms`` > 0 so are partitions with queued batches whose leader has
        had data ready for longer than that without a drain. An empty queue is never excluded.
        """
        stats = None
        if self.adaptive and len(queues) >= num_partitions:
            sizes, ids = [], []
            timeout = self.availability_timeout_ms
            for queue in queues:
                if queue.leader is None:
                    continue
                if timeout > 0 and queue.queue_size > 0 and node_latency:
                    latency = node_latency.get(queue.leader)
                    if latency is not None and \
                            latency.ready_time_ms - latency.drain_time_ms > timeout:
                        continue
                sizes.append(queue.queue_size)
                ids.append(queue.partition)
            stats = build_load_stats(sizes, ids, len(queues))
        state = self.topic_state(topic)
        with state.lock:
            state.stats = stats

    def load_stats(self, topic: str) -> PartitionLoadStats | None:
        """The topic's current adaptive weights (``None``: uniform)."""
        state = self._topics.get(topic)
        return None if state is None else state.stats

    def topic_state(self, topic: str) -> TopicState:
        """``topic``'s state, made on first use (kept for the partitioner's life)."""
        state = self._topics.get(topic)
        if state is None:
            with self._lock:
                state = self._topics.setdefault(topic, TopicState())
        return state
