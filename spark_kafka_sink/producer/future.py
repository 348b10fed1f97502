"""Completion of a batch and the light per-record futures derived from it.

A ``concurrent.futures.Future`` per record is expensive: it allocates a ``Condition`` (a lock and
a waiter list) at creation, ~0.9 µs on CPython 3.11, and ``set_result`` takes that lock and
notifies for every record on the sender thread. As Java does, a batch instead owns ONE
:class:`BatchCompletion` (Java's ``ProduceRequestResult``) and every record gets a
:class:`RecordFuture` (Java's ``FutureRecordMetadata``): five slots, ~0.2 µs, no lock. Its
:class:`~spark_kafka_sink.structs.RecordMetadata` is derived when asked for: offset =
``base_offset + index`` (-1 when the broker gave none), timestamp = the log-append time when the
topic uses it, else the record's create time.

``RecordFuture`` offers the ``concurrent.futures.Future`` methods callers use: ``result(timeout)``,
``exception(timeout)``, ``done()``, ``add_done_callback(fn)``, ``cancel()`` (always ``False``: a
record handed to the producer cannot be recalled), ``cancelled()``, ``running()``. It is not a
``Future`` subclass, so ``concurrent.futures.wait``/``as_completed`` (which use ``Future``
internals) need :meth:`RecordFuture.to_concurrent_future`.

Order of completion, once per batch (``BatchCompletion.finish``):

1. the outcome is stored and ``done()`` becomes true; ``result()`` callers wake up;
   then each :class:`~spark_kafka_sink.producer.tally.DeliveryTally` the batch's records were
   sent with learns the batch's outcome once, with its record count;
2. per record, in append order: the send callback ``callback(metadata, exception)`` (exactly one
   of them is ``None``), then the record's ``add_done_callback`` functions. A callback that raises
   is logged and the others still run;
3. the batch is *settled*: ``wait_settled`` (flush) returns only now, so a flush returns after
   every callback of the flushed records has run.

Thread safety: appends and completion may race with ``result``/``add_done_callback`` from any
thread; one small lock per batch orders them, and waiters get a condition lazily (most batches
are never waited on individually).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from typing import Callable, Optional

from ..structs import RecordMetadata, TopicPartition

log = logging.getLogger(__name__)

SendCallback = Callable[[Optional[RecordMetadata], Optional[BaseException]], None]
"""``callback(metadata, exception)``: exactly one argument is ``None``, as Java's ``Callback``."""

NO_TIMESTAMP = -1
INVALID_OFFSET = -1


class BatchCompletion:
    """The outcome of one batch, shared by its records' futures (Java's ``ProduceRequestResult``)."""

    __slots__ = ("topic_partition", "base_offset", "log_append_time_ms", "error",
                 "_final", "_settled", "_lock", "_condition", "_watchers", "_tallies")

    def __init__(self, topic_partition: TopicPartition):
        self.topic_partition = topic_partition
        self.base_offset = INVALID_OFFSET
        self.log_append_time_ms = NO_TIMESTAMP
        self.error: BaseException | None = None
        self._final = False
        self._settled = False
        self._lock = threading.Lock()
        self._condition: threading.Condition | None = None
        self._watchers: list[RecordFuture] = []  # futures with callbacks, in append order
        self._tallies: dict | None = None  # DeliveryTally -> records counted against it

    @property
    def done(self) -> bool:
        """Whether the outcome is known (callbacks may still be running)."""
        return self._final

    @property
    def settled(self) -> bool:
        """Whether the outcome is known and every callback has run."""
        return self._settled

    def watch(self, future: RecordFuture) -> None:
        """Register a future that has callbacks to run; called by the batch before completion."""
        self._watchers.append(future)

    def count_for(self, tally, records: int = 1) -> None:
        """Count ``records`` appended records against ``tally`` (a ``DeliveryTally``), told at
        ``finish``."""
        tallies = self._tallies
        if tallies is None:
            self._tallies = {tally: records}
        else:
            tallies[tally] = tallies.get(tally, 0) + records

    def finish(self, base_offset: int, log_append_time_ms: int, error: BaseException | None) -> bool:
        """Store the outcome, tell the tallies, run the callbacks, settle. ``False`` if already
        finished."""
        with self._lock:
            if self._final:
                return False
            self.base_offset = base_offset
            self.log_append_time_ms = log_append_time_ms
            self.error = error
            self._final = True
            self._notify_locked()
        for tally, count in (self._tallies or {}).items():
            try:
                tally.batch_completed(self.topic_partition, count, error, base_offset)
            except Exception:  # like a callback: must not stop the others, nor the sender
                log.exception("Error counting a batch of %s in a delivery tally", self.topic_partition)
        for future in self._watchers:  # frozen now: nothing is added after _final
            future._run_callbacks()
        with self._lock:
            self._settled = True
            self._notify_locked()
        return True

    def _notify_locked(self) -> None:
        if self._condition is not None:
            self._condition.notify_all()

    def _wait(self, predicate: Callable[[], bool], timeout: float | None) -> bool:
        if predicate():
            return True
        with self._lock:
            if self._condition is None:
                self._condition = threading.Condition(self._lock)
            return self._condition.wait_for(predicate, timeout)

    def wait_done(self, timeout: float | None = None) -> bool:
        """Block until the outcome is known; ``False`` on timeout (seconds, ``None``: forever)."""
        return self._wait(lambda: self._final, timeout)

    def wait_settled(self, timeout: float | None = None) -> bool:
        """Block until every callback has run; ``False`` on timeout."""
        return self._wait(lambda: self._settled, timeout)

    def add_watcher_if_pending(self, future: RecordFuture, fn: Callable) -> bool:
        """Attach ``fn`` to ``future`` unless the outcome is known; whether it was attached."""
        with self._lock:
            if self._final:
                return False
            if future._done_callbacks is None:
                future._done_callbacks = [fn]
                if future._callback is None:
                    self._watchers.append(future)
            else:
                future._done_callbacks.append(fn)
            return True


class RecordFuture:
    """The future of one record's send: resolves to its ``RecordMetadata``; see the module doc."""

    __slots__ = ("_completion", "_index", "_timestamp_ms", "_key_size", "_value_size",
                 "_callback", "_done_callbacks")

    def __init__(self, completion: BatchCompletion, index: int, timestamp_ms: int,
                 key_size: int, value_size: int, callback: SendCallback | None = None):
        self._completion = completion
        self._index = index
        self._timestamp_ms = timestamp_ms
        self._key_size = key_size
        self._value_size = value_size
        self._callback = callback
        self._done_callbacks: list[Callable] | None = None

    # --- concurrent.futures.Future API ----------------------------------------------------------

    def done(self) -> bool:
        return self._completion._final

    def cancel(self) -> bool:
        """Always ``False``: a record handed to the producer cannot be recalled."""
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return not self._completion._final

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata; raises its error, or ``TimeoutError`` after ``timeout`` s."""
        self._wait(timeout)
        error = self._completion.error
        if error is not None:
            raise error
        return self.metadata()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The record's error, ``None`` on success; ``TimeoutError`` after ``timeout`` s."""
        self._wait(timeout)
        return self._completion.error

    def add_done_callback(self, fn: Callable[[RecordFuture], object]) -> None:
        """Call ``fn(self)`` when done (at once, on this thread, if already done)."""
        if not self._completion.add_watcher_if_pending(self, fn):
            self._call(fn, self)

    def to_concurrent_future(self) -> concurrent.futures.Future:
        """A real ``concurrent.futures.Future`` mirroring this one (for ``wait``/``as_completed``)."""
        mirror: concurrent.futures.Future = concurrent.futures.Future()
        mirror.set_running_or_notify_cancel()

        def copy(future: RecordFuture) -> None:
            error = future._completion.error
            if error is not None:
                mirror.set_exception(error)
            else:
                mirror.set_result(future.metadata())

        self.add_done_callback(copy)
        return mirror

    # --- metadata -------------------------------------------------------------------------------

    def metadata(self) -> RecordMetadata:
        """The record's metadata from the batch outcome (call once done and successful)."""
        completion = self._completion
        tp = completion.topic_partition
        base = completion.base_offset
        log_append = completion.log_append_time_ms
        return RecordMetadata(
            tp.topic, tp.partition,
            INVALID_OFFSET if base == INVALID_OFFSET else base + self._index,
            log_append if log_append != NO_TIMESTAMP else self._timestamp_ms,
            self._key_size, self._value_size)

    @property
    def topic_partition(self) -> TopicPartition:
        return self._completion.topic_partition

    # --- internals ------------------------------------------------------------------------------

    def _wait(self, timeout: float | None) -> None:
        if not self._completion._final and not self._completion.wait_done(timeout):
            raise concurrent.futures.TimeoutError(
                f"record to {self._completion.topic_partition} not acknowledged within {timeout} s")

    def _run_callbacks(self) -> None:
        """Run the send callback, then the done callbacks; each failure is logged only."""
        callback = self._callback
        if callback is not None:
            error = self._completion.error
            if error is None:
                self._call(callback, self.metadata(), None)
            else:
                self._call(callback, None, error)
        for fn in self._done_callbacks or ():
            self._call(fn, self)

    def _call(self, fn: Callable, *args) -> None:
        try:
            fn(*args)
        except Exception:  # a user callback must not stop the others, nor the sender
            log.exception("Error executing user-provided callback on message for topic-partition %s",
                          self._completion.topic_partition)

    def __repr__(self) -> str:
        state = "pending" if not self.done() else (
            "failed" if self._completion.error is not None else "done")
        return f"RecordFuture({self._completion.topic_partition}, index={self._index}, {state})"
