"""``spark-kafka-sink broker`` and ``spark-kafka-sink schema-registry``: run a local Apache Kafka
cluster or schema registry until Ctrl-C / SIGTERM, printing first what a client needs.

``broker`` prints the ``bootstrap.servers`` line first, so scripts can read it. ``--port`` fixes
the first node's port (the others follow it); each ``--topic`` is created once the cluster is
up, before that line. ``--security`` adds SSL, SASL_PLAINTEXT and SASL_SSL listeners and prints
``bootstrap.servers.<PROTOCOL>=...``, ``ssl.ca.location=...`` and the client properties files
(owner-only, passwords included) written into the work dir: ``--config-file`` of the client
commands takes them. ``schema-registry`` runs the testing kit's schema registry (Apicurio
Registry, in memory, Java 21+) the same way, printing ``schema.registry.url=...`` first.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Sequence

from .arguments import TopicSpec, port_number, say, topic_spec


def add_serve_parsers(commands) -> None:
    from ..embedded import DEFAULT_KAFKA_VERSION

    broker = commands.add_parser(
        "broker", help="run a local Apache Kafka broker or cluster (KRaft) until Ctrl-C",
        description="Run real Apache Kafka nodes (combined broker+controller, KRaft) on 127.0.0.1 "
                    "until Ctrl-C or SIGTERM. The Kafka jars are fetched from Maven Central on the "
                    "first run (Maven, or the Ivy jar shipped with pyspark) and cached.")
    broker.add_argument("--nodes", type=int, default=1, metavar="N",
                        help="number of nodes (default 1; 3 gives replication factor 3, min ISR 2)")
    broker.add_argument("--port", type=port_number, metavar="P",
                        help="the first node's port (node i gets P+i; default: free ports)")
    broker.add_argument("--topic", type=topic_spec, action="append", default=[],
                        metavar="NAME[:PARTITIONS]",
                        help="create this topic at start (1 partition unless given; the brokers' "
                             "replication factor); repeatable. Kept ones (--work-dir) are left as they are")
    broker.add_argument("--kafka-version", default=DEFAULT_KAFKA_VERSION, metavar="V",
                        help=f"Apache Kafka version (default {DEFAULT_KAFKA_VERSION})")
    broker.add_argument("--work-dir", metavar="D",
                        help="directory for the nodes' storage and logs (default: a temporary "
                             "directory, removed on exit); kept on exit when given")
    broker.add_argument("--cache-dir", metavar="D",
                        help="jar cache root (default $SPARK_KAFKA_SINK_CACHE or "
                             "~/.cache/spark-kafka-sink)")
    broker.add_argument("--heap", default="384m", help="JVM heap per node (default 384m)")
    broker.add_argument("--security", action="store_true",
                        help="also open SSL, SASL_PLAINTEXT and SASL_SSL listeners (PLAIN, SCRAM-SHA-256, "
                             "SCRAM-SHA-512; a CA and certificates generated at start)")
    broker.add_argument("--client-auth", choices=("none", "requested", "required"), default="none",
                        help="ssl.client.auth of the TLS listeners (with --security; default none)")
    broker.set_defaults(run=_run_broker)

    registry = commands.add_parser(
        "schema-registry", help="run a local Confluent-compatible schema registry until Ctrl-C",
        description="Run Apicurio Registry (in-memory storage; its Confluent-compatible API) on "
                    "127.0.0.1 until Ctrl-C or SIGTERM. It needs Java 21 or later "
                    "(SPARK_KAFKA_SINK_REGISTRY_JAVA, JAVA_HOME, PATH or the system's JVM "
                    "directory) and is fetched from Maven Central on the first run, then cached.")
    registry.add_argument("--work-dir", metavar="D",
                          help="directory for its log (default: a temporary directory, removed on "
                               "exit); kept on exit when given")
    registry.add_argument("--cache-dir", metavar="D",
                          help="cache root (default $SPARK_KAFKA_SINK_CACHE or ~/.cache/spark-kafka-sink)")
    registry.add_argument("--port", type=port_number, metavar="P",
                          help="the port of its API (default: a free port); 8081 is Confluent's usual one")
    registry.add_argument("--heap", default="128m", help="JVM heap (default 128m)")
    registry.set_defaults(run=_run_schema_registry)


def _run_broker(args: argparse.Namespace) -> int:
    from ..embedded import BrokerSecurity, EmbeddedKafka

    if args.nodes < 1:
        print("spark-kafka-sink broker: --nodes must be at least 1", file=sys.stderr)
        return 2
    if args.client_auth != "none" and not args.security:
        print("spark-kafka-sink broker: --client-auth needs --security", file=sys.stderr)
        return 2
    if args.port is not None and args.port + args.nodes - 1 > 65535:
        print(f"spark-kafka-sink broker: ports {args.port}..{args.port + args.nodes - 1} run past 65535",
              file=sys.stderr)
        return 2
    security = BrokerSecurity(client_auth=args.client_auth) if args.security else None
    ports = None if args.port is None else [args.port + i for i in range(args.nodes)]
    cluster = EmbeddedKafka(args.nodes, version=args.kafka_version, work_dir=args.work_dir,
                            cache_dir=args.cache_dir, heap=args.heap, security=security, ports=ports)
    created: list[str] = []

    def start() -> None:
        cluster.start()
        created.extend(_create_topics(cluster, args.topic))

    def died() -> bool:
        dead = [node for node in cluster.nodes if not node.is_alive]
        for node in dead:
            say(f"node {node.node_id} exited with code {node.exit_code}; log {node.log_path}:\n"
                f"{node.log_tail(30)}", err=True)
        return bool(dead)

    say(f"Starting Apache Kafka {args.kafka_version} (KRaft), {args.nodes} node(s) "
        "(the first run fetches the jars from Maven Central)...", err=True)
    return _serve("broker", start, lambda: _report(cluster, created), died,
                  lambda: cluster.close(grace_s=15.0))


def _run_schema_registry(args: argparse.Namespace) -> int:
    from ..testing import SchemaRegistry

    registry = SchemaRegistry(work_dir=args.work_dir, cache_dir=args.cache_dir, heap=args.heap, port=args.port)

    def report() -> None:
        say(f"schema.registry.url={registry.url}")
        say(f"Apicurio Registry {registry.version}, started in {registry.start_seconds:.1f} s, "
            f"pid {registry.pid}, log {registry.log_path}")
        say("Press Ctrl-C to stop.")

    def died() -> bool:
        if registry.is_alive:
            return False
        say(f"the registry exited; its log ends:\n{registry.log_tail(30)}", err=True)
        return True

    say("Starting Apicurio Registry (the first run fetches it from Maven Central)...", err=True)
    return _serve("schema-registry", registry.start, report, died, registry.close)


def _serve(name: str, start: Callable[[], object], report: Callable[[], None],
           died: Callable[[], bool], close: Callable[[], object]) -> int:
    """Start a service, report it, then run until Ctrl-C / SIGTERM (0) or until ``died`` (1);
    ``close`` runs in every case, with both signals still caught."""
    from ..embedded import BrokerLaunchError
    from ..errors import KafkaError

    stop = threading.Event()
    started = threading.Event()

    def on_signal(signum, frame) -> None:
        if not started.is_set():
            raise KeyboardInterrupt  # abort start(); it stops whatever it launched
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            start()
        except (BrokerLaunchError, KafkaError) as exc:
            say(f"spark-kafka-sink {name}: {exc}", err=True)
            return 1
        except KeyboardInterrupt:
            say("Interrupted during start-up.", err=True)
            return 130
        started.set()
        report()
        while not stop.wait(0.5):
            if died():
                return 1
        say("Stopping...", err=True)
        return 0
    finally:
        # SIGINT/SIGTERM stay caught until everything is stopped and reaped.
        close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        say("Stopped.", err=True)


def _create_topics(cluster, topics: Sequence[TopicSpec]) -> list[str]:
    """Create ``topics`` (the brokers' default replication factor; one that exists is left as it
    is); a line per topic for the report."""
    from ..admin import create_topic

    lines = []
    for topic in topics:
        created = create_topic(cluster.bootstrap_servers, topic.name, topic.partitions, exist_ok=True)
        lines.append(f"topic {topic.name}: {created.partitions} partition(s)"
                     + ("" if created.created else " (it existed; left as it was)"))
    return lines


def _report(cluster, topics: Sequence[str] = ()) -> None:
    say(f"bootstrap.servers={cluster.bootstrap_servers}")
    for line in topics:
        say(line)
    say(f"cluster id {cluster.cluster_id}, Kafka {cluster.version}, started in "
        f"{cluster.start_seconds:.1f} s, work dir {cluster.work_dir}")
    for node in cluster.nodes:
        say(f"  node {node.node_id}: pid {node.pid}, port {node.port}, "
            f"controller port {node.controller_port}, log {node.log_path}")
    if cluster.security is not None:
        _report_security(cluster)
    say("Press Ctrl-C to stop.")


def _report_security(cluster) -> None:
    """The secured listeners, the CA, and one client properties file per listener (0600: the
    SASL passwords are in them, never on the terminal)."""
    from ..embedded.config import render
    from ..embedded.security import write_private

    for protocol in cluster.security.protocols:
        say(f"bootstrap.servers.{protocol}={cluster.bootstrap_for(protocol)}")
    if cluster.tls is not None:
        say(f"ssl.ca.location={cluster.tls.ca_path}")
    for protocol in cluster.security.protocols:
        path = cluster.work_dir / f"client-{protocol.lower()}.properties"
        props = {"bootstrap.servers": cluster.bootstrap_for(protocol), **cluster.client_properties(protocol)}
        write_private(path, render(props).encode())
        say(f"client.properties.{protocol}={path}")
    if cluster.security.sasl:
        say(f"SASL users {', '.join(cluster.security.users)} (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); "
            "their passwords are in the client properties files")

