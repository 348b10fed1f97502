"""A scripted, in-memory stand-in for the Selector, with fake brokers built on ServerFraming.

``FakeSelector`` implements the same five-method seam as ``client.selector.Selector``. Bytes the
client sends reach a :class:`FakeBroker` (one ``ServerFraming`` per connection, so reconnects
start clean); the broker's answers come back as ``received`` chunks. Tests script the rest:

    sel = FakeSelector()
    broker = sel.add_broker("b1", 9092, FakeBroker(node_id=1))
    sel.auto_connect = False          # then: sel.complete_connect(node) / sel.fail_connect(node)
    sel.stall_writes.add(node)        # bytes stay unwritten (no completed send) until removed
    broker.hold = True                # the broker records requests but does not answer
    sel.drop(node, "reset")           # the connection drops in the next poll
    sel.inject(node, raw_bytes)       # arbitrary bytes from the broker (protocol errors)
    sel.chunk_size = 7                # answers arrive in 7-byte pieces (partial deliveries)
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable

from spark_kafka_sink.client.selector import PollResult
from spark_kafka_sink.errors import KafkaConnectionError
from spark_kafka_sink.protocol import ALL_APIS, API_VERSIONS, METADATA, PRODUCE, ServerFraming
from spark_kafka_sink.protocol.framing import IncomingRequest

Handler = Callable[[IncomingRequest], Any]


def our_ranges() -> dict[int, tuple[int, int]]:
    return {api.api_key: (api.min_version, api.max_version) for api in ALL_APIS}


def metadata_body(brokers: list[tuple[int, str, int]], topics: dict[str, int | tuple[int, int]],
                  *, leaders: dict[tuple[str, int], int] | None = None,
                  cluster_id: str = "fake", leader_epoch: int = 0) -> dict[str, Any]:
    """A Metadata response body: ``topics`` maps name -> partition count, or -> (0, error code).
    Leaders go round-robin over the brokers unless ``leaders`` says otherwise."""
    ids = [b[0] for b in brokers]
    leaders = leaders or {}
    out_topics = []
    for name, spec in topics.items():
        if isinstance(spec, tuple):
            out_topics.append({"name": name, "error_code": spec[1], "partitions": []})
            continue
        parts = []
        for p in range(spec):
            leader = leaders.get((name, p), ids[p % len(ids)] if ids else -1)
            parts.append({"partition_index": p, "leader_id": leader, "leader_epoch": leader_epoch,
                          "replica_nodes": [leader], "isr_nodes": [leader]})
        out_topics.append({"name": name, "error_code": 0, "partitions": parts})
    return {"brokers": [{"node_id": n, "host": h, "port": p} for n, h, p in brokers],
            "cluster_id": cluster_id, "controller_id": ids[0] if ids else -1, "topics": out_topics}


class FakeBroker:
    """Answers requests in memory. ApiVersions is answered from ``ranges`` (api key -> (min,
    max), and finalized ``features`` (name -> level, epoch 1)); Metadata from ``metadata`` (a body, or a callable taking the request); Produce with
    acks=0 gets no answer; anything else goes to ``handlers[api_key](request)``, whose return
    value is the response body (None: no answer)."""

    def __init__(self, node_id: int, *, ranges: dict[int, tuple[int, int]] | None = None,
                 metadata: dict | Handler | None = None, handlers: dict[int, Handler] | None = None,
                 api_versions_max: int = API_VERSIONS.max_version,
                 features: dict[str, int] | None = None):
        self.node_id = node_id
        self.ranges = our_ranges() if ranges is None else ranges
        self.metadata = metadata
        self.handlers = dict(handlers or {})
        self.api_versions_max = api_versions_max
        self.features = dict(features or {})
        self.requests: list[IncomingRequest] = []
        self.hold = False
        self.connections = 0

    def new_connection(self) -> ServerFraming:
        self.connections += 1
        return ServerFraming()

    def requests_for(self, api) -> list[IncomingRequest]:
        return [r for r in self.requests if r.api is api]

    def handle(self, server: ServerFraming, data: bytes) -> bytes:
        server.receive_data(data)
        out = []
        while (request := server.next_request()) is not None:
            self.requests.append(request)
            if not self.hold:
                out.append(self.answer(server, request))
        return b"".join(out)

    def answer(self, server: ServerFraming, request: IncomingRequest) -> bytes:
        if request.api is API_VERSIONS:
            return self._api_versions(server, request)
        if request.api is METADATA:
            body = self.metadata(request) if callable(self.metadata) else self.metadata
        elif request.api is PRODUCE and request.body.acks == 0:
            return b""
        else:
            body = self.handlers[request.api.api_key](request)
        return b"" if body is None else server.respond(request, body)

    def _api_versions(self, server: ServerFraming, request: IncomingRequest) -> bytes:
        keys = [{"api_key": k, "min_version": lo, "max_version": hi}
                for k, (lo, hi) in self.ranges.items()]
        if request.version > self.api_versions_max:      # KIP-511: answer in v0, name our range
            keys = [{"api_key": 18, "min_version": 0, "max_version": self.api_versions_max}]
            return server.respond(request, {"error_code": 35, "api_keys": keys}, version=0)
        body = {"error_code": 0, "api_keys": keys}
        if self.features and request.version >= 3:
            body["finalized_features_epoch"] = 1
            body["finalized_features"] = [{"name": name, "max_version_level": level,
                                           "min_version_level": 1}
                                          for name, level in self.features.items()]
        return server.respond(request, body)


class FakeSelector:
    """The Selector seam, scripted in memory; see the module docstring."""

    def __init__(self) -> None:
        self.brokers: dict[tuple[str, int], FakeBroker] = {}
        self.auto_connect = True
        self.chunk_size: int | None = None
        self.stall_writes: set[int] = set()
        self.poll_timeouts: list[int] = []
        self.connect_calls: list[tuple[int, str, int, int, int]] = []
        self.wakeups = 0
        self.closed = False
        self._server: dict[int, tuple[FakeBroker, ServerFraming]] = {}
        self._connecting: dict[int, FakeBroker | None] = {}
        self._connected: list[int] = []
        self._outbox: dict[int, list[bytes]] = defaultdict(list)
        self._inbox: dict[int, list[bytes]] = defaultdict(list)
        self._drops: dict[int, str] = {}

    def add_broker(self, host: str, port: int, broker: FakeBroker) -> FakeBroker:
        self.brokers[(host, port)] = broker
        return broker

    # --- scripting --------------------------------------------------------------------------------

    def complete_connect(self, node_id: int) -> None:
        broker = self._connecting.pop(node_id)
        assert broker is not None, f"no broker listens for node {node_id}"
        self._open(node_id, broker)

    def fail_connect(self, node_id: int, reason: str = "connection refused") -> None:
        self._connecting.pop(node_id)
        self._drops[node_id] = reason

    def drop(self, node_id: int, reason: str = "connection reset by peer") -> None:
        self._server.pop(node_id, None)
        self._outbox.pop(node_id, None)
        self._drops[node_id] = reason

    def inject(self, node_id: int, data: bytes) -> None:
        self._inbox[node_id].append(data)

    def is_open(self, node_id: int) -> bool:
        return node_id in self._server

    def pending_connects(self) -> list[int]:
        return list(self._connecting)

    # --- the seam ---------------------------------------------------------------------------------

    def connect(self, node_id: int, host: str, port: int, *, send_buffer_bytes: int,
                receive_buffer_bytes: int) -> None:
        assert not self.closed
        assert node_id not in self._server and node_id not in self._connecting, node_id
        self.connect_calls.append((node_id, host, port, send_buffer_bytes, receive_buffer_bytes))
        if host == "unresolvable":
            raise KafkaConnectionError(f"connecting to node {node_id} at {host}:{port} failed")
        broker = self.brokers.get((host, port))
        self._connecting[node_id] = broker
        if self.auto_connect:
            self._connecting.pop(node_id)
            if broker is None:
                self._drops[node_id] = "connection refused"
            else:
                self._open(node_id, broker)

    def send(self, node_id: int, data: Any) -> None:
        assert not self.closed
        data = b"".join(data) if isinstance(data, tuple) else data
        if node_id not in self._server:
            self._drops.setdefault(node_id, "send on a closed connection")
            return
        self._outbox[node_id].append(bytes(data))

    def poll(self, timeout_ms: int) -> PollResult:
        assert not self.closed
        self.poll_timeouts.append(timeout_ms)
        connected, self._connected = tuple(self._connected), []
        completed = self._write_all()
        received = self._take_inbox()
        drops, self._drops = self._drops, {}
        return PollResult(connected, drops, completed, received)

    def wakeup(self) -> None:
        self.wakeups += 1

    def close(self, node_id: int | None = None) -> None:
        if node_id is None:
            self.closed = True
            self._server.clear()
            return
        self._server.pop(node_id, None)
        self._connecting.pop(node_id, None)
        self._outbox.pop(node_id, None)
        self._inbox.pop(node_id, None)
        self._drops.pop(node_id, None)

    # --- internals --------------------------------------------------------------------------------

    def _open(self, node_id: int, broker: FakeBroker) -> None:
        self._server[node_id] = (broker, broker.new_connection())
        self._connected.append(node_id)

    def _write_all(self) -> tuple[int, ...]:
        completed = []
        for node_id in list(self._outbox):
            if node_id in self.stall_writes or node_id not in self._server:
                continue
            broker, server = self._server[node_id]
            for data in self._outbox.pop(node_id):
                completed.append(node_id)
                answer = broker.handle(server, data)
                if answer:
                    self._inbox[node_id].append(answer)
        return tuple(completed)

    def _take_inbox(self) -> dict[int, list[bytes]]:
        received = {}
        for node_id, chunks in list(self._inbox.items()):
            if node_id in self._drops and node_id not in self._server:
                continue
            data = b"".join(chunks)
            if not data:
                continue
            size = self.chunk_size or len(data)
            received[node_id] = [data[i:i + size] for i in range(0, len(data), size)]
        self._inbox.clear()
        return received
