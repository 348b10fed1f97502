"""The exactly-once sink's commit log: where the driver records a micro-batch's transactions
before it commits them, so that a driver that dies half-way can be finished by the next one.

A compacted topic with one partition (option ``commit.topic``; the sink creates it), keyed by the
query's ``transactional.id.prefix``: each micro-batch writes a :class:`BatchRecord` twice, as
``prepared`` (the batch id, its partition count and every task's
:class:`~spark_kafka_sink.producer.resumable.ResumableTransaction`) before the first commit, then
as ``committed`` after the last one (``aborted`` when the driver gave the batch up). Compaction
keeps the last record per prefix, which is all a restarted driver needs: it reads the partition
once (:func:`~spark_kafka_sink.admin.read_partition`) and takes the prefix's last record.

Writes go through an idempotent producer with ``acks=all`` and wait for the acknowledgement, so a
record the driver went on from is durable. Values are JSON (``format`` 1); a record this version
cannot read is an error naming the topic and offset, never skipped.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, replace

from ..admin import create_topic, read_partition
from ..errors import KafkaError
from ..producer.producer import KafkaProducer
from ..producer.resumable import ResumableTransaction
from .options import SinkConfig

log = logging.getLogger(__name__)

FORMAT = 1
PREPARED, COMMITTED, ABORTED = "prepared", "committed", "aborted"
STATES = (PREPARED, COMMITTED, ABORTED)
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.ms": "3600000"}
"""Compacted, with hourly segments: compaction never touches the active segment, so with the
default week a restarted driver would read a week of records (two per micro-batch)."""
_WRITE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class BatchRecord:
    """One micro-batch as the commit log holds it (see the module docstring). ``batch_id`` is
    Spark's batch id as a string (``write-<uuid>`` for ``KafkaSink.write``); ``max_partitions``
    is the most partitions any batch of the prefix has used, so a restarted driver knows which
    transactional ids a crashed run may have left open; ``probe_epochs`` are the producer epochs
    the driver's last upward probe left on the ids from ``max_partitions`` up (ids no task had
    used), so that the next probe tells an id only probed from one a task used since."""

    prefix: str
    batch_id: str
    state: str
    partitions: int
    transactions: tuple[ResumableTransaction, ...]
    max_partitions: int
    written_ms: int = 0
    probe_epochs: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ValueError(f"state must be one of {STATES}, got {self.state!r}")

    def with_state(self, state: str) -> BatchRecord:
        return replace(self, state=state, written_ms=int(time.time() * 1000))

    def to_json(self) -> bytes:
        return json.dumps({
            "format": FORMAT, "prefix": self.prefix, "batch_id": self.batch_id,
            "state": self.state, "partitions": self.partitions,
            "max_partitions": self.max_partitions, "written_ms": self.written_ms,
            "probe_epochs": list(self.probe_epochs),
            "transactions": [t.as_dict() for t in self.transactions],
        }, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> BatchRecord:
        value = json.loads(data)
        if value.get("format") != FORMAT:
            raise ValueError(f"unknown commit record format {value.get('format')!r} (this version "
                             f"reads format {FORMAT})")
        transactions = tuple(ResumableTransaction.from_dict(t) for t in value["transactions"])
        return cls(value["prefix"], value["batch_id"], value["state"], value["partitions"],
                   transactions, value["max_partitions"], value.get("written_ms", 0),
                   tuple(value.get("probe_epochs", ())))


class CommitLog:
    """The commit log of one sink (see the module docstring); driver side only."""

    def __init__(self, config: SinkConfig, *, timeout_s: float = _WRITE_TIMEOUT_S):
        if not config.exactly_once:
            raise ValueError("a commit log belongs to an exactly-once sink")
        self.topic = config.commit_topic
        self.prefix = config.transactional_id_prefix
        self._producer_config = config.producer_config
        self._bootstrap = ",".join(f"{hp.host}:{hp.port}"
                                   for hp in config.producer_config.bootstrap_servers)
        self._timeout_s = timeout_s
        self._producer: KafkaProducer | None = None

    def ensure_topic(self) -> None:
        """Create the topic (one partition, compacted) unless it exists."""
        created = create_topic(self._bootstrap, self.topic, 1, configs=TOPIC_CONFIGS,
                               exist_ok=True, timeout_s=self._timeout_s, config=self._producer_config)
        if created.created:
            log.info("created the exactly-once commit log topic %r", self.topic)

    def latest(self) -> BatchRecord | None:
        """The prefix's last record, or None when it has none."""
        last = None
        key = self.prefix.encode()
        for record in read_partition(self._bootstrap, self.topic, 0, timeout_s=self._timeout_s,
                                     config=self._producer_config):
            if record.key != key or record.value is None:
                continue
            try:
                last = BatchRecord.from_json(record.value)
            except (ValueError, KeyError, TypeError) as error:
                raise KafkaError(f"commit log {self.topic!r}, offset {record.offset}: unreadable "
                                 f"record for prefix {self.prefix!r}: {error}") from error
        return last

    def append(self, record: BatchRecord) -> None:
        """Write ``record`` and wait for its acknowledgement (raises if it is not written)."""
        if record.prefix != self.prefix:
            raise ValueError(f"record of prefix {record.prefix!r} in the log of {self.prefix!r}")
        if self._producer is None:
            self._producer = KafkaProducer(self._producer_config.with_overrides(
                {"acks": "all", "enable.idempotence": True, "linger.ms": 0}))
        future = self._producer.send(self.topic, record.to_json(), key=self.prefix.encode(),
                                     partition=0)
        self._producer.flush(self._timeout_s)
        future.result(timeout=self._timeout_s)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close(self._timeout_s)
            self._producer = None

    def __repr__(self) -> str:
        return f"CommitLog(topic={self.topic!r}, prefix={self.prefix!r})"

