"""An embedded Apache Kafka cluster (KRaft) of 1..N combined broker+controller nodes on loopback.

    with EmbeddedKafka(nodes=3) as kafka:
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers)
        kafka.kill_node(kafka.leaders("t")[0])

``start()`` finds Java 17+, resolves the jars (once per machine, see ``jars.py``), picks free
loopback ports, writes and formats every node's storage, starts the JVMs in parallel, and returns
once every node answers Metadata listing all N brokers. Every failure is a ``BrokerLaunchError``
subclass with the evidence in its message.

``security=BrokerSecurity(...)`` adds SSL / SASL_PLAINTEXT / SASL_SSL client listeners to every node
(see security.py; ``bootstrap_for``, ``client_properties``, ``tls``). ``advertised_ports`` makes each
node advertise its PLAINTEXT listener on another port (a fault proxy's) and move inter-broker
traffic to an unproxied INTERNAL listener. ``close()`` stops every JVM and reaps it; a finalizer
(run at interpreter exit too) kills whatever is left if ``close()`` was never called.
"""

from __future__ import annotations

import base64
import datetime
import shutil
import tempfile
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import KafkaError
from .config import CLIENT_PROTOCOLS, HOST, NodeAddress
from .errors import BrokerStartError, PortInUseError
from .jars import DEFAULT_KAFKA_VERSION, KafkaJars, resolve_kafka_jars
from .java import find_java
from .node import KafkaNode
from .ports import check_free, free_ports
from ..client.cluster_snapshot import ClusterSnapshot
from .probe import fetch_metadata
from .security import BrokerSecurity, TlsMaterial, broker_properties, scram_format_args
from .security import client_properties as _client_properties

_PROBE_TIMEOUT_S = 3.0
_POLL_S = 0.1


def new_cluster_id() -> str:
    """A Kafka cluster id: a random 16-byte UUID, base64url without padding (22 characters).

    Like Kafka's ``Uuid.randomUuid()``, never one starting with ``-``: StorageTool's argument
    parser would read ``-t -abc...`` as an option and fail.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


class EmbeddedKafka:
    """A real Apache Kafka cluster of ``nodes`` JVMs, for tests, the demo and the CLI.

    ``work_dir``: where node directories go; default a temporary directory removed by ``close()``
    unless ``keep``. A given ``work_dir`` is never removed. ``cache_dir``: the jar cache root (see
    :func:`resolve_kafka_jars`). ``start_timeout_s`` bounds the launch (not the first-time jar
    download). ``ports`` / ``controller_ports``: explicit listener ports, one per node (default:
    free ports picked at start). ``extra_properties`` override the generated server.properties.
    ``security``: the extra secured client listeners (default none: PLAINTEXT only).
    ``advertised_ports``: one per node; node *i* advertises its PLAINTEXT listener as
    ``127.0.0.1:advertised_ports[i]`` (a proxy the caller runs in front of ``node.port``) and its
    brokers replicate over a separate INTERNAL listener. Every port stays the same across restarts.
    ``system_properties``: JVM system properties of every node (``-Dname=value``), e.g. Kafka's
    ``org.apache.kafka.sasl.oauthbearer.allowed.urls`` for a JWKS the brokers may read.
    """

    def __init__(self, nodes: int = 1, *, version: str = DEFAULT_KAFKA_VERSION,
                 work_dir: str | Path | None = None, keep: bool = False,
                 cache_dir: str | Path | None = None, start_timeout_s: float = 90.0,
                 heap: str = "384m", extra_properties: Mapping[str, object] | None = None,
                 ports: Sequence[int] | None = None, controller_ports: Sequence[int] | None = None,
                 security: BrokerSecurity | None = None, advertised_ports: Sequence[int] | None = None,
                 system_properties: Mapping[str, str] | None = None):
        if nodes < 1:
            raise ValueError(f"nodes must be at least 1, got {nodes}")
        for name, given in (("ports", ports), ("controller_ports", controller_ports),
                            ("advertised_ports", advertised_ports)):
            if given is not None and len(given) != nodes:
                raise ValueError(f"{name} needs one port per node ({nodes}), got {list(given)}")
            if given is not None and not all(isinstance(p, int) and 0 < p < 65536 for p in given):
                raise ValueError(f"{name} must be ports in 1..65535, got {list(given)}")
        if advertised_ports is not None:
            if len(set(advertised_ports)) != nodes:
                raise ValueError(f"advertised_ports must differ from each other, got {list(advertised_ports)}")
            clash = sorted(set(advertised_ports) & set([*(ports or ()), *(controller_ports or ())]))
            if clash:
                raise ValueError(f"advertised_ports {clash} are also listener ports; an advertised port "
                                 f"is the proxy's, in front of the node's own port")
        if security is not None and not isinstance(security, BrokerSecurity):
            raise TypeError(f"security must be a BrokerSecurity, got {type(security).__name__}")
        self.size = nodes
        self.version = version
        self.cache_dir = cache_dir
        self.start_timeout_s = start_timeout_s
        self.heap = heap
        self.extra_properties = dict(extra_properties or {})
        self.system_properties = dict(system_properties or {})
        for name, value in self.system_properties.items():
            if not isinstance(name, str) or not name or "=" in name or not isinstance(value, str):
                raise ValueError(f"system_properties must map names (without '=') to strings, "
                                 f"got {name!r}: {type(value).__name__}")
        self.keep = keep
        self._given_work_dir = Path(work_dir) if work_dir is not None else None
        self._ports = list(ports) if ports is not None else None
        self._controller_ports = list(controller_ports) if controller_ports is not None else None
        self._advertised_ports = list(advertised_ports) if advertised_ports is not None else None
        self.security = security
        self._tls: TlsMaterial | None = None
        self._nodes: list[KafkaNode] = []
        self._finalizer: weakref.finalize | None = None
        self.work_dir: Path | None = None
        self.cluster_id: str | None = None
        self.jars: KafkaJars | None = None
        self.java: str | None = None
        self.start_seconds: float | None = None

    # --- views -----------------------------------------------------------------------------

    @property
    def nodes(self) -> list[KafkaNode]:
        return list(self._nodes)

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:p1,127.0.0.1:p2,...``: every node's PLAINTEXT listener as advertised
        (with ``advertised_ports``, the proxies' ports; each ``node.bootstrap`` is the real one)."""
        return self.bootstrap_for("PLAINTEXT")

    def bootstrap_for(self, protocol: str) -> str:
        """Every node's ``127.0.0.1:port`` for ``protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT or
        SASL_SSL (the last three need ``security``)."""
        if protocol not in CLIENT_PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(CLIENT_PROTOCOLS)}, got {protocol!r}")
        if protocol != "PLAINTEXT" and protocol not in self._secure_protocols():
            raise ValueError(f"this cluster has no {protocol} listener (security={self.security!r})")
        if not self._nodes:
            raise RuntimeError("the embedded Kafka cluster is not started")
        return ",".join(node.bootstrap_for(protocol) for node in self._nodes)

    @property
    def tls(self) -> TlsMaterial | None:
        """The CA and certificates generated at start (PEM files); ``None`` without SSL."""
        return self._tls

    def client_properties(self, protocol: str, mechanism: str | None = None,
                          user: str | None = None) -> dict[str, str]:
        """Client properties (Java/librdkafka names) for ``protocol``'s listener: ``security.protocol``,
        the ``ssl.*`` locations (with the client certificate when the broker asks for one) and
        ``sasl.mechanism``/``sasl.username``/``sasl.password`` (default PLAIN as the first user).
        ``bootstrap.servers`` is not included: see :meth:`bootstrap_for`."""
        if protocol != "PLAINTEXT" and protocol not in self._secure_protocols():
            raise ValueError(f"this cluster has no {protocol} listener (security={self.security!r})")
        if protocol != "PLAINTEXT" and "SSL" in protocol and self._tls is None:
            raise RuntimeError("the embedded Kafka cluster is not started (no certificates yet)")
        return _client_properties(self.security, self._tls, protocol, mechanism, user)

    def _secure_protocols(self) -> tuple[str, ...]:
        return self.security.protocols if self.security is not None else ()

    def node(self, node_id: int) -> KafkaNode:
        for node in self._nodes:
            if node.node_id == node_id:
                return node
        raise KeyError(f"no node {node_id}; nodes are {[n.node_id for n in self._nodes]}")

    def __repr__(self) -> str:
        return f"EmbeddedKafka(size={self.size}, version={self.version!r}, nodes={self._nodes})"

    # --- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> EmbeddedKafka:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()

    def start(self) -> EmbeddedKafka:
        """Resolve, format and launch every node; return once all N brokers are in Metadata."""
        if self._nodes:
            raise RuntimeError("already started")
        began = time.monotonic()
        try:
            self._start()
        except BaseException:
            self.close(grace_s=0.0)
            raise
        self.start_seconds = time.monotonic() - began
        return self

    def close(self, grace_s: float = 3.0) -> None:
        """Stop every node, reap it, and remove the temporary work dir; idempotent.

        All nodes get SIGTERM at once; any still running after ``grace_s`` gets SIGKILL (0: kill at
        once). A lone node stops cleanly in about 0.4 s. In a multi-node cluster the last node
        cannot finish a controlled shutdown without a quorum and is killed after ``grace_s``; its
        storage is scratch anyway (every start formats afresh).
        """
        nodes = list(self._nodes)
        if nodes:
            with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
                list(pool.map(lambda node: node.stop(grace_s) if grace_s > 0 else node.kill(), nodes))
        if self._finalizer is not None:
            self._finalizer()  # kills stragglers (none expected) and removes the temp dir
            self._finalizer = None
        alive = [node for node in nodes if node.is_alive]
        self._nodes.clear()
        if alive:
            raise BrokerStartError(f"nodes still running after close(): {alive}")

    def stop_node(self, node_id: int, grace_s: float = 15.0) -> int | None:
        """Stop one node cleanly (SIGTERM); returns its exit code."""
        return self.node(node_id).stop(grace_s)

    def kill_node(self, node_id: int) -> int | None:
        """SIGKILL one node, as a crash would; returns its exit code."""
        return self.node(node_id).kill()

    def restart_node(self, node_id: int, timeout_s: float | None = None) -> KafkaNode:
        """Start a stopped or killed node again on its storage; wait until Metadata lists it again.

        A running node is stopped first.
        """
        node = self.node(node_id)
        node.restart()
        deadline = time.monotonic() + (timeout_s or self.start_timeout_s)
        self._wait_until(lambda: self._lists_node(node), deadline, [node],
                         f"node {node_id} to rejoin the cluster")
        return node

    # --- metadata views --------------------------------------------------------------------

    def metadata(self, topics: list[str] | None = None, timeout_s: float = 10.0) -> ClusterSnapshot:
        """A fresh Metadata response from the first live node that answers."""
        last: Exception | None = None
        for node in self._nodes:
            if node.is_alive:
                try:
                    return fetch_metadata(node.port, topics, timeout_s=timeout_s)
                except (OSError, KafkaError) as exc:
                    last = exc
        raise BrokerStartError(f"no live node answered Metadata (last error: {last!r})")

    def broker_ids(self) -> tuple[int, ...]:
        """The node ids of the live brokers, as Metadata reports them."""
        return tuple(sorted(self.metadata([]).nodes))

    def leaders(self, topic: str) -> dict[int, int]:
        """``{partition: leader node id}`` for ``topic`` from a fresh Metadata (-1: no leader)."""
        snapshot = self.metadata([topic])
        if topic not in snapshot.topics:
            raise KeyError(f"topic {topic!r}: Metadata error code {snapshot.topic_error(topic)}")
        return {p.partition: p.leader for p in snapshot.partitions_for(topic)}

    # --- start-up --------------------------------------------------------------------------

    def _start(self) -> None:
        explicit = self._ports is not None or self._controller_ports is not None
        if explicit:
            for port in [*(self._ports or ()), *(self._controller_ports or ())]:
                check_free(port, "Kafka listener port")
        self.java = find_java()
        self.jars = resolve_kafka_jars(self.version, self.cache_dir, java=self.java)
        self._make_work_dir()
        self.cluster_id = new_cluster_id()
        for attempt in (1, 2):
            try:
                self._launch(self._addresses())
                return
            except PortInUseError:
                if explicit or attempt == 2:
                    raise
                # A free port was taken between picking and binding: pick new ones, once.
                self.close(grace_s=0.0)
                self._make_work_dir()

    def _make_work_dir(self) -> None:
        if self._given_work_dir is not None:
            self.work_dir = self._given_work_dir
            self.work_dir.mkdir(parents=True, exist_ok=True)
            tmp = None
        else:
            self.work_dir = Path(tempfile.mkdtemp(prefix="spark-kafka-sink-kafka-"))
            tmp = None if self.keep else self.work_dir
        for old in self.work_dir.glob("node-*"):
            shutil.rmtree(old, ignore_errors=True)
        self._finalizer = weakref.finalize(self, _emergency_cleanup, self._nodes, tmp)

    def _addresses(self) -> list[NodeAddress]:
        secure = self._secure_protocols()
        advertised = self._advertised_ports
        per_node = 2 + len(secure) + (1 if advertised is not None else 0)
        reserved = set(advertised or ())  # a proxy's port need not be bound yet: never pick it
        picked = iter([p for p in free_ports(per_node * self.size + len(reserved)) if p not in reserved])
        ports = self._ports or [next(picked) for _ in range(self.size)]
        controller_ports = self._controller_ports or [next(picked) for _ in range(self.size)]
        return [NodeAddress(i + 1, ports[i], controller_ports[i],
                            advertised_port=advertised[i] if advertised is not None else None,
                            internal_port=next(picked) if advertised is not None else None,
                            secure_ports={protocol: next(picked) for protocol in secure})
                for i in range(self.size)]

    def _launch(self, addresses: list[NodeAddress]) -> None:
        for address in addresses:
            for listener, port in address.bound_ports().items():
                check_free(port, f"node {address.node_id} {listener} listener port")
        nodes = [KafkaNode(a, self.work_dir / f"node-{a.node_id}", java=self.java, jars=self.jars,
                           heap=self.heap, dump_cds=a is addresses[0],
                           system_properties=self.system_properties) for a in addresses]
        security_props, format_args = self._prepare_security()
        for node in nodes:
            node.configure(addresses, self.extra_properties, security_props)
        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
            list(pool.map(lambda node: node.format(self.cluster_id, format_args), nodes))
        self._nodes.extend(nodes)
        for node in nodes:  # from this thread: the parent-death signal is per thread
            node.start()
        deadline = time.monotonic() + self.start_timeout_s
        self._wait_until(self._all_listed, deadline, nodes, f"all {self.size} brokers in Metadata")

    def _prepare_security(self) -> tuple[dict[str, str], list[str]]:
        """The secured listeners' broker properties and StorageTool's ``--add-scram`` arguments;
        generates the certificates into ``<work_dir>/tls`` when SSL is on."""
        self._tls = None
        if self.security is None:
            return {}, []
        if self.security.ssl:
            from .certs import generate_tls  # needs `cryptography`, imported only when SSL is on
            self._tls = generate_tls(self.work_dir / "tls", datetime.datetime.now(datetime.timezone.utc))
        return broker_properties(self.security, self._tls), scram_format_args(self.security)

    def _all_listed(self) -> bool:
        """Every node answers Metadata, and every answer lists all N brokers."""
        expected = {node.node_id for node in self._nodes}
        return all(set(fetch_metadata(n.port, [], timeout_s=_PROBE_TIMEOUT_S).nodes) >= expected
                   for n in self._nodes)

    def _lists_node(self, node: KafkaNode) -> bool:
        """``node`` answers Metadata, and every live node lists it."""
        return all(node.node_id in fetch_metadata(n.port, [], timeout_s=_PROBE_TIMEOUT_S).nodes
                   for n in self._nodes if n.is_alive)

    def _wait_until(self, ready: Callable[[], bool], deadline: float, watched: list[KafkaNode],
                    what: str) -> None:
        last_error: Exception | None = None
        while True:
            for node in watched:
                if not node.is_alive:
                    raise self._exit_error(node)
            try:
                if ready():
                    return
                last_error = None
            except (OSError, KafkaError) as exc:
                last_error = exc
            if time.monotonic() > deadline:
                logs = "\n\n".join(f"--- node {n.node_id} log ({n.log_path}), last 60 lines:\n"
                                   f"{n.log_tail(60)}" for n in watched)
                raise BrokerStartError(
                    f"timed out after {self.start_timeout_s:.0f} s waiting for {what} "
                    f"(last probe error: {last_error!r}).\n{logs}")
            time.sleep(_POLL_S)

    def _exit_error(self, node: KafkaNode) -> Exception:
        code = node.exit_code
        if node.log_mentions("Address already in use"):
            ports = ", ".join(f"{name} {HOST}:{port}" for name, port in node.address.bound_ports().items())
            return PortInUseError(
                f"node {node.node_id} could not bind one of its ports ({ports}): address already "
                f"in use. Log tail:\n{node.log_tail(20)}", node.port)
        return BrokerStartError(
            f"node {node.node_id} (pid {node.pid}) exited with code {code} during start-up. "
            f"Log {node.log_path}, last 60 lines:\n{node.log_tail(60)}")


def _emergency_cleanup(nodes: list[KafkaNode], tmp_dir: Path | None) -> None:
    """Finalizer (also at interpreter exit): SIGKILL every node left running, remove the temp dir."""
    for node in nodes:
        try:
            node.kill()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
    if tmp_dir is not None:
        shutil.rmtree(tmp_dir, ignore_errors=True)
