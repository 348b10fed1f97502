"""InitProducerId for the idempotent producer: when to send it, where, and what its answer means.

The sender calls :meth:`ProducerIdInitializer.maybe_send` each loop once
``TransactionManager.bump_epoch_and_reset_id_if_needed()`` said an id is needed. It sends one
request at a time (v3+, no transactional id, the current id/epoch for a KIP-360 bump, which is
(-1, -1) after a reset) to the least-loaded node, never blocking: a node that is not ready yet
is connected to and asked again on a later loop.

The answer (Java's ``InitProducerIdHandler``, idempotent part):

- no error: the id and epoch are set; batches can drain;
- a retriable error or a dropped connection: ``init_failed`` and sent again after
  ``retry.backoff.ms``;
- anything else: the producer is fatally failed (``TransactionManager.fatal_error``); the sender
  then fails every batch with that error.
"""

from __future__ import annotations

import logging

from .. import errors
from ..client.network_client import NetworkClient
from ..client.requests import ClientRequest, ClientResponse
from ..protocol.apis import INIT_PRODUCER_ID
from .transaction_manager import TransactionManager, ProducerIdState

log = logging.getLogger(__name__)

NOTHING_TO_WAIT_FOR_MS = (1 << 63) - 1


class ProducerIdInitializer:
    """Sends InitProducerId when needed and applies the response; see the module docstring."""

    def __init__(self, *, client: NetworkClient, idempotence: TransactionManager,
                 transaction_timeout_ms: int, retry_backoff_ms: int):
        self._client = client
        self._idempotence = idempotence
        self._transaction_timeout_ms = transaction_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._in_flight = False
        self._not_before_ms = 0

    @property
    def in_flight(self) -> bool:
        return self._in_flight

    def maybe_send(self, now_ms: int) -> int:
        """Send InitProducerId if allowed now; the ms worth waiting before trying again
        (``NOTHING_TO_WAIT_FOR_MS`` when a request is out or was just sent)."""
        if self._in_flight:
            return NOTHING_TO_WAIT_FOR_MS
        if now_ms < self._not_before_ms:
            return self._not_before_ms - now_ms
        node = self._client.least_loaded_node(now_ms)
        if node is None:
            log.debug("no node to send InitProducerId to; waiting for metadata")
            return self._retry_backoff_ms
        if not self._client.ready(node.node_id, now_ms):
            return min(self._client.connection_delay(node.node_id, now_ms), self._retry_backoff_ms)
        return self._send(node.node_id, now_ms)

    def _send(self, node_id: int, now_ms: int) -> int:
        current = self._idempotence.producer_id_and_epoch
        body = {"transactional_id": None, "transaction_timeout_ms": self._transaction_timeout_ms,
                "producer_id": current.producer_id, "producer_epoch": current.epoch}
        request = ClientRequest(node_id, INIT_PRODUCER_ID, body, created_ms=now_ms,
                                callback=self._on_response)
        try:
            self._client.send(request, now_ms)
        except errors.UnsupportedVersionError as exc:
            self._idempotence.fatal_error(errors.UnsupportedVersionError(
                f"the idempotent producer needs InitProducerId v3 or later: {exc}"))
            return NOTHING_TO_WAIT_FOR_MS
        log.debug("sending InitProducerId (current %s) to node %d", current, node_id)
        self._idempotence.begin_init()
        self._in_flight = True
        return NOTHING_TO_WAIT_FOR_MS

    def _on_response(self, response: ClientResponse) -> None:
        self._in_flight = False
        if self._idempotence.state is not ProducerIdState.INITIALIZING:
            return                                   # failed fatally meanwhile
        now_ms = response.received_ms
        if response.disconnected or response.body is None:
            log.info("InitProducerId to node %d got no answer (%s); retrying in %d ms",
                     response.node_id, "timed out" if response.timed_out else "disconnected",
                     self._retry_backoff_ms)
            self._retry_later(now_ms)
            return
        body = response.body
        error = errors.error_for(body.error_code, f"InitProducerId failed on node "
                                 f"{response.node_id}; the idempotent producer cannot continue")
        if error is None:
            self._idempotence.set_producer_id_and_epoch(body.producer_id, body.producer_epoch)
        elif error.retriable:
            log.info("InitProducerId failed with %s; retrying in %d ms", error.name,
                     self._retry_backoff_ms)
            self._retry_later(now_ms)
        else:                                    # an unknown code too (UNKNOWN_SERVER_ERROR)
            self._idempotence.fatal_error(error)

    def _retry_later(self, now_ms: int) -> None:
        self._idempotence.init_failed()
        self._not_before_ms = now_ms + self._retry_backoff_ms
