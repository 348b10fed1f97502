"""RecordAccumulator: per-partition queues of batches between ``send()`` and the sender thread.

Java's ``RecordAccumulator``; docs/ARCHITECTURE.md ("A record's path") follows a record through
it. ``append`` adds a record to its partition's last open batch (the caller's partition, or
the sticky one for a :class:`StickyTarget`), or starts a batch with memory from the
:class:`~.buffer_pool.BufferPool` (which may block up to ``max_block_ms``);
``queue_encoded_batch`` queues a batch built whole (``send_arrow``). ``IncompleteBatches`` holds every
batch not done yet, queued or in flight: what ``flush`` waits for and a forced close fails.
``ready`` names the leaders with a sendable first batch (full, waited ``linger.ms`` or its retry
backoff, or anything while a flush runs, memory is exhausted or the accumulator is closed; muted
partitions skipped); ``drain`` takes per node the first batch of each partition up to
``max_request_size`` (the first always goes; the starting partition rotates so none starves),
gated and stamped with producer id, epoch and sequence by :mod:`.transactions.manager` with
idempotence; ``expired_batches``, ``reenqueue`` (at the front, KIP-580's jittered backoff).

``split_and_reenqueue`` (MESSAGE_TOO_LARGE) puts the parts back at the front in order, as if
never tried: no backoff, no attempt counted. Each is at most ``batch.size`` and at most half the
refused batch (before compression), so every split makes progress and a record too large by
itself ends up alone (Java halves only from a second split, KAFKA-8350). The refused batch's
lease is shared among the parts, so the memory stays counted until they complete.

Deviations from Java, on purpose: a partition held back by idempotence is skipped rather than
ending the node's drain; the retry backoff is drawn once per retry (stored on the batch), so
``ready`` and ``drain`` see the same value; the leader-epoch shortcut that skips the backoff after
a leader change is not implemented yet. Every ``now_ms`` is monotonic (:mod:`spark_kafka_sink.clock`).

Thread-safety contract:

- the appends run on any number of user threads; ``ready``, ``drain``, ``expired_batches``,
  ``reenqueue``, ``mute``/``unmute``, ``deallocate`` and ``abort_incomplete_batches`` on the
  sender thread; ``begin_flush``, ``await_flush_completion``, ``close`` and read-only queries on any;
- each partition's deque has its own lock, held for every read or write of the deque and every
  append to a batch still in it; a drained batch is the sender's alone; the partition map is
  copy-on-write (readers take no lock); muted partitions, drain indexes and node-latency stats
  are the sender thread's; the incomplete set and the flush counter have one small lock each;
- allocation never holds a deque lock (an append drops it, allocates, retakes it and checks
  again), and ``closed`` is checked under the deque lock right before an append, so none slips in
  after ``abort_incomplete_batches`` emptied the deques;
- lock order: a deque lock, then the incomplete-set lock or (a sticky ``append``) the sticky
  partitioner's per-topic lock; the pool lock is never taken under a deque lock.
"""

from __future__ import annotations

import logging
import random
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Iterable, NamedTuple, Optional

from ..bytecodec import INT64_MAX
from ..client.backoff import ExponentialBackoff
from ..clock import SYSTEM_CLOCK, Clock
from ..errors import BufferExhaustedError, ProducerClosedError
from ..record import CompressionType, RecordBatchBuilder
from ..record.codecs import codec_for
from ..record.layout import HEADER_SIZE
from ..structs import TopicPartition
from .buffer_pool import BufferPool, MemoryLease
from .compression_ratio import CompressionRatioEstimator
from .future import RecordFuture, SendCallback
from .producer_batch import ProducerBatch
from .transactions.idempotence import Idempotence
from .transactions.manager import TransactionManager

if TYPE_CHECKING:
    from ..client.cluster_snapshot import ClusterSnapshot
    from .partitioner import StickyPartitioner, TopicState, TopicView

log = logging.getLogger(__name__)

NO_DELAY_LIMIT_MS = INT64_MAX
"""``next_ready_check_delay_ms`` when nothing is waiting (Java's ``Long.MAX_VALUE``)."""


# --- result objects ---------------------------------------------------------------------------

class RecordAppendResult(NamedTuple):
    """What ``append`` did with a record: the names of the plain tuple it returns
    (``RecordAppendResult(*accumulator.append(...))``; ``append`` makes none itself, see there).

    ``future``: the record's future; ``batch_full``: the record left the partition with a full
    batch the sender has not been woken for (it filled the last batch, or started one behind a
    full batch): wake the sender; ``new_batch_created``: the record started a batch (wake the
    sender, and the sticky partitioner may switch); ``appended_bytes``: bytes the record added
    (the partitioner counts them).
    """

    future: RecordFuture
    batch_full: bool
    new_batch_created: bool
    appended_bytes: int


class StickyTarget:
    """An :meth:`RecordAccumulator.append` target for a record with no partition and no key
    (or ``partitioner.ignore.keys``): the ``topic``'s sticky partition (KIP-794) as ``view``,
    the current metadata, shows the topic. Immutable; the producer keeps one per topic and
    metadata snapshot."""

    __slots__ = ("topic", "view", "state")

    def __init__(self, topic: str, view: TopicView, state: TopicState | None = None):
        """``state``: the sticky partitioner's state of ``topic``
        (:meth:`~.partitioner.StickyPartitioner.topic_state`), so that an append reads the
        current token without a lookup; ``None``: the append takes the locked path."""
        self.topic = topic
        self.view = view
        self.state = state


@dataclass(frozen=True)
class ReadyCheckResult:
    """Nodes with sendable data; ms until the next partition may become sendable
    (``NO_DELAY_LIMIT_MS`` if none); topics with batches but no known leader."""

    ready_nodes: frozenset[int]
    next_ready_check_delay_ms: int
    unknown_leader_topics: frozenset[str]


@dataclass(frozen=True)
class PendingRecords:
    """Records without an outcome yet (:meth:`RecordAccumulator.pending`): what a flush that
    timed out names."""

    records: int
    batches: int
    by_partition: Mapping[TopicPartition, int]

    def __str__(self) -> str:
        topics: dict[str, list[int]] = {}
        for tp in sorted(self.by_partition, key=lambda tp: (tp.topic, tp.partition)):
            topics.setdefault(tp.topic, []).append(tp.partition)
        where = "; ".join(f"topic {topic!r} partition{'s' if len(parts) > 1 else ''} "
                          f"{', '.join(map(str, parts))}" for topic, parts in topics.items())
        return (f"{self.records} record{'s' if self.records != 1 else ''} in {self.batches} "
                f"batch{'es' if self.batches != 1 else ''}" + (f" ({where})" if where else ""))


class IncompleteBatches:
    """Every batch not done yet, queued or in flight (Java's ``IncompleteBatches``): what flush
    waits for and a forced close fails. Thread safe."""

    __slots__ = ("_batches", "_lock")

    def __init__(self) -> None:
        self._batches: set[ProducerBatch] = set()
        self._lock = threading.Lock()

    def add(self, batch: ProducerBatch) -> None:
        with self._lock:
            self._batches.add(batch)

    def add_all(self, batches: Iterable[ProducerBatch]) -> None:
        with self._lock:
            self._batches.update(batches)

    def remove(self, batch: ProducerBatch) -> None:
        with self._lock:
            self._batches.discard(batch)

    def copy_all(self) -> list[ProducerBatch]:
        with self._lock:
            return list(self._batches)

    def __bool__(self) -> bool:
        return bool(self._batches)


class _PartitionQueue:
    """One partition's batches, oldest first, and the lock that guards them.

    ``leader``: ``(snapshot, leader node)`` as ``ready`` last looked the leader up (sender
    thread only; a snapshot is immutable, so the node holds while the snapshot is the same)."""

    __slots__ = ("tp", "lock", "batches", "leader")

    def __init__(self, tp: TopicPartition):
        self.tp = tp
        self.lock = threading.Lock()
        self.batches: deque[ProducerBatch] = deque()
        self.leader: tuple[object, Any] = (None, None)


# --- the accumulator ------------------------------------------------------------------------

class RecordAccumulator:
    """Per-partition deques of :class:`ProducerBatch`; see the module docstring."""

    def __init__(self, *, batch_size: int, one_record_per_batch: bool = False,
                 compression_type: CompressionType | int | str = "none",
                 compression_level: int | None = None, linger_ms: int, retry_backoff_ms: int,
                 retry_backoff_max_ms: int, delivery_timeout_ms: int, buffer_pool: BufferPool,
                 clock: Clock = SYSTEM_CLOCK, transaction_manager: TransactionManager | None = None,
                 idempotence: Idempotence | None = None,
                 partitioner: Optional[StickyPartitioner] = None, rng: random.Random | None = None):
        """``batch_size`` and ``one_record_per_batch``: :class:`~.batch_size.BatchSize`'s
        ``records`` and ``one_record_per_batch`` (``batch.size=0``: every batch is closed after
        its first record). ``partitioner``: the sticky partitioner for records without a
        partition (a :class:`StickyTarget` append); ``ready`` then feeds it queue sizes.
        ``rng``: retry jitter.
        ``transaction_manager``: a transactional producer's, told of each partition a new batch
        needs in the transaction (on the appending thread). ``idempotence``: the sequence
        bookkeeping that gates and stamps the drain (on the sender thread)."""
        self.batch_size = batch_size
        self._one_record_per_batch = one_record_per_batch
        self.linger_ms = linger_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        # retry.backoff.ms doubling up to retry.backoff.max.ms, +-20 % jitter (KIP-580)
        self.retry_backoff = ExponentialBackoff(retry_backoff_ms, retry_backoff_max_ms,
                                                rng=rng if rng is not None else random.Random())
        self.compression_type = self._compression_type = compression_type
        self.compression_level = self._compression_level = compression_level
        RecordBatchBuilder(compression_type=compression_type, compression_level=compression_level,
                           batch_size=self.batch_size)  # validate the codec and level now, not at append
        # with a codec: each topic's expected compression ratio, from the batches built at drain
        # (compression_ratio.py); send_arrow plans with it and the drain sizes requests with it
        self.compression_ratios = (None if codec_for(compression_type).type == CompressionType.NONE
                                   else CompressionRatioEstimator())
        self._pool = buffer_pool
        self._clock = clock
        self._txn = transaction_manager
        self._idempotence = idempotence
        self._partitioner = partitioner
        self._topics: dict[str, dict[int, _PartitionQueue]] = {}  # copy-on-write
        self._topics_lock = threading.Lock()
        self._incomplete = IncompleteBatches()
        self._flushes_in_progress = 0
        self._flush_lock = threading.Lock()
        self._closed = False
        self._closed_reason: BaseException | None = None  # see close()
        self.io_thread_ident: int | None = None  # the sender thread's, set by the producer
        # sender thread only:
        self._muted: set[TopicPartition] = set()
        self._drain_index: dict[int, int] = {}
        self._node_latency: dict[int, object] = {}
        self._fed_loads: dict[str, tuple[int, list]] = {}  # what ready last fed the partitioner
        self._next_batch_expiry_ms = NO_DELAY_LIMIT_MS

    # --- partition queues -----------------------------------------------------------------------

    def _queue(self, topic: str, partition: int) -> _PartitionQueue | None:
        partitions = self._topics.get(topic)
        return None if partitions is None else partitions.get(partition)

    def _queue_for(self, tp: TopicPartition) -> _PartitionQueue:
        """The partition's queue, created (copy-on-write) on first use."""
        queue = self._queue(tp.topic, tp.partition)
        if queue is not None:
            return queue
        with self._topics_lock:
            partitions = self._topics.get(tp.topic, {})
            queue = partitions.get(tp.partition)
            if queue is None:
                queue = _PartitionQueue(tp)
                topics = dict(self._topics)
                topics[tp.topic] = {**partitions, tp.partition: queue}
                self._topics = topics
            return queue

    def _all_queues(self) -> Iterable[_PartitionQueue]:
        for partitions in self._topics.values():
            yield from partitions.values()

    # --- append ---------------------------------------------------------------------------------

    def partition_queue(self, tp: TopicPartition) -> _PartitionQueue:
        """``tp``'s queue, created on first use: the target of :meth:`append` for a record whose
        partition is known. Queues are never removed, so a caller may keep the handle (the
        producer caches one per partition and metadata snapshot, to skip the lookups on every
        record)."""
        return self._queue(tp.topic, tp.partition) or self._queue_for(tp)

    def append(self, target: _PartitionQueue | StickyTarget, timestamp_ms: int, key, value,
               headers, callback: SendCallback | None, max_block_ms: int,
               now_ms: int) -> tuple[RecordFuture, bool, bool, int]:
        """Add a record to the last open batch of its partition's deque, or start a batch with
        memory from the pool, waiting up to ``max_block_ms`` for it (Java's
        ``RecordAccumulator.append``).

        ``target``: the partition's queue (:meth:`partition_queue`) when the caller chose the
        partition (a key, or an explicit one), or a :class:`StickyTarget` when the record has
        neither (Java's ``UNKNOWN_PARTITION``): the topic's sticky partition (KIP-794), picked
        and switched under the deque lock so that the partitioner's byte count stays exact under
        concurrent appends. The partition a record went to is ``future.topic_partition``. Java's
        ``abortOnNewBatch`` has no counterpart: it lets a pluggable partitioner's ``onNewBatch``
        move the record before a batch starts, and the sticky partitioner here is the built-in
        one, consulted inside the append.

        Returns ``(future, batch_full, new_batch_created, appended_bytes)``, the fields of
        :class:`RecordAppendResult`, as a plain tuple: one is made per record, and a named tuple
        or a dataclass costs 0.1-0.3 µs more to build. The common case (room in the last batch
        of a known partition) runs inline, without a helper call. Unlike Java's
        ``batchIsFull``, ``batch_full`` is not set again for every record appended while a full
        batch waits ahead: the sender was woken when that batch filled (it is sendable from
        then on), and a wakeup per record only makes the sender loop for nothing, taking the
        GIL from the sending thread.

        Raises :class:`ProducerClosedError` after ``close()``, :class:`BufferExhaustedError` when
        no memory was freed in time, ``TypeError``/``ValueError`` for a malformed record.
        """
        if target.__class__ is StickyTarget:
            return self._append_sticky(target.topic, target.view, timestamp_ms, key, value,
                                       headers, callback, max_block_ms, now_ms, target.state)
        # acquire/release rather than `with`: half the cost, ~0.08 µs a record
        lock = target.lock
        lock.acquire()
        try:
            if self._closed:
                raise self._closed_error()
            batches = target.batches
            if batches:
                last = batches[-1]
                if callback is None and not last.appends_closed:
                    # ProducerBatch.try_append without a callback, inlined: one call less per record
                    builder = last.builder
                    offset_delta = builder.append_record(timestamp_ms, key, value, headers)
                    if offset_delta is not None:
                        return (RecordFuture((last.completion, offset_delta, timestamp_ms,
                                              -1 if key is None else len(key),
                                              -1 if value is None else len(value), None)),
                                builder.last_append_full, False, builder.last_append_size)
                else:
                    future = last.try_append(timestamp_ms, key, value, headers, callback)
                    if future is not None:  # ProducerBatch.last_append_*, without the property calls
                        builder = last.builder
                        return future, builder.last_append_full, False, builder.last_append_size
                last.close_for_appends()
        finally:
            lock.release()
        lease, now_ms = self._allocate(key, value, headers, max_block_ms, now_ms)
        try:
            with target.lock:
                result = self._append_new_batch(target, lease, timestamp_ms, key, value, headers,
                                                callback, now_ms)
                if result[2]:     # new_batch_created: the batch owns the lease now
                    lease = None
                return result
        finally:
            self._pool.deallocate(lease)

    def _append_sticky(self, topic: str, view: TopicView, timestamp_ms: int, key, value, headers,
                       callback: SendCallback | None, max_block_ms: int, now_ms: int,
                       state: TopicState | None = None) -> tuple[RecordFuture, bool, bool, int]:
        """:meth:`append` to the topic's sticky partition, as ``view`` (the current metadata)
        shows the topic: Java's loop, which starts over when another thread switched the
        partition meanwhile. A record without callback first tries the open batch of the
        current partition (:meth:`_append_sticky_open`)."""
        partitioner = self._partitioner
        if partitioner is None:
            raise RuntimeError("a StickyTarget append needs the accumulator to have a partitioner")
        if state is not None and callback is None:
            result = self._append_sticky_open(topic, state, timestamp_ms, key, value, headers,
                                              view)
            if result is not None:
                return result
        lease = None
        try:
            while True:
                sticky = partitioner.peek(topic, view)
                queue = self._queue(topic, sticky.partition) or \
                    self._queue_for(TopicPartition(topic, sticky.partition))
                with queue.lock:
                    if self._sticky_changed(partitioner, topic, sticky, queue, view):
                        continue
                    result = self._try_append(queue, timestamp_ms, key, value, headers, callback)
                    if result is not None:
                        partitioner.update_partition_info(topic, sticky, result[3], view,
                                                          enable_switch=self._all_full(queue))
                        return result
                if lease is None:
                    lease, now_ms = self._allocate(key, value, headers, max_block_ms, now_ms)
                with queue.lock:
                    if self._sticky_changed(partitioner, topic, sticky, queue, view):
                        continue
                    result = self._append_new_batch(queue, lease, timestamp_ms, key, value, headers,
                                                    callback, now_ms)
                    if result[2]:
                        lease = None
                    partitioner.update_partition_info(topic, sticky, result[3], view,
                                                      enable_switch=self._all_full(queue))
                    return result
        finally:
            self._pool.deallocate(lease)

    def _append_sticky_open(self, topic: str, state: TopicState, timestamp_ms: int, key, value,
                            headers, view: TopicView) -> tuple[RecordFuture, bool, bool, int] | None:
        """The common sticky append, in one call: the current token's partition has an open
        batch with room for the record. ``None`` when it has not (no token yet, another
        thread switched, no open batch, no room, the accumulator closed): nothing was changed,
        and :meth:`_append_sticky`'s loop decides, as in Java. What it skips is what that loop
        would find unchanged: with an open last batch, ``_sticky_changed`` is ``is_changed``;
        below ``batch.size`` bytes, ``update_partition_info`` only adds them (no switch)."""
        sticky = state.current
        if sticky is None:
            return None
        partitions = self._topics.get(topic)
        queue = None if partitions is None else partitions.get(sticky.partition)
        if queue is None:
            return None
        lock = queue.lock
        lock.acquire()
        try:
            batches = queue.batches
            if not batches or state.current is not sticky or self._closed:
                return None
            last = batches[-1]
            builder = last.builder
            if last.appends_closed or builder.last_append_full:  # no open batch: it may switch
                return None
            offset_delta = builder.append_record(timestamp_ms, key, value, headers)
            if offset_delta is None:
                return None
            future = RecordFuture((last.completion, offset_delta, timestamp_ms,
                                   -1 if key is None else len(key),
                                   -1 if value is None else len(value), None))
            size, full = builder.last_append_size, builder.last_append_full
            partitioner = self._partitioner
            produced = sticky.produced_bytes + size
            if produced < partitioner.batch_size:  # counted under this deque lock (TopicState)
                sticky.produced_bytes = produced
            else:
                partitioner.update_partition_info(topic, sticky, size, view, enable_switch=full)
            return future, full, False, size
        finally:
            lock.release()

    @staticmethod
    def _sticky_changed(partitioner, topic, sticky, queue: _PartitionQueue, view) -> bool:
        """Java's ``partitionChanged``: switched by another thread, or a switch that was held back
        while the last batch was open can happen now. Deque lock held."""
        if partitioner.is_changed(topic, sticky):
            return True
        if RecordAccumulator._all_full(queue):
            partitioner.update_partition_info(topic, sticky, 0, view, enable_switch=True)
            return partitioner.is_changed(topic, sticky)
        return False

    @staticmethod
    def _all_full(queue: _PartitionQueue) -> bool:
        """Whether the deque has no open batch (only the last one can be open)."""
        batches = queue.batches
        return not batches or batches[-1].is_full

    def _allocate(self, key, value, headers, max_block_ms: int, now_ms: int) -> tuple:
        """A lease big enough for a batch starting with this record, and ``now_ms`` moved on by
        the time the pool kept us waiting."""
        size = max(self.batch_size, RecordBatchBuilder.estimate_size_upper_bound(key, value, headers))
        before = self._clock.monotonic_ms()
        lease = self._lease(size, max_block_ms)
        return lease, now_ms + max(0, self._clock.monotonic_ms() - before)

    def _lease(self, size: int, max_block_ms: int) -> MemoryLease:
        """``size`` bytes from the pool, waiting up to ``max_block_ms`` for them; not at all on
        the I/O thread (a send from a callback): it would wait for memory only it can free."""
        if threading.get_ident() != self.io_thread_ident:
            return self._pool.allocate(size, max_block_ms)
        try:
            return self._pool.allocate(size, 0)
        except BufferExhaustedError as exc:
            raise BufferExhaustedError(
                f"{exc}. A send from a producer callback never waits for memory: the callback "
                "runs on the producer's I/O thread, the only thread that frees it") from None

    def _try_append(self, queue: _PartitionQueue, timestamp_ms: int, key, value, headers,
                    callback: SendCallback | None) -> tuple[RecordFuture, bool, bool, int] | None:
        """Append to the last batch if it has room (:meth:`append`'s outcome), else ``None``.
        Deque lock held."""
        if self._closed:
            raise self._closed_error()
        batches = queue.batches
        if not batches:
            return None
        last = batches[-1]
        future = last.try_append(timestamp_ms, key, value, headers, callback)
        if future is None:
            last.close_for_appends()
            return None
        # last_append_full is last.is_full right after an append, without two property calls
        builder = last.builder
        return future, builder.last_append_full, False, builder.last_append_size

    def _append_new_batch(self, queue: _PartitionQueue, lease, timestamp_ms: int, key, value,
                          headers, callback: SendCallback | None,
                          now_ms: int) -> tuple[RecordFuture, bool, bool, int]:
        """Start a batch with ``lease`` unless another thread did meanwhile (:meth:`append`'s
        outcome). Deque lock held."""
        result = self._try_append(queue, timestamp_ms, key, value, headers, callback)
        if result is not None:
            return result  # someone else made a batch while we waited for memory
        builder = RecordBatchBuilder(compression_type=self._compression_type,
                                     compression_level=self._compression_level,
                                     batch_size=lease.size)
        batch = ProducerBatch(queue.tp, builder, now_ms, buffer=lease)
        future = batch.try_append(timestamp_ms, key, value, headers, callback)
        if self._one_record_per_batch:
            batch.close_for_appends()
        queue.batches.append(batch)
        self._incomplete.add(batch)
        if self._txn is not None:
            self._txn.maybe_add_partition(queue.tp)
        return future, len(queue.batches) > 1 or batch.is_full, True, batch.estimated_size_in_bytes

    def queue_encoded_batch(self, tp: TopicPartition, builder: RecordBatchBuilder, tally,
                            max_block_ms: int, now_ms: int) -> ProducerBatch:
        """Queue a batch encoded elsewhere (``send_arrow``) behind ``tp``'s queued batches.

        Not a variant of :meth:`append`: no record is appended to anything. The batch arrives
        whole and closed, sized by its encoder rather than by the room left in an open batch;
        its records have no future each but count against ``tally`` (a ``DeliveryTally``); the
        partition is the caller's (``send_arrow`` planned every row's), never the sticky one;
        and the lease is the batch's own size. Java has no counterpart (its records always go
        through ``append``).

        ``builder`` holds the whole batch (``RecordBatchBuilder.from_records``) and takes no
        appends. An open batch of ``tp`` is closed for appends first, so records sent before
        this call stay before it. Memory: a lease of ``builder.estimated_size`` bytes from the
        pool, which may block up to ``max_block_ms`` (never under the deque lock). From here on
        the batch is an ordinary one: drained per leader, stamped with sequences, retried and
        expired like the others.
        """
        queue = self.partition_queue(tp)
        lease = self._lease(builder.estimated_size, max_block_ms)
        try:
            with queue.lock:
                if self._closed:
                    raise self._closed_error()
                batches = queue.batches
                if batches and not batches[-1].is_full:
                    batches[-1].close_for_appends()
                batch = ProducerBatch(tp, builder, now_ms, buffer=lease)
                batch.close_for_appends()
                batch.completion.count_for(tally, 0, builder.record_count)
                batches.append(batch)
                lease = None  # the batch owns it now
                self._incomplete.add(batch)
                if self._txn is not None:
                    self._txn.maybe_add_partition(tp)
                return batch
        finally:
            self._pool.deallocate(lease)

    # --- ready ----------------------------------------------------------------------------------

    def ready(self, cluster: ClusterSnapshot, now_ms: int) -> ReadyCheckResult:
        """Which leader nodes have sendable data; see the module docstring."""
        ready_nodes: set[int] = set()
        unknown_leader_topics: set[str] = set()
        next_delay = NO_DELAY_LIMIT_MS
        exhausted = self._pool.queued > 0
        forced = exhausted or self._closed or self._flushes_in_progress > 0
        feed_partitioner = self._partitioner is not None and self._partitioner.adaptive
        muted = self._muted
        for topic, partitions in self._topics.items():
            loads = [] if feed_partitioner else None
            for queue in partitions.values():
                with queue.lock:
                    if not queue.batches:
                        first = None
                    else:
                        first = queue.batches[0]
                        waited = first.waited_time_ms(now_ms)
                        backing_off = first.is_backing_off(now_ms)
                        full = len(queue.batches) > 1 or first.is_full
                    queue_size = len(queue.batches)
                cached = queue.leader
                if cached[0] is cluster:
                    leader = cached[1]
                else:
                    leader = cluster.leader_for(queue.tp)
                    queue.leader = (cluster, leader)
                if loads is not None:
                    loads.append((queue.tp.partition, queue_size, None if leader is None else leader.node_id))
                if first is None:
                    continue
                if leader is None:
                    unknown_leader_topics.add(topic)
                    continue
                if leader.node_id in ready_nodes or (muted and queue.tp in muted):
                    continue
                time_to_wait = first.retry_backoff_ms if backing_off else self.linger_ms
                sendable = full or waited >= time_to_wait or forced
                if sendable and not backing_off:
                    ready_nodes.add(leader.node_id)
                else:
                    next_delay = min(next_delay, max(time_to_wait - waited, 0))
            if loads is not None:
                self._feed_partitioner(topic, loads, cluster)
        return ReadyCheckResult(frozenset(ready_nodes), next_delay, frozenset(unknown_leader_topics))

    def _feed_partitioner(self, topic: str, loads: list, cluster: ClusterSnapshot) -> None:
        """Give the partitioner the topic's queue sizes and leaders. Skipped when they are what
        it was last given (most sender loops change no queue): the stats it would rebuild are
        equal. Not skipped when an availability timeout makes node latency an input too."""
        count = cluster.partition_count(topic)
        if count:
            fed = (count, loads)
            if self._fed_loads.get(topic) == fed and not self._partitioner.availability_timeout_ms:
                return
            from .partitioner import PartitionLoad
            queues = [PartitionLoad(partition, size, leader) for partition, size, leader in loads]
            self._partitioner.update_load_stats(topic, queues, count, self._node_latency)
            self._fed_loads[topic] = fed

    def update_node_latency_stats(self, node_id: int, now_ms: int, can_drain: bool) -> None:
        """Sender: ``node_id`` had data ready at ``now_ms`` (and could take it if ``can_drain``);
        lets the adaptive partitioner avoid partitions of a node that stopped taking data."""
        if self._partitioner is None or not self._partitioner.availability_timeout_ms:
            return
        from .partitioner import NodeLatency
        previous = self._node_latency.get(node_id)
        drain_ms = now_ms if can_drain or previous is None else previous.drain_time_ms
        self._node_latency[node_id] = NodeLatency(ready_time_ms=now_ms, drain_time_ms=drain_ms)

    # --- drain ----------------------------------------------------------------------------------

    def drain(self, cluster: ClusterSnapshot, nodes: Iterable[int] | Mapping[int, int],
              max_request_size: int, now_ms: int) -> dict[int, list[ProducerBatch]]:
        """Batches to send now, per node id, each list within ``max_request_size`` bytes.
        ``nodes``: node ids, or node id -> the id of the connection the batches will go out on
        (the sender's; the idempotence gate pipelines a partition only on one connection).
        Without connection ids, each node counts as one connection."""
        links = nodes if isinstance(nodes, Mapping) else {node_id: node_id for node_id in nodes}
        return {node_id: self._drain_node(cluster, node_id, link, max_request_size, now_ms)
                for node_id, link in links.items()}

    def _drain_node(self, cluster: ClusterSnapshot, node_id: int, link: int, max_size: int,
                    now_ms: int) -> list[ProducerBatch]:
        parts = cluster.partitions_for_node(node_id)
        drained: list[ProducerBatch] = []
        if not parts:
            return drained
        count = len(parts)
        start = self._drain_index.get(node_id, 0) % count
        next_start = (start + 1) % count  # a full round: the next call starts one further on
        size = 0
        for step in range(count):
            index = (start + step) % count
            tp = parts[index]
            if tp in self._muted:
                continue
            queue = self._queue(tp.topic, tp.partition)
            if queue is None:
                continue
            with queue.lock:
                if not queue.batches:
                    continue
                first = queue.batches[0]
                if first.is_backing_off(now_ms):
                    continue
                if drained and size + self._expected_size(first) > max_size:
                    next_start = index  # this partition goes first next time
                    break
                if self._idempotence is not None:
                    if not self._idempotence.can_drain(first, link):
                        continue
                    batch = queue.batches.popleft()
                    self._idempotence.assign_producer_state(batch)
                else:
                    batch = queue.batches.popleft()
            built_now = not batch.is_closed
            batch.close()  # builds the bytes: outside the lock, appenders need not wait for it
            if built_now and self.compression_ratios is not None:
                self.compression_ratios.observe(tp.topic, batch.estimated_size_in_bytes - HEADER_SIZE,
                                                batch.size_in_bytes - HEADER_SIZE)
            size += batch.size_in_bytes
            drained.append(batch)
            batch.drained(now_ms, link)
        self._drain_index[node_id] = next_start
        return drained

    def _expected_size(self, batch: ProducerBatch) -> int:
        """The bytes ``batch`` will take in a request: built ones know it; with a codec, the
        others are expected to shrink by their topic's estimated ratio (Java's estimate)."""
        if batch.is_closed or self.compression_ratios is None:
            return batch.size_in_bytes
        return self.compression_ratios.estimated_size(batch.topic_partition.topic, HEADER_SIZE,
                                                      batch.estimated_size_in_bytes - HEADER_SIZE)

    # --- expiry and retries ---------------------------------------------------------------------

    def expired_batches(self, now_ms: int) -> list[ProducerBatch]:
        """Remove and return queued batches created ``delivery.timeout.ms`` ago or earlier.

        Only batches in the deques (never sent, or waiting for a retry); batches in flight are the
        sender's to expire. The caller fails them (``batch.fail(batch.timeout_error(now_ms))``)
        and deallocates them.
        """
        expired: list[ProducerBatch] = []
        self._next_batch_expiry_ms = NO_DELAY_LIMIT_MS
        for queue in self._all_queues():
            with queue.lock:
                batches = queue.batches
                while batches:
                    first = batches[0]
                    if not first.has_reached_delivery_timeout(self.delivery_timeout_ms, now_ms):
                        self._next_batch_expiry_ms = min(self._next_batch_expiry_ms,
                                                         first.created_ms + self.delivery_timeout_ms)
                        break
                    batches.popleft()
                    first.close_for_appends()
                    expired.append(first)
        return expired

    @property
    def next_expiry_time_ms(self) -> int:
        """When the oldest queued batch expires, as of the last ``expired_batches`` call."""
        return self._next_batch_expiry_ms

    def reenqueue(self, batch: ProducerBatch, now_ms: int, *, backoff: bool = True) -> None:
        """Put a batch to retry back at the front of its deque, backing off exponentially from
        ``now_ms``: in sequence order with idempotence, else in creation order among the other
        retries (requests failed by one disconnect come back oldest first; each at the very
        front would reverse them, and expiry, which stops at the first unexpired batch of a
        deque, would then miss an expired batch behind a younger one). The delivery timeout is
        the sender's to check before calling this. ``backoff`` False: retry at once (the
        partition's new leader is known, KIP-951)."""
        batch.reenqueued(now_ms, self.retry_backoff.backoff(batch.attempts) if backoff else 0)
        queue = self._queue_for(batch.topic_partition)
        with queue.lock:
            if self._idempotence is not None:
                self._insert_in_sequence_order(queue.batches, batch)
            else:
                self._insert_in_creation_order(queue.batches, batch)

    def split_and_reenqueue(self, big: ProducerBatch, now_ms: int,
                            refused: frozenset[int] = frozenset(), *,
                            alone: frozenset[int] | None = None) -> list[ProducerBatch]:
        """Split ``big`` (refused as too large, holding more than one record; or holding the
        records at indexes ``refused`` that the broker refused one by one, which then get a
        part of their own each) and queue the parts at the front of its deque, except those
        refused records' parts; every part, in order. ``alone`` (default: ``refused``): the
        records that get a part of their own. See the module docstring. With idempotence the
        parts carry ``big``'s sequences and are tracked in flight (the caller stops tracking
        ``big``, and fails the refused parts). ``big`` keeps no lease: the caller still
        deallocates it, which forgets it."""
        alone = refused if alone is None else alone
        if alone:
            target = self.batch_size
        else:
            target = min(self.batch_size, max(1, big.estimated_size_in_bytes // 2))
        parts = big.split(target, compression_type=self._compression_type,
                          compression_level=self._compression_level, alone=alone)
        self._share_lease(big, parts)
        self._incomplete.add_all(parts)
        if self._idempotence is not None:
            for part in parts:
                self._idempotence.add_in_flight(part)
        if refused:
            firsts = _first_indexes(parts)
            queued = [part for part, first in zip(parts, firsts) if first not in refused]
        else:
            queued = parts
        queue = self._queue_for(big.topic_partition)
        with queue.lock:
            for part in reversed(queued):
                if self._idempotence is not None:
                    self._insert_in_sequence_order(queue.batches, part)
                else:
                    self._insert_in_creation_order(queue.batches, part)
        log.debug("split a batch of %d records for %s into %d at %d bytes each at most, now %d ms",
                  big.record_count, big.topic_partition, len(parts), target, now_ms)
        return parts

    @staticmethod
    def _share_lease(big: ProducerBatch, parts: list[ProducerBatch]) -> None:
        """Hand ``big``'s lease on to ``parts``: each takes what its records need, the last the
        rest, so the shares add up to exactly the leased bytes."""
        lease, big.buffer = big.buffer, None
        if lease is None:
            return
        remaining = lease.size
        for part in parts[:-1]:
            share = min(remaining, part.estimated_size_in_bytes)
            part.buffer = MemoryLease(share)
            remaining -= share
        parts[-1].buffer = MemoryLease(remaining)

    @staticmethod
    def _insert_in_creation_order(batches: deque[ProducerBatch], batch: ProducerBatch) -> None:
        """Ahead of every batch created at or after it: only retries sit before a batch that was
        never sent (every batch still queued was created after every batch drained), so the
        deque stays in creation order and expiry may stop at its first unexpired batch. Deque
        lock held."""
        earlier = []
        while batches and batches[0].created_ms < batch.created_ms:
            earlier.append(batches.popleft())
        batches.appendleft(batch)
        batches.extendleft(reversed(earlier))

    def _insert_in_sequence_order(self, batches: deque[ProducerBatch], batch: ProducerBatch) -> None:
        """Java's ``insertInSequenceOrder``: ahead of every batch with a higher sequence or none.
        Deque lock held."""
        if not batch.has_sequence:
            raise RuntimeError("Trying to re-enqueue a batch which doesn't have a sequence even "
                               "though idempotency is enabled.")
        if not self._idempotence.has_in_flight(batch.topic_partition):
            raise RuntimeError("We are re-enqueueing a batch which is not tracked as part of the in "
                               f"flight requests. batch.topic_partition: {batch.topic_partition}; "
                               f"batch.base_sequence: {batch.base_sequence}")
        earlier = []
        while batches and batches[0].has_sequence and batches[0].base_sequence < batch.base_sequence:
            earlier.append(batches.popleft())
        batches.appendleft(batch)
        batches.extendleft(reversed(earlier))

    # --- muting ---------------------------------------------------------------------------------

    def mute(self, tp: TopicPartition) -> None:
        """Hold ``tp`` back from ``ready``/``drain`` (a request for it is in flight and order must
        be kept: ``max.in.flight.requests.per.connection`` = 1)."""
        self._muted.add(tp)

    def unmute(self, tp: TopicPartition) -> None:
        self._muted.discard(tp)

    def is_muted(self, tp: TopicPartition) -> bool:
        return tp in self._muted

    # --- flush ----------------------------------------------------------------------------------

    def begin_flush(self) -> None:
        """Make every batch sendable now, until the matching ``await_flush_completion`` returns."""
        with self._flush_lock:
            self._flushes_in_progress += 1

    @property
    def flush_in_progress(self) -> bool:
        return self._flushes_in_progress > 0

    def await_flush_completion(self, timeout_ms: int | None = None) -> bool:
        """Wait until every batch incomplete at the call is done and its callbacks have run;
        ``False`` if ``timeout_ms`` passed first. Ends the flush begun by ``begin_flush``."""
        try:
            completions = [batch.completion for batch in self._incomplete.copy_all()]
            deadline = None if timeout_ms is None else self._clock.monotonic_ms() + timeout_ms
            for completion in completions:
                remaining = None if deadline is None else max(0, deadline - self._clock.monotonic_ms())
                if not completion.wait_settled(None if remaining is None else remaining / 1000):
                    return False
            return True
        finally:
            with self._flush_lock:
                self._flushes_in_progress -= 1

    # --- state ----------------------------------------------------------------------------------

    def has_undrained(self) -> bool:
        """Whether any batch waits in a deque."""
        for queue in self._all_queues():
            with queue.lock:
                if queue.batches:
                    return True
        return False

    def pending(self) -> PendingRecords:
        """The records of every batch not done yet (queued or in flight), by partition."""
        by_partition: dict[TopicPartition, int] = {}
        batches = self._incomplete.copy_all()
        for batch in batches:
            tp = batch.topic_partition
            by_partition[tp] = by_partition.get(tp, 0) + batch.record_count
        return PendingRecords(sum(by_partition.values()), len(batches), MappingProxyType(by_partition))

    def has_incomplete(self) -> bool:
        """Whether any batch, queued or in flight, is not done yet."""
        return bool(self._incomplete)

    def queue_size(self, tp: TopicPartition) -> int:
        """Batches waiting in ``tp``'s deque."""
        queue = self._queue(tp.topic, tp.partition)
        return 0 if queue is None else len(queue.batches)

    def queued_batches(self, tp: TopicPartition) -> list[ProducerBatch]:
        """A snapshot of ``tp``'s deque, oldest first."""
        queue = self._queue(tp.topic, tp.partition)
        if queue is None:
            return []
        with queue.lock:
            return list(queue.batches)

    @property
    def buffer_pool(self) -> BufferPool:
        return self._pool

    @property
    def closed(self) -> bool:
        return self._closed

    # --- release, abort, close ------------------------------------------------------------------

    def deallocate(self, batch: ProducerBatch) -> None:
        """A batch is done: forget it and give its memory back to the pool (once)."""
        self._incomplete.remove(batch)
        lease, batch.buffer = batch.buffer, None
        self._pool.deallocate(lease)

    def abort_incomplete_batches(self, exception: BaseException) -> None:
        """Fail every batch not done yet, queued or in flight (a forced close), and free their
        memory. Closes the accumulator first, so no append can add a batch behind the sweep."""
        self.close()
        queued = self._take_queued()
        seen = set(queued)
        self._abort(queued + [batch for batch in self._incomplete.copy_all() if batch not in seen],
                    exception)

    def abort_undrained_batches(self, exception: BaseException) -> None:
        """Fail every batch still waiting in a deque and free its memory (the producer hit a fatal
        error). Batches in flight are the sender's to fail. The accumulator stays open, so later
        appends are failed the same way by the sender's next loop."""
        self._abort(self._take_queued(), exception)

    def _take_queued(self) -> list[ProducerBatch]:
        """Empty every deque; the batches that were in them."""
        taken: list[ProducerBatch] = []
        for queue in self._all_queues():
            with queue.lock:
                taken.extend(queue.batches)
                queue.batches.clear()
        return taken

    def _abort(self, batches: list[ProducerBatch], exception: BaseException) -> None:
        for batch in batches:
            batch.close_for_appends()
            batch.fail(exception)
            self.deallocate(batch)

    def close(self, reason: BaseException | None = None) -> None:
        """Accept no more records; every partition becomes sendable; blocked senders fail.
        ``reason``: why (the sender thread died): later appends raise an error naming it. The
        first reason given stays."""
        if reason is not None and self._closed_reason is None:
            self._closed_reason = reason
        self._closed = True
        self._pool.close()

    def _closed_error(self) -> ProducerClosedError:
        """What an append after ``close()`` raises (a fresh error each time: it may be raised on
        several threads)."""
        reason = self._closed_reason
        if reason is None:
            return ProducerClosedError("Producer closed while send in progress")
        error = ProducerClosedError(str(reason))
        error.__cause__ = reason
        return error


def _first_indexes(parts: list[ProducerBatch]) -> list[int]:
    """The index, in the batch they were split from, of each part's first record."""
    firsts, index = [], 0
    for part in parts:
        firsts.append(index)
        index += part.record_count
    return firsts
