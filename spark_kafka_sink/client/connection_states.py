"""The state of our connection to each node, as a transition table (h11 ``_state.py`` style).

The rules:

- A node we never connected to, or whose entry was removed, has no entry and may connect at once.
- DISCONNECTED -> CONNECTING when a connection is initiated. CONNECTING -> CHECKING_API_VERSIONS
  when the socket (and, later, its TLS transport) is up and the ApiVersions request is queued.
  CHECKING_API_VERSIONS -> READY when the broker's versions arrive, or -> AUTHENTICATING first
  when SASL is configured (SaslHandshake and SaslAuthenticate run; ``client.auth.authenticator``).
  AUTHENTICATING -> READY once the broker accepts us. A refused authentication is a failure like
  any other: DISCONNECTED, with the reconnect backoff grown.
- Any state -> DISCONNECTED on a failure, a timeout or a close. No other move exists; asking for
  one raises :class:`~spark_kafka_sink.errors.IllegalStateError`.
- Reconnect backoff: after the n-th consecutive failure a node waits
  ``reconnect.backoff.ms * 2**(n-1)`` (±20% jitter, capped at ``reconnect.backoff.max.ms``) from
  its last connection attempt before it may connect again. Reaching READY resets the count.
- Connection setup timeout: a node in CONNECTING longer than its setup timeout is given up. The
  timeout starts at ``socket.connection.setup.timeout.ms`` and doubles (±20%) with each failed
  connect up to ``socket.connection.setup.timeout.max.ms``; it resets once a connect succeeds.
- A node whose address changed starts over with a fresh entry (no backoff carried over).
- Throttling (KIP-219): a response may ask the client to send nothing more to its broker for
  ``throttle_time_ms``; :meth:`throttle` records until when. A READY node is not ready for
  requests before then (:meth:`is_ready` with a time), and :meth:`poll_delay` is that wait for a
  connected node. The throttle outlives a reconnect, as in Java: it is the broker's quota.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum

from ..errors import IllegalStateError
from .backoff import ExponentialBackoff, UniformSource

NO_DELAY_MS = 0
FOREVER_MS = 2**63 - 1


class ConnectionState(Enum):
    DISCONNECTED = "DISCONNECTED"
    CONNECTING = "CONNECTING"
    CHECKING_API_VERSIONS = "CHECKING_API_VERSIONS"
    AUTHENTICATING = "AUTHENTICATING"
    READY = "READY"


_S = ConnectionState

#: state -> the states it may move to
TRANSITIONS: dict[ConnectionState, frozenset[ConnectionState]] = {
    _S.DISCONNECTED: frozenset({_S.CONNECTING}),
    _S.CONNECTING: frozenset({_S.CHECKING_API_VERSIONS, _S.DISCONNECTED}),
    _S.CHECKING_API_VERSIONS: frozenset({_S.AUTHENTICATING, _S.READY, _S.DISCONNECTED}),
    _S.AUTHENTICATING: frozenset({_S.READY, _S.DISCONNECTED}),
    _S.READY: frozenset({_S.DISCONNECTED}),
}

_CONNECTED = frozenset({_S.CHECKING_API_VERSIONS, _S.AUTHENTICATING, _S.READY})


@dataclass
class _NodeState:
    """One node's entry (mutable, private to the table)."""

    state: ConnectionState
    address: str
    last_attempt_ms: int
    reconnect_backoff_ms: int
    setup_timeout_ms: int
    failed_attempts: int = 0
    failed_connects: int = 0
    throttle_until_ms: int = 0


class ConnectionStates:
    """Per-node connection states with reconnect backoff and setup timeouts; see module doc."""

    def __init__(self, *, reconnect_backoff_ms: int = 50, reconnect_backoff_max_ms: int = 1000,
                 setup_timeout_ms: int = 10_000, setup_timeout_max_ms: int = 30_000,
                 rng: UniformSource | None = None):
        rng = rng if rng is not None else random.Random()
        self._reconnect = ExponentialBackoff(reconnect_backoff_ms, reconnect_backoff_max_ms,
                                             rng=rng)
        self._setup = ExponentialBackoff(setup_timeout_ms, setup_timeout_max_ms, rng=rng)
        self._nodes: dict[int, _NodeState] = {}

    # --- queries --------------------------------------------------------------------------------

    def state(self, node_id: int) -> ConnectionState:
        """The node's state; DISCONNECTED when it has no entry."""
        entry = self._nodes.get(node_id)
        return _S.DISCONNECTED if entry is None else entry.state

    def can_connect(self, node_id: int, now_ms: int) -> bool:
        """Disconnected and past the reconnect backoff (or never tried)."""
        entry = self._nodes.get(node_id)
        if entry is None:
            return True
        return (entry.state is _S.DISCONNECTED
                and now_ms - entry.last_attempt_ms >= entry.reconnect_backoff_ms)

    def is_blacked_out(self, node_id: int, now_ms: int) -> bool:
        """Disconnected and still inside the reconnect backoff."""
        entry = self._nodes.get(node_id)
        return (entry is not None and entry.state is _S.DISCONNECTED
                and now_ms - entry.last_attempt_ms < entry.reconnect_backoff_ms)

    def connection_delay(self, node_id: int, now_ms: int) -> int:
        """Ms to wait before a send could be possible: the backoff left when disconnected, the
        setup timeout while connecting, and "forever" (until a wakeup) when connected."""
        entry = self._nodes.get(node_id)
        if entry is None:
            return NO_DELAY_MS
        if entry.state is _S.CONNECTING:
            return entry.setup_timeout_ms
        if entry.state is _S.DISCONNECTED:
            return max(entry.reconnect_backoff_ms - (now_ms - entry.last_attempt_ms), 0)
        return FOREVER_MS

    def unreachable(self, node_id: int) -> bool:
        """DISCONNECTED because its last connection attempt failed (connect refused or timed
        out), not merely closed: tried, and not reachable."""
        entry = self._nodes.get(node_id)
        return entry is not None and entry.state is _S.DISCONNECTED and entry.failed_connects > 0

    def poll_delay(self, node_id: int, now_ms: int) -> int:
        """Ms to wait before ``node_id`` could take a request: the throttle left when connected
        and throttled, else :meth:`connection_delay`."""
        throttled = self.throttle_delay(node_id, now_ms)
        if throttled and self.is_connected(node_id):
            return throttled
        return self.connection_delay(node_id, now_ms)

    def is_ready(self, node_id: int, now_ms: int | None = None) -> bool:
        """READY, and (given ``now_ms``) not throttled."""
        entry = self._nodes.get(node_id)
        return (entry is not None and entry.state is _S.READY
                and (now_ms is None or entry.throttle_until_ms <= now_ms))

    def throttle(self, node_id: int, until_ms: int) -> None:
        """The broker asked for no request to ``node_id`` before ``until_ms`` (a later throttle
        never shortens an earlier one). Ignored for a node without an entry."""
        entry = self._nodes.get(node_id)
        if entry is not None and until_ms > entry.throttle_until_ms:
            entry.throttle_until_ms = until_ms

    def throttle_delay(self, node_id: int, now_ms: int) -> int:
        """Ms left of ``node_id``'s throttle (0: not throttled)."""
        entry = self._nodes.get(node_id)
        return 0 if entry is None else max(entry.throttle_until_ms - now_ms, 0)

    def is_connecting(self, node_id: int) -> bool:
        return self.state(node_id) is _S.CONNECTING

    def is_connected(self, node_id: int) -> bool:
        """The socket is up (checking versions, authenticating or ready)."""
        return self.state(node_id) in _CONNECTED

    def is_preparing(self, node_id: int) -> bool:
        """Connecting, or connected but not READY yet."""
        return self.state(node_id) in (_S.CONNECTING, _S.CHECKING_API_VERSIONS, _S.AUTHENTICATING)

    def is_disconnected(self, node_id: int) -> bool:
        """Has an entry and is DISCONNECTED (a failure happened, as opposed to never tried)."""
        entry = self._nodes.get(node_id)
        return entry is not None and entry.state is _S.DISCONNECTED

    def any_connecting(self) -> bool:
        return any(entry.state is _S.CONNECTING for entry in self._nodes.values())

    def last_attempt_ms(self, node_id: int) -> int:
        entry = self._nodes.get(node_id)
        return 0 if entry is None else entry.last_attempt_ms

    def reconnect_backoff_ms(self, node_id: int) -> int:
        """The node's current reconnect backoff (the base value before any failure)."""
        entry = self._nodes.get(node_id)
        return self._reconnect.backoff(0) if entry is None else entry.reconnect_backoff_ms

    def setup_timeout_ms(self, node_id: int) -> int:
        """The node's current connection setup timeout."""
        return self._entry(node_id).setup_timeout_ms

    def next_setup_deadline_ms(self) -> int | None:
        """The earliest moment a CONNECTING node's setup times out; None when none connects."""
        return min((entry.last_attempt_ms + entry.setup_timeout_ms
                    for entry in self._nodes.values() if entry.state is _S.CONNECTING),
                   default=None)

    def nodes_with_setup_timeout(self, now_ms: int) -> list[int]:
        """CONNECTING nodes whose setup took longer than their timeout."""
        return [node_id for node_id, entry in self._nodes.items()
                if entry.state is _S.CONNECTING
                and now_ms - entry.last_attempt_ms > entry.setup_timeout_ms]

    # --- transitions ----------------------------------------------------------------------------

    def connecting(self, node_id: int, now_ms: int, address: str) -> None:
        """A connection attempt to ``address`` starts now."""
        entry = self._nodes.get(node_id)
        if entry is None or entry.address != address:
            entry = _NodeState(_S.DISCONNECTED, address, now_ms,
                               self._reconnect.backoff(0), self._setup.backoff(0))
            self._nodes[node_id] = entry
        self._move(node_id, entry, _S.CONNECTING)
        entry.last_attempt_ms = now_ms

    def checking_api_versions(self, node_id: int) -> None:
        """Connected; the ApiVersions request is queued. The setup timeout resets."""
        entry = self._entry(node_id)
        self._move(node_id, entry, _S.CHECKING_API_VERSIONS)
        self._reset_setup_timeout(entry)

    def authenticating(self, node_id: int) -> None:
        """API versions known; the SASL exchange starts."""
        self._move(node_id, self._entry(node_id), _S.AUTHENTICATING)

    def ready(self, node_id: int) -> None:
        """The node accepts requests; the failure counts reset."""
        entry = self._entry(node_id)
        self._move(node_id, entry, _S.READY)
        entry.failed_attempts = 0
        entry.reconnect_backoff_ms = self._reconnect.backoff(0)
        self._reset_setup_timeout(entry)

    def disconnected(self, node_id: int, now_ms: int) -> None:
        """The connection failed or closed; the backoff grows."""
        entry = self._entry(node_id)
        if entry.state is _S.DISCONNECTED:
            return
        was_connecting = entry.state is _S.CONNECTING
        self._move(node_id, entry, _S.DISCONNECTED)
        entry.last_attempt_ms = now_ms
        entry.reconnect_backoff_ms = self._reconnect.backoff(entry.failed_attempts)
        entry.failed_attempts += 1
        if was_connecting:
            entry.failed_connects += 1
            entry.setup_timeout_ms = self._setup.backoff(entry.failed_connects)
        else:
            self._reset_setup_timeout(entry)

    def remove(self, node_id: int) -> None:
        """Forget the node: it may connect at once next time."""
        self._nodes.pop(node_id, None)

    # --- internals ------------------------------------------------------------------------------

    def _entry(self, node_id: int) -> _NodeState:
        entry = self._nodes.get(node_id)
        if entry is None:
            raise IllegalStateError(f"no connection state for node {node_id}")
        return entry

    @staticmethod
    def _move(node_id: int, entry: _NodeState, new: ConnectionState) -> None:
        if new not in TRANSITIONS[entry.state]:
            raise IllegalStateError(
                f"node {node_id}: cannot move from {entry.state.value} to {new.value}")
        entry.state = new

    def _reset_setup_timeout(self, entry: _NodeState) -> None:
        entry.failed_connects = 0
        entry.setup_timeout_ms = self._setup.backoff(0)
