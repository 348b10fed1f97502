"""The producer's own requests about its producer id (and, to come, its transactions): small
handler classes (aiokafka's style, Java's ``TxnRequestHandler``), sent one at a time by a
:class:`TxnRequestSender` that the sender polls before it sends produce data (Java's
``maybeSendAndPollTransactionalRequest``).

A handler says what to send (:meth:`TxnRequestHandler.request_body`), where
(:meth:`TxnRequestHandler.target_node`: the least-loaded node; a coordinator, for transactional
requests), and turns the answer into one of three outcomes (:class:`Outcome`): done, retry after
``retry.backoff.ms``, or a fatal error it has already reported to the
:class:`~.transaction_manager.TransactionManager`. Nothing here blocks: a node that is not ready
yet is connected to and asked again on a later loop.

:class:`InitProducerIdHandler` is the first handler (Java's ``InitProducerIdHandler``, idempotent
part): v3+, no transactional id, the current id/epoch for a KIP-360 bump ((-1, -1) after a
reset). No error: the id and epoch are set and batches can drain. A retriable error or a dropped
connection: ``init_failed``, sent again after the backoff. Anything else, an unknown error code
included: the producer is fatally failed, and the sender then fails every batch with that error.
"""

from __future__ import annotations

import abc
import enum
import logging
from typing import Any

from .. import errors
from ..bytecodec import INT64_MAX
from ..client.network_client import NetworkClient
from ..client.requests import ClientRequest, ClientResponse
from ..protocol.api_message import ApiMessage
from ..protocol.apis import INIT_PRODUCER_ID
from .transaction_manager import ProducerIdState, TransactionManager

log = logging.getLogger(__name__)

NOTHING_TO_WAIT_FOR_MS = INT64_MAX


class Outcome(enum.Enum):
    """What a handler made of its answer."""

    DONE = "done"
    RETRY = "retry"      # send again after retry.backoff.ms
    FATAL = "fatal"      # already reported to the transaction manager


class TxnRequestHandler(abc.ABC):
    """One request about the producer's id or transactions; subclasses fill in the request and
    the meaning of its answer."""

    api: ApiMessage

    def __init__(self, manager: TransactionManager):
        self.manager = manager

    def target_node(self, client: NetworkClient, now_ms: int) -> int | None:
        """The node to send to; None while none is known (wait for metadata)."""
        node = client.least_loaded_node(now_ms)
        return None if node is None else node.node_id

    @abc.abstractmethod
    def request_body(self) -> dict[str, Any]:
        """The request's body, built when it is sent."""

    def on_sent(self, node_id: int) -> None:
        """The request went out."""

    def on_unsupported_version(self, exc: errors.UnsupportedVersionError) -> None:
        """No version of the request is spoken by both sides: fatal by default."""
        self.manager.fatal_error(exc)

    def handle_no_answer(self, response: ClientResponse) -> Outcome:
        """The connection dropped or the request timed out: retry by default."""
        log.info("%s to node %d got no answer (%s); retrying", self.api.name, response.node_id,
                 "timed out" if response.timed_out else "disconnected")
        return Outcome.RETRY

    @abc.abstractmethod
    def handle_response(self, body: Any, node_id: int) -> Outcome:
        """The outcome of the answer ``body`` from ``node_id``."""

    def on_retry(self) -> None:
        """Called before the handler waits out the backoff to be sent again."""


class InitProducerIdHandler(TxnRequestHandler):
    """InitProducerId for the idempotent producer; see the module docstring."""

    api = INIT_PRODUCER_ID

    def __init__(self, manager: TransactionManager, *, transaction_timeout_ms: int):
        super().__init__(manager)
        self._transaction_timeout_ms = transaction_timeout_ms

    def request_body(self) -> dict[str, Any]:
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

    def handle_response(self, body: Any, node_id: int) -> Outcome:
        error = errors.error_for(body.error_code, f"InitProducerId failed on node {node_id}; the "
                                 "idempotent producer cannot continue")
        if error is None:
            self.manager.set_producer_id_and_epoch(body.producer_id, body.producer_epoch)
            return Outcome.DONE
        if error.retriable:
            log.info("InitProducerId failed with %s; retrying", error.name)
            return Outcome.RETRY
        self.manager.fatal_error(error)          # an unknown code too (UNKNOWN_SERVER_ERROR)
        return Outcome.FATAL

    def on_retry(self) -> None:
        self.manager.init_failed()


class TxnRequestSender:
    """Sends the pending handler's request, one at a time, and applies its outcome; see the
    module docstring."""

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

    def maybe_send(self, now_ms: int) -> int:
        """Send the pending request if allowed now; the ms worth waiting before trying again
        (``NOTHING_TO_WAIT_FOR_MS`` when a request is out, was just sent, or none is pending)."""
        handler = self._pending
        if handler is None or self._in_flight:
            return NOTHING_TO_WAIT_FOR_MS
        if now_ms < self._not_before_ms:
            return self._not_before_ms - now_ms
        node_id = handler.target_node(self._client, now_ms)
        if node_id is None:
            log.debug("no node to send %s to; waiting for metadata", handler.api.name)
            return self._retry_backoff_ms
        if not self._client.ready(node_id, now_ms):
            return min(self._client.connection_delay(node_id, now_ms), self._retry_backoff_ms)
        request = ClientRequest(node_id, handler.api, handler.request_body(), created_ms=now_ms,
                                callback=lambda response: self._on_response(handler, response))
        try:
            self._client.send(request, now_ms)
        except errors.UnsupportedVersionError as exc:
            self._pending = None
            handler.on_unsupported_version(exc)
            return NOTHING_TO_WAIT_FOR_MS
        handler.on_sent(node_id)
        self._in_flight = True
        return NOTHING_TO_WAIT_FOR_MS

    def _on_response(self, handler: TxnRequestHandler, response: ClientResponse) -> None:
        self._in_flight = False
        if self._manager.state is ProducerIdState.FATAL_ERROR:
            self._pending = None                 # failed fatally meanwhile
            return
        if response.disconnected or response.body is None:
            outcome = handler.handle_no_answer(response)
        else:
            outcome = handler.handle_response(response.body, response.node_id)
        if outcome is Outcome.RETRY:
            handler.on_retry()
            self._not_before_ms = response.received_ms + self._retry_backoff_ms
        else:
            self._pending = None
