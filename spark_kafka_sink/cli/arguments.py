"""What the commands share: argument types (each an ``ArgumentTypeError`` naming the fault, so
argparse exits 2 with it), the client's connection options, and printing.

The client options are the producer's (and the sink's ``kafka.*`` options without the prefix):
``--bootstrap-server`` (default :data:`DEFAULT_BOOTSTRAP`, the README's address), ``--property``
``k=v`` for any producer property (``security.protocol``, ``sasl.*``, ``ssl.*``, Java or librdkafka
names), ``--config-file`` for a ``.properties`` file of them (the ones ``broker --security``
writes), and ``--timeout``. A ``--property`` wins over the file; ``--bootstrap-server`` over the
file's ``bootstrap.servers``. :func:`client_settings` checks them all as a ``ProducerConfig``,
before any connection; :class:`ClientSettings` never shows a value in its repr.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, NamedTuple

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_TIMEOUT_S = 10.0


class TopicSpec(NamedTuple):
    """A ``NAME[:PARTITIONS]`` argument."""

    name: str
    partitions: int


def topic_spec(text: str) -> TopicSpec:
    """``NAME`` or ``NAME:PARTITIONS`` (a topic name cannot hold ``:``); ``ArgumentTypeError``
    naming what is wrong."""
    from ..producer.topics import topic_name_problem

    name, sep, count = text.rpartition(":") if ":" in text else (text, "", "")
    if sep and not count.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: the partition count after ':' must be a "
                                         f"positive integer, got {count!r}")
    partitions = int(count) if sep else 1
    if partitions < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a topic needs at least 1 partition")
    problem = topic_name_problem(name)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r}: {problem}")
    return TopicSpec(name, partitions)


def topic_name(text: str) -> str:
    """A valid topic name (``ArgumentTypeError`` naming what is wrong)."""
    from ..producer.topics import topic_name_problem

    problem = topic_name_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r}: {problem}")
    return text


def port_number(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 1-65535, got {text!r}")
    return int(text)


def count(text: str) -> int:
    """An integer of at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1, got {text!r}")
    return int(text)


def partition_number(text: str) -> int:
    """An integer of at least 0."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"a partition is a whole number from 0, got {text!r}")
    return int(text)


def offset(text: str) -> int:
    """An offset (``N``) or a count back from the end (``-N``)."""
    digits = text[1:] if text.startswith("-") else text
    if not digits.isdigit():
        raise argparse.ArgumentTypeError(f"an offset is N (from 0) or -N (N before the end), got {text!r}")
    return int(text)


def seconds(text: str) -> float:
    """A positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"a positive number of seconds, got {text!r}")
    return value


def key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (the value may hold ``=``; the key may not be empty). The error never
    repeats what was given past a ``:`` or blank: it may be a password typed with the wrong
    separator."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        shown = text.split(":", 1)[0].split(None, 1)[0] if text.strip() else ""
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {shown!r}"
                                         + (" and more (not shown)" if shown != text else ""))
    return key.strip(), value


@dataclass(frozen=True)
class ClientSettings:
    """Where and how to connect: the bootstrap address, the producer ``properties`` that apply
    (security, client id; never shown in the repr, they may hold passwords), and the time bound."""

    bootstrap: str
    properties: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def config(self):
        """The properties as a ``ProducerConfig`` (``bootstrap.servers`` included)."""
        from ..config import ProducerConfig

        return ProducerConfig({**self.properties, "bootstrap.servers": self.bootstrap})


def add_client_options(parser: argparse.ArgumentParser) -> None:
    """``--bootstrap-server``, ``--property``, ``--config-file`` and ``--timeout``."""
    group = parser.add_argument_group("connection")
    group.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT...]",
                       help=f"the brokers to start from (default: the config file's "
                            f"bootstrap.servers, else {DEFAULT_BOOTSTRAP})")
    group.add_argument("--property", type=key_value, action="append", default=[], metavar="K=V",
                       help="a client property as the producer takes it (security.protocol, "
                            "sasl.mechanism, sasl.username, ssl.ca.location, ...); repeatable")
    group.add_argument("--config-file", metavar="FILE",
                       help="a .properties file of client properties, e.g. one `broker --security` "
                            "wrote (--property wins over it)")
    group.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT_S, metavar="S",
                       help=f"give up after S seconds (default {DEFAULT_TIMEOUT_S:g})")


def client_settings(args: argparse.Namespace, parser: argparse.ArgumentParser) -> ClientSettings:
    """The client options of ``args``, checked as a ``ProducerConfig``; a fault exits 2 through
    ``parser.error`` naming it."""
    from ..config import ProducerConfig
    from ..errors import ConfigError, PropertiesError
    from ..properties import load_properties

    properties: dict[str, str] = {}
    if args.config_file:
        try:
            properties.update(load_properties(args.config_file))
        except OSError as error:
            parser.error(f"--config-file {args.config_file}: {error.strerror or error}")
        except PropertiesError as error:
            parser.error(f"--config-file: {error}")
    properties.update(args.property)
    bootstrap = args.bootstrap_server or properties.get("bootstrap.servers") or DEFAULT_BOOTSTRAP
    properties.pop("bootstrap.servers", None)
    try:
        ProducerConfig({**properties, "bootstrap.servers": bootstrap})
    except ConfigError as error:
        where = "--bootstrap-server" if "bootstrap.servers" in str(error) else "--property/--config-file"
        parser.error(f"{where}: {error}")
    return ClientSettings(bootstrap, MappingProxyType(properties), args.timeout)


def say(text: str, err: bool = False) -> None:
    print(text, file=sys.stderr if err else sys.stdout, flush=True)
