"""The producer's own requests about its producer id and its transactions: small handler classes
(aiokafka's style, Java's ``TxnRequestHandler``), sent one at a time by a
:class:`TxnRequestSender` that the sender polls before it sends produce data (Java's
``maybeSendAndPollTransactionalRequest``).

A handler says what to send (:meth:`TxnRequestHandler.request_body`), where
(:meth:`TxnRequestHandler.target_node`: the least-loaded node, or the coordinator), and turns the
answer into a :class:`HandlerOutcome`: done, retry after ``retry.backoff.ms``, or a fatal error
already reported to the :class:`~.manager.TransactionManager`. Nothing blocks. A handler lives
for one request: a retry asks the manager again what to send, so a moved coordinator is looked up
again.

Threads: the handlers and :class:`TxnRequestSender` run on the producer's I/O thread (for
:mod:`.resumable`, on the caller's thread, with no producer). They call the manager, which takes
its own lock, and InitProducerId's answer goes to the sequence bookkeeping
(:mod:`.idempotence`); the manager never calls them.

- :class:`InitProducerIdHandler`, idempotent producer: v3+, no transactional id, the current
  id/epoch for a KIP-360 bump ((-1, -1) after a reset). No error: the id and epoch are set
  (:meth:`.idempotence.Idempotence.set_producer_id_and_epoch`) and batches can drain. A
  retriable error or a dropped connection: ``init_failed``, sent again after the backoff. Anything else, an unknown error code included: fatal, and the sender then fails
  every batch with that error.
- Transactional requests (Java's handlers, Java's error handling): NOT_COORDINATOR,
  COORDINATOR_NOT_AVAILABLE or a dropped connection to the coordinator: look it up again, retry;
  COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS: retry; PRODUCER_FENCED and
  INVALID_PRODUCER_EPOCH: fatal, as :class:`~spark_kafka_sink.errors.ProducerFencedError`;
  authorization failures and INVALID_TXN_STATE: fatal; TRANSACTION_ABORTABLE, UNKNOWN_PRODUCER_ID
  and INVALID_PRODUCER_ID_MAPPING: the transaction becomes abortable; anything else: fatal.
  EndTxn of a resumed transaction (:mod:`.resumable`) answered INVALID_PRODUCER_ID_MAPPING is
  fatal instead: the id expired, and there is no producer to abort with.

  - :class:`FindCoordinatorHandler`: key type TRANSACTION; v4+ sends the key in
    ``coordinator_keys`` and reads ``coordinators``, v0-3 the single-key fields.
  - :class:`TxnInitProducerIdHandler`: InitProducerId with the transactional id, to the
    coordinator (fences older producers of the id; after an abort that needs a new epoch, KIP-360).
  - :class:`AddPartitionsToTxnHandler`: v3 and below (v4+ is for brokers), the partitions whose
    first batch waits. A partition refused with an unexpected error, or TOPIC_AUTHORIZATION_FAILED,
    makes the transaction abortable.
  - :class:`EndTxnHandler`: commit or abort, once nothing is in flight; below v5 under
    transaction version 1, v5+ under version 2 (KIP-890: the answer carries the bumped epoch).
"""

from __future__ import annotations

import abc
import enum
import logging
from typing import Any

from ... import errors
from ...bytecodec import INT64_MAX
from ...client.network_client import NetworkClient
from ...client.requests import ClientRequest, ClientResponse
from ...error_codes import ErrorCode
from ...protocol.api_message import ApiMessage
from ...protocol.apis import ADD_PARTITIONS_TO_TXN, END_TXN, FIND_COORDINATOR, INIT_PRODUCER_ID
from ...structs import Node, TopicPartition
from .idempotence import Idempotence
from .manager import TransactionManager, fenced_error
from .states import TransactionalStep, TransactionState

log = logging.getLogger(__name__)

NOTHING_TO_WAIT_FOR_MS = INT64_MAX


class HandlerOutcome(enum.Enum):
    """What a handler made of its answer."""

    DONE = "done"
    RETRY = "retry"      # send again after retry.backoff.ms
    FATAL = "fatal"      # already reported to the transaction manager


class TxnRequestHandler(abc.ABC):
    """One request about the producer's id or transactions; subclasses fill in the request and
    the meaning of its answer."""

    api: ApiMessage
    max_version: int | None = None

    def __init__(self, manager: TransactionManager):
        self.manager = manager

    def target_node(self, client: NetworkClient, now_ms: int) -> Node | None:
        """The node to send to; None while none is known (wait for metadata)."""
        return client.least_loaded_node(now_ms)

    @abc.abstractmethod
    def request_body(self, version: int) -> dict[str, Any]:
        """The request's body at ``version``, built when it is sent."""

    def on_sent(self, node_id: int) -> None:
        """The request went out."""

    def on_unsupported_version(self, exc: errors.UnsupportedVersionError) -> None:
        """No version of the request is spoken by both sides: fatal by default."""
        self.manager.fatal_error(exc)

    def handle_no_answer(self, response: ClientResponse) -> HandlerOutcome:
        """The connection dropped or the request timed out: retry by default."""
        log.info("%s to node %d got no answer (%s); retrying", self.api.name, response.node_id,
                 "timed out" if response.timed_out else "disconnected")
        return HandlerOutcome.RETRY

    @abc.abstractmethod
    def handle_response(self, body: Any, node_id: int) -> HandlerOutcome:
        """The outcome of the answer ``body`` from ``node_id``."""

    def on_retry(self) -> None:
        """Called before the handler waits out the backoff to be sent again."""

    def on_unreachable(self, node_id: int) -> None:
        """The connection to the target node failed before the request could go: by default
        the next attempt picks a node again."""


class InitProducerIdHandler(TxnRequestHandler):
    """InitProducerId for the idempotent producer; see the module docstring. Its answer goes to
    the sequence bookkeeping (which has the manager take the id, then re-sequences); the rest
    to the manager."""

    api = INIT_PRODUCER_ID

    def __init__(self, idempotence: Idempotence, *, transaction_timeout_ms: int):
        super().__init__(idempotence.manager)
        self.idempotence = idempotence
        self._transaction_timeout_ms = transaction_timeout_ms

    def request_body(self, version: int) -> dict[str, Any]:
        current = self.manager.producer_id_and_epoch
        return {"transactional_id": None, "transaction_timeout_ms": self._transaction_timeout_ms,
                "producer_id": current.producer_id, "producer_epoch": current.epoch}

    def on_sent(self, node_id: int) -> None:
        log.debug("sending InitProducerId (current %s) to node %d", self.manager.producer_id_and_epoch,
                  node_id)
        self.manager.begin_init()

    def on_unsupported_version(self, exc: errors.UnsupportedVersionError) -> None:
        self.manager.fatal_error(errors.UnsupportedVersionError(
            f"the idempotent producer needs InitProducerId v3 or later: {exc}"))

    def handle_response(self, body: Any, node_id: int) -> HandlerOutcome:
        error = errors.error_for(body.error_code, f"InitProducerId failed on node {node_id}; the "
                                 "idempotent producer cannot continue")
        if error is None:
            self.idempotence.set_producer_id_and_epoch(body.producer_id, body.producer_epoch)
            return HandlerOutcome.DONE
        if error.retriable:
            log.info("InitProducerId failed with %s; retrying", error.name)
            return HandlerOutcome.RETRY
        self.manager.fatal_error(error)          # an unknown code too (UNKNOWN_SERVER_ERROR)
        return HandlerOutcome.FATAL

    def on_retry(self) -> None:
        self.manager.init_failed()


_COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_RETRY = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS})
_FENCED = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})
_ABORTABLE = frozenset({ErrorCode.TRANSACTION_ABORTABLE, ErrorCode.UNKNOWN_PRODUCER_ID,
                        ErrorCode.INVALID_PRODUCER_ID_MAPPING})


class CoordinatorRequestHandler(TxnRequestHandler):
    """A request to the transaction coordinator, with Java's handling of the errors every such
    request shares (see the module docstring)."""

    def target_node(self, client: NetworkClient, now_ms: int) -> Node | None:
        return self.manager.coordinator

    def handle_no_answer(self, response: ClientResponse) -> HandlerOutcome:
        self.manager.set_coordinator(None)
        return super().handle_no_answer(response)

    def on_unreachable(self, node_id: int) -> None:
        log.info("%s: cannot connect to the transaction coordinator, node %d; looking it up again",
                 self.api.name, node_id)
        self.manager.set_coordinator(None)

    def handle_error(self, code: int, node_id: int) -> HandlerOutcome:
        """The outcome of error ``code`` (not NONE) that the handler does not treat itself."""
        error = errors.error_for(code, f"{self.api.name} for transactional.id "
                                 f"{self.manager.transactional_id!r} on node {node_id}")
        if code in _COORDINATOR_MOVED:
            self.manager.set_coordinator(None)
            return HandlerOutcome.RETRY
        if code in _RETRY:
            log.debug("%s: %s; retrying", self.api.name, error.name)
            return HandlerOutcome.RETRY
        if code in _FENCED:
            self.manager.fatal_error(fenced_error(self.manager, error,
                                                        f"{self.api.name} on node {node_id}"))
            return HandlerOutcome.FATAL
        if code in _ABORTABLE:
            self.manager.abortable_error(error)
            return HandlerOutcome.DONE
        self.manager.fatal_error(error)
        return HandlerOutcome.FATAL


class FindCoordinatorHandler(TxnRequestHandler):
    """FindCoordinator for the transactional id (key type 1, TRANSACTION)."""

    api = FIND_COORDINATOR

    def request_body(self, version: int) -> dict[str, Any]:
        key = self.manager.transactional_id
        if version >= 4:
            return {"key_type": 1, "coordinator_keys": [key]}
        return {"key": key, "key_type": 1}

    def handle_response(self, body: Any, node_id: int) -> HandlerOutcome:
        if body.coordinators is not None and len(body.coordinators):   # v4+
            found = body.coordinators[0]
            code, message, node = found.error_code, found.error_message, found
        else:
            code, message, node = body.error_code, getattr(body, "error_message", None), body
        if code == ErrorCode.NONE:
            coordinator = Node(node.node_id, node.host, node.port)
            log.info("Discovered transaction coordinator %s for transactional.id %r",
                     coordinator, self.manager.transactional_id)
            self.manager.set_coordinator(coordinator)
            return HandlerOutcome.DONE
        if code in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                    ErrorCode.NOT_COORDINATOR):
            return HandlerOutcome.RETRY
        self.manager.fatal_error(errors.error_for(
            code, f"could not find the transaction coordinator of transactional.id "
            f"{self.manager.transactional_id!r}" + (f": {message}" if message else "")))
        return HandlerOutcome.FATAL


class TxnInitProducerIdHandler(CoordinatorRequestHandler):
    """InitProducerId for a transactional id (see the module docstring)."""

    api = INIT_PRODUCER_ID

    def request_body(self, version: int) -> dict[str, Any]:
        current = self.manager.producer_id_and_epoch
        return {"transactional_id": self.manager.transactional_id,
                "transaction_timeout_ms": self.manager.transaction_timeout_ms,
                "producer_id": current.producer_id, "producer_epoch": current.epoch}

    def on_unsupported_version(self, exc: errors.UnsupportedVersionError) -> None:
        self.manager.fatal_error(errors.UnsupportedVersionError(
            f"transactions need InitProducerId v3 or later: {exc}"))

    def handle_response(self, body: Any, node_id: int) -> HandlerOutcome:
        if body.error_code == ErrorCode.NONE:
            self.manager.transactional_init_done(body.producer_id, body.producer_epoch)
            return HandlerOutcome.DONE
        if body.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT:
            self.manager.fatal_error(errors.error_for(
                body.error_code, f"transaction.timeout.ms ({self.manager.transaction_timeout_ms} ms) "
                f"is refused by the brokers (node {node_id}): it is more than their "
                "transaction.max.timeout.ms (15 minutes by default); lower it or raise theirs"))
            return HandlerOutcome.FATAL
        if body.error_code in _ABORTABLE:         # nothing to abort while initialising
            self.manager.fatal_error(errors.error_for(
                body.error_code, f"InitProducerId for transactional.id "
                f"{self.manager.transactional_id!r} on node {node_id}"))
            return HandlerOutcome.FATAL
        return self.handle_error(body.error_code, node_id)


class AddPartitionsToTxnHandler(CoordinatorRequestHandler):
    """AddPartitionsToTxn (v3 and below) for the partitions whose first batch waits."""

    api = ADD_PARTITIONS_TO_TXN
    max_version = 3                              # v4+ is broker to broker

    def __init__(self, manager: TransactionManager):
        super().__init__(manager)
        self.partitions = manager.take_new_partitions()

    def request_body(self, version: int) -> dict[str, Any]:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(self.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        pid_epoch = self.manager.producer_id_and_epoch
        return {"v3_and_below_transactional_id": self.manager.transactional_id,
                "v3_and_below_producer_id": pid_epoch.producer_id,
                "v3_and_below_producer_epoch": pid_epoch.epoch,
                "v3_and_below_topics": [{"name": topic, "partitions": partitions}
                                        for topic, partitions in by_topic.items()]}

    def handle_no_answer(self, response: ClientResponse) -> HandlerOutcome:
        self.manager.partitions_not_added(self.partitions, retry=True)
        return super().handle_no_answer(response)

    def on_unreachable(self, node_id: int) -> None:
        self.manager.partitions_not_added(self.partitions, retry=True)
        super().on_unreachable(node_id)

    def on_unsupported_version(self, exc: errors.UnsupportedVersionError) -> None:
        self.manager.partitions_not_added(self.partitions, retry=False)
        super().on_unsupported_version(exc)

    def handle_response(self, body: Any, node_id: int) -> HandlerOutcome:
        failed: dict[TopicPartition, int] = {}
        for topic in body.results_by_topic_v3_and_below:
            for result in topic.results_by_partition:
                if result.partition_error_code != ErrorCode.NONE:
                    failed[TopicPartition(topic.name, result.partition_index)] = \
                        result.partition_error_code
        if not failed:
            self.manager.partitions_added(self.partitions)
            return HandlerOutcome.DONE
        codes = set(failed.values())
        unexpected = codes - {ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.TOPIC_AUTHORIZATION_FAILED}
        shared = next((code for code in unexpected if code in _COORDINATOR_MOVED | _RETRY | _FENCED
                       | _ABORTABLE | {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                       ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                       ErrorCode.INVALID_TXN_STATE}), None)
        if shared == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            self.manager.partitions_not_added(self.partitions, retry=True)
            return HandlerOutcome.RETRY
        if shared is not None:
            outcome = self.handle_error(shared, node_id)
            self.manager.partitions_not_added(self.partitions, retry=outcome is HandlerOutcome.RETRY)
            return outcome
        self.manager.partitions_not_added(self.partitions, retry=False)
        detail = ", ".join(f"{tp.topic}-{tp.partition}: {errors.for_code(code).__name__}"
                           for tp, code in sorted(failed.items()))
        self.manager.abortable_error(errors.KafkaError(
            f"Could not add partitions to the transaction of transactional.id "
            f"{self.manager.transactional_id!r}: {detail}"))
        return HandlerOutcome.DONE


class EndTxnHandler(CoordinatorRequestHandler):
    """EndTxn, commit or abort, once nothing is in flight."""

    api = END_TXN

    def __init__(self, manager: TransactionManager, *, committed: bool):
        super().__init__(manager)
        self.committed = committed
        self.max_version = None if manager.transaction_version >= 2 else 4

    def request_body(self, version: int) -> dict[str, Any]:
        pid_epoch = self.manager.producer_id_and_epoch
        return {"transactional_id": self.manager.transactional_id,
                "producer_id": pid_epoch.producer_id, "producer_epoch": pid_epoch.epoch,
                "committed": self.committed}

    def handle_response(self, body: Any, node_id: int) -> HandlerOutcome:
        if body.error_code == ErrorCode.NONE:
            self.manager.end_txn_done(body.producer_id, body.producer_epoch)
            return HandlerOutcome.DONE
        if body.error_code == ErrorCode.INVALID_TXN_STATE:
            timeout_ms = self.manager.transaction_timeout_ms
            what, other = ("commit", f"aborted (after transaction.timeout.ms ({timeout_ms} ms), "
                           "or by its producer), so its records are lost") if self.committed \
                else ("abort", "committed")
            self.manager.fatal_error(errors.error_for(
                body.error_code, f"EndTxn({what}) for transactional.id "
                f"{self.manager.transactional_id!r}, producer id "
                f"{self.manager.producer_id_and_epoch.producer_id} epoch "
                f"{self.manager.producer_id_and_epoch.epoch}: the coordinator has no open "
                f"transaction of that producer to {what}; it was already {other}"))
            return HandlerOutcome.FATAL
        if body.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING and self.manager.resumed:
            self.manager.fatal_error(errors.error_for(
                body.error_code, f"EndTxn({'commit' if self.committed else 'abort'}) for "
                f"transactional.id {self.manager.transactional_id!r}, producer id "
                f"{self.manager.producer_id_and_epoch.producer_id} epoch "
                f"{self.manager.producer_id_and_epoch.epoch}: the coordinator no longer knows the "
                "id (it expired: unused for longer than the brokers' "
                "transactional.id.expiration.ms), so whether this transaction was committed before "
                "is unknown; if it was not, the coordinator aborted it after "
                f"transaction.timeout.ms ({self.manager.transaction_timeout_ms} ms)"))
            return HandlerOutcome.FATAL
        return self.handle_error(body.error_code, node_id)


def transactional_handler(step: TransactionalStep, manager: TransactionManager) -> TxnRequestHandler:
    """The handler for a step of :meth:`TransactionManager.next_transactional_step`."""
    if step is TransactionalStep.FIND_COORDINATOR:
        return FindCoordinatorHandler(manager)
    if step is TransactionalStep.INIT_PRODUCER_ID:
        return TxnInitProducerIdHandler(manager)
    if step is TransactionalStep.ADD_PARTITIONS:
        return AddPartitionsToTxnHandler(manager)
    if step in (TransactionalStep.COMMIT, TransactionalStep.ABORT):
        return EndTxnHandler(manager, committed=step is TransactionalStep.COMMIT)
    raise ValueError(f"unknown transactional step {step!r}")


class TxnRequestSender:
    """Sends one producer-id or transactional request at a time and applies its outcome; see
    the module docstring."""

    def __init__(self, *, client: NetworkClient, manager: TransactionManager, retry_backoff_ms: int):
        self._client = client
        self._manager = manager
        self._retry_backoff_ms = retry_backoff_ms
        self._pending: TxnRequestHandler | None = None
        self._in_flight = False
        self._not_before_ms = 0

    @property
    def in_flight(self) -> bool:
        return self._in_flight

    @property
    def has_pending(self) -> bool:
        return self._pending is not None

    def enqueue(self, handler: TxnRequestHandler) -> None:
        if self._pending is not None:
            raise errors.IllegalStateError(
                f"{handler.api.name} enqueued while {self._pending.api.name} is pending")
        self._pending = handler

    def maybe_send(self, now_ms: int, has_incomplete_batches: bool = False) -> int:
        """Send the pending request (for a transactional producer, the manager's next step) if
        allowed now; the ms worth waiting before trying again (``NOTHING_TO_WAIT_FOR_MS`` when a
        request is out, was just sent, or none is pending)."""
        if self._in_flight:
            return NOTHING_TO_WAIT_FOR_MS
        if now_ms < self._not_before_ms:
            return self._not_before_ms - now_ms
        if self._pending is None and self._manager.is_transactional:
            step = self._manager.next_transactional_step(has_incomplete_batches)
            if step is not None:
                self._pending = transactional_handler(step, self._manager)
        handler = self._pending
        if handler is None:
            return NOTHING_TO_WAIT_FOR_MS
        node = handler.target_node(self._client, now_ms)
        if node is None:
            log.debug("no node to send %s to; waiting for metadata", handler.api.name)
            return self._retry_backoff_ms
        if not self._client.ready(node.node_id, now_ms, node):
            if self._client.connection_failed(node.node_id):
                # the node is down or gone (a coordinator that died): ask again what to send and
                # where, after the backoff, as Java's maybeFindCoordinatorAndRetry
                handler.on_unreachable(node.node_id)
                self._pending = None
                self._not_before_ms = now_ms + self._retry_backoff_ms
                return self._retry_backoff_ms
            return min(self._client.poll_delay(node.node_id, now_ms), self._retry_backoff_ms)
        request = ClientRequest(node.node_id, handler.api, handler.request_body, created_ms=now_ms,
                                max_version=handler.max_version,
                                callback=lambda response: self._on_response(handler, response))
        try:
            self._client.send(request, now_ms)
        except errors.UnsupportedVersionError as exc:
            self._pending = None
            handler.on_unsupported_version(exc)
            return NOTHING_TO_WAIT_FOR_MS
        handler.on_sent(node.node_id)
        self._in_flight = True
        return NOTHING_TO_WAIT_FOR_MS

    def _on_response(self, handler: TxnRequestHandler, response: ClientResponse) -> None:
        self._in_flight = False
        self._pending = None                     # a retry asks again what to send
        if self._manager.state is TransactionState.FATAL_ERROR:
            return                               # failed fatally meanwhile
        if response.disconnected or response.body is None:
            outcome = handler.handle_no_answer(response)
        else:
            outcome = handler.handle_response(response.body, response.node_id)
        if outcome is HandlerOutcome.RETRY:
            handler.on_retry()
            self._not_before_ms = response.received_ms + self._retry_backoff_ms
