"""MetadataUpdater: the network client's side of metadata refresh (Java's DefaultMetadataUpdater).

It keeps at most one Metadata request in flight, builds its body (the tracked topics, never
auto-creating them) and turns the outcome into :class:`Metadata` calls:

- an answer with brokers            -> ``metadata.update``
- an answer with no brokers, or a top-level error (a broker still starting) -> failed attempt
- a top-level REBOOTSTRAP_REQUIRED (KIP-1102) -> failed attempt, and ``rebootstrap_required``
  for the network client
- a disconnect or timeout before the answer -> failed attempt
- no Metadata version both sides speak -> failed attempt and a fatal error for the waiters

Any disconnect also asks for an update (it may come from stale metadata), and counts as a failed
attempt when an update was due, so the refresh backs off instead of spinning. Which node to ask
and whether to connect first is the network client's decision (``maybe_update_metadata``).

A bootstrap address that keeps failing is logged once at WARNING, then at most once per
:data:`REPEAT_LOG_MS` with the count since (a wrong address would otherwise log every reconnect
attempt), and once at INFO when metadata arrives after such failures.
"""

from __future__ import annotations

import logging
from typing import Any

from ..error_codes import ErrorCode
from ..errors import KafkaError
from .metadata import Metadata

log = logging.getLogger(__name__)

REPEAT_LOG_MS = 30_000
"""How often a bootstrap address that keeps failing is logged again, with the count since."""


class _Failures:
    """One bootstrap address's disconnects since it was last logged."""

    __slots__ = ("total", "unlogged", "logged_ms")

    def __init__(self, now_ms: int):
        self.total, self.unlogged, self.logged_ms = 1, 0, now_ms


class MetadataUpdater:
    """One Metadata request at a time, for ``metadata``; see module doc."""

    def __init__(self, metadata: Metadata, request_timeout_ms: int):
        self.metadata = metadata
        self._request_timeout_ms = request_timeout_ms
        self._in_progress = False
        self.rebootstrap_required = False   # a Metadata answer said REBOOTSTRAP_REQUIRED
        self._failures: dict[str, _Failures] = {}   # bootstrap address -> its disconnects

    @property
    def in_progress(self) -> bool:
        return self._in_progress

    def is_update_due(self, now_ms: int) -> bool:
        """An update should be sent now (none is in flight and the metadata wants one)."""
        return not self._in_progress and self.metadata.time_to_next_update(now_ms) == 0

    def time_to_update(self, now_ms: int) -> int:
        """Ms until a request should be sent: the metadata's timing, or a whole request timeout
        while one is in flight (its answer or failure ends the wait earlier)."""
        waiting = self._request_timeout_ms if self._in_progress else 0
        return max(self.metadata.time_to_next_update(now_ms), waiting)

    def request_body(self) -> dict[str, Any]:
        """Metadata for the tracked topics (an empty list asks for brokers only)."""
        return {"topics": [{"name": topic} for topic in self.metadata.topics],
                "allow_auto_topic_creation": False}

    def sent(self) -> None:
        self._in_progress = True
        self.metadata.request_sent()

    def handle_response(self, response: Any, now_ms: int) -> None:
        self._in_progress = False
        top_level_error = getattr(response, "error_code", 0)
        if top_level_error == ErrorCode.REBOOTSTRAP_REQUIRED:   # KIP-1102: the cluster says so
            self.metadata.failed_update(now_ms)
            self.rebootstrap_required = True
        elif top_level_error:
            log.warning("Metadata answered with error code %d; will retry", top_level_error)
            self.metadata.failed_update(now_ms)
        elif not response.brokers:
            log.debug("ignoring a Metadata response with no brokers")
            self.metadata.failed_update(now_ms)
        else:
            self.metadata.update(response, now_ms)
            if self._failures:
                log.info("metadata received after %s", ", ".join(
                    f"{failures.total} disconnect(s) from bootstrap broker {address}"
                    for address, failures in self._failures.items()))
                self._failures.clear()

    def handle_failed_request(self, now_ms: int, fatal: KafkaError | None = None) -> None:
        self._in_progress = False
        self.metadata.failed_update(now_ms)
        if fatal is not None:
            self.metadata.fatal_error(fatal)

    def handle_server_disconnect(self, now_ms: int, node_id: int) -> None:
        node = self.metadata.snapshot.node(node_id)
        if node is not None and node_id < 0:     # still bootstrapping: say which address failed
            self._log_bootstrap_failure(node.address, node_id, now_ms)
        if self.is_update_due(now_ms):
            self.metadata.failed_update(now_ms)
        self.metadata.request_update(now_ms)

    def _log_bootstrap_failure(self, address: str, node_id: int, now_ms: int) -> None:
        failures = self._failures.get(address)
        if failures is None:
            self._failures[address] = _Failures(now_ms)
            log.warning("bootstrap broker %s (node %d) disconnected", address, node_id)
            return
        failures.total += 1
        failures.unlogged += 1
        if now_ms - failures.logged_ms >= REPEAT_LOG_MS:
            log.warning("bootstrap broker %s (node %d) disconnected %d more time(s) in the last "
                        "%.0f s (%d in all)", address, node_id, failures.unlogged,
                        (now_ms - failures.logged_ms) / 1000, failures.total)
            failures.unlogged, failures.logged_ms = 0, now_ms
