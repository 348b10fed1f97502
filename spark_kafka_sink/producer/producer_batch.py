"""ProducerBatch: one partition's records on their way to the broker (Java's ``ProducerBatch``).

Life of a batch::

    open --try_append()*--> open/full --close()--> closed (drained: bytes built, maybe in flight)
         --reenqueued()--> closed, in retry (back in its deque, sent again after a backoff)
         --complete()/fail()--> final (every record future resolved, every callback run once)
         --split()--> final SPLIT (refused as too large: the records moved to smaller batches)

- ``try_append`` returns ``None`` once the batch is full or closed; the accumulator then starts
  a new batch.
- ``close`` ends appends and builds the bytes; ``records()`` returns them. Producer state
  (producer id, epoch, base sequence) may still change afterwards (a retry after an epoch bump);
  the header and CRC are then rebuilt, the records are not.
- ``split`` (the broker refused the batch as MESSAGE_TOO_LARGE) re-reads the built batch and
  re-encodes its records, timestamps, keys, values and headers unchanged, into smaller batches
  that keep this batch's creation time and, with idempotence, its producer id, epoch and
  sequence range (consecutive, from this batch's base sequence). The records' futures, callbacks
  and tally counts move with them (:meth:`.future.BatchCompletion.split_into`).
- The final state is set once. A second completion is ignored with a log line, as Java does for
  FAILED -> SUCCEEDED (a batch expired while in flight and then succeeded); it never raises into
  the sender.

Times (``now_ms``, ``created_ms`` ...) are monotonic milliseconds (see ``spark_kafka_sink.clock``).

Thread safety: a batch is guarded by its deque's lock while it is in the accumulator; once drained
it belongs to the sender thread. Completion is thread safe (:class:`BatchCompletion`).
"""

from __future__ import annotations

import enum
import logging

from ..errors import KafkaTimeoutError, is_record_error
from ..record import RecordBatchBuilder, read_batch
from ..record.layout import NO_SEQUENCE
from ..record.sequence import increment_sequence
from ..structs import TopicPartition
from .buffer_pool import MemoryLease
from .future import (INVALID_OFFSET, NO_TIMESTAMP, BatchCompletion, RecordFuture, SendCallback,
                     SplitPart)
from .tally import DeliveryTally

log = logging.getLogger(__name__)



class FinalState(enum.Enum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SPLIT = "split"  # its records went on in smaller batches, which carry their outcomes


class ProducerBatch:
    """Records for one partition, their futures and their retry bookkeeping."""

    __slots__ = ("topic_partition", "created_ms", "buffer", "completion", "attempts",
                 "last_attempt_ms", "drained_ms", "retry_backoff_ms", "in_flight", "link", "builder",
                 "_in_retry", "appends_closed", "_closed", "_size_in_bytes", "_sequence_reset",
                 "_final_state", "_built")

    def __init__(self, tp: TopicPartition, builder: RecordBatchBuilder, created_ms: int, *,
                 buffer: MemoryLease | None = None):
        """``buffer``: the pool lease that pays for this batch (returned by the accumulator)."""
        self.topic_partition = tp
        self.created_ms = created_ms
        self.buffer = buffer
        self.completion = BatchCompletion(tp)
        self.attempts = 0
        self.last_attempt_ms = created_ms
        self.drained_ms = created_ms
        self.retry_backoff_ms = 0  # the backoff before the current retry (set by the accumulator)
        self.in_flight = False  # set by the sender while a request carries this batch
        self.link = -1  # the connection (NetworkClient.connection_id) it was last drained for
        # the records' encoder; read-only for others (the accumulator reads what the last append
        # left in it: last_append_size, last_append_full)
        self.builder = builder
        self._in_retry = False
        self.appends_closed = False  # no more appends (read-only for others: see is_full)
        self._closed = False
        self._size_in_bytes = 0
        self._sequence_reset = False
        self._final_state: FinalState | None = None
        self._built: bytes | None = None  # built by close(), handed to the next records()

    # --- appending ------------------------------------------------------------------------------

    def try_append(self, timestamp_ms: int, key, value, headers,
                   callback: SendCallback | None) -> RecordFuture | None:
        """Append a record; its future, or ``None`` when the batch is full or closed. What the
        append added and whether it filled the batch: :attr:`last_append_size`,
        :attr:`last_append_full`."""
        if self.appends_closed:
            return None
        # append_record, not append: no AppendResult per record (see RecordBatchBuilder)
        offset_delta = self.builder.append_record(timestamp_ms, key, value, headers)
        if offset_delta is None:
            return None
        if callback is None:  # the common case, with one test
            return RecordFuture((self.completion, offset_delta, timestamp_ms,
                                 -1 if key is None else len(key),
                                 -1 if value is None else len(value), None))
        if isinstance(callback, DeliveryTally):
            self.completion.count_for(callback, offset_delta)  # per batch: no callback on the future
            callback = None
        future = RecordFuture((self.completion, offset_delta, timestamp_ms,
                               -1 if key is None else len(key),
                               -1 if value is None else len(value), callback))
        if callback is not None:
            self.completion._watchers.append(future)  # BatchCompletion.watch, inlined (hot path)
        return future

    @property
    def last_append_size(self) -> int:
        """Bytes the last successful :meth:`try_append` added."""
        return self.builder.last_append_size

    @property
    def last_append_full(self) -> bool:
        """Whether the last successful :meth:`try_append` left no room (``is_full`` as of then)."""
        return self.builder.last_append_full

    @property
    def record_count(self) -> int:
        return self.builder.record_count

    @property
    def estimated_size_in_bytes(self) -> int:
        """Bytes of the batch before compression (header included)."""
        return self.builder.estimated_size

    @property
    def is_full(self) -> bool:
        """No room for another record, or closed for appends (Java's ``isFull``)."""
        return self.appends_closed or self.builder.is_full

    @property
    def initial_capacity(self) -> int:
        """The bytes leased from the pool for this batch."""
        return 0 if self.buffer is None else self.buffer.size

    # --- closing and bytes ----------------------------------------------------------------------

    def close(self) -> None:
        """No more appends; build the bytes (once). Also ends a sequence reset, as in Java: a
        batch whose sequence was rewritten is "reset" only until it is drained again.

        The bytes built here are kept for the next :meth:`records` call (the request that
        follows the drain), so a batch is not built twice in a row."""
        self.appends_closed = True
        if not self._closed:
            self._closed = True
            built = self.builder.build()
            self._size_in_bytes = len(built)
            self._built = built
        self._sequence_reset = False

    def close_for_appends(self) -> None:
        """No more appends (a record did not fit); the bytes are built later, at drain."""
        self.appends_closed = True

    @property
    def is_closed(self) -> bool:
        """Whether the batch was closed (drained at least once): its bytes are built."""
        return self._closed

    def records(self) -> bytes:
        """The whole record batch as sent (header with the current producer state + records).

        The first call after :meth:`close` returns the bytes ``close`` built (unless the
        producer state changed since) and lets go of them; later calls rebuild. So the batch
        holds its bytes twice only between its drain and its request, and a retry after an epoch
        bump still carries its new header. Rebuilding is a header, a CRC and one copy: the
        builder keeps the (compressed) records."""
        if not self._closed:
            raise RuntimeError(f"{self!r} must be closed before its records are sent")
        built, self._built = self._built, None
        return built if built is not None else self.builder.build()

    @property
    def size_in_bytes(self) -> int:
        """Bytes of the built batch (compressed), known once closed; the estimate before that."""
        return self._size_in_bytes or self.builder.estimated_size

    # --- producer state (idempotence) -----------------------------------------------------------

    def set_producer_state(self, producer_id: int, epoch: int, base_sequence: int,
                           is_transactional: bool) -> None:
        """Stamp the producer id, epoch and base sequence (at drain, or on a sequence rewrite)."""
        self._built = None
        self.builder.set_producer_state(producer_id, epoch, base_sequence, is_transactional)

    def reset_producer_state(self, producer_id: int, epoch: int, base_sequence: int) -> None:
        """Rewrite the producer state of a batch already sent (after an epoch bump)."""
        log.info("Resetting sequence number of batch with current sequence %d for partition %s to %d",
                 self.base_sequence, self.topic_partition, base_sequence)
        self._sequence_reset = True
        self._built = None
        self.builder.set_producer_state(producer_id, epoch, base_sequence, self.is_transactional)

    @property
    def producer_id(self) -> int:
        return self.builder.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.builder.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.builder.base_sequence

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, wrapping past int32 max as the broker does."""
        return increment_sequence(self.base_sequence, self.record_count - 1)

    @property
    def has_sequence(self) -> bool:
        return self.builder.base_sequence != NO_SEQUENCE

    @property
    def is_transactional(self) -> bool:
        return self.builder.is_transactional

    @property
    def sequence_has_been_reset(self) -> bool:
        """Whether the sequence was rewritten since the batch was last drained."""
        return self._sequence_reset

    # --- retries and timing ---------------------------------------------------------------------

    @property
    def in_retry(self) -> bool:
        """Whether the batch was sent and came back for another attempt."""
        return self._in_retry

    def reenqueued(self, now_ms: int, backoff_ms: int = 0) -> None:
        """Record a retry: one more attempt, backing off ``backoff_ms`` from ``now_ms``."""
        self.attempts += 1
        # Java takes the later of the last append and now: with a monotonic now_ms, now (a
        # drained batch takes no appends, and it was drained after its last one)
        self.last_attempt_ms = now_ms
        self.retry_backoff_ms = backoff_ms
        self._in_retry = True

    def drained(self, now_ms: int, link: int = -1) -> None:
        """Taken from the deque at ``now_ms`` to go out on connection ``link``."""
        self.drained_ms = max(self.drained_ms, now_ms)
        self.link = link

    def waited_time_ms(self, now_ms: int) -> int:
        """Time since creation, or since the last retry was enqueued."""
        return max(0, now_ms - self.last_attempt_ms)

    def is_backing_off(self, now_ms: int) -> bool:
        """Whether a retried batch is still inside its retry backoff."""
        return self.attempts > 0 and now_ms - self.last_attempt_ms < self.retry_backoff_ms

    @property
    def queue_time_ms(self) -> int:
        """Time from creation to the (last) drain (``record-queue-time``)."""
        return self.drained_ms - self.created_ms

    def has_reached_delivery_timeout(self, delivery_timeout_ms: int, now_ms: int) -> bool:
        return delivery_timeout_ms <= now_ms - self.created_ms

    def timeout_error(self, now_ms: int) -> KafkaTimeoutError:
        """The error an expired batch fails with (Java's wording)."""
        return KafkaTimeoutError(
            f"Expiring {self.record_count} record(s) for {self.topic_partition}: "
            f"{now_ms - self.created_ms} ms has passed since batch creation")

    # --- split ----------------------------------------------------------------------------------

    def split(self, batch_size: int, *, compression_type, compression_level: int | None,
              alone: frozenset[int] = frozenset()) -> list["ProducerBatch"]:
        """Move the records to new batches of at most ``batch_size`` bytes each before
        compression (a record larger than that gets a batch of its own, and so does each record
        whose index is in ``alone``), in order; the new batches, closed for appends. This batch
        becomes final (``SPLIT``); its lease stays for the caller to share out. See the module
        docstring. Sender thread; the batch must have been built (drained) and not be final."""
        if self._final_state is not None or not self._closed:
            raise RuntimeError(f"{self!r} can be split only once built and before its outcome")
        decoded = read_batch(self.builder.build())
        builders: list[RecordBatchBuilder] = []
        firsts: list[int] = []
        builder = None
        for index, record in enumerate(decoded.records):
            if builder is None or index in alone or index - 1 in alone or builder.append_record(
                    record.timestamp_ms, record.key, record.value, record.headers) is None:
                builder = RecordBatchBuilder(compression_type=compression_type,
                                             compression_level=compression_level,
                                             batch_size=batch_size)
                builder.append_record(record.timestamp_ms, record.key, record.value, record.headers)
                builders.append(builder)
                firsts.append(index)
        batches = [ProducerBatch(self.topic_partition, b, self.created_ms) for b in builders]
        sequence = self.base_sequence
        for batch in batches:
            batch.close_for_appends()
            if self.has_sequence:
                batch.set_producer_state(self.producer_id, self.producer_epoch, sequence,
                                         self.is_transactional)
                sequence = increment_sequence(sequence, batch.record_count)
        with self.completion._lock:
            if self._final_state is not None:
                raise RuntimeError(f"{self!r} completed while it was being split")
            self._final_state = FinalState.SPLIT
        self.completion.split_into([SplitPart(first, batch.completion)
                                    for first, batch in zip(firsts, batches)])
        return batches

    # --- completion -----------------------------------------------------------------------------

    def complete(self, base_offset: int, log_append_time_ms: int = NO_TIMESTAMP) -> bool:
        """Succeed: resolve every record future and run every callback once. ``False`` if the
        batch was already final (then nothing happens but a log line)."""
        return self._finish(FinalState.SUCCEEDED, base_offset, log_append_time_ms, None)

    def fail(self, exception: BaseException) -> bool:
        """Fail every record with ``exception``; ``False`` if the batch was already final."""
        return self._finish(FinalState.FAILED, INVALID_OFFSET, NO_TIMESTAMP, exception)

    def _finish(self, state: FinalState, base_offset: int, log_append_time_ms: int,
                error: BaseException | None) -> bool:
        with self.completion._lock:
            previous = self._final_state
            if previous is None:
                self._final_state = state
        self._built = None
        if previous is not None:
            unexpected = FinalState.SUCCEEDED in (previous, state)
            level = logging.WARNING if unexpected else logging.DEBUG
            log.log(level, "Ignored completion %s of batch %s (base offset %d): already %s",
                    state.value, self, base_offset, previous.value)
            return False
        return self.completion.finish(base_offset, log_append_time_ms, error,
                                      self._decoded_records if self.refused_alone(error) else None)

    def refused_alone(self, error: BaseException | None) -> bool:
        """Whether failing with ``error`` is a refusal of the batch's record on its own: a
        per-record error (``errors.is_record_error``) on a batch of ONE record. The sender puts
        every record a broker names in ``record_errors`` in a batch of its own before failing
        it, so a batch of several records failing with such an error was refused as a whole
        (CORRUPT_MESSAGE from corruption on the wire, retried until it ran out): that says
        nothing about its records, and stays a failure."""
        return self.record_count == 1 and is_record_error(error)

    def _decoded_records(self) -> list:
        """The batch's records decoded (for a tally keeping records refused one by one)."""
        return list(read_batch(self.builder.build()).records)

    def refusal_kept(self, error: BaseException) -> bool:
        """Whether failing with ``error`` refuses the record on its own (:meth:`refused_alone`)
        and it was sent with a tally that keeps refused records: the refusal is then the
        sender's to handle (e.g. a dead-letter topic), not a lost record."""
        return self.refused_alone(error) and self.completion.kept_by_tallies() == self.record_count

    @property
    def final_state(self) -> FinalState | None:
        return self._final_state

    @property
    def is_done(self) -> bool:
        return self._final_state is not None

    def __repr__(self) -> str:
        return (f"ProducerBatch(topic_partition={self.topic_partition}, "
                f"record_count={self.record_count})")
