"""KafkaCluster: a real Apache Kafka (KRaft) of 1..N nodes for tests, with nodes to kill and proxies.

    with KafkaCluster(nodes=3, proxied=True) as cluster:
        cluster.create_topic("events", partitions=6)
        producer = KafkaProducer({"bootstrap.servers": cluster.bootstrap_servers, ...})
        cluster.kill(cluster.leader_of("events", 0))       # a crash (SIGKILL)
        cluster.proxy(2).stall(5.0)                        # node 2 unreachable for clients, 5 s
        cluster.restart(1)                                 # back on its storage, rejoined

It wraps :class:`spark_kafka_sink.embedded.EmbeddedKafka`. With ``proxied=True`` every node gets a
:class:`~spark_kafka_sink.testing.FaultProxy` in front of its PLAINTEXT client port, and the node
advertises the proxy's address, so every client connection (bootstrap and after) goes through
the proxy while replication and the controller quorum stay direct. ``security`` (a
``BrokerSecurity``) adds SSL / SASL listeners; see ``bootstrap_for`` and ``client_properties``.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import admin
from ..embedded import EmbeddedKafka
from ..client.blocking import BlockingConnection
from ..errors import KafkaError, raise_for_code
from ..protocol.apis import CREATE_TOPICS
from .faultproxy import HOST, FaultProxy

_POLL_S = 0.1
PLAINTEXT = "PLAINTEXT"


class KafkaCluster:
    """``nodes`` combined broker+controller JVMs on loopback; a context manager.

    ``nodes``: 1, or 3 for fault tests (replication factor 3, ``min.insync.replicas`` 2 by default).
    ``security``: a ``spark_kafka_sink.embedded.BrokerSecurity`` for SSL / SASL listeners.
    ``proxied``: a FaultProxy in front of each node's PLAINTEXT client listener (see :meth:`proxy`).
    ``work_dir``: where node directories go (default: a temporary directory removed at close).
    ``heap``: each JVM's heap. ``broker_properties``: server.properties overrides for every node.
    ``version``: the Apache Kafka release (default: the embedded broker's, 4.x; e.g. ``"3.9.1"``).
    """

    def __init__(self, nodes: int = 1, *, security: Any = None, proxied: bool = False,
                 work_dir: str | Path | None = None, heap: str = "384m",
                 broker_properties: Mapping[str, object] | None = None,
                 start_timeout_s: float = 90.0, version: str | None = None):
        if nodes < 1:
            raise ValueError(f"nodes must be at least 1, got {nodes}")
        self.size = nodes
        self.security = security
        self.proxied = proxied
        self._work_dir = work_dir
        self._heap = heap
        self._broker_properties = dict(broker_properties or {})
        self._start_timeout_s = start_timeout_s
        self.version = version
        self._kafka: EmbeddedKafka | None = None
        self._proxies: dict[int, FaultProxy] = {}

    # --- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()

    def start(self) -> KafkaCluster:
        """Start the proxies (if proxied), then every node; return once all are in Metadata."""
        if self._kafka is not None:
            raise RuntimeError("the cluster is already started")
        options: dict[str, Any] = {"work_dir": self._work_dir, "heap": self._heap,
                                   "start_timeout_s": self._start_timeout_s,
                                   "extra_properties": self._broker_properties}
        if self.security is not None:
            options["security"] = self.security
        if self.version is not None:
            options["version"] = self.version
        try:
            if self.proxied:
                # The proxies listen first (their ports are what the nodes advertise); they learn
                # their targets, the nodes' own ports, once the launcher has bound them. Nothing
                # connects through a proxy before that: the readiness probe uses the real ports.
                for node_id in range(1, self.size + 1):
                    self._proxies[node_id] = FaultProxy(HOST, 0).start()
                options["advertised_ports"] = [self._proxies[n].port for n in sorted(self._proxies)]
            self._kafka = EmbeddedKafka(self.size, **options)
            self._kafka.start()
            for node in self._kafka.nodes:
                if node.node_id in self._proxies:
                    self._proxies[node.node_id].target = (HOST, node.port)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop every node, then every proxy; idempotent."""
        kafka, self._kafka = self._kafka, None
        try:
            if kafka is not None:
                kafka.close()
        finally:
            proxies, self._proxies = list(self._proxies.values()), {}
            for proxy in proxies:
                proxy.close()

    # --- addresses -------------------------------------------------------------------------

    @property
    def embedded(self) -> EmbeddedKafka:
        """The underlying launcher (its nodes, ports and logs)."""
        if self._kafka is None:
            raise RuntimeError("the cluster is not started")
        return self._kafka

    @property
    def node_ids(self) -> tuple[int, ...]:
        return tuple(node.node_id for node in self.embedded.nodes)

    @property
    def bootstrap_servers(self) -> str:
        """The PLAINTEXT bootstrap list clients should use (the proxies' addresses when proxied)."""
        return self.embedded.bootstrap_servers

    def bootstrap_for(self, protocol: str) -> str:
        """The bootstrap list of the ``protocol`` listener (``PLAINTEXT``, ``SSL``, ``SASL_*``)."""
        if protocol.upper() == PLAINTEXT:
            return self.bootstrap_servers
        return self.embedded.bootstrap_for(protocol)

    def client_properties(self, protocol: str = PLAINTEXT, mechanism: str | None = None,
                          user: str | None = None) -> dict[str, str]:
        """Client properties for the ``protocol`` listener, ``bootstrap.servers`` included.

        The names are the Java / librdkafka ones, accepted by this package's producer and by
        confluent-kafka alike.
        """
        props = {"bootstrap.servers": self.bootstrap_for(protocol)}
        if protocol.upper() != PLAINTEXT:
            props.update(self.embedded.client_properties(protocol, mechanism=mechanism, user=user))
        return props

    def proxy(self, node_id: int) -> FaultProxy:
        """The FaultProxy in front of node ``node_id`` (``proxied=True`` only)."""
        if not self.proxied:
            raise RuntimeError("this cluster has no proxies: create it with proxied=True")
        try:
            return self._proxies[node_id]
        except KeyError:
            raise KeyError(f"no node {node_id}; nodes are {sorted(self._proxies)}") from None

    # --- faults ----------------------------------------------------------------------------

    def kill(self, node_id: int) -> None:
        """SIGKILL node ``node_id``, as a crash would."""
        self.embedded.kill_node(node_id)

    def stop(self, node_id: int, grace_s: float = 15.0) -> None:
        """Stop node ``node_id`` cleanly (controlled shutdown: its leaderships move first)."""
        self.embedded.stop_node(node_id, grace_s)

    def restart(self, node_id: int, timeout_s: float | None = None) -> None:
        """Start node ``node_id`` again on its storage (stopping it first if it runs); returns
        once every live node lists it in Metadata."""
        self.embedded.restart_node(node_id, timeout_s)

    def restart_all(self, timeout_s: float | None = None) -> None:
        """Start every node that is not running, all at once (a cluster that lost its controller
        quorum cannot take them one by one); returns once Metadata lists every node."""
        down = [node for node in self.embedded.nodes if not node.is_alive]
        for node in down:
            node.start()
        deadline = time.monotonic() + (timeout_s or self._start_timeout_s)
        expected = set(self.node_ids)
        last: object = None
        while True:
            for node in down:
                if not node.is_alive:
                    raise RuntimeError(f"node {node.node_id} exited while restarting; log tail:\n"
                                       f"{node.log_tail(40)}")
            try:
                listed = set(self.broker_ids())
                if listed >= expected:
                    return
                last = sorted(listed)
            except (OSError, KafkaError) as exc:
                last = exc
            if time.monotonic() > deadline:
                raise TimeoutError(f"nodes {[n.node_id for n in down]} not all back after "
                                   f"{timeout_s or self._start_timeout_s} s (last: {last!r})")
            time.sleep(_POLL_S)

    def freeze(self, node_id: int) -> None:
        """SIGSTOP node ``node_id``: alive but silent (a long GC pause, a hung host). The cluster
        fences it after ``broker.session.timeout.ms`` (3 s here)."""
        self.embedded.node(node_id).send_signal(signal.SIGSTOP)

    def thaw(self, node_id: int) -> None:
        """SIGCONT a node frozen by :meth:`freeze`."""
        self.embedded.node(node_id).send_signal(signal.SIGCONT)

    def is_alive(self, node_id: int) -> bool:
        return self.embedded.node(node_id).is_alive

    # --- topics and metadata ---------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None,
                     config: Mapping[str, object] | None = None, *,
                     assignments: Mapping[int, Sequence[int]] | None = None,
                     timeout_s: float = 30.0) -> dict[int, int]:
        """Create ``name`` and wait until every partition has a leader; ``{partition: leader}``.

        ``replication_factor`` defaults to ``min(3, nodes)``; ``config`` holds topic configs
        (``{"min.insync.replicas": 3}``). ``assignments`` places replicas by hand,
        ``{partition: [node ids, preferred leader first]}``, instead of ``partitions`` and
        ``replication_factor``.
        """
        configs = {key: str(value) for key, value in (config or {}).items()}
        if assignments is None:
            created = admin.create_topic(
                self._direct_bootstrap(), name, partitions,
                replication_factor=replication_factor or min(3, self.size), configs=configs,
                timeout_s=timeout_s)
            return dict(created.leaders)
        return self._create_assigned(name, assignments, configs, timeout_s)

    def set_client_quotas(self, quotas: Mapping[str, float | None], *, client_id: str | None = None,
                          timeout_s: float = 30.0) -> None:
        """Set (``None``: remove) client quotas for ``client_id``, or for every client's default
        when ``client_id`` is None, e.g. ``{"producer_byte_rate": 1_048_576}``: the brokers then
        throttle producers above 1 MiB/s (KIP-219)."""
        admin.alter_client_quotas(self._direct_bootstrap(), {"client-id": client_id}, quotas,
                                  timeout_s=timeout_s)

    def _create_assigned(self, name: str, assignments: Mapping[int, Sequence[int]],
                         configs: Mapping[str, str], timeout_s: float) -> dict[int, int]:
        body = {"topics": [{"name": name, "num_partitions": -1, "replication_factor": -1,
                            "assignments": [{"partition_index": p, "broker_ids": list(nodes)}
                                            for p, nodes in sorted(assignments.items())],
                            "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                "timeout_ms": int(timeout_s * 1000), "validate_only": False}
        host, port = self._direct_bootstrap().split(",")[0].rsplit(":", 1)
        with BlockingConnection(host, int(port), timeout_s=timeout_s + 5) as conn:
            for result in conn.request(CREATE_TOPICS, body).topics:
                raise_for_code(result.error_code, f"CreateTopics {name}: {result.error_message or ''}")
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                leaders = self.leaders(name)
                if len(leaders) == len(assignments) and all(v >= 0 for v in leaders.values()):
                    return leaders
            except (OSError, KafkaError, KeyError) as exc:
                leaders = {"error": repr(exc)}
            if time.monotonic() > deadline:
                raise KafkaError(f"topic {name}: not every partition has a leader after "
                                 f"{timeout_s} s (leaders: {leaders})")
            time.sleep(_POLL_S)

    def leaders(self, topic: str) -> dict[int, int]:
        """``{partition: leader node id}`` from a fresh Metadata (-1: no leader)."""
        return self.embedded.leaders(topic)

    def leader_of(self, topic: str, partition: int) -> int:
        """The node id leading ``topic``-``partition`` now (-1 while it has none)."""
        leaders = self.leaders(topic)
        if partition not in leaders:
            raise KeyError(f"{topic} has no partition {partition}; it has {sorted(leaders)}")
        return leaders[partition]

    def isr(self, topic: str, partition: int) -> tuple[int, ...]:
        """The in-sync replicas of ``topic``-``partition`` from a fresh Metadata."""
        for info in self.embedded.metadata([topic]).partitions_for(topic):
            if info.partition == partition:
                return tuple(sorted(info.isr))
        raise KeyError(f"{topic} has no partition {partition}")

    def broker_ids(self) -> tuple[int, ...]:
        """The live brokers as Metadata lists them."""
        return self.embedded.broker_ids()

    def wait_for_isr(self, topic: str, size: int | None = None, timeout_s: float = 60.0) -> None:
        """Wait until every partition of ``topic`` has ``size`` in-sync replicas (default: all
        its replicas); ``TimeoutError`` naming the lagging partitions otherwise."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                infos = self.embedded.metadata([topic]).partitions_for(topic)
                lagging = {i.partition: i.isr for i in infos
                           if len(i.isr) < (size if size is not None else len(i.replicas))}
                if infos and not lagging:
                    return
            except (OSError, KafkaError) as exc:
                lagging = {"error": repr(exc)}
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: in-sync replicas not complete after {timeout_s} s: "
                                   f"{lagging}")
            time.sleep(_POLL_S)

    def _direct_bootstrap(self) -> str:
        """The live nodes' own PLAINTEXT ports, never through a proxy (for admin requests)."""
        live = [node.bootstrap for node in self.embedded.nodes if node.is_alive]
        if not live:
            raise RuntimeError("every node of the cluster is down")
        return ",".join(live)

    def __repr__(self) -> str:
        state = "stopped" if self._kafka is None else f"nodes={self.embedded.nodes}"
        return f"KafkaCluster(size={self.size}, proxied={self.proxied}, {state})"
