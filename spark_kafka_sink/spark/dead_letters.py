"""The per-record error policy of a task: bad records to a dead-letter topic, or skipped.

A *bad record* is one that cannot be written while the producer, the network and the cluster are
fine (:func:`~spark_kafka_sink.errors.is_record_error`):

- stage ``convert``, found before sending: a null or invalid topic, a partition out of range or
  negative, a header with a null key, a negative timestamp, a record over ``max.request.size`` or
  ``buffer.memory``;
- stage ``produce``, refused by the broker for that record alone: MESSAGE_TOO_LARGE for a single
  record, INVALID_RECORD (e.g. a null key on a compacted topic), INVALID_TIMESTAMP,
  CORRUPT_MESSAGE. The producer splits such records out of their batches, so their batch-mates
  are written either way. Only a refusal that names the record, or whose batch held that one
  record, is a bad record: a batch of several refused as a whole is fatal
  (``ProducerBatch.refused_alone``).

Anything else (authentication, authorization, a topic missing after ``max.block.ms``, a fenced
producer, a timeout, a broker or network failure) is fatal: the task fails, whatever the policy.

With ``errors.tolerance=all`` a task hands every bad record to :class:`DeadLetters`: with a
dead-letter topic it is written there, through the task's producer (so, exactly-once, in the
task's transaction), as its original key, value and headers plus context headers: Kafka
Connect's layout under the prefix :data:`HEADER_PREFIX`, listed in docs/bad-records.md.
Each context header value is at most :data:`CONTEXT_VALUE_MAX` bytes (a longer one is cut, with
:data:`TRUNCATED` at its end), and a dead letter always fits: it is sized against the most the
task's producer sends and the dead-letter topic's own ``max.message.bytes`` (which the driver's
preflight reads and passes to the tasks). A record too large for that drops its value (left
empty), then its key, then its own headers, keeping the context headers (:func:`fit`). When the
dead-letter topic still refuses one as too large (its limit was not known: ``preflight=false``),
it goes once more as its context headers alone; a second refusal fails the task. Only the
headers this sink added to the dead letter count as its own: a replayed dead letter's headers are
the record's (:func:`split_context`).

Without a dead-letter topic the record is skipped and counted. Nothing is lost silently: a
dead-letter write that fails fails the task (:meth:`DeadLetters.check`), and the counts reach the
driver's metrics (``record-error-total``, ``dlq-record-send-total``, ``record-skip-total``,
``error.<class>.record-error-total``).
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import logging
import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import KafkaError, MessageTooLargeError, is_record_error
from ..producer.tally import DeliveryTally, RefusedRecord
from ..record import RecordBatchBuilder
from .options import ErrorPolicy

log = logging.getLogger(__name__)

HEADER_PREFIX = "__spark_kafka_sink.errors."
CONVERT, PRODUCE = "convert", "produce"
LOG_BURST = 10
"""``errors.log.enable``: at most this many WARN lines per :data:`LOG_PERIOD_MS` per task; the
lines held back are counted in the next one."""
LOG_PERIOD_MS = 10_000
TOPIC_HEADER = HEADER_PREFIX + "topic"
CONTEXT_VALUE_MAX = 1024
"""The most bytes of one context header value: a longer one (a mis-mapped column as the topic, a
long exception message) is cut to this, ending with :data:`TRUNCATED`."""
MIN_CONTEXT_VALUE = 64
"""How far :func:`fit` cuts context header values when even they alone are too large."""
TRUNCATED = "...[truncated, {size} bytes]"
NOTES = ("value", "key", "headers")
"""The parts of a bad record a dead letter may leave out to fit, in the order they go; each one
left out gets a header ``<prefix><part>.dropped`` saying so."""


def as_bytes(value: Any) -> bytes | None:
    """A bad record's key or value as bytes: bytes as they are, a string as UTF-8, ``None``
    kept, and anything else (an Avro column's struct, list, map or number, as Spark hands it to
    Python) as JSON text: binary inside it as base64, dates and times ISO 8601, decimals exact."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return json.dumps(_plain(value), default=_json_default, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False).encode("utf-8")


def _plain(value: Any) -> Any:
    """``value`` with every pyspark ``Row`` in it a dict by field name (json would make a Row, a
    tuple, a list), and a float that is not finite a string (``"nan"``, ``"inf"``: JSON has none)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if hasattr(value, "asDict"):
        return {name: _plain(item) for name, item in value.asDict().items()}
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return list(value)
    return str(value)


class DeadLetterError(KafkaError):
    """A bad record could not be written to the dead-letter topic: the task fails."""


@dataclass(frozen=True)
class BadRecord:
    """A record the policy applies to: what it was meant to be, and why it was not written."""

    stage: str
    topic: str | None
    partition: int | None
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]]
    error: BaseException
    position: int | None = None
    """Its row in the task's partition, when known (stage ``convert``)."""

    @classmethod
    def refused(cls, record: RefusedRecord) -> BadRecord:
        """A record the broker refused on its own (stage ``produce``)."""
        tp = record.topic_partition
        return cls(PRODUCE, tp.topic, tp.partition, record.key, record.value, record.headers,
                   record.error)


@dataclass(frozen=True)
class TaskContext:
    """Where a task's bad records come from, for their context headers."""

    batch_id: int | None
    partition_id: int
    attempt: int


@dataclass(frozen=True)
class DeadLetter:
    """What goes to the dead-letter topic for one bad record: ``key``, ``value`` and ``headers``
    (the record's own, then the context headers, then a note per part dropped to fit), and
    ``dropped``: the parts of the record left out to fit, in the order they go (``value``,
    ``key``, ``headers``)."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    dropped: tuple[str, ...] = ()


class DeadLetters:
    """One task's bad records: counted by error class, logged if asked, then written to the
    dead-letter topic or skipped. Used only with ``errors.tolerance=all``.

    ``max_record_size``: the largest record the task's producer sends
    (``min(max.request.size, buffer.memory)``); the dead-letter topic's own ``max.message.bytes``,
    when the preflight read it (``ErrorPolicy.dlq_max_message_bytes``), bounds it further.
    ``flush_timeout_s``: the bound of each flush of :meth:`settle` (``None``: none), so that a
    stuck producer fails the task rather than hanging it."""

    def __init__(self, policy: ErrorPolicy, context: TaskContext, max_record_size: int, *,
                 clock: Clock = SYSTEM_CLOCK, flush_timeout_s: float | None = None):
        if not policy.tolerant:
            raise ValueError("DeadLetters is for errors.tolerance=all")
        self.policy = policy
        self.context = context
        self.max_record_size = dead_letter_limit(max_record_size, policy.dlq_max_message_bytes)
        self.tally = DeliveryTally(keep_refused=True)  # the dead-letter writes
        self.cut_tally = DeliveryTally(keep_refused=True)
        """The dead letters sent again cut to their context headers after the dead-letter topic
        refused them as too large: a refusal of one of these is a failure, never sent again."""
        self.errors_by_class: dict[str, int] = {}
        self.skipped = 0
        self.cut = 0
        """Dead letters that left out part of their record to fit."""
        self._failures: list[BaseException] = []
        self._clock = clock
        self._flush_timeout_s = flush_timeout_s
        self._log_window: int | None = None
        self._logged = 0
        self._held_back = 0

    @property
    def bad(self) -> int:
        """Bad records handled so far."""
        return sum(self.errors_by_class.values())

    @property
    def dead_lettered(self) -> int:
        """Records the dead-letter topic acknowledged."""
        return self.tally.acked + self.cut_tally.acked

    def handle(self, producer: Any, bad: BadRecord) -> None:
        """Count ``bad``, log it if asked, and write it to the dead-letter topic (or skip it)."""
        name = type(bad.error).__name__
        self.errors_by_class[name] = self.errors_by_class.get(name, 0) + 1
        if self.policy.log:
            self._log(bad)
        if self.policy.dlq_topic is None:
            self.skipped += 1
            return
        self._send(producer, self.policy.dlq_topic, self.dead_letter(bad), self.tally)

    def handle_refused(self, producer: Any, tallies: Iterable[DeliveryTally]) -> int:
        """Handle the records the broker refused one by one that ``tallies`` kept; how many."""
        count = 0
        for tally in tallies:
            if tally.refused:
                for record in tally.take_refused():
                    self.handle(producer, BadRecord.refused(record))
                    count += 1
        return count

    def settle(self, producer: Any, tallies: Iterable[DeliveryTally]) -> None:
        """After the task's sends: flush until every refused record was handled and every
        dead-letter write has an outcome. A dead letter the dead-letter topic refused as too large
        goes again once, cut to its context headers (:meth:`cut_to_context`); any other refusal,
        and any refusal of a letter sent again, is kept for :meth:`check`."""
        tallies = list(tallies)
        while True:
            producer.flush(self._flush_timeout_s)
            moved = self.handle_refused(producer, tallies)
            for record in self.tally.take_refused():
                moved += 1
                if isinstance(record.error, MessageTooLargeError):
                    self._send(producer, record.topic_partition.topic,
                               self.cut_to_context(record), self.cut_tally)
                else:
                    self._failures.append(record.error)
            for record in self.cut_tally.take_refused():   # never sent a third time
                moved += 1
                self._failures.append(record.error)
            if not moved:
                return

    def check(self) -> None:
        """Raise :class:`DeadLetterError` if a dead-letter write failed."""
        failure = self.tally.first_failure or self.cut_tally.first_failure
        error = failure.error if failure is not None else (self._failures[0] if self._failures else None)
        if error is None:
            return
        failed = self.tally.failed + self.cut_tally.failed + len(self._failures)
        raise DeadLetterError(
            f"{failed} bad record(s) could not be written to the dead-letter topic "
            f"{self.policy.dlq_topic!r} ({type(error).__name__}: {error}); failing the task so "
            f"that none is lost") from error

    def _send(self, producer: Any, topic: str, letter: DeadLetter, tally: DeliveryTally) -> None:
        """Send ``letter``; a record error ``send`` raises (it is still too large for the
        producer) is kept for :meth:`check` rather than escaping as the bad record's own."""
        if letter.dropped:
            self.cut += 1
        try:
            producer.send(topic, letter.value, letter.key, None, None, list(letter.headers), tally)
        except Exception as error:  # noqa: BLE001 - only a record error is the letter's own
            if not is_record_error(error):
                raise
            self._failures.append(error)

    # --- the dead-letter record -----------------------------------------------------------------

    def dead_letter(self, bad: BadRecord) -> DeadLetter:
        """The dead-letter record for ``bad``: its key, value and headers plus the context
        headers, within :attr:`max_record_size` (see :func:`fit`)."""
        own = tuple((k, v) for k, v in bad.headers if isinstance(k, str))
        context = tuple(self.context_headers(bad)) if self.policy.context_headers else ()
        return fit(bad.key, bad.value, own, context, self.max_record_size,
                   f"the dead letter would be larger than {self.max_record_size} bytes")

    def cut_to_context(self, record: RefusedRecord) -> DeadLetter:
        """A dead letter the dead-letter topic refused as too large (its limit was not known, or
        is lower than known), as its context headers alone."""
        own, context = split_context(record.headers)
        return fit(record.key, record.value, own, context, None,
                   "the dead-letter topic refused the dead letter as too large")

    def context_headers(self, bad: BadRecord) -> list[tuple[str, bytes | None]]:
        """The context headers of ``bad``, each value cut to :data:`CONTEXT_VALUE_MAX` bytes. The
        ``topic`` header always comes first (a null value when the topic was null): it marks
        where this sink's headers start."""
        error = bad.error
        cls = type(error)
        pairs = [("partition", bad.partition),
                 ("exception.class.name", f"{cls.__module__}.{cls.__qualname__}"),
                 ("exception.message", str(error)), ("stage", bad.stage),
                 ("spark.batch.id", self.context.batch_id),
                 ("spark.partition.id", self.context.partition_id),
                 ("spark.attempt", self.context.attempt)]
        topic = None if bad.topic is None else cap(str(bad.topic).encode("utf-8"))
        return [(TOPIC_HEADER, topic)] + [(HEADER_PREFIX + name, cap(str(value).encode("utf-8")))
                                          for name, value in pairs if value is not None]

    def _log(self, bad: BadRecord) -> None:
        now = self._clock.monotonic_ms()
        if self._log_window is None or now - self._log_window >= LOG_PERIOD_MS:
            self._log_window, self._logged = now, 0
        if self._logged >= LOG_BURST:
            self._held_back += 1
            return
        self._logged += 1
        held, self._held_back = self._held_back, 0
        topic = bad.topic if bad.topic is None else cap(str(bad.topic).encode("utf-8"), 300).decode("utf-8")
        where = f"topic {topic!r}, partition {'unknown' if bad.partition is None else bad.partition}"
        if bad.position is not None:
            where += f", row {bad.position} of Spark partition {self.context.partition_id}"
        target = (f"dead-letter topic {self.policy.dlq_topic!r}" if self.policy.dlq_topic
                  else "skipped")
        log.warning("bad record (%s stage; %s) -> %s: %s: %s%s", bad.stage, where, target,
                    type(bad.error).__name__, bad.error,
                    f" ({held} more not logged)" if held else "")

    def figures(self) -> dict[str, Any]:
        """The counts for the task's metrics."""
        return {"bad": self.bad, "dead_lettered": self.dead_lettered, "skipped": self.skipped,
                "errors_by_class": dict(self.errors_by_class)}


def dead_letter_limit(max_record_size: int, topic_limit: int | None) -> int:
    """The largest dead letter (a batch of one, before compression): what the task's producer
    sends, and what the dead-letter topic takes (its ``max.message.bytes``) when known."""
    return max_record_size if topic_limit is None else min(max_record_size, topic_limit)


def cap(value: bytes, limit: int = CONTEXT_VALUE_MAX) -> bytes:
    """``value`` if it has at most ``limit`` bytes, else its start (cut on a UTF-8 character
    boundary) and :data:`TRUNCATED` with its full size, ``limit`` bytes at most in all."""
    if len(value) <= limit:
        return value
    marker = TRUNCATED.format(size=len(value)).encode("ascii")
    keep = max(0, limit - len(marker))
    return value[:keep].decode("utf-8", "ignore").encode("utf-8") + marker


def fit(key: bytes | None, value: bytes | None, own: Sequence[tuple[str, bytes | None]],
        context: Sequence[tuple[str, bytes | None]], limit: int | None, why: str) -> DeadLetter:
    """A dead letter of the record ``key``, ``value``, ``own`` headers with the ``context``
    headers, within ``limit`` bytes (a batch of one, before compression): drop the value (an
    empty one), then the key, then the record's own headers, each until it fits, each drop noted
    in a header (``why``: the reason given). The context headers stay; when even they do not fit,
    their values are cut further (to :data:`MIN_CONTEXT_VALUE` bytes at least). ``limit`` None:
    drop all three."""
    own, context = tuple(own), tuple(context)
    notes: list[tuple[str, bytes]] = []
    dropped: list[str] = []
    letter = DeadLetter(key, value, own + context)
    for part in NOTES:
        if limit is not None and _size(letter) <= limit:
            return letter
        if part == "value" and value:
            notes.append(_note(part, f"{len(value)} bytes: {why}"))
            value = b""
        elif part == "key" and key is not None:
            notes.append(_note(part, f"{len(key)} bytes: {why}"))
            key = None
        elif part == "headers" and own:
            size = sum(len(k.encode("utf-8")) + len(v or b"") for k, v in own)
            notes.append(_note(part, f"{len(own)} header(s), {size} bytes: {why}"))
            own = ()
        else:
            continue
        dropped.append(part)
        letter = DeadLetter(key, value, own + context + tuple(notes), tuple(dropped))
    limit_each = CONTEXT_VALUE_MAX // 2
    while limit is not None and _size(letter) > limit and limit_each >= MIN_CONTEXT_VALUE:
        context = tuple((k, None if v is None else cap(v, limit_each)) for k, v in context)
        letter = DeadLetter(key, value, context + tuple(notes), tuple(dropped))
        limit_each //= 2
    return letter


def split_context(headers: Sequence[tuple[str, bytes | None]]
                  ) -> tuple[tuple[tuple[str, bytes | None], ...], tuple[tuple[str, bytes | None], ...]]:
    """A dead letter's headers as (the record's own, this sink's): this sink's start at the LAST
    :data:`TOPIC_HEADER`, which its context headers always begin with, so a header of the same
    name among the record's own (a dead letter replayed through the sink) counts as the
    record's. Without context headers all of them are the record's."""
    names = [name for name, _ in headers]
    if TOPIC_HEADER not in names:
        return tuple(headers), ()
    start = len(names) - 1 - names[::-1].index(TOPIC_HEADER)
    return tuple(headers[:start]), tuple(headers[start:])


def _note(part: str, text: str) -> tuple[str, bytes]:
    return HEADER_PREFIX + part + ".dropped", text.encode("utf-8")


def _size(letter: DeadLetter) -> int:
    return RecordBatchBuilder.estimate_size_upper_bound(letter.key, letter.value, letter.headers)
