"""InFlightRequests: requests sent (or being sent) to each node that have not completed yet.

One deque per node, oldest first. Kafka answers the requests of one connection in order, so a
response always completes the oldest request (``complete_next``); a request that expects no
response (Produce with acks=0) completes as soon as its bytes are written, and it is then the
newest (``complete_last_sent``).

``can_send_more(node)`` is false once the node has ``max.in.flight.requests.per.connection``
requests, and also while the newest request's bytes are not fully written yet, as in Java: a
connection writes one request at a time, so a slow socket pushes back on the sender instead of
queueing unbounded bytes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from typing import Iterator

from ..errors import IllegalStateError
from .requests import InFlightRequest


class InFlightRequests:
    """Per-node deques of :class:`InFlightRequest`, capped per connection; see module doc."""

    def __init__(self, max_per_connection: int):
        if max_per_connection < 1:
            raise ValueError(f"max_per_connection must be at least 1, got {max_per_connection}")
        self.max_per_connection = max_per_connection
        self._requests: dict[int, deque[InFlightRequest]] = {}
        self._unwritten: set[int] = set()     # nodes whose newest request is still being written

    def add(self, request: InFlightRequest) -> None:
        """Track a request just handed to the selector (its bytes are not written yet)."""
        self._requests.setdefault(request.node_id, deque()).append(request)
        self._unwritten.add(request.node_id)

    def can_send_more(self, node_id: int) -> bool:
        queue = self._requests.get(node_id)
        if not queue:
            return True
        return node_id not in self._unwritten and len(queue) < self.max_per_connection

    def mark_written(self, node_id: int) -> InFlightRequest:
        """The newest request's bytes are all on the wire; returns it."""
        request = self.last_sent(node_id)
        self._unwritten.discard(node_id)
        return request

    def last_sent(self, node_id: int) -> InFlightRequest:
        """The newest request to ``node_id`` (left in place)."""
        return self._queue(node_id)[-1]

    def complete_next(self, node_id: int) -> InFlightRequest:
        """Remove and return the oldest request: the one the next response answers."""
        queue = self._queue(node_id)
        request = queue.popleft()
        if not queue:
            self._unwritten.discard(node_id)
        return request

    def complete_last_sent(self, node_id: int) -> InFlightRequest:
        """Remove and return the newest request (one that expects no response)."""
        request = self._queue(node_id).pop()
        self._unwritten.discard(node_id)
        return request

    def clear_all(self, node_id: int) -> list[InFlightRequest]:
        """Remove and return every request to ``node_id``, oldest first."""
        self._unwritten.discard(node_id)
        return list(self._requests.pop(node_id, ()))

    def add_throttle(self, node_id: int, throttle_ms: int) -> None:
        """The broker throttles ``node_id``'s connection for ``throttle_ms``: its requests in
        flight get that much longer before they time out (Java's ``incrementThrottleTime``)."""
        queue = self._requests.get(node_id)
        if queue:
            self._requests[node_id] = deque(replace(request, throttle_ms=request.throttle_ms + throttle_ms)
                                            for request in queue)

    def timed_out_nodes(self, now_ms: int) -> list[int]:
        """Nodes with a request older than its own request timeout (throttled time not counted)."""
        return [node_id for node_id, queue in self._requests.items()
                if any(now_ms > request.deadline_ms for request in queue)]

    def next_deadline_ms(self) -> int | None:
        """The earliest request deadline over all nodes, or None when nothing is in flight."""
        deadlines = (r.deadline_ms for queue in self._requests.values() for r in queue)
        return min(deadlines, default=None)

    def count(self, node_id: int | None = None) -> int:
        """In-flight requests to ``node_id``, or to all nodes when None."""
        if node_id is not None:
            return len(self._requests.get(node_id, ()))
        return sum(len(queue) for queue in self._requests.values())

    def nodes(self) -> Iterator[int]:
        """Nodes with at least one request in flight."""
        return (node_id for node_id, queue in self._requests.items() if queue)

    def _queue(self, node_id: int) -> deque[InFlightRequest]:
        queue = self._requests.get(node_id)
        if not queue:
            raise IllegalStateError(f"no request in flight to node {node_id}")
        return queue
