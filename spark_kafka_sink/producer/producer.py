"""KafkaProducer: the thin facade over metadata, partitioner, accumulator and sender thread.

``send()`` runs on the caller's thread and never touches a socket (docs/ARCHITECTURE.md):

1. wait, at most ``max.block.ms``, for the topic's metadata (only the first send to a topic waits);
2. check the record's size against ``max.request.size`` and ``buffer.memory``;
3. pick the partition: an explicit one wins (checked against the count); a key goes to
   ``toPositive(murmur2(key)) % numPartitions`` as in Java; no key (or ``partitioner.ignore.keys``)
   goes to the uniform sticky partitioner (KIP-794);
4. append to the accumulator (which may block for memory, within what is left of
   ``max.block.ms``), and wake the sender when a batch filled up or a new one started.

It returns a future of :class:`~spark_kafka_sink.structs.RecordMetadata` with the
``concurrent.futures.Future`` API (``result``, ``exception``, ``done``, ``add_done_callback``;
``to_concurrent_future()`` gives a real one for ``concurrent.futures.wait``); ``callback(metadata,
exception)`` runs on the sender thread when the record completes.

The sender thread is the only other thread; it lives exactly as long as the producer:
``close()`` delivers what is pending (within ``timeout``), then stops it and closes every socket.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import numbers
import threading
from typing import Any, Mapping

from ..bytecodec import INT64_MAX
from ..client.cluster_snapshot import ClusterSnapshot, PartitionInfo
from ..client.factory import ClientObservers, build_client
from ..client.selector import Selectable
from ..clock import SYSTEM_CLOCK, Clock
from ..config import ProducerConfig
from ..errors import (
    IllegalStateError, InvalidPartitionError, KafkaError, KafkaTimeoutError, MetadataTimeoutError,
    ProducerClosedError, RecordContentError, RecordTooLargeError,
)
from ..record import CompressionType, RecordBatchBuilder
from ..record.builder import NO_HEADERS_SIZE_BOUND
from ..structs import TopicPartition
from .accumulator import RecordAccumulator, StickyTarget
from .arrow.input import DEFAULT, ArrowSendResult, resolve_columns, timestamps_ms
from .batch_size import BatchSize
from .buffer_pool import BufferPool
from .future import RecordFuture
from .metrics import ProducerMetrics
from .metrics_snapshot import MetricsSnapshot
from .partitioner import (
    KEY_CACHE_MAX_KEY_BYTES, KEY_CACHE_SIZE, StickyPartitioner, TopicPartitions, TopicState,
    check_partition, partition_for_key,
)
from .transactions.resumable import ResumableTransaction
from .sender import Sender, SenderSettings
from .topics import check_topic
from .transactions.idempotence import Idempotence
from .transactions.manager import TransactionManager

log = logging.getLogger(__name__)

_client_ids = itertools.count(1)

_ARROW_CHUNK_BYTES = 8 << 20
"""Key and value bytes ``send_arrow`` encodes in one pass (at least 4 x ``batch.size``): bounds
the encoded copy a large input holds beyond ``buffer.memory``."""
_ARROW_CHUNK_ROWS = 1 << 17
"""Rows ``send_arrow`` prepares in one pass, whatever their size: tiny rows cost more in per-row
work arrays than in bytes (2,000,000 rows of 3 B: peak RSS +300 MB in 8 MB passes, +116 MB in
passes of 131,072 rows, and twice as fast)."""

_FORCED_CLOSE_GRACE_S = 5.0
"""How long ``close()`` waits for the I/O thread after a forced close: it only has to fail what
is left and close its sockets, unless a send callback keeps it busy."""

_LEVEL_ATTRIBUTE = {
    CompressionType.GZIP: "compression_gzip_level",
    CompressionType.LZ4: "compression_lz4_level",
    CompressionType.ZSTD: "compression_zstd_level",
}


# RecordBatchBuilder.estimate_size_upper_bound of a headerless record with bytes key and value is
# NO_HEADERS_SIZE_BOUND + len(key) + len(value) + (each length's zig-zag varint size - 1); with no
# key, NO_HEADERS_SIZE_BOUND + len(value) + (its varint size - 1), within the same bound. The fast
# check in send() only applies when len(key) + len(value) <= _max_record_size - this bound, and
# _max_record_size <= max.request.size, an int32: each length is then below 2**31, whose varint
# takes at most 5 bytes, so 4 + 4 covers both (tests/unit/producer checks the parity).
_PLAIN_RECORD_BOUND = NO_HEADERS_SIZE_BOUND + 4 + 4


def _as_bytes(value: Any, argument: str) -> bytes | bytearray | memoryview | None:
    """``str`` becomes UTF-8; bytes-likes and None pass; anything else is a TypeError naming it."""
    if value is None or isinstance(value, (bytes, bytearray, memoryview)):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"{argument} must be bytes, str or None, not {type(value).__name__}")


def _checked_timestamp(timestamp_ms: Any) -> int:
    """``timestamp_ms`` as an int, or the error Java's producer gives (its message, plus why)."""
    if isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, numbers.Integral):
        raise TypeError(f"timestamp_ms must be an int (epoch milliseconds) or None, not "
                        f"{type(timestamp_ms).__name__}")
    timestamp_ms = int(timestamp_ms)
    if timestamp_ms < 0:
        raise RecordContentError(f"Invalid timestamp: {timestamp_ms}. Timestamp should always be "
                         f"non-negative or null (None: the send time; -1 is not 'no timestamp')")
    if timestamp_ms > INT64_MAX:
        raise RecordContentError(f"Invalid timestamp: {timestamp_ms}. It does not fit an int64")
    return timestamp_ms


class _TopicRoute:
    """One topic in one metadata snapshot, as ``send`` uses it: the partition count, the sticky
    partitioner's view, the accumulator's append target for a record without key or partition
    (``sticky``), each partition's accumulator queue once looked up (queues are never removed,
    so a handle stays valid; only the sending threads fill the slots, and a lost race just
    looks the same queue up twice), and ``by_key``: the queue of each recent ``bytes`` key, so
    a key seen before costs one dict lookup instead of a murmur2 and a modulo. The partition
    of a key depends only on the key and the partition count, fixed for the route's life."""

    __slots__ = ("snapshot", "topic", "partition_count", "view", "sticky", "queues", "by_key",
                 "used_ms", "used_wall_ms")

    def __init__(self, snapshot: ClusterSnapshot, topic: str, sticky_state: TopicState):
        self.snapshot = snapshot
        self.topic = topic
        self.partition_count = snapshot.partition_count(topic)
        self.view = TopicPartitions(self.partition_count, snapshot.available_partitions_for(topic))
        self.sticky = StickyTarget(topic, self.view, sticky_state)
        self.queues: list = [None] * (self.partition_count or 0)
        self.by_key: dict[bytes, Any] = {}
        # the (wall-clock) millisecond in which send last found the topic marked used in the
        # metadata, and the monotonic time read then: sends in the same millisecond need not look
        # again, nor read the monotonic clock
        self.used_ms = -1
        self.used_wall_ms = -1

    def queue(self, accumulator: RecordAccumulator, partition: int):
        """The partition's queue handle, looked up on first use."""
        queue = accumulator.partition_queue(TopicPartition(self.topic, partition))
        self.queues[partition] = queue
        return queue

    def keyed(self, accumulator: RecordAccumulator, key) -> Any:
        """The queue of a keyed record (Java's default partitioner), remembered in ``by_key`` for
        a short ``bytes`` key. The memory is bounded: a full cache starts over, so a stream
        whose keys change keeps its current ones (and a key is held alive at most until then)."""
        partition = partition_for_key(key, self.partition_count)
        queue = self.queues[partition] or self.queue(accumulator, partition)
        if type(key) is bytes and len(key) <= KEY_CACHE_MAX_KEY_BYTES:
            by_key = self.by_key
            if len(by_key) >= KEY_CACHE_SIZE:
                by_key.clear()
            by_key[key] = queue
        return queue


class KafkaProducer:
    """Sends records to Kafka from any number of threads; see the module docstring.

    ``config``: a mapping of Java producer property names (``{"bootstrap.servers": ...,
    "linger.ms": 5}``) or a :class:`~spark_kafka_sink.config.ProducerConfig`. ``clock`` and
    ``selector`` are for tests.
    """

    def __init__(self, config: Mapping[str, Any] | ProducerConfig, *, clock: Clock = SYSTEM_CLOCK,
                 selector: Selectable | None = None):
        self.config = cfg = ProducerConfig.coerce(config)
        self.client_id = cfg.client_id or f"producer-{next(_client_ids)}"
        self._clock = clock
        # read per record: bound once, not looked up twice each time
        self._monotonic_ms, self._now_ns = clock.monotonic_ms, clock.now_ns
        self._closed = False
        self._close_lock = threading.Lock()
        self._max_record_size = min(cfg.max_request_size, cfg.buffer_memory)
        # bytes key and value, no headers, len(key) + len(value) at most this: the size estimate
        # is within _max_record_size, so send skips computing it (see _PLAIN_RECORD_BOUND)
        self._unchecked_payload_limit = self._max_record_size - _PLAIN_RECORD_BOUND
        self._max_block_ms = cfg.max_block_ms  # read per record: one attribute, not two
        self._ignore_keys = cfg.partitioner_ignore_keys
        self._routes: tuple[ClusterSnapshot | None, dict[str, _TopicRoute]] = (None, {})
        self._batch_size = batch_size = BatchSize.from_config(cfg)  # every size: batch_size.py
        self._pool = BufferPool(cfg.buffer_memory, batch_size.records, clock=clock)
        # idempotence: the producer id and the transaction lifecycle (the manager, behind its
        # lock), and the sequences (the sender thread's); see docs/ARCHITECTURE.md, "Threads and
        # locks"
        transaction_manager = TransactionManager(
            cfg.transactional_id, cfg.transaction_timeout_ms) if cfg.enable_idempotence else None
        idempotence = None if transaction_manager is None else Idempotence(transaction_manager)
        # the manager when transactional: send() checks, per record, that a transaction is open,
        # and the accumulator notes each partition a transaction needs
        self._transactional = transaction_manager if cfg.transactional_id is not None else None
        self._partitioner = StickyPartitioner(
            batch_size.records, adaptive=cfg.partitioner_adaptive_partitioning_enable,
            availability_timeout_ms=cfg.partitioner_availability_timeout_ms)
        level_attribute = _LEVEL_ATTRIBUTE.get(cfg.compression_type)
        self._accumulator = RecordAccumulator(
            batch_size=batch_size.records, one_record_per_batch=batch_size.one_record_per_batch,
            compression_type=cfg.compression_type,
            compression_level=getattr(cfg, level_attribute) if level_attribute else None,
            linger_ms=cfg.linger_ms, retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms, delivery_timeout_ms=cfg.delivery_timeout_ms,
            buffer_pool=self._pool, clock=clock, transaction_manager=self._transactional,
            idempotence=idempotence, partitioner=self._partitioner)
        self._metrics = ProducerMetrics(clock=clock, client_id=self.client_id)
        stack = build_client(cfg, clock=clock, default_client_id=self.client_id, selector=selector,
                             observers=ClientObservers(throttle=self._metrics.on_throttle,
                                                       authentication=self._metrics.on_authentication))
        self._metadata, self._client = stack.metadata, stack.client
        self._metrics.register_gauges(buffer_pool=self._pool, metadata=self._metadata, client=self._client)
        self._sender = Sender(client=self._client, metadata=self._metadata, accumulator=self._accumulator,
                              clock=clock, settings=SenderSettings.from_config(cfg),
                              idempotence=idempotence, metrics=self._metrics)
        self._thread = threading.Thread(target=self._sender.run, daemon=True,
                                        name=f"kafka-producer-network-thread | {self.client_id}")
        self._thread.start()
        self._accumulator.io_thread_ident = self._thread.ident

    # --- sending --------------------------------------------------------------------------------

    def send(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
             timestamp_ms: int | None = None, headers: list[tuple[str, bytes | None]] | None = None,
             callback=None) -> RecordFuture:
        """Queue one record; returns its future (see the module docstring).

        Raises at once: ``TypeError`` for a key/value that is not bytes, str or None, for headers
        that are not a list or tuple of ``(str, bytes | None)`` pairs, or a topic that is not a
        str; ``InvalidTopicError`` for a name Kafka does not allow (:mod:`.topics`);
        ``RecordTooLargeError`` over ``max.request.size`` or ``buffer.memory``;
        ``ValueError`` for a negative ``timestamp_ms`` (Java's rule: non-negative or None, and
        None, not -1, means "stamp it with the send time"), ``TypeError`` for one not an int;
        ``InvalidPartitionError`` for a negative partition, or one that a metadata answer fetched
        after the send began does not show (a partition above the cached count is waited for:
        it may have just been added); ``MetadataTimeoutError`` / ``BufferExhaustedError`` when
        ``max.block.ms`` runs out (one budget for every wait); ``ProducerClosedError`` after
        ``close()``.
        """
        if self._closed:
            raise ProducerClosedError("cannot send after the producer is closed")
        if self._transactional is not None:
            self._transactional.check_can_send()
        # the common record (a bytes or no key, a bytes value, no headers, far below the limit)
        # takes three tests and a length sum; anything else is converted and estimated exactly
        if type(value) is not bytes or headers or (type(key) is not bytes and key is not None):
            key, value = self._checked_payload(topic, key, value, headers)
        elif (len(value) if key is None else len(key) + len(value)) > self._unchecked_payload_limit:
            self._check_estimate(topic, key, value, headers)
        if timestamp_ms is not None and (type(timestamp_ms) is not int or timestamp_ms < 0):
            timestamp_ms = _checked_timestamp(timestamp_ms)
        wall_ms = self._now_ns() // 1_000_000  # now_ms(), without a Python call on the real clock
        route = self._routes[1].get(topic)
        if (route is not None and route.used_wall_ms == wall_ms
                and route.snapshot is self._metadata.snapshot):
            # found marked used in this (wall-clock) millisecond, and the metadata has not
            # changed since: the monotonic time read then stands for now (under 1 ms behind), so
            # a record reads one clock, as in Java
            now_ms = route.used_ms
            remaining_ms = self._max_block_ms
        else:  # a new topic, or the first send to it in this millisecond
            route, now_ms, remaining_ms, wall_ms = self._route_for_send(topic, wall_ms)
        if timestamp_ms is None:
            timestamp_ms = wall_ms
        if partition is None:
            if key is None or self._ignore_keys:
                target = route.sticky  # the accumulator picks the partition (KIP-794)
            else:
                try:  # a bytearray or writable memoryview is not hashable: keyed() takes it
                    target = route.by_key.get(key) or route.keyed(self._accumulator, key)
                except (TypeError, ValueError):
                    target = route.keyed(self._accumulator, key)
        else:
            try:
                partition = check_partition(topic, partition, route.partition_count)
            except InvalidPartitionError as missing:
                if missing.partition < 0:
                    raise
                # above the cached count: maybe just added; one fresh answer decides, within
                # what is left of max.block.ms
                start_ms = self._monotonic_ms()
                route = self._route(self._await_partition(topic, missing.partition, remaining_ms),
                                    topic)
                partition = missing.partition
                now_ms = self._monotonic_ms()
                remaining_ms = max(0, remaining_ms - (now_ms - start_ms))
            target = route.queues[partition] or route.queue(self._accumulator, partition)
        future, batch_full, new_batch_created, _ = self._accumulator.append(
            target, timestamp_ms, key, value, headers, callback, remaining_ms, now_ms)
        if batch_full:
            self._sender.wakeup()
        elif new_batch_created:
            self._wake_for_new_batch(now_ms)
        return future

    def send_arrow(self, topic: str, data: Any, *, value: Any = "value", key: Any = DEFAULT,
                   headers: Any = DEFAULT, timestamp: Any = DEFAULT,
                   partition: Any = DEFAULT, errors_tolerance: str = "none",
                   keep_refused: bool = False, value_format: Any = None,
                   key_format: Any = None) -> ArrowSendResult:
        """Queue every row of ``data`` (a ``pyarrow.RecordBatch`` or ``Table``) for ``topic``,
        encoded into record batches straight from the Arrow columns (:mod:`.arrow.send`).

        Column arguments name the columns (``None``: not used; left at the default: the column
        named ``key``/``headers``/``timestamp``/``partition`` if there is one). Returns one
        :class:`~.arrow.input.ArrowSendResult` for all rows (``wait``, ``raise_for_errors``,
        counts, per-partition offset ranges), not a future per row.

        ``errors_tolerance`` (Kafka Connect's name): ``"none"`` (the default) raises at the first
        row that cannot become a record (below); ``"all"`` leaves such rows out and sends the
        others, the result's ``rejected`` naming each row left out and its error
        (:mod:`.arrow.check`). ``keep_refused``: the result keeps the records the broker refuses
        one by one (INVALID_RECORD, ...) rather than counting them as failed
        (:meth:`~.tally.DeliveryTally.take_refused`).

        ``value_format`` / ``key_format``: write that column in a format of
        :mod:`spark_kafka_sink.avro` (``AvroFormat.for_type(batch.schema.field("value").type,
        schema, schema_id=...)``), whatever its Arrow type; a row it cannot encode is a
        :class:`~spark_kafka_sink.errors.SerializationError` naming the row and field, raised or
        left out as ``errors_tolerance`` says.

        Raises at once, with nothing queued: ``TypeError``/``ValueError`` for a bad column (named;
        a negative timestamp, before 1970, names its row and value),
        ``TypeError``/``InvalidTopicError`` for a bad topic name (:mod:`.topics`),
        ``RecordTooLargeError`` and ``InvalidPartitionError`` naming the row,
        ``MetadataTimeoutError``, ``ProducerClosedError``. Queuing a batch waits for memory at
        most ``max.block.ms``; rows that could not be queued fail in the result with that error.
        """
        from .arrow.plan import plan_partitions  # pyarrow loads with the first Arrow send only
        from .arrow.send import encode_rows, prepare_rows, row_chunks, row_sizes, turns

        if self._closed:
            raise ProducerClosedError("cannot send after the producer is closed")
        if self._transactional is not None:
            self._transactional.check_can_send()
        if errors_tolerance not in ("none", "all"):
            raise ValueError(f"errors_tolerance must be 'none' or 'all', got {errors_tolerance!r}")
        tolerant = errors_tolerance == "all"
        check_topic(topic)
        self._raise_if_sender_died()
        columns = resolve_columns(data, value=value, key=key, headers=headers, timestamp=timestamp,
                                  partition=partition, check_header_keys=not tolerant,
                                  value_format=value_format, key_format=key_format)
        if columns.unencoded and not tolerant:
            raise columns.unencoded[0]
        result = ArrowSendResult(columns.rows, keep_refused=keep_refused)
        if columns.rows == 0:
            return result
        clock = self._clock
        timestamps = timestamps_ms(columns.timestamp, columns.rows, clock.now_ms(),
                                   timestamp if isinstance(timestamp, str) else "timestamp",
                                   negative_ok=tolerant)
        start_ms = clock.monotonic_ms()
        snapshot = self._metadata.await_topic(topic, self._max_block_ms, clock)
        if columns.partition is not None:
            snapshot = self._await_explicit_partitions(
                topic, columns.partition, snapshot,
                self._max_block_ms - (clock.monotonic_ms() - start_ms))
        cfg = self.config
        limit = "max.request.size" if cfg.max_request_size <= cfg.buffer_memory else "buffer.memory"
        if tolerant:
            import numpy as np

            from .arrow.check import find_bad_rows, merge_rejected

            rejected = find_bad_rows(topic, columns, timestamps,
                                     self._route(snapshot, topic).partition_count,
                                     self._max_record_size, limit)
            if columns.unencoded:
                rejected = merge_rejected(columns.unencoded, rejected)
            if rejected:
                keep = np.ones(columns.rows, dtype=bool)
                keep[[r.row for r in rejected]] = False
                columns, timestamps = columns.filter(keep), timestamps[keep]
                result = ArrowSendResult(columns.rows, keep_refused=keep_refused,
                                         rejected=tuple(rejected))
                if columns.rows == 0:
                    return result
        sizes = row_sizes(columns)
        batch_size = self._batch_size.arrow(topic, self._accumulator.compression_ratios)
        plan = plan_partitions(topic, self._route(snapshot, topic).view, rows=columns.rows,
                               keys=columns.key, explicit=columns.partition, sizes=sizes,
                               sticky=self._partitioner, ignore_keys=self._ignore_keys,
                               batch_size=batch_size)

        def prepare(start: int, stop: int) -> Any:
            return prepare_rows(topic, columns.slice(start, stop), timestamps[start:stop],
                                plan.slice(start, stop), self._max_record_size, limit, row_offset=start)

        chunks = row_chunks(sizes, max(_ARROW_CHUNK_BYTES, 4 * batch_size), _ARROW_CHUNK_ROWS)
        first = prepare(*chunks[0])
        for start, stop in chunks[1:]:  # every record is checked before anything is queued
            prepare(start, stop)
        for index, (start, stop) in enumerate(chunks):
            prepared = first if index == 0 else prepare(start, stop)
            encoded = encode_rows(prepared, batch_size=batch_size,
                                  compression_type=self._accumulator.compression_type,
                                  compression_level=self._accumulator.compression_level)
            error = self._queue_batches(turns(encoded), result)
            if error is not None:  # the rows of the later chunks were never queued either
                for group in plan.slice(stop, columns.rows).groups:
                    result.not_queued(error, TopicPartition(topic, group.partition), len(group.rows))
                break
        return result

    def _queue_batches(self, batches: list, result: ArrowSendResult) -> KafkaError | None:
        """Hand encoded batches to the accumulator in order; each may wait ``max.block.ms`` for
        memory. On a failure, the batches not queued fail in ``result`` with its error, which is
        returned."""
        for index, (tp, encoded) in enumerate(batches):
            try:
                self._accumulator.queue_encoded_batch(tp, encoded.builder, result, self._max_block_ms,
                                                      self._clock.monotonic_ms())
            except KafkaError as error:
                for left_tp, left in batches[index:]:
                    result.not_queued(error, left_tp, left.record_count)
                return error
            self._sender.wakeup()
        return None

    def _await_topic(self, topic: str, max_block_ms: int) -> ClusterSnapshot:
        """The topic's metadata, waiting up to ``max_block_ms`` (never on the I/O thread: see
        :meth:`_no_wait_on_io_thread`)."""
        with self._no_wait_on_io_thread(topic):
            return self._metadata.await_topic(topic, self._wait_budget(max_block_ms), self._clock)

    def _await_partition(self, topic: str, partition: int, max_block_ms: int) -> ClusterSnapshot:
        """The metadata once it shows ``partition`` (see ``Metadata.await_partition``: one fresh
        answer decides; ``InvalidPartitionError`` if it lacks it); never waiting on the I/O
        thread either."""
        with self._no_wait_on_io_thread(topic):
            return self._metadata.await_partition(topic, partition, self._wait_budget(max_block_ms),
                                                  self._clock)

    def _wait_budget(self, max_block_ms: int) -> int:
        """``max_block_ms``, or 0 on the I/O thread (a send from a callback): that thread is the
        one that would fetch the metadata waited for."""
        return 0 if threading.current_thread() is self._thread else max(0, max_block_ms)

    @contextlib.contextmanager
    def _no_wait_on_io_thread(self, topic: str):
        """A metadata timeout on the I/O thread says why the send did not wait."""
        try:
            yield
        except MetadataTimeoutError as exc:
            if threading.current_thread() is not self._thread:
                raise
            raise MetadataTimeoutError(
                f"{exc}. A send from a producer callback never waits for metadata, since the "
                "callback runs on the producer's I/O thread, the thread that fetches it. Send to "
                f"topic {topic} from another thread first") from None

    def _await_explicit_partitions(self, topic: str, column: Any, snapshot: ClusterSnapshot,
                                   max_block_ms: int) -> ClusterSnapshot:
        """``send_arrow``'s partition column names a partition above the cached count: wait for
        it as ``send`` does. When it does not exist, the planner then fails naming the row."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if not pa.types.is_integer(column.type):
            return snapshot                      # the planner refuses the column, naming its type
        highest = pc.max(column).as_py()
        if highest is None or highest < (snapshot.partition_count(topic) or 0):
            return snapshot
        try:
            return self._await_partition(topic, int(highest), max_block_ms)
        except InvalidPartitionError:
            return self._metadata.snapshot

    def _raise_if_sender_died(self) -> None:
        """After the I/O thread died (``Sender.death``), fail at once with an error naming why,
        instead of waiting for metadata no thread will fetch. Off the per-record path: the
        accumulator refuses appends with the same error."""
        death = self._sender.death
        if death is not None:
            raise ProducerClosedError(str(death)) from death.__cause__

    def _wake_for_new_batch(self, now_ms: int) -> None:
        """A new batch is sendable ``linger.ms`` from now: wake the sender only if it would sleep
        past that. At once when a flush is in progress or senders wait for memory (every batch
        is sendable then), as Java wakes it for every new batch."""
        accumulator = self._accumulator
        if accumulator.flush_in_progress or self._pool.queued > 0:
            self._sender.wakeup()
        else:
            self._sender.wakeup_by(now_ms + accumulator.linger_ms)

    def _checked_payload(self, topic: str, key, value, headers) -> tuple:
        """``send``'s checks of a record that is not a plain one (a bytes or no key, a bytes
        value, no headers): ``str`` made UTF-8, other types refused, headers a list or tuple,
        the size estimated; the key and value to send."""
        if key is not None and type(key) is not bytes:
            key = _as_bytes(key, "key")
        if value is not None and type(value) is not bytes:
            value = _as_bytes(value, "value")
        if headers and not isinstance(headers, (list, tuple)):  # a str, dict or generator
            raise TypeError(f"headers must be a list or tuple of (str, bytes | None) pairs, "
                            f"not {type(headers).__name__}")
        self._check_estimate(topic, key, value, headers)
        return key, value

    def _check_estimate(self, topic: str, key, value, headers) -> None:
        """The record's size estimate against the limits (:meth:`_check_size` names the one it
        exceeds)."""
        if RecordBatchBuilder.estimate_size_upper_bound(key, value, headers) > self._max_record_size:
            self._check_size(topic, key, value, headers)

    def _check_size(self, topic: str, key, value, headers) -> None:
        """Java's ``ensureValidRecordSize``: the record alone in a batch must fit both limits.
        ``send`` calls it only when the estimate exceeds the smaller one, to name which."""
        size = RecordBatchBuilder.estimate_size_upper_bound(key, value, headers)
        for limit, name in ((self.config.max_request_size, "max.request.size"),
                            (self.config.buffer_memory, "buffer.memory")):
            if size > limit:
                raise RecordTooLargeError(
                    f"a record for topic {topic!r} is {size} bytes when serialized, which is larger "
                    f"than {limit}, the value of the {name} configuration")

    def _route_for_send(self, topic: str, wall_ms: int) -> tuple[_TopicRoute, int, int, int]:
        """``send``'s route once per millisecond and topic: the topic marked used in the current
        metadata (``Metadata.used_snapshot``), or else waited for, at most ``max.block.ms``.
        ``wall_ms``: the wall clock read by the send. Returns the route, the monotonic time after
        any wait, what is left of ``max.block.ms`` and the wall clock after any wait."""
        max_block_ms = self._max_block_ms
        now_ms = self._monotonic_ms()
        snapshot = self._metadata.used_snapshot(topic, now_ms)
        if snapshot is not None:
            route = self._route(snapshot, topic)
            # the next sends in this millisecond skip this method (used_ms first: a reader that
            # sees the new used_wall_ms sees the used_ms read with it)
            route.used_ms = now_ms
            route.used_wall_ms = wall_ms
            return route, now_ms, max_block_ms, wall_ms
        check_topic(topic)  # a bad name never reaches the metadata (a known topic is valid)
        self._raise_if_sender_died()
        snapshot = self._await_topic(topic, max_block_ms)
        after_ms = self._monotonic_ms()
        return (self._route(snapshot, topic), after_ms, max(0, max_block_ms - (after_ms - now_ms)),
                self._now_ns() // 1_000_000)

    def _route(self, snapshot: ClusterSnapshot, topic: str) -> _TopicRoute:
        """What ``send`` needs of ``topic`` in ``snapshot``, cached per metadata snapshot object:
        one dict lookup per record instead of a count, a TopicPartition and two queue lookups.
        A new snapshot (any metadata update) starts a new cache, so counts are never stale."""
        cached_snapshot, routes = self._routes
        if cached_snapshot is not snapshot:
            routes = {}
            self._routes = (snapshot, routes)
        route = routes.get(topic)
        if route is None:
            route = routes[topic] = _TopicRoute(snapshot, topic, self._partitioner.topic_state(topic))
        return route

    # --- transactions ---------------------------------------------------------------------------

    def init_transactions(self, timeout: float | None = None) -> None:
        """Get the producer id of ``transactional.id`` from its coordinator: this fences every
        older producer with the same id and aborts (or completes) the transaction it left open.
        Call once, before the first ``begin_transaction()``. ``timeout`` in seconds (default
        ``max.block.ms``); on ``KafkaTimeoutError`` the step goes on, and calling again waits
        for it. ``ProducerFencedError`` and other fatal errors mean: close the producer."""
        self._transaction_step("init", lambda txn: txn.initialize_transactions(), timeout)

    def begin_transaction(self) -> None:
        """Open a transaction; no request is sent (the partitions are enrolled as their first
        batches go out). Sends are allowed only between this and the commit or abort."""
        txn = self._transaction_manager("begin_transaction")
        start_ns = self._clock.monotonic_ns()
        txn.begin_transaction(self._client.finalized_features.level("transaction.version"))
        self._metrics.on_transaction_step("begin", self._clock.monotonic_ns() - start_ns)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush, then commit: every record sent in the transaction becomes visible to
        ``read_committed`` consumers, atomically. If a record failed, the commit raises and the
        transaction can only be aborted (``abort_transaction()``). ``timeout`` in seconds
        (default ``max.block.ms``); on ``KafkaTimeoutError`` calling again waits for the same
        commit."""
        flushing = []

        def begin(txn: TransactionManager):
            result = txn.begin_commit()
            self._accumulator.begin_flush()      # every batch is sendable now
            flushing.append(True)
            return result

        try:
            self._transaction_step("commit", begin, timeout)
        finally:
            if flushing:                         # end this call's flush, not another thread's
                self._accumulator.await_flush_completion(0)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort: records not sent yet fail with ``TransactionAbortedError``, the rest are
        marked aborted, invisible to ``read_committed`` consumers. ``timeout`` as for commit."""
        self._transaction_step("abort", lambda txn: txn.begin_abort(), timeout)

    def resumable_transaction(self) -> ResumableTransaction:
        """The open transaction as a small picklable value, to be committed or aborted from any
        process by :func:`~.resumable.commit_resumable` / :func:`~.resumable.abort_resumable`
        (see :mod:`.transactions.resumable`). Call ``flush()`` first and check the records: every batch must
        have completed (``IllegalStateError`` otherwise), and a failed one has made the
        transaction abortable (its error is raised). Closing the producer afterwards leaves the
        transaction open on the broker, for the holder of the value to complete."""
        txn = self._transaction_manager("resumable_transaction")
        if self._accumulator.has_incomplete():
            raise IllegalStateError("resumable_transaction() while records are still in flight: "
                                    "call flush() first")
        pid_epoch, partitions, version = txn.open_transaction()
        return ResumableTransaction(txn.transactional_id, pid_epoch.producer_id, pid_epoch.epoch,
                                    tuple(sorted(partitions)), version)

    def _transaction_manager(self, operation: str) -> TransactionManager:
        if self._transactional is None:
            raise IllegalStateError(f"{operation}() needs transactional.id in the producer's "
                                    "configuration")
        if self._closed:
            raise ProducerClosedError(f"cannot call {operation}() after the producer is closed")
        if threading.current_thread() is self._thread:
            raise IllegalStateError(
                f"{operation}() was called from a producer callback: callbacks run on the "
                "producer's I/O thread, which would wait for itself. Call it from another thread")
        return self._transactional

    def _transaction_step(self, step: str, begin, timeout: float | None) -> None:
        """Start a transactional step on the caller's thread, wake the I/O thread to carry it
        out, wait for it, and record its time (``txn-<step>-time-ns-total``)."""
        txn = self._transaction_manager(f"{step}_transaction" if step != "init"
                                        else "init_transactions")
        start_ns = self._clock.monotonic_ns()
        result = begin(txn)
        self._sender.wakeup()
        self._raise_if_sender_died()
        result.wait(self.config.max_block_ms if timeout is None else int(timeout * 1000))
        self._metrics.on_transaction_step(step, self._clock.monotonic_ns() - start_ns)

    # --- flush, close, introspection ------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Make every queued record sendable now and wait until all have completed (callbacks
        included). ``timeout`` in seconds; ``KafkaTimeoutError`` if it runs out.

        Not from a send callback: callbacks run on the producer's I/O thread, which would wait
        for itself, so there ``IllegalStateError`` is raised at once (as Kafka 4.1's Java
        producer does) and the producer goes on working."""
        if threading.current_thread() is self._thread:
            raise IllegalStateError(
                "flush() was called from a producer callback: callbacks run on the producer's I/O "
                "thread, which would wait for itself forever. Flush from another thread")
        self._accumulator.begin_flush()
        self._sender.wakeup()
        timeout_ms = None if timeout is None else int(timeout * 1000)
        if not self._accumulator.await_flush_completion(timeout_ms):
            raise KafkaTimeoutError(f"flush did not complete within {timeout} s: "
                                    f"{self._accumulator.pending()} still without an outcome")

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is pending, then stop the sender thread and close every connection.

        ``timeout`` (seconds) bounds the graceful part; records still pending then fail with
        ``ProducerClosedError``. ``close(0)`` fails them at once. ``None`` waits until every
        pending record has completed, which ``delivery.timeout.ms`` bounds. Safe to call twice.

        From a send callback (the I/O thread) it acts as ``close(0)``, as Java's does: the thread
        cannot wait for itself; it fails what is pending and closes every connection once the
        callback returns. Every wait here is bounded: a thread that does not stop after a forced
        close (a callback that never returns) is logged and left behind as a daemon thread.
        """
        with self._close_lock:
            if self._closed and not self._thread.is_alive():
                return
            self._closed = True
        if self._thread is threading.current_thread():
            if timeout != 0:
                log.warning("producer %s: close(%s) called from a producer callback acts as "
                            "close(0): the I/O thread cannot wait for itself", self.client_id, timeout)
            self._sender.force_close()
            return
        if timeout == 0:
            self._sender.force_close()
        else:
            self._sender.initiate_close()
            self._thread.join(self._graceful_close_s if timeout is None else timeout)
            if self._thread.is_alive():
                if self._accumulator.has_incomplete():
                    log.warning("producer %s: pending records not delivered within %s s; aborting "
                                "them", self.client_id, timeout)
                self._sender.force_close()
        self._thread.join(_FORCED_CLOSE_GRACE_S)
        if self._thread.is_alive():
            log.error("producer %s: the I/O thread did not stop within %s s of a forced close (is a "
                      "send callback blocked?); leaving it behind", self.client_id,
                      _FORCED_CLOSE_GRACE_S)
        self._metadata.close()

    @property
    def _graceful_close_s(self) -> float:
        """How long ``close()`` waits for pending records: every one has completed by
        ``delivery.timeout.ms`` (plus a request's answer), so this is only reached by a sender
        that stopped making progress."""
        cfg = self.config
        return (cfg.delivery_timeout_ms + cfg.request_timeout_ms) / 1000 + _FORCED_CLOSE_GRACE_S

    def partitions_for(self, topic: str) -> tuple[PartitionInfo, ...]:
        """The topic's partitions, waiting up to ``max.block.ms`` for its metadata."""
        snapshot = self._metadata.await_topic(topic, self.config.max_block_ms, self._clock)
        return snapshot.partitions_for(topic)

    def metrics(self) -> dict[str, float]:
        """Current metric values by Java name (``record-send-total``, ``topic.<t>.byte-total``...)."""
        return self._metrics.snapshot().as_dict()

    def metrics_snapshot(self) -> MetricsSnapshot:
        """The metrics as a mergeable value (the Spark layer sums them across tasks)."""
        return self._metrics.snapshot()

    def __enter__(self) -> "KafkaProducer":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"KafkaProducer(client_id={self.client_id!r}, {state}, config={self.config!r})"
