"""The ``spark-kafka-sink`` command (also ``python -m spark_kafka_sink``).

    spark-kafka-sink broker [--nodes N] [--port P] [--topic NAME[:PARTITIONS]]... [--security]
    spark-kafka-sink schema-registry
    spark-kafka-sink topics create NAME[:PARTITIONS]... [--replication-factor N] [--config K=V]...
    spark-kafka-sink topics list [--internal]
    spark-kafka-sink topics describe NAME... [--all-configs]
    spark-kafka-sink tail TOPIC [--partition P]... [--from-beginning | --offset N]
                          [--max-records N] [--isolation read_uncommitted|read_committed]
                          [--format text|json]
    spark-kafka-sink check [--topic T] [--option K=V]...

``broker`` and ``schema-registry`` (:mod:`.serve`) run local services until Ctrl-C. The client
commands take ``--bootstrap-server`` (default ``127.0.0.1:9092``), ``--property K=V`` and
``--config-file`` (producer properties: security, SASL, TLS) and ``--timeout`` (default 10 s)
(:mod:`.arguments`): ``topics`` (:mod:`.topics`) creates, lists and describes topics; ``tail``
(:mod:`.tail`) prints records read with the package's own Fetch; ``check`` (:mod:`.check`) runs
the sink's preflight with the sink's options. ``--help`` also lists the ``spark-submit`` jobs of
``jobs/`` (:mod:`.jobs`).

Exit codes: 0 done; 2 a bad argument (argparse names it; client properties are checked as a
``ProducerConfig`` before any connection); 1 a failure, on one line without a traceback: a
cluster that cannot be reached within ``--timeout``, refused credentials, a broker's error, a
failed check; 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ..version import __version__
from .arguments import ClientSettings, TopicSpec, client_settings, port_number, say, topic_spec

__all__ = ["TopicSpec", "build_parser", "failure", "main", "port_number", "topic_spec"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if hasattr(args, "bootstrap_server"):
        args.settings = client_settings(args, args.parser)
    try:
        return args.run(args)
    except KeyboardInterrupt:
        say("Interrupted.", err=True)
        return 130
    except Exception as error:          # one line, no traceback: see failure()
        line = failure(error, getattr(args, "settings", None))
        if line is None:
            raise
        say(f"spark-kafka-sink {_command(args)}: {line}", err=True)
        return 1


def build_parser() -> argparse.ArgumentParser:
    from . import check, serve, tail, topics
    from .jobs import jobs_help

    parser = argparse.ArgumentParser(
        prog="spark-kafka-sink", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Tools around spark-kafka-sink, a PySpark sink for Apache Kafka: a local\n"
                    "broker, topics, reading records back, and the sink's preflight.\n"
                    "`spark-kafka-sink COMMAND --help` tells more of each.",
        epilog=jobs_help())
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve.add_serve_parsers(commands)
    topics.add_topics_parser(commands)
    tail.add_tail_parser(commands)
    check.add_check_parser(commands)
    return parser


def failure(error: BaseException, settings: ClientSettings | None) -> str | None:
    """The one line for a client command's ``error``, or ``None`` for an error that is a bug
    (its traceback is worth more than a line)."""
    from ..errors import AuthenticationError, KafkaConnectionError, KafkaError, KafkaTimeoutError

    where = "" if settings is None else f" at {settings.bootstrap}"
    within = "" if settings is None else f" within {settings.timeout_s:g} s"
    if isinstance(error, AuthenticationError):
        return (f"the cluster{where} refused the client: {type(error).__name__}: {error} "
                "(check security.protocol, sasl.* and ssl.*)")
    if isinstance(error, (KafkaConnectionError, KafkaTimeoutError, TimeoutError)):
        return f"cannot reach the cluster{where}{within}: {error}"
    if isinstance(error, KafkaError):
        return f"{type(error).__name__}: {error}"
    if isinstance(error, OSError):
        return f"{type(error).__name__}: {error}"
    return None


def _command(args: argparse.Namespace) -> str:
    action = getattr(args, "action", None)
    return args.command if action is None else f"{args.command} {action}"
