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
  record, is a bad record: a batch of several refused as a whole (CORRUPT_MESSAGE from
  corruption on the wire, once its retries ran out) is fatal
  (``ProducerBatch.refused_alone``).

Anything else (authentication, authorization, a topic missing after ``max.block.ms``, a fenced
producer, a timeout, a broker or network failure) is fatal: the task fails, whatever the policy.

With ``errors.tolerance=all`` a task hands every bad record to :class:`DeadLetters`: with a
dead-letter topic it is written there, through the task's producer (so, exactly-once, in the
task's transaction), as its original key, value and headers plus context headers (Kafka Connect's
layout under the prefix :data:`HEADER_PREFIX`):

====================================  ===============================================
``__spark_kafka_sink.errors.topic``            the topic the record was meant for
``__spark_kafka_sink.errors.partition``        its partition, when known
``__spark_kafka_sink.errors.exception.class.name``  the error's class (module and name)
``__spark_kafka_sink.errors.exception.message``    the error's message
``__spark_kafka_sink.errors.stage``            ``convert`` or ``produce``
``__spark_kafka_sink.errors.spark.batch.id``   the micro-batch id (absent for ``write``)
``__spark_kafka_sink.errors.spark.partition.id``   the Spark partition of the task
``__spark_kafka_sink.errors.spark.attempt``    the task's attempt number
``__spark_kafka_sink.errors.value.dropped``    only when the record was too large for the
                                                dead-letter topic: it then keeps its headers
                                                and gets an empty value, and this says so
====================================  ===============================================

Without a dead-letter topic the record is skipped and counted. Nothing is lost silently: a
dead-letter write that fails fails the task (:meth:`DeadLetters.check`), and the counts reach the
driver's metrics (``record-error-total``, ``dlq-record-send-total``, ``record-skip-total``,
``error.<class>.record-error-total``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import KafkaError, MessageTooLargeError
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


class DeadLetters:
    """One task's bad records: counted by error class, logged if asked, then written to the
    dead-letter topic or skipped. Used only with ``errors.tolerance=all``."""

    def __init__(self, policy: ErrorPolicy, context: TaskContext, max_record_size: int, *,
                 clock: Clock = SYSTEM_CLOCK):
        if not policy.tolerant:
            raise ValueError("DeadLetters is for errors.tolerance=all")
        self.policy = policy
        self.context = context
        self.max_record_size = max_record_size
        self.tally = DeliveryTally(keep_refused=True)  # the dead-letter writes
        self.errors_by_class: dict[str, int] = {}
        self.skipped = 0
        self.stripped = 0
        self._failures: list[BaseException] = []
        self._clock = clock
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
        return self.tally.acked

    def handle(self, producer: Any, bad: BadRecord) -> None:
        """Count ``bad``, log it if asked, and write it to the dead-letter topic (or skip it)."""
        name = type(bad.error).__name__
        self.errors_by_class[name] = self.errors_by_class.get(name, 0) + 1
        if self.policy.log:
            self._log(bad)
        if self.policy.dlq_topic is None:
            self.skipped += 1
            return
        key, value, headers = self.dead_letter(bad)
        producer.send(self.policy.dlq_topic, value, key, None, None, headers, self.tally)

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
        dead-letter write has an outcome; a dead-letter record the broker refused as too large
        goes again as its headers alone, any other refusal is kept for :meth:`check`."""
        tallies = list(tallies)
        while True:
            producer.flush()
            moved = self.handle_refused(producer, tallies)
            for record in self.tally.take_refused():
                moved += 1
                if isinstance(record.error, MessageTooLargeError) and not _stripped(record.headers):
                    self.stripped += 1
                    producer.send(record.topic_partition.topic, b"", None, None, None,
                                  self._strip(list(record.headers), record.key, record.value,
                                              "the dead-letter topic refused it as too large"),
                                  self.tally)
                else:
                    self._failures.append(record.error)
            if not moved:
                return

    def check(self) -> None:
        """Raise :class:`DeadLetterError` if a dead-letter write failed."""
        failure = self.tally.first_failure
        error = failure.error if failure is not None else (self._failures[0] if self._failures else None)
        if error is None:
            return
        failed = self.tally.failed + len(self._failures)
        raise DeadLetterError(
            f"{failed} bad record(s) could not be written to the dead-letter topic "
            f"{self.policy.dlq_topic!r} ({type(error).__name__}: {error}); failing the task so "
            f"that none is lost") from error

    # --- the dead-letter record -----------------------------------------------------------------

    def dead_letter(self, bad: BadRecord) -> tuple[bytes | None, bytes | None, list]:
        """The key, value and headers written to the dead-letter topic for ``bad``."""
        headers = [(k, v) for k, v in bad.headers if isinstance(k, str)]
        if self.policy.context_headers:
            headers += self.context_headers(bad)
        key, value = bad.key, bad.value
        if RecordBatchBuilder.estimate_size_upper_bound(key, value, headers) > self.max_record_size:
            self.stripped += 1
            headers = self._strip(headers, key, value,
                                  f"the record is larger than {self.max_record_size} bytes")
            key, value = None, b""
        return key, value, headers

    def context_headers(self, bad: BadRecord) -> list[tuple[str, bytes]]:
        error = bad.error
        cls = type(error)
        pairs = [("topic", bad.topic), ("partition", bad.partition),
                 ("exception.class.name", f"{cls.__module__}.{cls.__qualname__}"),
                 ("exception.message", str(error)), ("stage", bad.stage),
                 ("spark.batch.id", self.context.batch_id),
                 ("spark.partition.id", self.context.partition_id),
                 ("spark.attempt", self.context.attempt)]
        return [(HEADER_PREFIX + name, str(value).encode("utf-8")) for name, value in pairs
                if value is not None]

    def _strip(self, headers: list, key: bytes | None, value: bytes | None, why: str) -> list:
        """``headers`` plus the note that key and value were dropped; the original headers go too
        when even they do not fit."""
        note = (HEADER_PREFIX + "value.dropped",
                (f"{why}: its key ({-1 if key is None else len(key)} bytes) and value "
                 f"({-1 if value is None else len(value)} bytes) were dropped").encode("utf-8"))
        kept = headers + [note]
        if RecordBatchBuilder.estimate_size_upper_bound(None, b"", kept) > self.max_record_size:
            kept = [h for h in headers if h[0].startswith(HEADER_PREFIX)] + [note]
        return kept

    def _log(self, bad: BadRecord) -> None:
        now = self._clock.monotonic_ms()
        if self._log_window is None or now - self._log_window >= LOG_PERIOD_MS:
            self._log_window, self._logged = now, 0
        if self._logged >= LOG_BURST:
            self._held_back += 1
            return
        self._logged += 1
        held, self._held_back = self._held_back, 0
        where = f"topic {bad.topic!r}, partition {'unknown' if bad.partition is None else bad.partition}"
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


def _stripped(headers: Sequence[tuple[str, bytes | None]]) -> bool:
    return any(key == HEADER_PREFIX + "value.dropped" for key, _ in headers)
