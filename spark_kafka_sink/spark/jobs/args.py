"""The jobs' command line: :func:`parse_job_args` turns it into a :class:`JobSpec`. Every mistake
that needs no data (a bad trigger, a missing Kafka address, an unknown producer option) fails
here, before a JVM starts, with an error naming the argument.

Sink options come from three places, later ones winning: the producer properties file
(``conf/producer.properties``; key ``K`` becomes ``kafka.K``), then ``--option key=value``, then
``--bootstrap`` / ``--topic``.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from ...errors import ConfigError, JobError
from ...properties import PropertiesError, load_properties
from ..options import KAFKA_PREFIX, TOPIC, SinkConfig

BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP"
FORMATS = ("json", "csv", "parquet")
AVAILABLE_NOW = "availableNow"

# Spark's interval syntax for processingTime triggers: "10 seconds", "1 minute 30 seconds".
_INTERVAL = re.compile(r"(\s*[0-9]+\s+(millisecond|second|minute|hour|day)s?)+\s*", re.IGNORECASE)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


@dataclass(frozen=True)
class Trigger:
    """When micro-batches run: ``availableNow`` (everything there now, then stop) or every
    ``interval`` (Spark's ``processingTime``, e.g. ``"10 seconds"``; runs until stopped)."""

    interval: str | None = None

    @property
    def available_now(self) -> bool:
        return self.interval is None

    def writer_kwargs(self) -> dict[str, Any]:
        """The keywords of ``DataStreamWriter.trigger``."""
        return {"availableNow": True} if self.available_now else {"processingTime": self.interval}

    def __str__(self) -> str:
        return AVAILABLE_NOW if self.available_now else self.interval or ""


def parse_trigger(text: str) -> Trigger:
    """``availableNow`` (any case) or an interval such as ``10 seconds``; ``JobError`` otherwise."""
    if text.strip().lower() == AVAILABLE_NOW.lower():
        return Trigger()
    if _INTERVAL.fullmatch(text):
        return Trigger(" ".join(text.split()))
    raise JobError(f"--trigger {text!r}: use {AVAILABLE_NOW!r} or an interval such as '10 seconds' "
                   f"or '1 minute'")


@dataclass(frozen=True)
class Source:
    """The files to read: a directory (or any Spark path) of ``format`` files. ``schema`` is a
    DDL string (``"id INT, name STRING"``) or ``None`` to infer it; ``max_files_per_trigger``
    caps the files per micro-batch (streaming only)."""

    path: str
    format: str
    schema: str | None = None
    max_files_per_trigger: int | None = None

    def reader_options(self) -> dict[str, str]:
        """Options for every read of this source: CSV files have a header line."""
        return {"header": "true"} if self.format == "csv" else {}


@dataclass(frozen=True)
class Columns:
    """Which source columns become the record key and value (``None``: no key / the whole row
    as JSON)."""

    key: str | None = None
    value: str | None = None


@dataclass(frozen=True)
class JobSpec:
    """Everything one run of a job needs, validated. ``sink_options`` are complete
    ``KafkaSink`` options (bootstrap servers and topic included)."""

    job: str
    source: Source
    topic: str
    columns: Columns
    sink_options: Mapping[str, str]
    checkpoint: str | None = None
    trigger: Trigger | None = None
    metrics_json: str | None = None
    timeout_s: float | None = None

    @property
    def streaming(self) -> bool:
        return self.checkpoint is not None

    @property
    def bootstrap(self) -> str:
        return self.sink_options[KAFKA_PREFIX + "bootstrap.servers"]


def _parser(job: str, streaming: bool, default_properties: Path | None) -> argparse.ArgumentParser:
    what = ("Stream the files of a directory to a Kafka topic (Structured Streaming, foreachBatch)"
            if streaming else "Write the files of a directory to a Kafka topic (one batch job)")
    parser = argparse.ArgumentParser(prog=job, description=f"{what} with spark-kafka-sink's KafkaSink.")
    parser.add_argument("--source", required=True, metavar="DIR", help="directory of input files")
    parser.add_argument("--format", default="json", choices=FORMATS,
                        help="input file format (default json: JSON lines; csv has a header line)")
    parser.add_argument("--schema", metavar="DDL",
                        help="input schema as DDL, e.g. 'id INT, name STRING' (default: inferred "
                             "once from the files there)")
    parser.add_argument("--topic", required=True, help="the Kafka topic to write to")
    parser.add_argument("--bootstrap", metavar="HOST:PORT[,...]",
                        help=f"Kafka bootstrap servers (default: ${BOOTSTRAP_ENV})")
    parser.add_argument("--key-column", metavar="COL", help="column for the record key (default: no key)")
    parser.add_argument("--value-column", metavar="COL",
                        help="column for the record value (default: the whole row as JSON)")
    if streaming:
        parser.add_argument("--checkpoint", required=True, metavar="DIR",
                            help="the query's checkpoint directory (where a restart resumes)")
        parser.add_argument("--trigger", default=AVAILABLE_NOW, metavar="WHEN",
                            help=f"{AVAILABLE_NOW!r} (default: what is there now, then stop) or an "
                                 f"interval such as '10 seconds' (run until Ctrl-C)")
        parser.add_argument("--max-files-per-trigger", type=int, metavar="N",
                            help="at most N files per micro-batch (default: Spark's, no limit)")
        parser.add_argument("--timeout", type=float, metavar="SECONDS",
                            help="stop the query and fail after this long (default: no limit)")
    shown = default_properties if default_properties is not None else "none"
    parser.add_argument("--producer-properties", metavar="PATH",
                        help=f"Java properties file of producer settings, each becoming a "
                             f"kafka.<name> sink option (default: {shown})")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra sink option, e.g. kafka.linger.ms=10 (repeatable; "
                             "overrides the properties file)")
    parser.add_argument("--metrics-json", metavar="PATH",
                        help="write rows, seconds and the sink metrics there as JSON at the end")
    return parser


def parse_job_args(argv: Sequence[str], *, streaming: bool, default_properties: Path | None = None,
                   environ: Mapping[str, str] | None = None) -> JobSpec:
    """The :class:`JobSpec` for a command line. Usage errors exit as argparse does (status 2);
    everything else is a :class:`JobError` naming the argument."""
    job = "stream_to_kafka" if streaming else "batch_to_kafka"
    args = _parser(job, streaming, default_properties).parse_args(list(argv))
    environ = os.environ if environ is None else environ
    source = _source(args, streaming)
    trigger = parse_trigger(args.trigger) if streaming else None
    if streaming and args.timeout is not None and args.timeout <= 0:
        raise JobError(f"--timeout must be more than 0 seconds, got {args.timeout}")
    properties = _producer_properties(args.producer_properties, default_properties)
    bootstrap = (args.bootstrap or environ.get(BOOTSTRAP_ENV, "").strip()
                 or properties.pop("bootstrap.servers", None))
    if not bootstrap:
        raise JobError(f"no Kafka address: pass --bootstrap HOST:PORT[,HOST:PORT...] or set "
                       f"{BOOTSTRAP_ENV}")
    options = _sink_options(properties, args.option, bootstrap, args.topic)
    return JobSpec(
        job=job, source=source, topic=options[TOPIC],
        columns=Columns(_blank_is_none(args.key_column, "--key-column"),
                        _blank_is_none(args.value_column, "--value-column")),
        sink_options=MappingProxyType(options),
        checkpoint=args.checkpoint if streaming else None, trigger=trigger,
        metrics_json=args.metrics_json, timeout_s=args.timeout if streaming else None)


def _blank_is_none(value: str | None, flag: str) -> str | None:
    if value is not None and not value.strip():
        raise JobError(f"{flag} must name a column, got an empty name")
    return value


def _source(args: argparse.Namespace, streaming: bool) -> Source:
    path = args.source
    if not SCHEME.match(path) and not Path(path).exists():
        raise JobError(f"--source {path!r}: no such directory")
    max_files = getattr(args, "max_files_per_trigger", None)
    if max_files is not None and max_files < 1:
        raise JobError(f"--max-files-per-trigger must be at least 1, got {max_files}")
    schema = args.schema.strip() if args.schema else None
    return Source(path, args.format, schema or None, max_files if streaming else None)


def _producer_properties(given: str | None, default: Path | None) -> dict[str, str]:
    """The properties file's settings: the given file (which must exist), else the default one
    if it exists, else none."""
    if given is None and (default is None or not default.is_file()):
        return {}
    path = Path(given) if given is not None else default
    try:
        loaded = load_properties(path)
    except FileNotFoundError:
        raise JobError(f"--producer-properties {str(path)!r}: no such file") from None
    except (OSError, PropertiesError) as error:
        raise JobError(f"--producer-properties: {error}") from None
    for key in loaded:
        if key.lower().startswith(KAFKA_PREFIX):
            raise JobError(f"--producer-properties {str(path)!r}: key {key!r}: write producer "
                           f"properties without the {KAFKA_PREFIX!r} prefix (it is added)")
    return dict(loaded)


_OWN_FLAGS = {TOPIC: "--topic", KAFKA_PREFIX + "bootstrap.servers": "--bootstrap",
              "checkpointlocation": "--checkpoint"}


def _sink_options(properties: Mapping[str, str], extra: Sequence[str], bootstrap: str,
                  topic: str) -> dict[str, str]:
    options = {KAFKA_PREFIX + key.lower(): value for key, value in properties.items()}
    for item in extra:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise JobError(f"--option {item!r}: write it as KEY=VALUE, e.g. kafka.linger.ms=10")
        lower = name.lower()
        if lower in _OWN_FLAGS:
            raise JobError(f"--option {name}: use {_OWN_FLAGS[lower]} instead")
        options[lower if lower.startswith(KAFKA_PREFIX) else name] = value.strip()
    options[KAFKA_PREFIX + "bootstrap.servers"] = bootstrap
    options[TOPIC] = topic
    try:
        config = SinkConfig.from_options(options)
    except ConfigError as error:
        raise JobError(f"sink options (--producer-properties, --option): {error}") from None
    options[TOPIC] = config.topic or topic  # trimmed, as the sink uses it
    return options
