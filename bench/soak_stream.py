"""The soak's stream: a bounded-rate source, a gate in front of ``KafkaSink`` and the read-back.

- **Source.** Spark's ``rate-micro-batch`` source: every micro-batch holds exactly ``rowsPerBatch``
  rows whose ``value`` column continues 0, 1, 2, ... across batches, however late the batch runs,
  so a pause never builds a backlog. With a ``processingTime`` trigger of ``trigger_s`` that is
  ``rate`` records a second at most. Key = the id as a string; value = the id, ``:`` and padding
  up to ``value_size`` bytes.
- **Gate** (:class:`BatchGate`), the ``foreachBatch`` function: it hands each micro-batch to the
  sink and records what the sink's metrics say about it. It can hold a micro-batch before writing
  it (a pause, so the workers sit idle and their pooled producers are evicted) and, once stopped,
  lets later micro-batches through unwritten, so the query is stopped between writes and the
  written ids are exactly ``0 .. N-1``.
- **Read-back** (:func:`read_ids`): every record of the topic, with confluent-kafka's consumer
  (a client independent of ours), as ids.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

MAX_PAUSE_S = 120.0
"""A held micro-batch goes on after this long even if nobody resumes it."""


@dataclass(frozen=True)
class BatchRecord:
    """One written micro-batch, from the sink's metrics."""

    batch_id: int
    records: int
    """``record-send-total``: records acknowledged by the broker."""
    producers_created: int
    """``producer-create-total``: tasks that created their producer instead of reusing one."""
    tasks: int
    seconds: float
    after_pause: bool
    """Whether the gate held this micro-batch before writing it."""
    held_s: float = 0.0
    """How long the gate held it."""


class BatchGate:
    """``foreachBatch(gate)``: writes each micro-batch with ``sink`` unless stopped; see the module
    docstring. Runs on the driver, in the thread py4j calls back on; the soak's main thread drives
    :meth:`request_pause`, :meth:`resume` and :meth:`stop`."""

    def __init__(self, sink: Any):
        self._sink = sink
        self._cond = threading.Condition()
        self._stopped = False
        self._active = False
        self._pause_requested = False
        self._paused = threading.Event()
        self._resume = threading.Event()
        self.batches: list[BatchRecord] = []
        self.skipped = 0
        self.error: BaseException | None = None

    def __call__(self, df: Any, batch_id: int) -> None:
        with self._cond:
            if self._stopped:
                self.skipped += 1
                return
            self._active = True
            hold = self._pause_requested
        try:
            held_from = time.monotonic()
            if hold:
                self._paused.set()
                self._resume.wait(MAX_PAUSE_S)
            started = time.monotonic()
            self._sink(df, batch_id)
            metrics = self._sink.last_metrics or {}
            self.batches.append(BatchRecord(
                batch_id, int(metrics.get("record-send-total", 0)), int(metrics.get("producer-create-total", 0)),
                int(metrics.get("task-total", 0)), time.monotonic() - started, hold, started - held_from))
        except BaseException as error:
            self.error = error
            raise
        finally:
            with self._cond:
                self._active = False
                if hold:
                    self._pause_requested = False
                    self._paused.clear()
                    self._resume.clear()
                self._cond.notify_all()

    def request_pause(self) -> None:
        """Hold the next micro-batch before it is written, until :meth:`resume`."""
        with self._cond:
            self._pause_requested = True
            self._resume.clear()  # a resume left over from the last pause must not release this one

    @property
    def paused(self) -> bool:
        """Whether a micro-batch is being held now."""
        return self._paused.is_set()

    def resume(self) -> None:
        self._resume.set()

    def stop(self, timeout_s: float) -> bool:
        """Write no more micro-batches; wait up to ``timeout_s`` for the one being written.
        Whether none is being written any more."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._stopped = True
            self._resume.set()
            while self._active:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    @property
    def written(self) -> int:
        return sum(batch.records for batch in self.batches)


def rate_stream(spark: Any, *, rows_per_batch: int, partitions: int, value_size: int) -> Any:
    """The streaming DataFrame (``key``, ``value`` strings) of the module docstring."""
    from pyspark.sql import functions as F

    ids = F.col("value").cast("string")
    padding = F.expr(f"repeat('x', greatest(0, {value_size} - length(CAST(value AS STRING)) - 1))")
    return (spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", rows_per_batch)
            .option("numPartitions", partitions)
            .load()
            .select(ids.alias("key"), F.concat(ids, F.lit(":"), padding).alias("value")))


@dataclass(frozen=True)
class Delivery:
    """What the topic holds, compared with what the sink wrote (ids ``0 .. expected-1``)."""

    expected: int
    read: int
    unique: int
    duplicates: int
    missing: int
    unexpected: int
    """Ids outside ``0 .. expected-1``."""
    bad_values: int
    """Records whose value does not start with ``<key>:`` (a mix-up or corruption)."""
    read_seconds: float
    sample_missing: list[int] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return (self.read == self.expected == self.unique and not self.missing and not self.unexpected
                and not self.bad_values)


def read_ids(bootstrap: str, topic: str, expected: int, timeout_s: float = 120.0) -> Delivery:
    """Every record of ``topic`` (up to each partition's end offset when the read starts), read
    with confluent-kafka; bounded by ``timeout_s``."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    started = time.monotonic()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"soak-verify-{topic}",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    counts: Counter[int] = Counter()
    read = bad = 0
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        positions = {p: 0 for p in partitions}
        deadline = started + timeout_s
        while any(positions[p] < ends[p] for p in partitions) and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=10_000, timeout=1.0):
                if message.error() is not None:
                    raise RuntimeError(f"reading {topic!r} back failed: {message.error()}")
                positions[message.partition()] = message.offset() + 1
                read += 1
                key = message.key().decode()
                counts[int(key)] += 1
                if not message.value().decode().startswith(key + ":"):
                    bad += 1
    finally:
        consumer.close()
    missing = [i for i in range(expected) if i not in counts]
    unexpected = sum(1 for i in counts if not 0 <= i < expected)
    duplicates = sum(n - 1 for n in counts.values() if n > 1)
    return Delivery(expected, read, len(counts), duplicates, len(missing), unexpected, bad,
                    time.monotonic() - started, missing[:10])
