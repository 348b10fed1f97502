"""ClientRequest, InFlightRequest and ClientResponse: what goes through the NetworkClient.

A caller builds a :class:`ClientRequest` (node, API, body) and hands it to
``NetworkClient.send``; the client picks the version, encodes it and tracks it as an
:class:`InFlightRequest` until it completes. Every request completes exactly once, as one
:class:`ClientResponse`:

- with a ``body`` when the broker answered (or ``body=None`` for a request that expects no
  response, e.g. Produce with acks=0, once its bytes are written);
- ``disconnected=True`` when its connection dropped first;
- ``timed_out=True`` (and ``disconnected=True``, the connection is closed) when no answer came
  within its request timeout.

They compare by identity (``eq=False``): two requests with equal bodies are still two requests.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Callable, Mapping

from ..protocol.api_message import ApiMessage
from ..protocol.values import Struct


@dataclass(frozen=True, eq=False)
class ClientRequest:
    """A request to send to ``node_id``.

    ``version`` None lets the client negotiate the highest version both sides speak on that
    connection (at most ``max_version`` when given). ``body`` may be a function of the version
    the client settles on, for requests whose fields differ between versions (FindCoordinator
    v4 batches its keys). ``request_timeout_ms`` None means the client's ``request.timeout.ms``.
    ``callback(response)`` runs inside ``poll`` when the request completes (errors it raises are
    logged, never propagated).
    """

    node_id: int
    api: ApiMessage
    body: Mapping[str, Any] | Struct | Callable[[int], Mapping[str, Any]] = field(repr=False)  # SASL tokens
    _: KW_ONLY
    created_ms: int
    version: int | None = None
    max_version: int | None = None
    expect_response: bool = True
    callback: Callable[["ClientResponse"], None] | None = None
    request_timeout_ms: int | None = None


@dataclass(frozen=True, eq=False)
class InFlightRequest:
    """A request on the wire: its correlation id and version on that connection, when it was
    handed to the selector, and the timeout that applies. ``internal`` marks the client's own
    ApiVersions and Metadata requests, which never reach the caller."""

    request: ClientRequest
    correlation_id: int
    version: int
    send_ms: int
    request_timeout_ms: int
    internal: bool = False
    throttle_ms: int = 0  # time the broker throttled this connection since: not counted as waiting

    @property
    def node_id(self) -> int:
        return self.request.node_id

    @property
    def deadline_ms(self) -> int:
        return self.send_ms + self.request_timeout_ms + self.throttle_ms

    def completed(self, body: Struct | None, now_ms: int) -> "ClientResponse":
        return ClientResponse(self.request, now_ms, body, version=self.version,
                              send_ms=self.send_ms)

    def disconnected(self, now_ms: int, *, timed_out: bool = False) -> "ClientResponse":
        return ClientResponse(self.request, now_ms, None, disconnected=True, timed_out=timed_out,
                              version=self.version, send_ms=self.send_ms)


@dataclass(frozen=True, eq=False)
class ClientResponse:
    """How a request ended; see the module docstring. ``error`` carries a local failure that
    prevented a response (never a broker error code: those are in ``body``)."""

    request: ClientRequest
    received_ms: int
    body: Struct | None
    disconnected: bool = False
    timed_out: bool = False
    error: Exception | None = None
    version: int | None = None
    send_ms: int | None = None

    @property
    def node_id(self) -> int:
        return self.request.node_id

    @property
    def latency_ms(self) -> int | None:
        """From handing the request to the selector to its completion."""
        return None if self.send_ms is None else self.received_ms - self.send_ms
