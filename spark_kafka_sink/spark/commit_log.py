"""The exactly-once sink's commit log: where the driver records a micro-batch's transactions
before it commits them, so that a driver that dies half-way can be finished by the next one.

A compacted topic with one partition (option ``commit.topic``; the sink creates it), keyed by the
query's ``transactional.id.prefix``: each micro-batch writes a :class:`BatchRecord` twice, as
``prepared`` (the batch id, its partition count and every task's
:class:`~spark_kafka_sink.producer.transactions.resumable.ResumableTransaction`) before the first
commit, then as ``committed`` after the last one (``aborted`` when the driver gave the batch up).
A restarted driver reads it once (:func:`~spark_kafka_sink.admin.read_partition`) and takes the
prefix's last record. :meth:`CommitLog.ensure_topic` refuses a topic that is not compacted
(:func:`judge_topic`, naming the fix: deleted records could no longer tell a replay from a new
batch) and warns of replication factor 1 on a cluster of several brokers.

**One writer per query.** Records are written by a transactional producer with the prefix's own
id, ``<prefix>-commit-log`` (:func:`writer_id`: never a task's ``<prefix>-<n>``, covered by a
prefixed ACL on ``<prefix>-``), one transaction per record, waiting for the commit. A driver
initializes it before it reads the log (:meth:`CommitLog.latest`), which fences every older
driver's writer: a driver that outlived its replacement has its next append refused with
:class:`DriverFencedError` and cannot append ``aborted`` after the new driver's ``committed``.
The log is read ``read_committed``, waiting for undecided transactions, so a reader never sees a
fenced driver's record, nor a stale view. The writer's transactions time out after
:data:`WRITER_TRANSACTION_TIMEOUT_MS` (at most the sink's ``transaction.timeout.ms``): a driver
that dies mid-append holds readers of a shared topic back that long at most.

**Replays, resets, older checkpoints.** Records carry the streaming query's id (``query_id``,
stable across restarts). A batch id the log shows committed by another query is a checkpoint
reset with the prefix kept: :func:`is_replay` refuses it (:class:`CheckpointResetError`) instead
of skipping it; records without a query id are judged by batch id alone. A numeric batch id below
the log's last one (query ids equal or either unknown) means a checkpoint restored from an older
copy: :func:`check_order` refuses it (:class:`OlderBatchError`).

**Expiry and ownership.** A writer idle for longer than ``transactional.id.expiration.ms`` is
forgotten (INVALID_PRODUCER_ID_MAPPING on its next append); it is made again once, only if the
log still ends with the record this driver last read or wrote (else :class:`DriverFencedError`).
:meth:`CommitLog.begin` sends a record and waits for the brokers to accept it before the driver
fences any id, and commits it afterwards: a fenced driver learns it before it aborts anything.

Values are JSON (``format`` 1, ``query_id`` optional); a record this version cannot read is an
error naming the topic and offset, never skipped.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from enum import Enum

from ..admin import READ_COMMITTED, TopicDescription, create_topic, describe_topics, read_partition
from ..errors import (
    ConfigError, InvalidProducerEpochError, InvalidProducerIdMappingError, KafkaError,
    ProducerFencedError,
)
from ..producer.producer import KafkaProducer
from ..producer.transactions.resumable import ResumableTransaction
from .options import COMMIT_TOPIC, TXN_PREFIX, SinkConfig

log = logging.getLogger(__name__)

FORMAT = 1


class BatchState(str, Enum):
    """A micro-batch's step in the commit log: what the driver decided for it. The values are
    the ``state`` strings records carry (format 1)."""

    PREPARED = "prepared"
    COMMITTED = "committed"
    ABORTED = "aborted"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: object) -> BatchState:
        """The state a record names; ``ValueError`` naming ``value`` when it is none of them
        (a record this version cannot read)."""
        try:
            return cls(value)
        except ValueError:
            known = ", ".join(repr(state.value) for state in cls)
            raise ValueError(f"unknown commit record state {value!r} (this version knows "
                             f"{known})") from None


PREPARED, COMMITTED, ABORTED = BatchState.PREPARED, BatchState.COMMITTED, BatchState.ABORTED
STATES = tuple(BatchState)
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.ms": "3600000"}
"""Compacted, with hourly segments: compaction never touches the active segment, so with the
default week a restarted driver would read a week of records (two per micro-batch)."""
CHECKED_CONFIGS = ("cleanup.policy", "retention.ms", "retention.bytes")
WRITER_SUFFIX = "-commit-log"
WRITER_TRANSACTION_TIMEOUT_MS = 30_000
"""The commit-log writer's ``transaction.timeout.ms`` (lowered to the sink's if that is less):
one record per transaction, committed at once."""
_WRITE_TIMEOUT_S = 60.0


class DriverFencedError(KafkaError):
    """Another driver of the same query initialized the commit log's writer after this one: this
    driver must stop (its record was not written)."""


class CheckpointResetError(KafkaError):
    """The commit log shows the batch id committed by another streaming query: the checkpoint was
    reset (or replaced) while ``transactional.id.prefix`` was kept."""


class OlderBatchError(KafkaError):
    """Spark runs a micro-batch id older than the last one the commit log records for the prefix:
    the checkpoint was restored from an older copy (or reset): writing it would duplicate rows."""


def _expired(error: BaseException) -> bool:
    """Whether ``error`` (or what caused it) is INVALID_PRODUCER_ID_MAPPING."""
    seen = 0
    while error is not None and seen < 5:
        if isinstance(error, InvalidProducerIdMappingError):
            return True
        error, seen = error.__cause__, seen + 1
    return False


def _numeric(batch_id: str) -> int | None:
    return int(batch_id) if batch_id.isdigit() else None


def check_order(last: BatchRecord | None, batch_id: str, query_id: str | None,
                topic: str) -> None:
    """Refuse (:class:`OlderBatchError`) a Spark batch id lower than ``last``'s, the prefix's
    last record (whatever its state: after ``aborted`` for N Spark runs N again, never less),
    unless both query ids are known and differ (another query: see :func:`is_replay`). Ids of
    ``KafkaSink.write`` (``write-<uuid>``) are not ordered."""
    if last is None:
        return
    new, old = _numeric(batch_id), _numeric(last.batch_id)
    if new is None or old is None or new >= old:
        return
    if query_id is not None and last.query_id is not None and last.query_id != query_id:
        return
    raise OlderBatchError(
        f"KafkaSink: micro-batch {batch_id} is older than the last one the commit log {topic!r} "
        f"records for {TXN_PREFIX} {last.prefix!r}: {last}. Spark only ever runs the last batch "
        f"again, so the checkpoint was restored from an older copy (or deleted and started "
        f"again): writing micro-batch {batch_id} and those after it up to {last.batch_id} again "
        f"would duplicate their rows in the output. It was not written. Restore the newest "
        f"checkpoint, or use a new {TXN_PREFIX} to write this query's data again on purpose")


class PendingRecord:
    """A commit-log record sent in the writer's open transaction (:meth:`CommitLog.begin`):
    :meth:`commit` it (or a ``replacement`` sent after it in the same transaction, which readers
    then take as the prefix's last record), or :meth:`abort` it."""

    def __init__(self, log_: CommitLog, record: BatchRecord):
        self._log = log_
        self.record = record

    def commit(self, replacement: BatchRecord | None = None) -> None:
        self._log._finish(self.record, replacement)

    def abort(self) -> None:
        self._log._cancel()


def writer_id(prefix: str) -> str:
    """The transactional id of the prefix's commit-log writer: ``<prefix>-commit-log``. The
    tasks' ids are ``<prefix>-<n>`` (``n`` digits), so it is none of them, nor another prefix's
    task id or writer id."""
    return prefix + WRITER_SUFFIX


@dataclass(frozen=True)
class BatchRecord:
    """One micro-batch as the commit log holds it (see the module docstring). ``batch_id`` is
    Spark's batch id as a string (``write-<uuid>`` for ``KafkaSink.write``); ``max_partitions``
    is the most partitions any batch of the prefix has used, so a restarted driver knows which
    transactional ids a crashed run may have left open; ``probe_epochs`` are the producer epochs
    the driver's last upward probe left on the ids from ``max_partitions`` up (ids no task had
    used), so that the next probe tells an id only probed from one a task used since;
    ``query_id`` is the id of the streaming query that wrote it (``None``: unknown)."""

    prefix: str
    batch_id: str
    state: BatchState
    partitions: int
    transactions: tuple[ResumableTransaction, ...]
    max_partitions: int
    written_ms: int = 0
    probe_epochs: tuple[int, ...] = ()
    query_id: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", BatchState.parse(self.state))

    def to_json(self) -> bytes:
        value = {
            "format": FORMAT, "prefix": self.prefix, "batch_id": self.batch_id,
            "state": self.state.value, "partitions": self.partitions,
            "max_partitions": self.max_partitions, "written_ms": self.written_ms,
            "probe_epochs": list(self.probe_epochs),
            "transactions": [t.as_dict() for t in self.transactions]}
        if self.query_id is not None:
            value["query_id"] = self.query_id
        return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> BatchRecord:
        value = json.loads(data)
        if value.get("format") != FORMAT:
            raise ValueError(f"unknown commit record format {value.get('format')!r} (this version "
                             f"reads format {FORMAT})")
        transactions = tuple(ResumableTransaction.from_dict(t) for t in value["transactions"])
        return cls(value["prefix"], value["batch_id"], value["state"], value["partitions"],
                   transactions, value["max_partitions"], value.get("written_ms", 0),
                   tuple(value.get("probe_epochs", ())), value.get("query_id"))

    def __str__(self) -> str:
        query = "" if self.query_id is None else f" of streaming query {self.query_id}"
        return f"micro-batch {self.batch_id}{query} ({self.state})"


def is_replay(last: BatchRecord | None, batch_id: str, query_id: str | None, topic: str) -> bool:
    """Whether ``batch_id`` (of streaming query ``query_id``, ``None`` if unknown) is a replay:
    ``last``, the prefix's last record, shows it committed. Raises :class:`CheckpointResetError`
    when that commit was another query's (both ids known): skipping the batch would lose its
    rows."""
    if last is None:
        return False
    other = query_id is not None and last.query_id is not None and last.query_id != query_id
    if last.batch_id != batch_id or last.state is not BatchState.COMMITTED:
        if other:
            log.warning("KafkaSink: the commit log %r of %s %r was last written by %s; this is "
                        "streaming query %s, micro-batch %s (a checkpoint reset, or another query "
                        "with this prefix): going on, no batch id collides yet", topic, TXN_PREFIX,
                        last.prefix, last, query_id, batch_id)
        return False
    if other:
        raise CheckpointResetError(
            f"KafkaSink: checkpoint reset detected: the commit log {topic!r} of {TXN_PREFIX} "
            f"{last.prefix!r} shows micro-batch {batch_id} committed by streaming query "
            f"{last.query_id}, and this is query {query_id} (a query's id is kept in its "
            "checkpoint: a new one means the checkpoint was deleted or replaced, so its batch ids "
            "started again). Skipping the batch as a replay would lose its rows; it was not "
            f"written. Use a new {TXN_PREFIX} with the new checkpoint, or restore the old "
            "checkpoint")
    return True


@dataclass(frozen=True)
class TopicVerdict:
    """What :func:`judge_topic` found: ``refusal``, why the topic cannot hold the log (``None``:
    it can), and ``warning``, a risk to log."""

    refusal: str | None = None
    warning: str | None = None


def judge_topic(described: TopicDescription, bootstrap: str) -> TopicVerdict:
    """Whether ``described`` can hold a commit log: compacted and not deleted by retention
    (refused otherwise, naming the fix); replication factor 1 on a cluster of several brokers is
    a warning (one disk lost loses the log)."""
    name = described.name
    if described.config_error is not None:
        return TopicVerdict(warning=(
            f"KafkaSink: cannot read the configuration of the exactly-once commit topic {name!r} "
            f"({described.config_error}); make sure its cleanup.policy is compact"))
    refusal = _policy_refusal(described, bootstrap)
    if refusal is not None:
        return TopicVerdict(refusal=refusal)
    if described.replication_factor == 1 and described.cluster_brokers > 1:
        return TopicVerdict(warning=(
            f"KafkaSink: the exactly-once commit topic {name!r} has replication factor 1 on a "
            f"cluster of {described.cluster_brokers} brokers: if that broker's log is lost, so is "
            "what tells a replayed micro-batch from a new one. Recreate it with replication factor "
            f"3 (or the cluster's default.replication.factor raised), or set option "
            f"{COMMIT_TOPIC!r} to a replicated topic"))
    return TopicVerdict()


def _policy_refusal(described: TopicDescription, bootstrap: str) -> str | None:
    policy = described.configs.get("cleanup.policy")
    policies = {p.strip() for p in (policy or "").split(",")}
    kept = all(described.configs.get(name) == "-1" for name in ("retention.ms", "retention.bytes"))
    if "compact" in policies and ("delete" not in policies or kept):
        return None
    why = ("is not compacted" if "compact" not in policies else
           "deletes records after retention.ms / retention.bytes, the last ones too")
    return (f"option {COMMIT_TOPIC!r}: topic {described.name!r} has cleanup.policy={policy!r}, so "
            f"it {why}: once a prefix's last record is gone, a micro-batch Spark replays is "
            "written again. Make it compacted (kafka-configs.sh --bootstrap-server "
            f"{bootstrap} --alter --entity-type topics --entity-name {described.name} "
            f"--add-config cleanup.policy=compact), or set {COMMIT_TOPIC!r} to another topic "
            "(the sink creates it compacted)")


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
        self._futures: list = []
        self._seen: bytes | None = None          # the prefix's last record as this driver knows it

    @property
    def writer_id(self) -> str:
        return writer_id(self.prefix)

    def ensure_topic(self) -> None:
        """Create the topic (one partition, compacted) unless it exists; refuse one that is not
        compacted (``ConfigError``), warn about replication factor 1 (:func:`judge_topic`)."""
        created = create_topic(self._bootstrap, self.topic, 1, configs=TOPIC_CONFIGS,
                               exist_ok=True, timeout_s=self._timeout_s, config=self._producer_config)
        if created.created:
            log.info("created the exactly-once commit log topic %r", self.topic)
        described = describe_topics(self._bootstrap, [self.topic], config_names=list(CHECKED_CONFIGS),
                                    timeout_s=self._timeout_s, config=self._producer_config)
        verdict = judge_topic(described[self.topic], self._bootstrap)
        if verdict.refusal is not None:
            raise ConfigError(verdict.refusal)
        if verdict.warning is not None:
            log.warning("%s", verdict.warning)

    def latest(self) -> BatchRecord | None:
        """The prefix's last committed record, or None when it has none. Takes the log over
        first: this driver's writer initializes, fencing every older driver's."""
        self._writer()
        last = self._read_last()
        self._seen = None if last is None else last.to_json()
        return last

    def append(self, record: BatchRecord) -> None:
        """Write ``record`` in a transaction and wait for its commit (raises if it is not
        written; :class:`DriverFencedError` when another driver took the log over)."""
        self.begin(record).commit()

    def begin(self, record: BatchRecord) -> PendingRecord:
        """Start writing ``record``: the writer's transaction begins and the record is sent and
        flushed, so the brokers have accepted this writer (a fenced one is refused here, with
        :class:`DriverFencedError`, and nothing is written). Then :meth:`PendingRecord.commit`
        (optionally replacing the record) or :meth:`PendingRecord.abort`. A driver verifies this
        way that it still owns the log before it fences the tasks' ids.

        A writer whose transactional id expired (the query idle for longer than the brokers'
        ``transactional.id.expiration.ms``: INVALID_PRODUCER_ID_MAPPING) is made again, once, but
        only if the log still ends with the record this driver last read or wrote (else another
        driver took over since: :class:`DriverFencedError`)."""
        if record.prefix != self.prefix:
            raise ValueError(f"record of prefix {record.prefix!r} in the log of {self.prefix!r}")
        try:
            self._guarded(record, lambda: self._start(record))
        except KafkaError as error:
            if not _expired(error):
                raise
            self._take_back(record, error)
            self._guarded(record, lambda: self._start(record))
        return PendingRecord(self, record)

    def _take_back(self, record: BatchRecord, error: KafkaError) -> None:
        """The writer's id expired: make it again if no other driver wrote since."""
        last = self._read_last()
        now = None if last is None else last.to_json()
        if now != self._seen:
            raise DriverFencedError(
                f"KafkaSink: commit log {self.topic!r}: the writer {self.writer_id!r} of "
                f"{TXN_PREFIX} {self.prefix!r} had expired (idle for longer than the brokers' "
                f"transactional.id.expiration.ms), and the log's last record for the prefix is "
                f"now {last}, not what this driver last read or wrote: another driver of the "
                f"query took over. {record} was not recorded; this driver must stop") from error
        log.info("KafkaSink: the commit log writer %r had expired (the query was idle longer "
                 "than transactional.id.expiration.ms); the log is unchanged since this driver's "
                 "last record: initializing it again", self.writer_id)

    def _finish(self, record: BatchRecord, replacement: BatchRecord | None) -> None:
        final = record if replacement is None else replacement
        self._guarded(final, lambda: self._complete(replacement))
        self._seen = final.to_json()

    def _cancel(self) -> None:
        """Abort the writer's open transaction (nothing of it becomes visible); on any error
        the writer is discarded, and the next initialization aborts it."""
        try:
            self._abort()
        except BaseException:
            self._discard_writer()
            raise

    def _guarded(self, record: BatchRecord, step) -> None:
        try:
            step()
        except BaseException as error:
            self._discard_writer()               # the next append starts over: init aborts
            if isinstance(error, (ProducerFencedError, InvalidProducerEpochError)):
                raise DriverFencedError(
                    f"KafkaSink: commit log {self.topic!r}: another driver of the query with "
                    f"{TXN_PREFIX} {self.prefix!r} took over (its writer {self.writer_id!r} "
                    f"initialized after this driver's, fencing it; or this append outlived the "
                    f"writer's transaction timeout). {record} was not recorded; this driver must "
                    f"stop: {error}") from error
            raise

    # --- the I/O (replaced by the model test's in-memory log) ---------------------------------

    def _read_last(self) -> BatchRecord | None:
        """The prefix's last record at ``read_committed``, read without the writer."""
        last = None
        key = self.prefix.encode()
        for record in read_partition(self._bootstrap, self.topic, 0, timeout_s=self._timeout_s,
                                     config=self._producer_config, isolation_level=READ_COMMITTED):
            if record.key != key or record.value is None:
                continue
            try:
                last = BatchRecord.from_json(record.value)
            except (ValueError, KeyError, TypeError) as error:
                raise KafkaError(f"commit log {self.topic!r}, offset {record.offset}: unreadable "
                                 f"record for prefix {self.prefix!r}: {error}") from error
        return last

    def _start(self, record: BatchRecord) -> None:
        producer = self._writer()
        producer.begin_transaction()
        self._send(producer, record)
        producer.flush(self._timeout_s)
        self._futures[-1].result(timeout=self._timeout_s)   # refused if this writer is fenced

    def _complete(self, replacement: BatchRecord | None) -> None:
        producer = self._writer()
        if replacement is not None:
            self._send(producer, replacement)
        producer.commit_transaction(self._timeout_s)
        for future in self._futures:
            future.result(timeout=self._timeout_s)
        self._futures = []

    def _abort(self) -> None:
        self._futures = []
        if self._producer is not None:
            self._producer.abort_transaction(self._timeout_s)

    def _send(self, producer: KafkaProducer, record: BatchRecord) -> None:
        self._futures.append(producer.send(self.topic, record.to_json(), key=self.prefix.encode(),
                                           partition=0))

    def _writer(self) -> KafkaProducer:
        """The transactional writer, initialized (which fences older drivers' writers)."""
        if self._producer is None:
            timeout_ms = min(WRITER_TRANSACTION_TIMEOUT_MS,
                             self._producer_config.transaction_timeout_ms)
            producer = KafkaProducer(self._producer_config.with_overrides({
                "acks": "all", "enable.idempotence": True, "linger.ms": 0,
                "transactional.id": self.writer_id, "transaction.timeout.ms": timeout_ms}))
            try:
                producer.init_transactions(self._timeout_s)
            except BaseException:
                producer.close(0)
                raise
            self._producer = producer
        return self._producer

    def _discard_writer(self) -> None:
        self._futures = []
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.close(0)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close(self._timeout_s)
            self._producer = None

    def __repr__(self) -> str:
        return f"CommitLog(topic={self.topic!r}, prefix={self.prefix!r})"
