"""``spark-kafka-sink topics create|list|describe``: the topics of a cluster, through
:mod:`spark_kafka_sink.admin` (CreateTopics, Metadata, DescribeConfigs).

``create NAME[:PARTITIONS]...`` creates each topic in turn (1 partition unless given; the
broker's replication factor unless ``--replication-factor``; ``--config k=v`` for each) and
returns once every partition has a leader; an existing topic is an error unless
``--if-not-exists``. ``list`` prints the topics with their partition counts and replication
factors (Kafka's internal ones with ``--internal``). ``describe NAME...`` prints each partition's
leader and replicas and the configs set on the topic (``--all-configs``: every config); a topic
that does not exist makes it exit 1.
"""

from __future__ import annotations

import argparse
from typing import Mapping, Sequence

from .arguments import add_client_options, count, key_value, say, topic_name, topic_spec


def add_topics_parser(commands) -> None:
    topics = commands.add_parser("topics", help="create, list or describe topics",
                                 description="Create, list or describe the topics of a cluster.")
    actions = topics.add_subparsers(dest="action", metavar="ACTION", required=True)

    create = actions.add_parser(
        "create", help="create topics and wait for their leaders",
        description="Create each topic (1 partition unless NAME:PARTITIONS says otherwise) and "
                    "wait until every partition has a leader.")
    create.add_argument("topics", type=topic_spec, nargs="+", metavar="NAME[:PARTITIONS]")
    create.add_argument("--replication-factor", type=count, metavar="N",
                        help="replicas per partition (default: the brokers' default.replication.factor)")
    create.add_argument("--config", type=key_value, action="append", default=[], metavar="K=V",
                        help="a topic config, e.g. cleanup.policy=compact; repeatable")
    create.add_argument("--if-not-exists", action="store_true",
                        help="leave a topic that exists as it is instead of failing")
    add_client_options(create)
    create.set_defaults(run=run_create, parser=create)

    listing = actions.add_parser("list", help="list the topics",
                                 description="List the cluster's topics with their partition "
                                             "counts and replication factors.")
    listing.add_argument("--internal", action="store_true",
                         help="include Kafka's internal topics (__consumer_offsets, ...)")
    add_client_options(listing)
    listing.set_defaults(run=run_list, parser=listing)

    describe = actions.add_parser(
        "describe", help="show topics' partitions, leaders and configs",
        description="Show each topic's partitions (leader, replicas, in-sync replicas) and the "
                    "configs set on it.")
    describe.add_argument("topics", type=topic_name, nargs="+", metavar="NAME")
    describe.add_argument("--all-configs", action="store_true",
                          help="every config, defaults included")
    add_client_options(describe)
    describe.set_defaults(run=run_describe, parser=describe)


def run_create(args: argparse.Namespace) -> int:
    from ..admin import BROKER_DEFAULT, create_topic

    settings = args.settings
    for spec in args.topics:
        created = create_topic(settings.bootstrap, spec.name, spec.partitions,
                               replication_factor=args.replication_factor or BROKER_DEFAULT,
                               configs=dict(args.config), exist_ok=args.if_not_exists,
                               timeout_s=settings.timeout_s, config=settings.config)
        say(f"topic {spec.name}: {created.partitions} partition(s), "
            + ("created" if created.created else "exists already (left as it was)"))
    return 0


def run_list(args: argparse.Namespace) -> int:
    from ..admin import describe_cluster

    settings = args.settings
    cluster = describe_cluster(settings.bootstrap, timeout_s=settings.timeout_s, config=settings.config)
    for line in list_lines(cluster.topics, internal=args.internal):
        say(line)
    return 0


def list_lines(topics: Sequence, *, internal: bool) -> list[str]:
    """A table of ``topics`` (``TopicListing``), internal ones only with ``internal``."""
    shown = [t for t in topics if internal or not t.internal]
    if not shown:
        return ["(no topics)"]
    width = max(len("TOPIC"), *(len(t.name) for t in shown))
    lines = [f"{'TOPIC':<{width}}  PARTITIONS  REPLICATION"]
    lines.extend(f"{t.name:<{width}}  {t.partitions:>10}  {t.replication_factor:>11}"
                 + ("  (internal)" if t.internal else "") for t in shown)
    return lines


def run_describe(args: argparse.Namespace) -> int:
    from ..admin import describe_topics

    settings = args.settings
    names = list(dict.fromkeys(args.topics))
    found = describe_topics(settings.bootstrap, names, timeout_s=settings.timeout_s,
                            config=settings.config)
    missing = False
    for name in names:
        description = found.get(name)
        if description is None or not description.exists:
            missing = True
            say(f"topic {name}: does not exist", err=True)
            continue
        for line in describe_lines(description, all_configs=args.all_configs):
            say(line)
    return 1 if missing else 0


def describe_lines(description, *, all_configs: bool) -> list[str]:
    """The lines for one ``TopicDescription`` that exists."""
    lines = [f"topic {description.name}: {description.partitions} partition(s), replication "
             f"factor {description.replication_factor}, {description.cluster_brokers} broker(s) "
             "in the cluster"]
    for state in description.partition_states:
        leader = state.leader if state.leader >= 0 else "none"
        lines.append(f"  partition {state.partition}: leader {leader}, replicas {_ids(state.replicas)}, "
                     f"in sync {_ids(state.isr)}"
                     + (f", offline {_ids(state.offline)}" if state.offline else ""))
    if description.config_error is not None:
        lines.append(f"  configs: cannot read them: {description.config_error}")
        return lines
    configs: Mapping[str, str | None] = description.configs
    names = sorted(configs if all_configs else description.overridden)
    if not names:
        lines.append("  configs: none set on the topic (--all-configs shows the defaults)")
    else:
        lines.append("  configs:" if all_configs else "  configs set on the topic:")
        lines.extend(f"    {name}={_config_value(configs.get(name))}" for name in names)
    return lines


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids) or "none"


def _config_value(value: str | None) -> str:
    return "(none)" if value is None else value
