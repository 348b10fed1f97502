"""The ``server.properties`` of an embedded node: combined broker+controller on loopback.

One node (demo, most tests): every internal topic has replication factor 1 and min ISR 1.
Three nodes (fault tests): a static voter set, replication factor 3 and ``min.insync.replicas=2``,
so that killing one node moves leaders and acks=all writes still succeed. Timeouts are shortened
so that a killed node is fenced (and its partitions get new leaders) within a few seconds.

Listeners of a node, all on 127.0.0.1 (inter-broker and controller traffic is always PLAINTEXT)::

    PLAINTEXT       clients; advertised on ``advertised_port`` when set (a fault proxy in front)
    SSL             clients over TLS                  (only with security, see security.py)
    SASL_PLAINTEXT  clients with SASL                 (only with security)
    SASL_SSL        clients with SASL over TLS        (only with security)
    INTERNAL        inter-broker, PLAINTEXT, never proxied (only when ``advertised_port`` is set)
    CONTROLLER      KRaft controller traffic
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HOST = "127.0.0.1"


CLIENT_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class NodeAddress:
    """Where one node listens.

    ``port`` is the PLAINTEXT client listener the node binds; ``advertised_port`` (when set) is
    the port it tells clients instead, and then ``internal_port`` carries inter-broker traffic.
    ``secure_ports`` maps each extra client protocol (SSL, SASL_PLAINTEXT, SASL_SSL) to its port.
    """

    node_id: int
    port: int
    controller_port: int
    advertised_port: int | None = None
    internal_port: int | None = None
    secure_ports: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.advertised_port is None) != (self.internal_port is None):
            raise ValueError(f"node {self.node_id}: advertised_port and internal_port go together "
                             f"(got {self.advertised_port} and {self.internal_port})")
        unknown = sorted(set(self.secure_ports) - set(CLIENT_PROTOCOLS[1:]))
        if unknown:
            raise ValueError(f"node {self.node_id}: unknown secure listener(s) {unknown}; "
                             f"expected some of {list(CLIENT_PROTOCOLS[1:])}")
        object.__setattr__(self, "secure_ports", dict(self.secure_ports))

    def client_port(self, protocol: str) -> int:
        """The port a client of ``protocol`` connects to (the advertised one for PLAINTEXT)."""
        if protocol == "PLAINTEXT":
            return self.advertised_port if self.advertised_port is not None else self.port
        if protocol not in self.secure_ports:
            raise KeyError(f"node {self.node_id} has no {protocol} listener "
                           f"(listeners: {', '.join(self.bound_ports())})")
        return self.secure_ports[protocol]

    def bound_ports(self) -> dict[str, int]:
        """``{listener name: port}`` of every listener this node binds, in ``listeners`` order."""
        ports = {"PLAINTEXT": self.port}
        ports.update((p, self.secure_ports[p]) for p in CLIENT_PROTOCOLS if p in self.secure_ports)
        if self.internal_port is not None:
            ports["INTERNAL"] = self.internal_port
        ports["CONTROLLER"] = self.controller_port
        return ports


def listener_properties(me: NodeAddress) -> dict[str, str]:
    """``listeners``, ``advertised.listeners``, the protocol map and the inter-broker listener."""
    bound = me.bound_ports()
    advertised = {name: port for name, port in bound.items() if name != "CONTROLLER"}
    advertised["PLAINTEXT"] = me.client_port("PLAINTEXT")
    protocol = {name: ("PLAINTEXT" if name in ("INTERNAL", "CONTROLLER") else name) for name in bound}
    return {
        "listeners": ",".join(f"{name}://{HOST}:{port}" for name, port in bound.items()),
        "advertised.listeners": ",".join(f"{name}://{HOST}:{port}" for name, port in advertised.items()),
        "listener.security.protocol.map": ",".join(f"{name}:{p}" for name, p in protocol.items()),
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "INTERNAL" if me.internal_port is not None else "PLAINTEXT",
    }


def quorum_voters(addresses: Sequence[NodeAddress]) -> str:
    """The static ``controller.quorum.voters`` value: ``id@127.0.0.1:port,...``."""
    return ",".join(f"{a.node_id}@{HOST}:{a.controller_port}" for a in addresses)


def server_properties(me: NodeAddress, cluster: Sequence[NodeAddress], log_dir: Path,
                      extra: Mapping[str, object] | None = None,
                      security: Mapping[str, object] | None = None) -> dict[str, str]:
    """Every property of node ``me`` in ``cluster``.

    ``security`` holds the secured listeners' SSL/SASL properties (security.py); ``extra`` entries
    override everything.
    """
    size = len(cluster)
    replication = min(3, size)
    min_isr = 1 if size < 3 else 2
    props: dict[str, object] = {
        # Identity and roles.
        "process.roles": "broker,controller",
        "node.id": me.node_id,
        "controller.quorum.voters": quorum_voters(cluster),
        # Listeners, loopback only.
        **listener_properties(me),
        # Storage.
        "log.dirs": str(log_dir),
        "num.partitions": 1,
        "default.replication.factor": replication,
        "min.insync.replicas": min_isr,
        "auto.create.topics.enable": "false",  # tests create their topics explicitly
        "log.retention.check.interval.ms": 10_000,
        "log.cleaner.dedupe.buffer.size": 8 << 20,  # 128 MB by default: a third of our heap
        # Internal topics, sized for a test machine (created on first use; fewer partitions = faster).
        "offsets.topic.replication.factor": replication,
        "offsets.topic.num.partitions": 5,
        "transaction.state.log.replication.factor": replication,
        "transaction.state.log.min.isr": min_isr,
        "transaction.state.log.num.partitions": 5,
        # A transaction past its transaction.timeout.ms is aborted within 1 s, not 10 s.
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1_000,
        "share.coordinator.state.topic.replication.factor": replication,
        "share.coordinator.state.topic.min.isr": min_isr,
        "group.initial.rebalance.delay.ms": 0,
        # Few threads: tests run on 2 cores.
        "num.network.threads": 2,
        "num.io.threads": 4,
        "background.threads": 4,
        "num.recovery.threads.per.data.dir": 1,
        # Fast failure detection: a killed node is fenced after 3 s instead of 9 s.
        "broker.heartbeat.interval.ms": 500,
        "broker.session.timeout.ms": 3_000,
        "controller.quorum.election.timeout.ms": 1_000,
        "controller.quorum.fetch.timeout.ms": 2_000,
        "controller.quorum.election.backoff.max.ms": 1_000,
        "controller.socket.timeout.ms": 5_000,
    }
    props.update(security or {})
    props.update(extra or {})
    return {key: str(value) for key, value in props.items()}


def render(props: Mapping[str, str]) -> str:
    """``key=value`` lines in the Java properties format (values escaped as Java expects)."""
    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("\n", "\\n")
    return "".join(f"{key}={escape(value)}\n" for key, value in props.items())
