"""The ``server.properties`` of an embedded node: combined broker+controller on loopback.

One node (demo, most tests): every internal topic has replication factor 1 and min ISR 1.
Three nodes (fault tests): a static voter set, replication factor 3 and ``min.insync.replicas=2``,
so that killing one node moves leaders and acks=all writes still succeed. Timeouts are shortened
so that a killed node is fenced (and its partitions get new leaders) within a few seconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

HOST = "127.0.0.1"


@dataclass(frozen=True)
class NodeAddress:
    """Where one node listens: its client (PLAINTEXT) port and its controller (Raft) port."""

    node_id: int
    port: int
    controller_port: int


def quorum_voters(addresses: Sequence[NodeAddress]) -> str:
    """The static ``controller.quorum.voters`` value: ``id@127.0.0.1:port,...``."""
    return ",".join(f"{a.node_id}@{HOST}:{a.controller_port}" for a in addresses)


def server_properties(me: NodeAddress, cluster: Sequence[NodeAddress], log_dir: Path,
                      extra: Mapping[str, object] | None = None) -> dict[str, str]:
    """Every property of node ``me`` in ``cluster``; ``extra`` entries override ours."""
    size = len(cluster)
    replication = min(3, size)
    min_isr = 1 if size < 3 else 2
    props: dict[str, object] = {
        # Identity and roles.
        "process.roles": "broker,controller",
        "node.id": me.node_id,
        "controller.quorum.voters": quorum_voters(cluster),
        # Listeners, loopback only.
        "listeners": f"PLAINTEXT://{HOST}:{me.port},CONTROLLER://{HOST}:{me.controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{me.port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
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
    props.update(extra or {})
    return {key: str(value) for key, value in props.items()}


def render(props: Mapping[str, str]) -> str:
    """``key=value`` lines in the Java properties format (values escaped as Java expects)."""
    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("\n", "\\n")
    return "".join(f"{key}={escape(value)}\n" for key, value in props.items())
