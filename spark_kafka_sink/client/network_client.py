"""NetworkClient: asynchronous request/response to many brokers over one Selector.

Driven by one thread (the producer's sender)::

    if client.ready(node_id, now_ms):        # connects when allowed; True once READY
        client.send(ClientRequest(node_id, PRODUCE, body, created_ms=now_ms), now_ms)
    for response in client.poll(timeout_ms, now_ms): ...

``poll`` reads as its steps: maybe send a Metadata request, do the socket I/O, then handle
completed sends (requests that expect no response complete here), completed receives, dropped
connections, new connections, the ApiVersions handshakes to start, connection setup timeouts and
request timeouts; finally it runs the callbacks and returns every completed request.

Per node: a connection state (``connection_states``), a :class:`Connection` (framing and the
broker's versions) while connected, and the in-flight requests (``in_flight``). Each connection
negotiates ApiVersions before it is READY, and every request's version is negotiated against
that connection's answer. With SASL (``settings.sasl``) the connection then authenticates
(``auth.authenticator``: SaslHandshake, then SaslAuthenticate rounds) before it is READY, and, when the
broker gives the session a lifetime (KIP-368), authenticates again on the same connection at 85-95%
of it: new requests wait for that login, the ones in flight complete as usual. An OAUTHBEARER
token is never fetched on this thread: a login whose token is not ready (the token cache fetches
on a thread of its own) holds back its own node alone, and starts when the fetch wakes the poll;
it fails when the fetch fails with no valid token left, or after
``socket.connection.setup.timeout.ms`` without one. ``poll`` also starts the token's scheduled
background refresh.

Authentication failures (SASL refused, or a TLS handshake the selector reports failed) are not
retried at once: the connection is closed, the node waits its reconnect backoff (growing with each
failure up to ``reconnect.backoff.max.ms``, as any failed connection), the error is kept for
:meth:`NetworkClient.authentication_error` until the node is READY again, and it is raised to the
threads waiting for metadata (``Metadata.fatal_error``), so a send fails with it instead of
waiting ``max.block.ms``. A request whose connection drops completes with ``disconnected``; a
request that outlives its timeout closes its connection (as Java: the broker may be stuck) and
completes with ``timed_out``. A protocol error (bad frame, correlation id mismatch) closes the
connection with the reason logged. Metadata refreshes go to the least-loaded node, one at a time,
and take priority: while one is due, ``is_ready`` is false for every node. A response that asks
the client to wait (``throttle_time_ms``, KIP-219: :mod:`.throttle`) makes its node not ready
for that long; :meth:`NetworkClient.poll_delay` tells the sender how long.

Not thread-safe, except :meth:`wakeup`.
"""

from __future__ import annotations

import itertools
import logging
import random
from dataclasses import dataclass
from typing import Any, Callable

from ..clock import Clock
from ..errors import (
    AuthenticationError, CorrelationIdMismatchError, IllegalStateError, KafkaConnectionError,
    ProtocolError, SslAuthenticationError, UnsupportedVersionError,
)
from ..protocol.api_message import ApiMessage
from ..protocol.apis import API_VERSIONS, METADATA, SASL_AUTHENTICATE, SASL_HANDSHAKE
from ..protocol.frame_buffer import DEFAULT_MAX_FRAME_BYTES
from ..protocol.framing import Response
from ..structs import Node
from .api_versions import (
    FIRST_VERSION, NO_FEATURES, FinalizedFeatures, api_versions_body, interpret_api_versions,
)
from .auth.authenticator import SaslAuthenticator, SaslStep
from .auth.jaas import SASL_PROTOCOLS, SaslCredentials, credentials_from_config
from .connection import Connection
from .connection_states import FOREVER_MS, ConnectionState, ConnectionStates
from .in_flight import InFlightRequests
from .metadata import Metadata
from .metadata_updater import MetadataUpdater
from .requests import ClientRequest, ClientResponse, InFlightRequest
from .selector import PollResult, Selectable
from .throttle import client_should_throttle

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NetworkSettings:
    """The client's settings, Java producer names and Kafka 4 defaults.
    (``connections_max_idle_ms`` is the Selector's; it is here so one object carries them all.)"""

    client_id: str = "spark-kafka-sink"
    max_in_flight_requests_per_connection: int = 5
    request_timeout_ms: int = 30_000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1000
    socket_connection_setup_timeout_ms: int = 10_000
    socket_connection_setup_timeout_max_ms: int = 30_000
    connections_max_idle_ms: int = 540_000
    send_buffer_bytes: int = 131_072
    receive_buffer_bytes: int = 32_768
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    sasl: SaslCredentials | None = None
    metadata_recovery_strategy: str = "rebootstrap"
    metadata_recovery_rebootstrap_trigger_ms: int = 300_000

    @classmethod
    def from_config(cls, config: Any, **overrides: Any) -> "NetworkSettings":
        """From any object with these attribute names (``ProducerConfig`` has them all but
        ``max_frame_bytes``); ``sasl`` from its SASL properties when its protocol uses SASL."""
        values = {name: getattr(config, name) for name in cls.__dataclass_fields__
                  if hasattr(config, name)}
        if getattr(config, "security_protocol", "PLAINTEXT") in SASL_PROTOCOLS:
            values["sasl"] = credentials_from_config(config)
        values.update(overrides)
        return cls(**values)


# A broker takes a new login on a connection at most once a second, counted from when it read the
# previous one's SaslHandshake; one sooner goes to its request handler, which answers
# ILLEGAL_SASL_STATE (no mechanisms) and the connection is lost. Counted here from the end of the
# previous login, which the broker saw begin earlier, the gap is never shorter at the broker; the
# margin covers clocks read to the ms. A session shorter than this (a token near its end) expires
# first: the broker then closes the connection at its next request. So a login takes an OAuth
# token with at least MIN_SESSION_MS left (85% of it is the interval), or waits for a new one.
MIN_REAUTH_INTERVAL_MS = 1_100
MIN_SESSION_MS = 1_300


class NetworkClient:
    """Connections, in-flight requests, timeouts and metadata refresh; see module doc."""

    def __init__(self, *, selector: Selectable, metadata: Metadata, clock: Clock,
                 settings: NetworkSettings = NetworkSettings(), rng: random.Random | None = None,
                 throttle_observer: Callable[[ApiMessage, int, int], None] | None = None,
                 auth_observer: Callable[[bool, bool], None] | None = None):
        """``throttle_observer(api, throttle_ms, now_ms)`` sees the throttle time of every
        response that has one (the producer's ``produce-throttle-time`` metrics);
        ``auth_observer(reauthentication, succeeded)`` every SASL login's outcome."""
        self._selector = selector
        self._throttle_observer = throttle_observer
        self._auth_observer = auth_observer
        self._reauth_at_ms: dict[int, int] = {}   # node -> when its SASL session needs a new login
        self._reauthenticating: set[int] = set()
        self._token_cache = settings.sasl.token_cache if settings.sasl is not None else None
        self._awaiting_token: dict[int, int] = {}  # node -> when its login began waiting for a token
        if self._token_cache is not None:
            self._token_cache.add_listener(self.wakeup)   # a fetch ended: resume the waiting logins
        self._metadata = metadata
        self._clock = clock
        self._settings = settings
        self._rng = rng if rng is not None else random.Random()
        self._states = ConnectionStates(
            reconnect_backoff_ms=settings.reconnect_backoff_ms,
            reconnect_backoff_max_ms=settings.reconnect_backoff_max_ms,
            setup_timeout_ms=settings.socket_connection_setup_timeout_ms,
            setup_timeout_max_ms=settings.socket_connection_setup_timeout_max_ms, rng=self._rng)
        self._in_flight = InFlightRequests(settings.max_in_flight_requests_per_connection)
        self._connections: dict[int, Connection] = {}
        self._connection_ids: dict[int, int] = {}           # node -> id of its current connection
        self._next_connection_id = itertools.count(1)
        self._needs_api_versions: dict[int, int] = {}      # node -> ApiVersions version to send
        self._finalized_features: FinalizedFeatures = NO_FEATURES
        self._authenticators: dict[int, SaslAuthenticator] = {}
        self._auth_errors: dict[int, AuthenticationError] = {}
        self._updater = MetadataUpdater(metadata, settings.request_timeout_ms)
        self._closed = False
        self._polling_until_ms: int | None = None  # see wakeup_by
        metadata.set_waker(self.wakeup)

    # --- readiness ------------------------------------------------------------------------------

    def ready(self, node_id: int, now_ms: int, node: Node | None = None) -> bool:
        """True when a request can be sent to ``node_id`` now; otherwise starts connecting
        when allowed (not in backoff, node known) and returns False. ``node``: where to connect
        when the metadata does not know the node yet (a coordinator found by FindCoordinator)."""
        self._ensure_open()
        if self.is_ready(node_id, now_ms):
            return True
        if self._states.can_connect(node_id, now_ms):
            node = self._metadata.snapshot.node(node_id) or node
            if node is not None:
                self._initiate_connect(node, now_ms)
        return False

    def is_ready(self, node_id: int, now_ms: int) -> bool:
        """READY, not throttled, under the in-flight cap, and no metadata refresh is due (it
        goes first)."""
        return not self._updater.is_update_due(now_ms) and self._can_send_request(node_id, now_ms)

    def connection_delay(self, node_id: int, now_ms: int) -> int:
        """Ms before ``node_id`` could be ready: the reconnect backoff left when disconnected,
        the setup timeout while connecting, "forever" (until an event) when connected."""
        return self._states.connection_delay(node_id, now_ms)

    def poll_delay(self, node_id: int, now_ms: int) -> int:
        """Ms before ``node_id`` could take a request: the throttle left when the broker asked
        for a pause (:mod:`.throttle`), else :meth:`connection_delay`."""
        return self._states.poll_delay(node_id, now_ms)

    def connection_failed(self, node_id: int) -> bool:
        """The last connection to ``node_id`` failed or closed (it is not merely unknown)."""
        return self._states.is_disconnected(node_id)

    def authentication_error(self, node_id: int) -> AuthenticationError | None:
        """Why the last connection to ``node_id`` failed to authenticate (None: it did not, or
        the node was READY since)."""
        return self._auth_errors.get(node_id)

    def connection_id(self, node_id: int) -> int:
        """An id for the current connection to ``node_id``, new with every connection (0: none
        yet). Requests sent under one id were handled by the broker in order, on one socket;
        a new id means the broker may have restarted or moved leadership in between."""
        return self._connection_ids.get(node_id, 0)

    @property
    def finalized_features(self) -> FinalizedFeatures:
        """The cluster's finalized features, from the ApiVersions answer with the highest
        features epoch seen so far (Java's ``ApiVersions.finalizedFeatures``)."""
        return self._finalized_features

    def in_flight_request_count(self, node_id: int | None = None) -> int:
        return self._in_flight.count(node_id)

    def least_loaded_node(self, now_ms: int) -> Node | None:
        """The known node with the fewest in-flight requests among READY ones (an idle one at
        once); else one whose connection is being set up; else the connectable node tried
        longest ago. Never a node in reconnect backoff. The scan starts at a random node."""
        nodes = list(self._metadata.snapshot.nodes.values())
        if not nodes:
            return None
        offset = self._rng.randrange(len(nodes))
        ready: Node | None = None
        ready_load = 2**31
        preparing: Node | None = None
        connectable: Node | None = None
        for i in range(len(nodes)):
            node = nodes[(offset + i) % len(nodes)]
            node_id = node.node_id
            if self._can_send_request(node_id, now_ms):
                load = self._in_flight.count(node_id)
                if load == 0:
                    return node
                if load < ready_load:
                    ready, ready_load = node, load
            elif self._states.is_preparing(node_id):
                preparing = node
            elif self._states.can_connect(node_id, now_ms) and (
                    connectable is None or self._states.last_attempt_ms(node_id)
                    < self._states.last_attempt_ms(connectable.node_id)):
                connectable = node
        return ready or preparing or connectable

    # --- sending and polling --------------------------------------------------------------------

    def send(self, request: ClientRequest, now_ms: int) -> None:
        """Queue ``request`` on its node's connection (written during the next polls).

        Raises IllegalStateError when the node is not ready (check ``ready`` first) and
        UnsupportedVersionError when the broker and this client share no version of the API
        (or not the one requested)."""
        self._ensure_open()
        node_id = request.node_id
        if not self._can_send_request(node_id, now_ms):
            raise IllegalStateError(
                f"node {node_id} is not ready for a request (connection "
                f"{self._states.state(node_id).value}, {self._in_flight.count(node_id)} in flight, "
                f"throttled for {self._states.throttle_delay(node_id, now_ms)} ms)")
        connection = self._connections[node_id]
        version = connection.version_for(request.api, request.version, request.max_version)
        self._do_send(request, connection, version, now_ms, internal=False)

    def poll(self, timeout_ms: int, now_ms: int) -> list[ClientResponse]:
        """Do the I/O (waiting up to ``timeout_ms``) and return the requests that completed."""
        self._ensure_open()
        if self._token_cache is not None:
            self._token_cache.maybe_refresh()   # on schedule, on its own thread, not at a login
        early: list[ClientResponse] = []
        self._resume_token_waits(early, now_ms)
        self._maybe_reauthenticate(early, now_ms)
        metadata_timeout = self.maybe_update_metadata(now_ms)
        wait_ms = self._poll_timeout(timeout_ms, metadata_timeout, now_ms)
        # +1: the wait is rounded to whole ms while the clock is read to the ms below it
        self._polling_until_ms = self._clock.monotonic_ms() + wait_ms + 1
        try:
            result = self._selector.poll(wait_ms)
        finally:
            self._polling_until_ms = None
        now_ms = self._clock.monotonic_ms()
        responses: list[ClientResponse] = early
        self._handle_completed_sends(result, responses, now_ms)
        self._handle_completed_receives(result, responses, now_ms)
        self._handle_disconnections(result, responses, now_ms)
        self._handle_connections(result)
        self._handle_api_versions(now_ms)
        self._handle_timed_out_connections(responses, now_ms)
        self._handle_timed_out_requests(responses, now_ms)
        _run_callbacks(responses)
        return responses

    def maybe_update_metadata(self, now_ms: int) -> int:
        """Send a Metadata request (or connect for one) when due; ms until worth checking again.

        With ``metadata.recovery.strategy=rebootstrap`` (KIP-899, KIP-1102) the brokers the
        cluster named are dropped for ``bootstrap.servers`` again when none of them can be reached
        (the last connection attempt to each failed), when updates have failed for
        ``metadata.recovery.rebootstrap.trigger.ms``, or when a broker answers REBOOTSTRAP_REQUIRED."""
        rebootstrap = self._settings.metadata_recovery_strategy == "rebootstrap"
        if rebootstrap and self._updater.rebootstrap_required:
            self._updater.rebootstrap_required = False
            self._metadata.rebootstrap(now_ms, "a broker answered REBOOTSTRAP_REQUIRED")
        elif rebootstrap and self._metadata.failing_for_ms(now_ms) >= \
                self._settings.metadata_recovery_rebootstrap_trigger_ms:
            self._metadata.rebootstrap(now_ms, f"no metadata for "
                                       f"{self._settings.metadata_recovery_rebootstrap_trigger_ms} ms "
                                       "(metadata.recovery.rebootstrap.trigger.ms)")
        timeout = self._updater.time_to_update(now_ms)
        if timeout > 0:
            return timeout
        node = self.least_loaded_node(now_ms)
        if rebootstrap and self._metadata.update_version > 0 and self._none_reachable(now_ms):
            self._metadata.rebootstrap(now_ms, "no broker the cluster named can be reached")
            node = self.least_loaded_node(now_ms)
        if node is None:
            log.debug("no node available for a Metadata request")
            return self._settings.reconnect_backoff_ms
        if self._can_send_request(node.node_id, now_ms):
            self._send_metadata_request(node.node_id, now_ms)
            return self._settings.request_timeout_ms
        if self._states.any_connecting():
            return self._settings.reconnect_backoff_ms
        if self._states.can_connect(node.node_id, now_ms):
            log.debug("connecting to node %d for a Metadata request", node.node_id)
            self._initiate_connect(node, now_ms)
            return self._settings.reconnect_backoff_ms
        return FOREVER_MS

    def wakeup(self) -> None:
        """Make a blocked ``poll`` return now. Safe from any thread."""
        self._selector.wakeup()

    def wakeup_by(self, deadline_ms: int) -> None:
        """Make ``poll`` return by ``deadline_ms`` (monotonic): nothing to do when a poll is
        waiting and ends by then anyway, else :meth:`wakeup`. Safe from any thread.

        For work that is not due at once (a new batch lingers ``linger.ms``), so a producer
        thread does not wake the sender, and fight it for the GIL, only for it to go back to
        sleep. No wakeup is lost: ``_polling_until_ms`` is set before the selector waits and
        cleared as soon as it returns, both after the sender looked at its work; a caller that
        changed the work before reading it either sees ``None`` (the sender is not waiting: the
        wakeup makes its next wait return at once) or a wait that ends in time."""
        until = self._polling_until_ms
        if until is None or until > deadline_ms:
            self._selector.wakeup()

    def close(self) -> None:
        """Close every connection and the metadata (waking its waiters). Requests still in flight
        are dropped without completing: the sender drains them before it closes the client."""
        if self._closed:
            return
        self._closed = True
        if self._token_cache is not None:
            self._token_cache.remove_listener(self.wakeup)
        self._metadata.set_waker(None)
        self._selector.close()
        self._metadata.close()

    # --- poll steps -----------------------------------------------------------------------------

    def _handle_completed_sends(self, result: PollResult, responses: list[ClientResponse],
                                now_ms: int) -> None:
        for node_id in result.completed_sends:
            if not self._in_flight.count(node_id):
                continue
            request = self._in_flight.mark_written(node_id)
            if not request.request.expect_response:
                self._in_flight.complete_last_sent(node_id)
                responses.append(request.completed(None, now_ms))

    def _handle_completed_receives(self, result: PollResult, responses: list[ClientResponse],
                                   now_ms: int) -> None:
        for node_id, chunks in result.received.items():
            connection = self._connections.get(node_id)
            if connection is None:
                continue
            try:
                self._receive(connection, chunks, responses, now_ms)
            except ProtocolError as exc:
                log.warning("closing the connection to node %d: protocol error: %s", node_id, exc)
                self._close_connection(node_id, responses, now_ms)

    def _handle_disconnections(self, result: PollResult, responses: list[ClientResponse],
                               now_ms: int) -> None:
        for node_id, reason in result.disconnected.items():
            if self._states.state(node_id) is ConnectionState.DISCONNECTED:
                continue          # already handled (closed after a protocol error) or unknown
            failure = result.handshake_failures.get(node_id)
            if failure is not None:
                self._authentication_failed(node_id, SslAuthenticationError(
                    f"node {node_id} ({self._address(node_id)}): {failure}"), responses, now_ms)
                continue
            log.info("node %d disconnected: %s", node_id, reason)
            self._metadata.connection_failed(self._address(node_id), str(reason))
            self._process_disconnection(node_id, responses, now_ms)

    def _handle_connections(self, result: PollResult) -> None:
        for node_id in result.connected:
            log.debug("connected to node %d; fetching its API versions", node_id)
            self._connections[node_id] = Connection(
                node_id, self._settings.client_id, self._settings.max_frame_bytes)
            self._connection_ids[node_id] = next(self._next_connection_id)
            self._needs_api_versions[node_id] = FIRST_VERSION

    def _handle_api_versions(self, now_ms: int) -> None:
        for node_id, version in list(self._needs_api_versions.items()):
            if not self._in_flight.can_send_more(node_id):
                continue
            if self._states.is_connecting(node_id):
                self._states.checking_api_versions(node_id)
            del self._needs_api_versions[node_id]
            request = ClientRequest(node_id, API_VERSIONS, api_versions_body(version),
                                    created_ms=now_ms)
            self._do_send(request, self._connections[node_id], version, now_ms, internal=True)

    def _handle_timed_out_connections(self, responses: list[ClientResponse], now_ms: int) -> None:
        for node_id in self._states.nodes_with_setup_timeout(now_ms):
            log.info("disconnecting from node %d: connection setup took more than %d ms",
                     node_id, self._states.setup_timeout_ms(node_id))
            self._metadata.connection_failed(
                self._address(node_id),
                f"connection setup took more than {self._states.setup_timeout_ms(node_id)} ms")
            self._selector.close(node_id)
            self._process_disconnection(node_id, responses, now_ms, timed_out=True)

    def _handle_timed_out_requests(self, responses: list[ClientResponse], now_ms: int) -> None:
        for node_id in self._in_flight.timed_out_nodes(now_ms):
            log.info("disconnecting from node %d: a request got no response in time", node_id)
            self._selector.close(node_id)
            self._process_disconnection(node_id, responses, now_ms, timed_out=True)

    # --- internals ------------------------------------------------------------------------------

    def _none_reachable(self, now_ms: int) -> bool:
        """Every node the cluster named was tried and its last connection attempt failed (a
        connection merely closed, by an idle timeout or a blip, does not count)."""
        nodes = self._metadata.snapshot.nodes
        return bool(nodes) and all(node_id >= 0 and self._states.unreachable(node_id) for node_id in nodes)

    def _can_send_request(self, node_id: int, now_ms: int) -> bool:
        """READY and not throttled, under the in-flight cap, and not (about to be) logging in
        again: once a session's new login is due, nothing new goes to that node, so its pipeline
        drains and the login can start even under full load."""
        return (self._states.is_ready(node_id, now_ms) and node_id in self._connections
                and node_id not in self._reauthenticating
                and self._reauth_at_ms.get(node_id, FOREVER_MS) > now_ms
                and self._in_flight.can_send_more(node_id))

    def _initiate_connect(self, node: Node, now_ms: int) -> None:
        log.debug("connecting to node %d at %s", node.node_id, node.address)
        self._states.connecting(node.node_id, now_ms, node.address)
        try:
            self._selector.connect(node.node_id, node.host, node.port,
                                   send_buffer_bytes=self._settings.send_buffer_bytes,
                                   receive_buffer_bytes=self._settings.receive_buffer_bytes)
        except KafkaConnectionError as exc:
            log.warning("cannot connect to node %d: %s", node.node_id, exc)
            self._metadata.connection_failed(node.address, str(exc))
            self._states.disconnected(node.node_id, now_ms)
            self._updater.handle_server_disconnect(now_ms, node.node_id)

    def _send_metadata_request(self, node_id: int, now_ms: int) -> None:
        connection = self._connections[node_id]
        try:
            version = connection.version_for(METADATA)
        except UnsupportedVersionError as exc:
            log.error("cannot refresh metadata: %s", exc)
            self._updater.handle_failed_request(now_ms, fatal=exc)
            return
        request = ClientRequest(node_id, METADATA, self._updater.request_body(), created_ms=now_ms)
        log.debug("sending Metadata v%d for %s to node %d", version, self._metadata.topics, node_id)
        self._do_send(request, connection, version, now_ms, internal=True)
        self._updater.sent()

    def _do_send(self, request: ClientRequest, connection: Connection, version: int, now_ms: int,
                 *, internal: bool) -> None:
        body = request.body(version) if callable(request.body) else request.body
        out = connection.encode(request.api, version, body, request.expect_response)
        timeout = request.request_timeout_ms
        if timeout is None:
            timeout = self._settings.request_timeout_ms
        self._in_flight.add(InFlightRequest(request, out.correlation_id, version, now_ms, timeout,
                                            internal))
        self._selector.send(request.node_id, out.parts)

    def _receive(self, connection: Connection, chunks: list[bytes],
                 responses: list[ClientResponse], now_ms: int) -> None:
        """Complete the requests the chunks answer; stop if handling one closed the connection."""
        node_id = connection.node_id
        for chunk in chunks:
            for response in connection.receive(chunk):
                self._complete(node_id, response, responses, now_ms)
                if self._connections.get(node_id) is not connection:
                    return

    def _complete(self, node_id: int, response: Response, responses: list[ClientResponse],
                  now_ms: int) -> None:
        request = self._in_flight.complete_next(node_id)
        if request.correlation_id != response.correlation_id:
            raise CorrelationIdMismatchError(
                f"the response with correlation id {response.correlation_id} does not answer the "
                f"oldest request in flight (correlation id {request.correlation_id})")
        self._maybe_throttle(node_id, request, response.body, now_ms)
        if not request.internal:
            responses.append(request.completed(response.body, now_ms))
        elif request.request.api is METADATA:
            self._updater.handle_response(response.body, now_ms)
        elif request.request.api is SASL_HANDSHAKE or request.request.api is SASL_AUTHENTICATE:
            self._handle_sasl_response(request, response, responses, now_ms)
        else:
            self._handle_api_versions_response(request, response, responses, now_ms)

    def _handle_api_versions_response(self, request: InFlightRequest, response: Response,
                                      responses: list[ClientResponse], now_ms: int) -> None:
        node_id = request.node_id
        outcome = interpret_api_versions(response.body, request.version)
        if outcome.versions is not None:
            self._connections[node_id].set_versions(outcome.versions)
            if outcome.features.epoch > self._finalized_features.epoch:
                self._finalized_features = outcome.features
            if self._settings.sasl is not None:
                self._start_authentication(node_id, responses, now_ms)
            else:
                self._node_ready(node_id)
        elif outcome.retry_version is not None:
            log.debug("node %d does not know ApiVersions v%d; retrying at v%d",
                      node_id, request.version, outcome.retry_version)
            self._needs_api_versions[node_id] = outcome.retry_version
        else:
            log.warning("closing the connection to node %d: ApiVersions failed: %s",
                        node_id, outcome.error)
            self._close_connection(node_id, responses, now_ms)

    def _maybe_throttle(self, node_id: int, request: InFlightRequest, body: Any, now_ms: int) -> None:
        """Honour a response's ``throttle_time_ms`` (:mod:`.throttle`): record it, and when the
        broker answered at once and expects the client to wait (KIP-219), send nothing more to
        that node until the time is up."""
        if body is None or "throttle_time_ms" not in body:
            return
        throttle_ms = body.throttle_time_ms or 0
        if self._throttle_observer is not None:
            self._throttle_observer(request.request.api, throttle_ms, now_ms)
        if throttle_ms > 0 and client_should_throttle(request.request.api, request.version):
            log.debug("node %d asked for no requests for %d ms (%s v%d, a quota)", node_id,
                      throttle_ms, request.request.api.name, request.version)
            self._states.throttle(node_id, now_ms + throttle_ms)
            self._in_flight.add_throttle(node_id, throttle_ms)

    def _node_ready(self, node_id: int) -> None:
        self._states.ready(node_id)
        self._auth_errors.pop(node_id, None)
        log.debug("node %d is ready", node_id)

    # --- SASL (see auth/authenticator.py) -------------------------------------------------------

    def _start_authentication(self, node_id: int, responses: list[ClientResponse],
                              now_ms: int, *, reauthentication: bool = False) -> None:
        if reauthentication:
            self._reauthenticating.add(node_id)
        else:
            self._states.authenticating(node_id)
        self._login(node_id, responses, now_ms)

    def _login(self, node_id: int, responses: list[ClientResponse], now_ms: int) -> None:
        """Start the SASL exchange, once its OAUTHBEARER token is ready: the token cache is only
        polled, never waited on (its fetches run on a thread of their own), so a login whose token
        is not ready holds back its own node alone, until the fetch ends and wakes the poll
        (:meth:`_resume_token_waits`)."""
        assert self._settings.sasl is not None
        reauthentication = node_id in self._reauthenticating
        token = None
        if self._token_cache is not None:
            answer = self._token_cache.poll(min_life_ms=MIN_SESSION_MS)
            if answer.pending:
                if node_id not in self._awaiting_token:
                    log.debug("node %d: the login waits for an OAuth token from %s", node_id,
                              self._token_cache.describe())
                self._awaiting_token.setdefault(node_id, now_ms)
                return
            self._awaiting_token.pop(node_id, None)
            if answer.error is not None:
                self._authentication_failed(node_id, AuthenticationError(
                    f"{self._login_name(reauthentication)} with {self._address(node_id)}: no OAuth "
                    f"token: {answer.error}"), responses, now_ms)
                return
            token = answer.token
        authenticator = SaslAuthenticator(self._settings.sasl, self._address(node_id),
                                          reauthentication=reauthentication, token=token)
        self._authenticators[node_id] = authenticator
        log.debug("node %d: %s with %r", node_id,
                  "re-authenticating" if reauthentication else "authenticating", authenticator)
        self._send_sasl_step(node_id, authenticator.first_request(), responses, now_ms)

    def _resume_token_waits(self, responses: list[ClientResponse], now_ms: int) -> None:
        """Logins waiting for an OAuth token: start those whose token is ready now, fail those
        whose token fetch failed, or that waited ``socket.connection.setup.timeout.ms``."""
        limit_ms = self._settings.socket_connection_setup_timeout_ms
        for node_id, since_ms in list(self._awaiting_token.items()):
            if node_id not in self._connections:
                del self._awaiting_token[node_id]
            elif now_ms - since_ms >= limit_ms:
                del self._awaiting_token[node_id]
                assert self._token_cache is not None
                self._authentication_failed(node_id, AuthenticationError(
                    f"{self._login_name(node_id in self._reauthenticating)} with "
                    f"{self._address(node_id)}: no OAuth token from {self._token_cache.describe()} "
                    f"within {limit_ms} ms (socket.connection.setup.timeout.ms)"), responses, now_ms)
            else:
                self._login(node_id, responses, now_ms)

    def _login_name(self, reauthentication: bool) -> str:
        assert self._settings.sasl is not None
        what = "re-authentication" if reauthentication else "authentication"
        return f"SASL {self._settings.sasl.mechanism} {what}"

    def _maybe_reauthenticate(self, responses: list[ClientResponse], now_ms: int) -> None:
        """KIP-368: log in again on a READY connection whose SASL session is due, once it can
        take a request. New requests wait until the login completes; the responses to those
        already sent arrive first (in order) and complete as usual."""
        for node_id, due_ms in list(self._reauth_at_ms.items()):
            if (due_ms <= now_ms and node_id not in self._reauthenticating
                    and self._states.is_ready(node_id) and node_id in self._connections
                    and self._in_flight.can_send_more(node_id)):
                del self._reauth_at_ms[node_id]
                self._start_authentication(node_id, responses, now_ms, reauthentication=True)

    def _handle_sasl_response(self, request: InFlightRequest, response: Response,
                              responses: list[ClientResponse], now_ms: int) -> None:
        node_id = request.node_id
        authenticator = self._authenticators.get(node_id)
        if authenticator is None:
            return
        try:
            step = authenticator.on_response(request.request.api, response.body)
        except AuthenticationError as exc:
            self._authentication_failed(node_id, exc, responses, now_ms)
            return
        except Exception as exc:  # noqa: BLE001 - e.g. a token source's own bug: fail this login only
            self._authentication_failed(node_id, AuthenticationError(
                f"SASL {self._settings.sasl.mechanism} login with {self._address(node_id)} failed: "
                f"{type(exc).__name__}"), responses, now_ms)
            return
        if step is not None:
            self._send_sasl_step(node_id, step, responses, now_ms)
            return
        del self._authenticators[node_id]
        if authenticator.session_lifetime_ms > 0:  # KIP-368: again at 85-95% of the session, as Java
            share = self._rng.uniform(0.85, 0.95)
            self._reauth_at_ms[node_id] = now_ms + max(int(authenticator.session_lifetime_ms * share),
                                                       MIN_REAUTH_INTERVAL_MS)
        if self._auth_observer is not None:
            self._auth_observer(authenticator.reauthentication, True)
        if authenticator.reauthentication:
            self._reauthenticating.discard(node_id)
            self._auth_errors.pop(node_id, None)
            log.debug("node %d: re-authenticated; session lifetime %d ms", node_id,
                      authenticator.session_lifetime_ms)
            return
        self._node_ready(node_id)

    def _send_sasl_step(self, node_id: int, step: SaslStep, responses: list[ClientResponse],
                        now_ms: int) -> None:
        connection = self._connections[node_id]
        try:
            version = connection.version_for(step.api, step.version)
        except UnsupportedVersionError as exc:
            self._authentication_failed(node_id, AuthenticationError(
                f"node {node_id} ({self._address(node_id)}) cannot authenticate with SASL: {exc}"),
                responses, now_ms)
            return
        request = ClientRequest(node_id, step.api, step.body, created_ms=now_ms)
        self._do_send(request, connection, version, now_ms, internal=True)

    def _authentication_failed(self, node_id: int, error: AuthenticationError,
                               responses: list[ClientResponse], now_ms: int) -> None:
        """Close, back off, remember the error and raise it to the metadata waiters."""
        log.error("authentication with node %d failed: %s", node_id, error)
        if self._auth_observer is not None:
            self._auth_observer(node_id in self._reauthenticating, False)
        self._metadata.connection_failed(self._address(node_id), str(error))
        self._auth_errors[node_id] = error
        if self._states.is_connected(node_id) or self._states.is_connecting(node_id):
            self._selector.close(node_id)
            self._process_disconnection(node_id, responses, now_ms)
        self._metadata.fatal_error(error)

    def _address(self, node_id: int) -> str:
        node = self._metadata.snapshot.node(node_id)
        return node.address if node is not None else f"node {node_id}"

    def _close_connection(self, node_id: int, responses: list[ClientResponse], now_ms: int) -> None:
        self._selector.close(node_id)
        self._process_disconnection(node_id, responses, now_ms)

    def _process_disconnection(self, node_id: int, responses: list[ClientResponse], now_ms: int,
                               *, timed_out: bool = False) -> None:
        self._states.disconnected(node_id, now_ms)
        self._connections.pop(node_id, None)
        self._needs_api_versions.pop(node_id, None)
        self._authenticators.pop(node_id, None)
        self._awaiting_token.pop(node_id, None)
        self._reauth_at_ms.pop(node_id, None)
        self._reauthenticating.discard(node_id)
        for request in self._in_flight.clear_all(node_id):
            if not request.internal:
                responses.append(request.disconnected(now_ms, timed_out=timed_out))
            elif request.request.api is METADATA:
                self._updater.handle_failed_request(now_ms)
        self._updater.handle_server_disconnect(now_ms, node_id)

    def _poll_timeout(self, timeout_ms: int, metadata_timeout_ms: int, now_ms: int) -> int:
        """The wait bounded by the metadata timing and the nearest request or setup deadline."""
        # a login already due waits for its pipeline to drain: the completions wake the poll
        token_wait_ms = self._settings.socket_connection_setup_timeout_ms
        deadlines = (self._in_flight.next_deadline_ms(), self._states.next_setup_deadline_ms(),
                     min((d for d in self._reauth_at_ms.values() if d > now_ms), default=None),
                     min((since + token_wait_ms for since in self._awaiting_token.values()),
                         default=None))
        bound = min([timeout_ms, metadata_timeout_ms, self._settings.request_timeout_ms]
                    + [max(d - now_ms, 0) + 1 for d in deadlines if d is not None])
        return max(bound, 0)

    def _ensure_open(self) -> None:
        if self._closed:
            raise IllegalStateError("the network client is closed")


def _run_callbacks(responses: list[ClientResponse]) -> None:
    for response in responses:
        callback: Callable[[ClientResponse], None] | None = response.request.callback
        if callback is None:
            continue
        try:
            callback(response)
        except Exception:                  # a callback must not break the network thread
            log.exception("error in the completion callback of a %s request to node %d",
                          response.request.api.name, response.node_id)
