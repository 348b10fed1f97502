"""Completion of a batch and the light per-record futures derived from it.

A ``concurrent.futures.Future`` per record is expensive: it allocates a ``Condition`` (a lock and
a waiter list) at creation, and ``set_result`` takes that lock and notifies for every record on
the sender thread. As Java does, a batch instead owns ONE :class:`BatchCompletion` (Java's
``ProduceRequestResult``) and every record gets a :class:`RecordFuture` (Java's
``FutureRecordMetadata``): an immutable tuple of six fields, built in one C call, no lock, a
fraction of a ``Future``'s cost (bench/README.md, "Figures behind design choices"). Its
:class:`~spark_kafka_sink.structs.RecordMetadata` is derived when asked for: offset =
``base_offset + index`` (-1 when the broker gave none), timestamp = the log-append time when the
topic uses it, else the record's create time.

``RecordFuture`` offers the ``concurrent.futures.Future`` methods callers use: ``result(timeout)``,
``exception(timeout)``, ``done()``, ``add_done_callback(fn)``, ``cancel()`` (always ``False``: a
record handed to the producer cannot be recalled), ``cancelled()``, ``running()``. It is not a
``Future`` subclass, so ``concurrent.futures.wait``/``as_completed`` (which use ``Future``
internals) need :meth:`RecordFuture.to_concurrent_future`.

Order of completion, once per batch (``BatchCompletion.finish``):

1. the outcome is stored, ``done()`` becomes true and ``result()`` callers wake up; then each
   :class:`~.tally.DeliveryTally` of the batch's records learns the outcome once, with its count;
2. per record, in append order: the send callback ``callback(metadata, exception)`` (exactly one
   of them is ``None``), then the record's ``add_done_callback`` functions. A callback that raises
   (``BaseException`` included) is logged and the others still run;
3. the batch is *settled*: ``wait_settled`` (flush) returns only now, so a flush returns after
   every callback of the flushed records has run.

Split (the broker refused the batch as MESSAGE_TOO_LARGE; :meth:`BatchCompletion.split_into`):
the batch's records move to smaller batches, each with a completion of its own, and the old
completion never finishes. Futures keep pointing at it and follow the split to their record's new
completion and index (Java chains ``FutureRecordMetadata`` the same way), so ``result()``,
``done()``, callbacks and offsets come from the batch that finally carried the record. The tally
counts and callback futures move with their records, so each is still told exactly once. The old
completion is settled when all its parts are (Java's ``addDependent``), so a flush that started
before the split still waits for every record.

Thread safety: appends and completion may race with ``result``/``add_done_callback`` from any
thread; one small lock per batch orders them, and waiters get a condition lazily (most batches
are never waited on individually).
"""

from __future__ import annotations

import bisect
import concurrent.futures
import enum
import logging
import threading
import time
from dataclasses import dataclass
from operator import itemgetter
from typing import Callable, Optional, Sequence

from ..errors import is_record_error
from ..record.layout import INVALID_OFFSET
from ..structs import RecordMetadata, TopicPartition

log = logging.getLogger(__name__)

SendCallback = Callable[[Optional[RecordMetadata], Optional[BaseException]], None]
"""``callback(metadata, exception)``: exactly one argument is ``None``, as Java's ``Callback``."""

NO_TIMESTAMP = -1


class Watch(enum.Enum):
    """What :meth:`BatchCompletion.add_watcher_if_pending` did."""

    ATTACHED = "attached"  # the function runs when the batch completes
    DONE = "done"          # the outcome is known: the caller runs the function itself
    MOVED = "moved"        # the batch was split: look the record's completion up again


@dataclass(frozen=True)
class SplitPart:
    """One batch a split batch's records moved to: records ``first`` onwards (up to the next
    part's ``first``) are that batch's records ``0..``, in order."""

    first: int
    completion: "BatchCompletion"


class BatchCompletion:
    """The outcome of one batch, shared by its records' futures (Java's ``ProduceRequestResult``)."""

    __slots__ = ("topic_partition", "base_offset", "log_append_time_ms", "error",
                 "_final", "_settled", "_lock", "_condition", "_watchers", "_tallies",
                 "_split", "_split_firsts", "_parent", "_parts_pending", "_done_callbacks")

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
        # [tally, first index, end index] runs of records counted against a DeliveryTally, in
        # append order (runs, not a per-tally count, so that a split knows whose records go where)
        self._tallies: list[list] | None = None
        self._split: tuple[SplitPart, ...] | None = None  # set once, by split_into
        self._split_firsts: tuple[int, ...] = ()
        self._parent: BatchCompletion | None = None  # the completion this one is a split part of
        self._parts_pending = 0
        # add_done_callback functions of this completion's futures, by the future's index here
        # (a future is immutable; they stay here when a split moves the future to a part, whose
        # lock then guards the adds: one dict from the start, so two parts never race to make it)
        self._done_callbacks: dict[int, list[Callable]] = {}

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

    def count_for(self, tally, index: int, records: int = 1) -> None:
        """Count the ``records`` records appended from ``index`` on against ``tally`` (a
        ``DeliveryTally``), told at ``finish``."""
        tallies = self._tallies
        if tallies is None:
            self._tallies = [[tally, index, index + records]]
            return
        last = tallies[-1]
        if last[0] is tally and last[2] == index:
            last[2] = index + records
        else:
            tallies.append([tally, index, index + records])

    def kept_by_tallies(self) -> int:
        """Records counted against tallies that keep refused records (``keep_refused``)."""
        return sum(end - first for tally, first, end in self._tallies or () if tally.keep_refused)

    def tally_counts(self) -> dict:
        """Records counted per tally (each tally once, in first-append order)."""
        counts: dict = {}
        for tally, first, end in self._tallies or ():
            counts[tally] = counts.get(tally, 0) + end - first
        return counts

    def finish(self, base_offset: int, log_append_time_ms: int, error: BaseException | None,
               records: Callable[[], Sequence] | None = None) -> bool:
        """Store the outcome, tell the tallies, run the callbacks, settle. ``False`` if already
        finished, or split (its records finish with their new batches). ``records``: the batch's
        decoded records, asked for only when a tally keeps records refused with a per-record
        ``error`` (``DeliveryTally.keep_refused``)."""
        with self._lock:
            if self._final or self._split is not None:
                return False
            self.base_offset = base_offset
            self.log_append_time_ms = log_append_time_ms
            self.error = error
            self._final = True
            self._notify_locked()
        refused = records is not None and is_record_error(error)
        decoded: Sequence | None = None
        for tally, count in self.tally_counts().items():
            try:
                if refused and tally.keep_refused:
                    if decoded is None:
                        decoded = records()
                    kept = [record for owner, first, end in self._tallies or () if owner is tally
                            for record in decoded[first:end]]
                    tally.batch_refused(self.topic_partition, kept, error)
                else:
                    tally.batch_completed(self.topic_partition, count, error, base_offset)
            except BaseException:  # noqa: B036 - like a callback: must not stop the sender
                log.exception("Error counting a batch of %s in a delivery tally", self.topic_partition)
                if refused and tally.keep_refused:  # not kept: it must still count, as failed
                    tally.batch_completed(self.topic_partition, count, error, base_offset)
        for future in self._watchers:  # frozen now: nothing is added after _final
            future._run_callbacks()
        self._mark_settled()
        return True

    def _mark_settled(self) -> None:
        with self._lock:
            self._settled = True
            self._notify_locked()
        parent = self._parent
        if parent is not None:
            parent._part_settled()

    def _part_settled(self) -> None:
        """One of this split completion's parts settled; settled itself after the last one."""
        with self._lock:
            self._parts_pending -= 1
            last = self._parts_pending == 0
        if last:
            self._mark_settled()

    # --- split ----------------------------------------------------------------------------------

    @property
    def is_split(self) -> bool:
        return self._split is not None

    def split_into(self, parts: Sequence[SplitPart]) -> None:
        """Move this batch's records to ``parts`` (fresh completions, in record order, the first
        starting at record 0); see the module docstring. Called once, before any outcome."""
        if not parts or parts[0].first != 0:
            raise ValueError("split parts must start at record 0")
        firsts = tuple(part.first for part in parts)
        if any(a >= b for a, b in zip(firsts, firsts[1:])):
            raise ValueError(f"split parts must be in record order, got firsts {firsts}")
        with self._lock:
            if self._final or self._split is not None:
                raise RuntimeError(f"a completed or already split batch of {self.topic_partition} "
                                   "cannot be split")
            ends = firsts[1:] + (None,)
            for part, end in zip(parts, ends):
                target = part.completion
                for tally, first, stop in self._tallies or ():
                    low = max(first, part.first)
                    high = stop if end is None else min(stop, end)
                    if low < high:
                        target.count_for(tally, low - part.first, high - low)
                target._parent = self
            for future in self._watchers:
                index = future._resolved()[1]  # its index here: this completion is not split yet
                part = parts[bisect.bisect_right(firsts, index) - 1]
                part.completion._watchers.append(future)
            self._watchers = []
            self._tallies = None
            self._parts_pending = len(parts)
            self._split_firsts = firsts
            self._split = tuple(parts)  # last: readers without the lock see a complete split
            self._notify_locked()

    def follow(self, index: int) -> tuple["BatchCompletion", int]:
        """Where record ``index`` of this completion went: its completion and index there,
        through every split (a split part may be split again)."""
        completion = self
        while completion._split is not None:
            position = bisect.bisect_right(completion._split_firsts, index) - 1
            part = completion._split[position]
            completion, index = part.completion, index - part.first
        return completion, index

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
        """Block until the outcome is known or the batch is split (then the records' outcomes
        are their new batches'); ``False`` on timeout (seconds, ``None``: forever)."""
        return self._wait(lambda: self._final or self._split is not None, timeout)

    def wait_settled(self, timeout: float | None = None) -> bool:
        """Block until every callback has run; ``False`` on timeout."""
        return self._wait(lambda: self._settled, timeout)

    def add_watcher_if_pending(self, future: RecordFuture, fn: Callable) -> Watch:
        """Attach ``fn`` to ``future`` unless the outcome is known or the batch was split."""
        with self._lock:
            if self._final:
                return Watch.DONE
            if self._split is not None:
                return Watch.MOVED
            done_callbacks = future._completion._done_callbacks  # kept there (see __init__)
            functions = done_callbacks.get(future._index)
            if functions is None:
                done_callbacks[future._index] = [fn]
                if future._callback is None:
                    self._watchers.append(future)
            else:
                functions.append(fn)
            return Watch.ATTACHED


class RecordFuture(tuple):
    """The future of one record's send: resolves to its ``RecordMetadata``; see the module doc.

    An immutable record underneath, like a named tuple: ``RecordFuture((completion, index,
    timestamp_ms, key_size, value_size, callback))`` (one tuple argument, all six fields;
    ``callback`` ``None`` for none) is a single C-level allocation, a third cheaper than an
    object with slots, and ``send()`` makes one per record. The fields are private; futures
    compare and hash by identity, like any object, and do not order.
    """

    __slots__ = ()

    _completion: BatchCompletion = property(itemgetter(0))  # type: ignore[assignment]
    _index: int = property(itemgetter(1))  # type: ignore[assignment]
    _timestamp_ms: int = property(itemgetter(2))  # type: ignore[assignment]
    _key_size: int = property(itemgetter(3))  # type: ignore[assignment]
    _value_size: int = property(itemgetter(4))  # type: ignore[assignment]
    _callback: SendCallback | None = property(itemgetter(5))  # type: ignore[assignment]

    __hash__ = object.__hash__
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __lt__ = __le__ = __gt__ = __ge__ = None  # type: ignore[assignment]

    # --- concurrent.futures.Future API ----------------------------------------------------------

    def done(self) -> bool:
        completion = self._completion
        if completion._final:
            return True
        if completion._split is None:
            return False
        return completion.follow(self._index)[0]._final

    def cancel(self) -> bool:
        """Always ``False``: a record handed to the producer cannot be recalled."""
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return not self.done()

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata; raises its error, or ``TimeoutError`` after ``timeout`` s."""
        self._wait(timeout)
        error = self._resolved()[0].error
        if error is not None:
            raise error
        return self.metadata()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The record's error, ``None`` on success; ``TimeoutError`` after ``timeout`` s."""
        self._wait(timeout)
        return self._resolved()[0].error

    def add_done_callback(self, fn: Callable[[RecordFuture], object]) -> None:
        """Call ``fn(self)`` when done (at once, on this thread, if already done)."""
        while True:  # again only if the batch was split meanwhile (each split leaves fewer records)
            outcome = self._resolved()[0].add_watcher_if_pending(self, fn)
            if outcome is Watch.DONE:
                self._call(fn, self)
            if outcome is not Watch.MOVED:
                return

    def to_concurrent_future(self) -> concurrent.futures.Future:
        """A real ``concurrent.futures.Future`` mirroring this one (for ``wait``/``as_completed``)."""
        mirror: concurrent.futures.Future = concurrent.futures.Future()
        mirror.set_running_or_notify_cancel()

        def copy(future: RecordFuture) -> None:
            error = future._resolved()[0].error
            if error is not None:
                mirror.set_exception(error)
            else:
                mirror.set_result(future.metadata())

        self.add_done_callback(copy)
        return mirror

    # --- metadata -------------------------------------------------------------------------------

    def metadata(self) -> RecordMetadata:
        """The record's metadata from the batch outcome (call once done and successful)."""
        completion, index = self._resolved()
        tp = completion.topic_partition
        base = completion.base_offset
        log_append = completion.log_append_time_ms
        return RecordMetadata(
            tp.topic, tp.partition,
            INVALID_OFFSET if base == INVALID_OFFSET else base + index,
            log_append if log_append != NO_TIMESTAMP else self._timestamp_ms,
            self._key_size, self._value_size)

    @property
    def topic_partition(self) -> TopicPartition:
        return self._completion.topic_partition

    # --- internals ------------------------------------------------------------------------------

    def _resolved(self) -> tuple[BatchCompletion, int]:
        """The completion and index that decide this record (its batch's, or after a split the
        batch that carries it now)."""
        completion = self._completion
        if completion._split is None:
            return completion, self._index
        return completion.follow(self._index)

    def _wait(self, timeout: float | None) -> None:
        completion = self._resolved()[0]
        if completion._final:
            return
        # a split while waiting moves the wait to the record's new batch, within the same timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        while not completion._final:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not completion.wait_done(remaining):
                raise concurrent.futures.TimeoutError(
                    f"record to {completion.topic_partition} not acknowledged within {timeout} s")
            completion = self._resolved()[0]

    def _run_callbacks(self) -> None:
        """Run the send callback, then the done callbacks (on the thread that completes the batch:
        the sender's). Whatever one raises, ``BaseException`` included (a ``sys.exit()`` meant to
        stop on the first failure), is logged and contained: the others still run and the
        sender thread goes on."""
        callback = self._callback
        if callback is not None:
            error = self._resolved()[0].error
            if error is None:
                self._call(callback, self.metadata(), None, contain=BaseException)
            else:
                self._call(callback, None, error, contain=BaseException)
        for fn in self._completion._done_callbacks.get(self._index, ()):
            self._call(fn, self, contain=BaseException)

    def _call(self, fn: Callable, *args, contain: type[BaseException] = Exception) -> None:
        """Call a user function, logging what it raises (``contain`` and below) instead."""
        try:
            fn(*args)
        except contain:
            log.exception("Error executing user-provided callback on message for topic-partition %s",
                          self._completion.topic_partition)

    def __repr__(self) -> str:
        state = "pending" if not self.done() else (
            "failed" if self._resolved()[0].error is not None else "done")
        return f"RecordFuture({self._completion.topic_partition}, index={self._index}, {state})"
