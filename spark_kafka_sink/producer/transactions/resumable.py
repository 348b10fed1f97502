"""Transactions that outlive their producer: a small picklable value for an open transaction, and
the functions that commit or abort it from any process, with no producer thread and no records.

A producer hands out its open transaction after ``flush()``
(:meth:`KafkaProducer.resumable_transaction`): the transactional id, producer id and epoch, the
partitions enrolled and the transaction protocol version. Closing that producer leaves the
transaction open on the broker. :func:`commit_resumable` (or :func:`abort_resumable`) then finds
the coordinator of the transactional id and sends EndTxn with that id and epoch: the same request
the producer would have sent. This is the second phase of a two-phase commit: Spark tasks write
and hand out their transactions; the driver commits them once every task succeeded. :func:`fence_transactional_ids` is the
other tool of that driver: it fences the producers of a list of transactional ids and aborts what
they left open, as ``init_transactions()`` would, without a producer.

What the coordinator answers decides the outcome:

- committed (or already committed: EndTxn is idempotent for the same id and epoch, under both
  transaction versions): the function returns;
- the epoch was fenced (a newer producer with the same transactional id called
  ``init_transactions()``, or the transaction outlived ``transaction.timeout.ms`` and the
  coordinator aborted it): :class:`~spark_kafka_sink.errors.ProducerFencedError` saying the
  records are lost unless an earlier commit succeeded;
- no open transaction for that id and epoch (INVALID_TXN_STATE: it was aborted): a
  :class:`~spark_kafka_sink.errors.InvalidTxnStateError` saying so;
- the coordinator no longer knows the transactional id (INVALID_PRODUCER_ID_MAPPING: it expired
  after ``transactional.id.expiration.ms`` without use, so whether the transaction was committed
  before is unknown): :class:`~spark_kafka_sink.errors.InvalidProducerIdMappingError` saying so;
  repeating the call cannot help;
- no answer within ``timeout``: :class:`~spark_kafka_sink.errors.KafkaTimeoutError`; the
  transaction stays as it was, and the call can be repeated.

A fenced id's producer gets ``ProducerFencedError`` at its next transactional request; its open
transaction is aborted by the coordinator before the InitProducerId returns. The fence answers, per
id, the producer id and epoch the coordinator gave (:class:`FencedId`): epoch 0 means the id was
fresh (never used, or expired): there was nothing to abort.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ...client.factory import NO_OBSERVERS, ClientObservers, build_client
from ...client.selector import Selectable
from ...clock import SYSTEM_CLOCK, Clock
from ...config import ProducerConfig
from ...errors import ConfigError, KafkaTimeoutError
from ...structs import TopicPartition
from .manager import TransactionManager
from .requests import TxnRequestSender
from .states import TransactionalResult

_MAX_POLL_MS = 100
RESUMER_CLIENT_ID = "transaction-resumer"
"""The ``client.id`` of the resumable path's requests when the configuration sets none."""


@dataclass(frozen=True)
class ResumableTransaction:
    """An open transaction, as its producer handed it out (see the module docstring).
    ``partitions`` are sorted; ``transaction_version`` is 1, or 2 (KIP-890: EndTxn bumps the
    epoch)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]
    transaction_version: int

    def __post_init__(self) -> None:
        if not isinstance(self.transactional_id, str) or not self.transactional_id:
            raise ValueError(f"transactional_id must be a non-empty str, got {self.transactional_id!r}")
        if self.producer_id < 0 or self.producer_epoch < 0:
            raise ValueError(f"transaction {self.transactional_id!r} has no producer id/epoch: "
                             f"({self.producer_id}, {self.producer_epoch})")
        if self.transaction_version not in (1, 2):
            raise ValueError(f"transaction_version must be 1 or 2, got {self.transaction_version!r}")

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able values (what the Spark sink ships from tasks and logs)."""
        return {"transactional_id": self.transactional_id, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch,
                "transaction_version": self.transaction_version,
                "partitions": [[tp.topic, tp.partition] for tp in self.partitions]}

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> ResumableTransaction:
        """The transaction :meth:`as_dict` described."""
        return cls(value["transactional_id"], value["producer_id"], value["producer_epoch"],
                   tuple(TopicPartition(topic, partition) for topic, partition in value["partitions"]),
                   value["transaction_version"])

    def __str__(self) -> str:
        return (f"transaction of {self.transactional_id!r} (producer id {self.producer_id}, epoch "
                f"{self.producer_epoch}, {len(self.partitions)} partition(s), transaction "
                f"version {self.transaction_version})")


def commit_resumable(transaction: ResumableTransaction, config: Mapping[str, Any] | ProducerConfig,
                     timeout: float | None = None, *, clock: Clock = SYSTEM_CLOCK,
                     selector: Selectable | None = None,
                     observers: ClientObservers = NO_OBSERVERS) -> None:
    """Commit ``transaction`` (see the module docstring for the outcomes). ``config``: producer
    properties to reach the cluster (``bootstrap.servers``, security, the client's timeouts: its
    client is built as a producer's, :func:`~spark_kafka_sink.client.factory.build_client`); a
    ``transactional.id`` in it must be the transaction's. ``timeout`` in seconds, default
    ``max.block.ms``. ``observers`` hear the client's throttle times and SASL logins."""
    _complete(transaction, config, timeout, commit=True, clock=clock, selector=selector,
              observers=observers)


def abort_resumable(transaction: ResumableTransaction, config: Mapping[str, Any] | ProducerConfig,
                    timeout: float | None = None, *, clock: Clock = SYSTEM_CLOCK,
                    selector: Selectable | None = None,
                    observers: ClientObservers = NO_OBSERVERS) -> None:
    """Abort ``transaction``: its records become invisible to ``read_committed`` consumers and
    the partitions they hold back are released. Arguments as :func:`commit_resumable`."""
    _complete(transaction, config, timeout, commit=False, clock=clock, selector=selector,
              observers=observers)


@dataclass(frozen=True)
class FencedId:
    """What the coordinator answered the InitProducerId that fenced ``transactional_id``: the
    producer id and epoch it now holds."""

    transactional_id: str
    producer_id: int
    producer_epoch: int

    @property
    def fresh(self) -> bool:
        """The id had never been used (or had expired): nothing was open. The coordinator gives
        a new id epoch 0, and every InitProducerId (or, under transaction version 2, every
        EndTxn) on a known one raises its epoch; at the last epoch it moves the id to a new
        producer id at epoch 0, which reads as fresh too (after 32767 uses)."""
        return self.producer_epoch == 0


def fence_transactional_ids(transactional_ids: Iterable[str],
                            config: Mapping[str, Any] | ProducerConfig, timeout: float | None = None,
                            *, clock: Clock = SYSTEM_CLOCK, selector: Selectable | None = None,
                            observers: ClientObservers = NO_OBSERVERS) -> tuple[FencedId, ...]:
    """Fence every producer of each of ``transactional_ids`` and abort the transaction it left
    open, as ``init_transactions()`` does, with no producer thread: one InitProducerId per id,
    sent concurrently. Returns one :class:`FencedId` per distinct id, in order. ``config`` as for
    :func:`commit_resumable` (its ``transaction.timeout.ms`` is the one the InitProducerId
    carries: a broker whose ``transaction.max.timeout.ms`` is lower refuses it, naming it)."""
    ids = list(dict.fromkeys(transactional_ids))
    if not ids:
        return ()
    cfg = ProducerConfig.coerce(config)
    steps = []
    for transactional_id in ids:
        manager = TransactionManager(transactional_id, cfg.transaction_timeout_ms)
        steps.append((manager, manager.initialize_transactions()))
    _run(steps, cfg, timeout, f"fencing {len(ids)} transactional id(s)", clock, selector, observers)
    return tuple(FencedId(manager.transactional_id, manager.producer_id_and_epoch.producer_id,
                          manager.producer_id_and_epoch.epoch) for manager, _ in steps)


def _complete(transaction: ResumableTransaction, config: Mapping[str, Any] | ProducerConfig,
              timeout: float | None, *, commit: bool, clock: Clock,
              selector: Selectable | None, observers: ClientObservers) -> None:
    if not isinstance(transaction, ResumableTransaction):
        raise TypeError(f"transaction must be a ResumableTransaction, got {type(transaction).__name__}")
    cfg = ProducerConfig.coerce(config)
    if cfg.transactional_id not in (None, transaction.transactional_id):
        raise ConfigError(f"transactional.id {cfg.transactional_id!r} in the configuration is not "
                          f"the transaction's ({transaction.transactional_id!r})")
    manager = TransactionManager(transaction.transactional_id, cfg.transaction_timeout_ms)
    manager.resume_transaction(transaction.producer_id, transaction.producer_epoch,
                               frozenset(transaction.partitions), transaction.transaction_version)
    result = manager.begin_commit() if commit else manager.begin_abort()
    what = f"the {'commit' if commit else 'abort'} of the {transaction}"
    _run([(manager, result)], cfg, timeout, what, clock, selector, observers)


def _run(steps: list[tuple[TransactionManager, TransactionalResult]], cfg: ProducerConfig,
         timeout: float | None, what: str, clock: Clock, selector: Selectable | None,
         observers: ClientObservers) -> None:
    """Drive each manager's requests on one client, built as a producer's, until every result is
    done, then raise the first error; ``KafkaTimeoutError`` naming ``what`` when ``timeout`` runs
    out first."""
    stack = build_client(cfg, clock=clock, default_client_id=RESUMER_CLIENT_ID, selector=selector,
                         observers=observers)
    client = stack.client
    budget_ms = cfg.max_block_ms if timeout is None else int(timeout * 1000)
    deadline_ms = clock.monotonic_ms() + budget_ms
    try:
        senders = [(TxnRequestSender(client=client, manager=manager,
                                     retry_backoff_ms=cfg.retry_backoff_ms), result)
                   for manager, result in steps]
        while not all(result.is_done for _, result in senders):
            now_ms = clock.monotonic_ms()
            if now_ms >= deadline_ms:
                raise KafkaTimeoutError(f"{what} did not complete within {budget_ms} ms; nothing "
                                        "changed that cannot be repeated: the call can be retried")
            wait_ms = min((sender.maybe_send(now_ms) for sender, result in senders
                           if not result.is_done), default=_MAX_POLL_MS)
            client.poll(max(0, min(wait_ms, _MAX_POLL_MS, deadline_ms - now_ms)), now_ms)
        for _, result in senders:
            result.wait(0)                       # raises the step's error, if any
    finally:
        stack.close()
