"""``spark-kafka-sink check``: the sink's driver-side preflight
(:func:`spark_kafka_sink.spark.preflight.preflight`) run from a shell, with the options users
pass to ``KafkaSink``.

The options are built as the sink gets them: ``--bootstrap-server`` as
``kafka.bootstrap.servers``, each client property (``--property``, ``--config-file``) as
``kafka.<name>``, ``--topic`` as ``topic``, then every ``--option k=v`` as given (``kafka.*``,
``errors.deadletterqueue.*``, ``delivery.guarantee``, ...), and ``kafka.max.block.ms`` from
``--timeout`` unless an option sets it. :meth:`SinkConfig.from_options` checks them, then the
preflight checks the cluster, the credentials and the topics; with no topic named it checks the
connection alone. It prints what it found (exit 0) or the ``ConfigError`` / ``PreflightError`` on
one line (exit 1). As in the sink, a missing topic is asked for as the tasks' producer would ask,
so a broker with ``auto.create.topics.enable`` creates it.

It needs no SparkSession, but the sink's options live in :mod:`spark_kafka_sink.spark`, whose
import checks PySpark's version: without PySpark it says so (exit 1).
"""

from __future__ import annotations

import argparse
from typing import Any, Mapping, Sequence

from .arguments import ClientSettings, add_client_options, key_value, say, topic_name

MAX_BLOCK_MS = "kafka.max.block.ms"


def add_check_parser(commands) -> None:
    check = commands.add_parser(
        "check", help="run the sink's preflight: cluster, credentials, topics",
        description="Run the sink's driver-side preflight with the options you would pass to "
                    "KafkaSink: is the cluster reachable, are the credentials accepted, do the "
                    "topic and the dead-letter topic exist, does kafka.max.request.size suit them. "
                    "Needs PySpark installed, not running.")
    check.add_argument("--topic", type=topic_name, metavar="T", help="the sink's topic option")
    check.add_argument("--option", type=key_value, action="append", default=[], metavar="K=V",
                       help="a KafkaSink option as the sink takes it: kafka.<property>, "
                            "errors.deadletterqueue.topic.name, delivery.guarantee, ...; repeatable")
    add_client_options(check)
    check.set_defaults(run=run_check, parser=check)


def sink_options(settings: ClientSettings, topic: str | None,
                 options: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The sink options the check runs with (see the module docstring for the order)."""
    out: dict[str, Any] = {"kafka.bootstrap.servers": settings.bootstrap}
    out.update((f"kafka.{name}", value) for name, value in settings.properties.items())
    if topic is not None:
        out["topic"] = topic
    out.update(options)
    if not any(name.lower() == MAX_BLOCK_MS for name in out):
        out[MAX_BLOCK_MS] = str(max(1, int(settings.timeout_s * 1000)))
    return out


def run_check(args: argparse.Namespace) -> int:
    settings: ClientSettings = args.settings
    try:
        from ..spark.options import SinkConfig
        from ..spark.preflight import PreflightError, plan_topics, preflight
    except ImportError as error:
        say(f"spark-kafka-sink check: the sink's options need PySpark 3.4 or newer, installed "
            f"(no SparkSession is started): {error}. Install it: pip install 'pyspark>=3.4'", err=True)
        return 1
    from ..admin import describe_cluster, describe_topics
    from ..errors import ConfigError

    try:
        config = SinkConfig.from_options(sink_options(settings, args.topic, args.option))
    except ConfigError as error:
        say(f"spark-kafka-sink check: FAILED: the options: {error}", err=True)
        return 1
    seen: dict[str, Any] = {}

    def describe(*given, **keywords):
        found = describe_topics(*given, **keywords)
        seen.update(found)
        return found

    try:
        preflight(config, describe=describe)
    except PreflightError as error:
        say(f"spark-kafka-sink check: FAILED: {error}", err=True)
        return 1
    producer = config.producer_config
    where = (f"kafka.bootstrap.servers={settings.bootstrap} "
             f"(security.protocol {producer.security_protocol})")
    named = plan_topics(config).named if config.preflight else {}
    if not named:
        cluster = describe_cluster(settings.bootstrap, timeout_s=settings.timeout_s, config=producer)
        say(f"OK: connected to the cluster at {where}: cluster id {cluster.cluster_id}, "
            f"{len(cluster.brokers)} broker(s)")
        say("  preflight=false: the sink would check nothing more" if not config.preflight else
            "  no topic to check: name one with --topic or --option topic=... "
            "(errors.deadletterqueue.topic.name=... for a dead-letter topic)")
        return 0
    say(f"OK: the sink's preflight passed at {where}")
    for line in found_lines(named, seen, producer.max_request_size):
        say(line)
    return 0


def found_lines(named: Mapping[str, str], found: Mapping[str, Any], max_request_size: int) -> list[str]:
    """A line per checked topic: what the preflight learnt of it."""
    lines = []
    for name, option in named.items():
        d = found[name]
        limit = d.configs.get("max.message.bytes")
        size = ("" if limit is None else f", max.message.bytes={limit}"
                + (" (dead letters are sized to it)" if option.startswith("errors.")
                   else f" >= kafka.max.request.size={max_request_size}"))
        lines.append(f"  topic {name!r} (option {option!r}): {d.partitions} partition(s), replication "
                     f"factor {d.replication_factor} ({d.cluster_brokers} broker(s) in the cluster)"
                     f"{size}")
    return lines
