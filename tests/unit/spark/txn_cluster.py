"""In-memory transactional brokers for the model test of the exactly-once commit protocol
(``test_commit_model.py``): a transaction coordinator per transactional id with Kafka's
semantics, data partitions whose records become visible at ``read_committed`` on commit, a
compacted single-partition commit-log topic, and, per driver process, the handles the driver
uses (the transaction operations and the commit log) with crashes and timeouts injected on demand.

The coordinator (Kafka's ``TransactionCoordinator`` / ``TransactionMetadata``, transaction
version 1 unless a transaction says 2):

- InitProducerId: an unknown (or expired) id gets a new producer id at epoch 0; a known one has
  its ongoing transaction aborted and its epoch bumped. A ``transaction.timeout.ms`` above the
  brokers' ``transaction.max.timeout.ms`` is refused (INVALID_TRANSACTION_TIMEOUT).
- EndTxn (producer id, epoch, commit/abort): unknown id or another producer id:
  INVALID_PRODUCER_ID_MAPPING; another epoch: PRODUCER_FENCED; ongoing: completed; already
  completed the same way with that epoch: success (a retry); completed the other way, or nothing
  begun: INVALID_TXN_STATE. Version 2 (KIP-890) bumps the epoch on every EndTxn, and accepts a
  retry with the epoch just before.
- A transaction older than its ``transaction.timeout.ms`` is aborted by the coordinator, which
  bumps the epoch (the producer is fenced); an id idle for ``transactional.id.expiration.ms``
  with nothing open is forgotten.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable, Sequence

from spark_kafka_sink.errors import (
    InvalidProducerIdMappingError, InvalidTransactionTimeoutError, InvalidTxnStateError, KafkaError,
    KafkaTimeoutError, ProducerFencedError,
)
from spark_kafka_sink.producer.transactions.resumable import ResumableTransaction
from spark_kafka_sink.spark.commit_log import BatchRecord, CommitLog
from spark_kafka_sink.spark.exactly_once import FencedId
from spark_kafka_sink.structs import TopicPartition

EMPTY, ONGOING, COMPLETE_COMMIT, COMPLETE_ABORT = "Empty", "Ongoing", "CompleteCommit", "CompleteAbort"
DATA_TOPIC = "t"
DATA_PARTITIONS = 3


FENCING_LOG = True
"""The commit log has one fencing writer per query (a transactional producer whose
initialization, before each read of the log, fences every older driver's writer)."""
WRITER_TIMEOUT_MS = 30_000


class DriverKilled(BaseException):
    """The driver process died here (injected): nothing it does afterwards reaches the cluster."""


@dataclass
class Record:
    """One record a task wrote to a data partition."""

    row: tuple[str, int]          # (batch id, row index): the row's identity
    run: int                      # which run of which batch wrote it
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partition: int
    status: str = "open"          # open, committed, aborted


@dataclass
class TxnMeta:
    """A coordinator's state for one transactional id."""

    producer_id: int
    epoch: int
    timeout_ms: int
    updated_ms: int
    state: str = EMPTY
    last_epoch: int | None = None          # version 2: the epoch before the last EndTxn's bump
    started_ms: int = 0
    records: list[Record] = field(default_factory=list)


class Cluster:
    """The brokers: coordinators, data partitions, the commit-log topic, and the clock."""

    def __init__(self, *, max_timeout_ms: int, expiration_ms: int):
        self.now_ms = 0
        self.max_timeout_ms = max_timeout_ms
        self.expiration_ms = expiration_ms
        self.txns: dict[str, TxnMeta] = {}
        self.records: list[Record] = []
        self.commit_log: list[tuple[bytes, bytes]] = []      # the topic's partition 0 (compacted)
        self.appended: list[BatchRecord] = []                # every record ever appended, in order
        self._producer_ids = itertools.count(1000)

    # --- time -------------------------------------------------------------------------------------

    def advance(self, ms: int) -> None:
        self.now_ms += ms
        self.tick()

    def tick(self) -> None:
        """What the coordinators do on their own: abort timed-out transactions (bumping the
        epoch), forget idle ids."""
        for tid, meta in list(self.txns.items()):
            if meta.state == ONGOING and self.now_ms - meta.started_ms > meta.timeout_ms:
                self._finish(meta, commit=False)
                meta.epoch += 1
                meta.last_epoch = None
            elif meta.state != ONGOING and self.now_ms - meta.updated_ms > self.expiration_ms:
                del self.txns[tid]

    # --- the coordinator --------------------------------------------------------------------------

    def init_producer_id(self, tid: str, timeout_ms: int) -> FencedId:
        self.tick()
        if timeout_ms > self.max_timeout_ms:
            raise InvalidTransactionTimeoutError(
                f"transaction.timeout.ms ({timeout_ms} ms) is more than the brokers' "
                f"transaction.max.timeout.ms ({self.max_timeout_ms} ms)")
        meta = self.txns.get(tid)
        if meta is None:
            meta = self.txns[tid] = TxnMeta(next(self._producer_ids), 0, timeout_ms, self.now_ms)
            return FencedId(tid, meta.producer_id, meta.epoch)
        if meta.state == ONGOING:
            self._finish(meta, commit=False)
        meta.epoch += 1
        meta.last_epoch = None
        meta.state = EMPTY
        meta.timeout_ms = timeout_ms
        meta.updated_ms = self.now_ms
        return FencedId(tid, meta.producer_id, meta.epoch)

    def write(self, tid: str, producer_id: int, epoch: int, rows: Sequence[tuple[str, int]],
              run: int) -> tuple[TopicPartition, ...]:
        """A task's sends (AddPartitionsToTxn, then the records): the partitions enrolled."""
        self.tick()
        meta = self._meta(tid, producer_id, epoch)
        if not rows:
            return ()
        if meta.state != ONGOING:
            meta.state, meta.started_ms, meta.records = ONGOING, self.now_ms, []
        meta.updated_ms = self.now_ms
        for row in rows:
            record = Record(row, run, tid, producer_id, epoch, row[1] % DATA_PARTITIONS)
            meta.records.append(record)
            self.records.append(record)
        return tuple(sorted({TopicPartition(DATA_TOPIC, r.partition) for r in meta.records}))

    def end_txn(self, tid: str, producer_id: int, epoch: int, *, commit: bool, version: int) -> None:
        self.tick()
        meta = self.txns.get(tid)
        if meta is None or meta.producer_id != producer_id:
            raise InvalidProducerIdMappingError(f"EndTxn of {tid!r}: producer id {producer_id} is "
                                                "not the coordinator's")
        wanted = COMPLETE_COMMIT if commit else COMPLETE_ABORT
        if version >= 2 and epoch == meta.last_epoch and epoch == meta.epoch - 1:
            if meta.state == wanted:
                return                                             # a retry of the last EndTxn
            raise InvalidTxnStateError(f"EndTxn of {tid!r}: the transaction is {meta.state}")
        if epoch != meta.epoch:
            raise ProducerFencedError(f"EndTxn of {tid!r}: epoch {epoch} is fenced by {meta.epoch}")
        if meta.state == ONGOING:
            self._finish(meta, commit=commit)
            if version >= 2:
                meta.last_epoch, meta.epoch = meta.epoch, meta.epoch + 1
            return
        if meta.state == wanted:
            return
        raise InvalidTxnStateError(f"EndTxn of {tid!r}: the transaction is {meta.state}")

    def _meta(self, tid: str, producer_id: int, epoch: int) -> TxnMeta:
        meta = self.txns.get(tid)
        if meta is None or meta.producer_id != producer_id:
            raise InvalidProducerIdMappingError(f"{tid!r}: unknown producer id {producer_id}")
        if meta.epoch != epoch:
            raise ProducerFencedError(f"{tid!r}: epoch {epoch} is fenced by {meta.epoch}")
        return meta

    def _finish(self, meta: TxnMeta, *, commit: bool) -> None:
        for record in meta.records:
            record.status = "committed" if commit else "aborted"
        meta.records = []
        meta.state = COMPLETE_COMMIT if commit else COMPLETE_ABORT
        meta.updated_ms = self.now_ms

    # --- what readers see -------------------------------------------------------------------------

    def visible(self) -> list[Record]:
        """The data partitions at ``read_committed``."""
        return [r for r in self.records if r.status == "committed"]

    def open_ids(self, prefix: str) -> list[str]:
        return sorted(tid for tid, meta in self.txns.items()
                      if meta.state == ONGOING and tid.startswith(prefix + "-")
                      and not tid.endswith("-commit-log"))

    # --- the commit-log topic ---------------------------------------------------------------------

    def log_append(self, key: bytes, record: BatchRecord) -> None:
        self.commit_log.append((key, record.to_json()))
        self.appended.append(record)

    def compact(self) -> None:
        """The log cleaner: the last record per key survives."""
        last = {key: i for i, (key, _) in enumerate(self.commit_log)}
        self.commit_log = [entry for i, entry in enumerate(self.commit_log) if last[entry[0]] == i]


class Process:
    """One driver process's view of the cluster: every call may be the one it dies at
    (``crash_in``: after that many more calls, ``crash_when`` the call's effect) or time out
    (``faults``: a one-shot timeout per kind of call, before or after the effect)."""

    def __init__(self, cluster: Cluster, name: str, *, transaction_timeout_ms: int):
        self.cluster = cluster
        self.name = name
        self.transaction_timeout_ms = transaction_timeout_ms
        self.killed = False
        self.crash_in: int | None = None
        self.crash_when = "before"
        self.faults: dict[str, str] = {}
        self.calls: list[str] = []

    def call(self, kind: str, effect: Callable[[], object]) -> object:
        if self.killed:
            raise DriverKilled(f"{self.name} is dead ({kind})")
        self.calls.append(kind)
        if self.crash_in is not None:
            self.crash_in -= 1
            if self.crash_in <= 0:
                self.crash_in = None
                if self.crash_when == "after":
                    effect()
                self.killed = True
                raise DriverKilled(f"{self.name} killed {self.crash_when} {kind}")
        fault = self.faults.pop(kind, None)
        if fault == "before":
            raise KafkaTimeoutError(f"{kind} timed out (injected, nothing done)")
        result = effect()
        if fault == "after":
            raise KafkaTimeoutError(f"{kind} timed out (injected, after it took effect)")
        return result

    # --- the transaction operations (exactly_once.TransactionOps) --------------------------------

    def commit(self, transaction: ResumableTransaction) -> None:
        def effect():
            if transaction.partitions:              # nothing enrolled: no EndTxn, as the client
                self.cluster.end_txn(transaction.transactional_id, transaction.producer_id,
                                     transaction.producer_epoch, commit=True,
                                     version=transaction.transaction_version)
        self.call("commit", effect)

    def fence(self, transactional_ids: Sequence[str]) -> tuple:
        ids = list(dict.fromkeys(transactional_ids))
        if not ids:
            return ()
        return self.call("fence", lambda: tuple(
            self.cluster.init_producer_id(tid, self.transaction_timeout_ms) for tid in ids))


class MemoryCommitLog(CommitLog):
    """The real ``CommitLog`` (its appends, the writer's expiry and its fencing), with its I/O
    over the cluster's commit-log topic, for one driver: ``latest()`` first initializes this
    driver's writer (``<prefix>-commit-log``: InitProducerId, fencing older drivers' writers and
    aborting their open transaction); a record is sent in the writer's transaction (refused if
    the writer is fenced: ``DriverFencedError``; or its id expired: INVALID_PRODUCER_ID_MAPPING)
    and appended to the topic when it commits. An ``append`` is one call to the cluster (kind
    ``append``); a ``begin`` (before a fence) is one more (kind ``begin_log``)."""

    def __init__(self, process: Process, config):
        super().__init__(config)
        self.process = process
        self._handle: FencedId | None = None
        self._pending: list[BatchRecord] = []
        self._one_call = False
        self._rereading = False

    def ensure_topic(self) -> None:
        self.process.call("ensure_topic", lambda: None)

    def append(self, record: BatchRecord) -> None:
        self._one_call = True
        try:
            super().append(record)
        finally:
            self._one_call = False

    # --- the I/O ----------------------------------------------------------------------------------

    def _writer(self):
        if self._handle is None:
            timeout_ms = min(WRITER_TIMEOUT_MS, self.process.transaction_timeout_ms)
            self._handle = self.process.call("init_writer", lambda: (
                self.process.cluster.init_producer_id(self.writer_id, timeout_ms)))
        return self._handle

    def _discard_writer(self) -> None:
        self._handle = None
        self._pending = []

    def _take_back(self, record: BatchRecord, error: KafkaError) -> None:
        self._rereading = True                   # a read to check the log, not a recovery
        try:
            super()._take_back(record, error)
        finally:
            self._rereading = False

    def _read_last(self) -> BatchRecord | None:
        def read():
            key = self.prefix.encode()
            values = [value for k, value in self.process.cluster.commit_log if k == key]
            return BatchRecord.from_json(values[-1]) if values else None
        return self.process.call("reread" if self._rereading else "latest", read)

    def _meta(self, record: BatchRecord) -> TxnMeta:
        cluster = self.process.cluster
        cluster.tick()
        meta = cluster.txns.get(self.writer_id)
        if meta is None or meta.producer_id != self._handle.producer_id:
            raise InvalidProducerIdMappingError(f"commit log writer {self.writer_id!r}: unknown "
                                                "producer id (expired)")
        if meta.epoch != self._handle.producer_epoch:
            raise ProducerFencedError(f"commit log writer {self.writer_id!r}: epoch "
                                      f"{self._handle.producer_epoch} is fenced by {meta.epoch}")
        return meta

    def _start(self, record: BatchRecord) -> None:
        self._writer()

        def send():
            meta = self._meta(record)
            now = self.process.cluster.now_ms
            meta.state, meta.started_ms, meta.updated_ms = ONGOING, now, now
            self._pending = [record]
        if self._one_call:
            send()
        else:
            self.process.call("begin_log", send)

    def _complete(self, replacement: BatchRecord | None) -> None:
        def commit():
            cluster = self.process.cluster
            meta = self._meta(self._pending[0])
            if meta.state != ONGOING:
                raise InvalidTxnStateError(f"commit log writer {self.writer_id!r}: {meta.state}")
            for record in self._pending + ([] if replacement is None else [replacement]):
                cluster.log_append(self.prefix.encode(), record)
            meta.state, meta.updated_ms = COMPLETE_COMMIT, cluster.now_ms
            self._pending = []
        self.process.call("append", commit)

    def _abort(self) -> None:
        def abort():
            meta = self._meta(self._pending[0])
            if meta.state == ONGOING:
                meta.state, meta.updated_ms = COMPLETE_ABORT, self.process.cluster.now_ms
            self._pending = []
        self.process.call("abort_log", abort)

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"MemoryCommitLog({self.topic!r})"
