"""The sink's options: what ``KafkaSink(**options)`` (or ``.option(k, v)``) accepts, as a frozen value.

The options mirror Spark's built-in Kafka sink (``KafkaSourceProvider``):

==========================  ===================================================================
``kafka.<property>``        Any producer property (``config.ProducerConfig``), prefix stripped:
                            ``kafka.linger.ms=20`` -> ``linger.ms=20``.
``kafka.bootstrap.servers`` Required.
``topic``                   The topic of every record. When set it overrides the ``topic`` column,
                            which is then not read at all. Surrounding blanks are trimmed.
``producer.cache.timeout``  Sink-only. How long an idle pooled producer lives in a Python worker
                            before it is closed: a duration (``"10m"``, ``"30s"``, ``"1h"``,
                            ``"500ms"``; no suffix means ms) or an int of ms. Default ``10m``, as
                            Spark's ``spark.kafka.producer.cache.timeout``.
``mode``                    Sink-only. How ``KafkaSink`` hands the rows to the producer: ``arrow``
                            (the default: ``mapInArrow``, whole Arrow batches to ``send_arrow``,
                            metrics in collected rows, so on Spark Connect too) or ``rows``
                            (``foreachPartition``, one ``send`` per row, metrics in an
                            accumulator). Case and surrounding blanks do not matter. The Data
                            Source accepts it and writes rows either way.
==========================  ===================================================================

Rules, following Spark where it has one:

- Option names match without case, as Spark's (``CaseInsensitiveMap``): ``TOPIC`` is ``topic``, and
  ``kafka.Linger.MS`` is ``linger.ms`` (Spark lowercases the producer property too). The same name
  given twice in different cases is an error here (Spark keeps one of them arbitrarily).
- ``kafka.key.serializer`` / ``kafka.value.serializer`` are refused, as in Spark: records are written
  as bytes, so keys and values must already be string or binary columns; serialize in the DataFrame
  (``to_json``, ``to_avro``, ``cast``). Other Java-only producer properties (``partitioner.class``,
  ``interceptor.classes``, ...) are refused by name; Spark passes them to its Java producer.
- ``kafka.transactional.id`` is refused: the tasks writing in parallel would fence each other.
- An option that is neither ``kafka.*`` nor a sink option is an error with the nearest names (Spark
  ignores it silently; here a typo such as ``topik`` must not be). Spark's Kafka *source* options
  (``subscribe``, ``startingOffsets``, ``includeHeaders``, ``failOnDataLoss``, ...) get their own
  message: a sink does not read them. ``checkpointLocation`` is accepted and ignored: Spark's
  streaming writer adds it to a data source's options.
- An option whose value is ``None`` counts as not given.

Errors are :class:`~spark_kafka_sink.errors.ConfigError` naming the option; no error, repr or
:meth:`SinkConfig.redacted` view shows a secret's value (``kafka.sasl.jaas.config``, passwords).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..config import JAVA_ONLY, PROPERTIES, ProducerConfig
from ..errors import ConfigError
from ..producer.topics import topic_name_problem

KAFKA_PREFIX = "kafka."
TOPIC = "topic"
PRODUCER_CACHE_TIMEOUT = "producer.cache.timeout"
DEFAULT_PRODUCER_CACHE_TIMEOUT_MS = 10 * 60 * 1000  # "10m"
MODE = "mode"
ARROW, ROWS = "arrow", "rows"
MODES = (ARROW, ROWS)
DEFAULT_MODE = ARROW
SINK_OPTIONS = (TOPIC, PRODUCER_CACHE_TIMEOUT, MODE)
IGNORED_OPTIONS = frozenset({"checkpointlocation"})  # added by Spark's streaming writer

# Spark's Kafka source options (KafkaSourceProvider), lowercased: meaningless for a sink.
SOURCE_ONLY_OPTIONS = frozenset({
    "assign", "subscribe", "subscribepattern", "startingoffsets", "endingoffsets",
    "startingoffsetsbytimestamp", "endingoffsetsbytimestamp", "startingtimestamp", "endingtimestamp",
    "startingoffsetsbytimestampstrategy", "failondataloss", "minpartitions", "maxrecordsperpartition",
    "maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay", "fetchoffset.numretries",
    "fetchoffset.retryintervalms", "kafkaconsumer.polltimeoutms", "groupidprefix", "includeheaders"})

_SERIALIZERS = ("key.serializer", "value.serializer")

# Spark's JavaUtils.timeStringAs: an integer and an optional unit; no unit means milliseconds.
_DURATION = re.compile(r"([0-9]+)([a-z]+)?")
_UNIT_US = {"us": 1, "ms": 1_000, "s": 1_000_000, "m": 60_000_000, "min": 60_000_000,
            "h": 3_600_000_000, "d": 86_400_000_000}


def parse_duration_ms(value: Any) -> int:
    """Milliseconds from a Spark-style duration (``"10m"``, ``"30s"``, ``"1h"``, ``"500ms"``,
    ``"2d"``, ``"1500"`` = 1500 ms) or a non-negative int of ms. Raises ``ValueError``."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"must not be negative, got {value}")
        return value
    if not isinstance(value, str):
        raise ValueError(f"must be a duration string or an int of ms, got {type(value).__name__}")
    match = _DURATION.fullmatch(value.strip().lower())
    if match is None:
        raise ValueError(f"{value!r} is not a duration such as '10m', '30s', '1h' or '500ms'")
    number, unit = int(match.group(1)), match.group(2) or "ms"
    if unit not in _UNIT_US:
        raise ValueError(f"{value!r} has an unknown unit {unit!r}; use one of {', '.join(_UNIT_US)}")
    return number * _UNIT_US[unit] // 1_000


@dataclass(frozen=True)
class SinkConfig:
    """The validated sink options: a frozen, hashable, picklable value, equal by value.

    ``producer_config`` holds the ``kafka.*`` properties; ``topic`` is the default topic (``None``:
    each row's ``topic`` column); ``producer_cache_timeout_ms`` is the pooled producer's idle life;
    ``mode`` is ``"arrow"`` or ``"rows"`` (see the module docstring). Build it with
    :meth:`from_options`; the constructor validates too.
    """

    producer_config: ProducerConfig
    topic: str | None = None
    producer_cache_timeout_ms: int = DEFAULT_PRODUCER_CACHE_TIMEOUT_MS
    mode: str = DEFAULT_MODE

    def __post_init__(self) -> None:
        if not isinstance(self.producer_config, ProducerConfig):
            raise TypeError(f"producer_config must be a ProducerConfig, got "
                            f"{type(self.producer_config).__name__}")
        if self.topic is not None and (problem := topic_name_problem(self.topic)):
            raise ConfigError(f"option {TOPIC!r}: {problem}")
        timeout = self.producer_cache_timeout_ms
        if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 0:
            raise ConfigError(f"option {PRODUCER_CACHE_TIMEOUT!r} must be a duration of at least 0 ms, "
                              f"got {timeout!r}")
        if self.mode not in MODES:
            raise ConfigError(_bad_mode(self.mode))

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> SinkConfig:
        """The config for the sink options ``options`` (see the module docstring for the rules)."""
        if not isinstance(options, Mapping):
            raise TypeError(f"options must be a mapping, got {type(options).__name__}")
        given = _fold_case(options)
        properties: dict[str, Any] = {}
        sink: dict[str, Any] = {}
        for name, (original, value) in given.items():
            if name.startswith(KAFKA_PREFIX):
                properties[_property_name(name, original)] = value
            elif name in SINK_OPTIONS:
                sink[name] = value
            elif name not in IGNORED_OPTIONS:
                raise ConfigError(_unknown_option(original))
        if "bootstrap.servers" not in properties:
            raise ConfigError("option 'kafka.bootstrap.servers' is required: the brokers to start from, "
                              "as a comma-separated list of host:port")
        try:
            producer_config = ProducerConfig.from_properties(properties)
        except ConfigError as error:  # name the option as the user wrote it: kafka.<property>
            raise ConfigError(f"producer option (kafka.*): {error}") from None
        return cls(producer_config, _topic(sink.get(TOPIC)), _timeout(sink.get(PRODUCER_CACHE_TIMEOUT)),
                   _mode(sink.get(MODE)))

    def redacted(self) -> dict[str, Any]:
        """The options that differ from the defaults, by option name, secrets as ``"[hidden]"``:
        the view to log. ``kafka.bootstrap.servers`` is always there."""
        config = self.producer_config
        shown = config.redacted()
        out = {KAFKA_PREFIX + name: shown[name] for name, key in PROPERTIES.items()
               if name == "bootstrap.servers" or getattr(config, key.attr) != key.default}
        if self.topic is not None:
            out[TOPIC] = self.topic
        if self.producer_cache_timeout_ms != DEFAULT_PRODUCER_CACHE_TIMEOUT_MS:
            out[PRODUCER_CACHE_TIMEOUT] = f"{self.producer_cache_timeout_ms}ms"
        if self.mode != DEFAULT_MODE:
            out[MODE] = self.mode
        return out

    def __repr__(self) -> str:
        return f"SinkConfig({', '.join(f'{name}={value!r}' for name, value in self.redacted().items())})"


def _fold_case(options: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
    """Options by lowercased name -> (name as given, value); ``None`` values dropped."""
    folded: dict[str, tuple[str, Any]] = {}
    for name, value in options.items():
        if not isinstance(name, str):
            raise ConfigError(f"option names must be strings, got {type(name).__name__}")
        if value is None:
            continue
        lower = name.lower()
        if lower in folded:
            raise ConfigError(f"option {name!r} is given twice, as {folded[lower][0]!r} and {name!r}; "
                              f"option names match without case, so keep one")
        folded[lower] = (name, value)
    return folded


def _property_name(name: str, original: str) -> str:
    """The producer property of a ``kafka.*`` option, or a ConfigError naming the option."""
    prop = name[len(KAFKA_PREFIX):]
    if prop == "transactional.id":
        raise ConfigError(
            f"option {original!r} is not supported: the tasks of a write run in parallel, and "
            "tasks sharing one transactional id would fence each other. The sink writes at least "
            "once (each record once per partition with idempotence, more than once only when "
            "Spark retries a task)")
    if prop in PROPERTIES:
        return prop
    if prop in _SERIALIZERS:
        what = "keys" if prop.startswith("key") else "values"
        raise ConfigError(
            f"option {original!r} is not supported: the sink writes {what} as bytes, so the "
            f"{what[:-1]} column must be string (written as UTF-8) or binary. Serialize in the "
            f"DataFrame instead, e.g. with to_json(), to_avro() or cast().")
    if prop in JAVA_ONLY:
        raise ConfigError(f"option {original!r} sets a Java producer property that this sink's "
                          f"Python producer does not support")
    close = difflib.get_close_matches(prop, list(PROPERTIES), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(KAFKA_PREFIX + c) for c in close)}?" if close else ""
    raise ConfigError(f"option {original!r}: {prop!r} is not a producer property{hint}")


def _unknown_option(original: str) -> str:
    lower = original.lower()
    if lower in SOURCE_ONLY_OPTIONS:
        extra = (" The sink writes headers whenever the DataFrame has a 'headers' column."
                 if lower == "includeheaders" else "")
        return f"option {original!r} is a Kafka source option; the sink does not read it.{extra}"
    if lower in PROPERTIES:
        return (f"unknown option {original!r}; producer properties take the {KAFKA_PREFIX!r} prefix: "
                f"did you mean {KAFKA_PREFIX + lower!r}?")
    close = difflib.get_close_matches(lower, [*SINK_OPTIONS, *(KAFKA_PREFIX + p for p in PROPERTIES)],
                                      n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else "."
    return (f"unknown option {original!r}{hint} The sink takes {', '.join(map(repr, SINK_OPTIONS))} "
            f"and 'kafka.<producer property>'.")


def _topic(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"option {TOPIC!r} must be a string, got {type(value).__name__}")
    topic = value.strip()  # as Spark
    problem = topic_name_problem(topic)
    if problem:
        raise ConfigError(f"option {TOPIC!r}: {problem}")
    return topic


def _timeout(value: Any) -> int:
    if value is None:
        return DEFAULT_PRODUCER_CACHE_TIMEOUT_MS
    try:
        return parse_duration_ms(value)
    except ValueError as error:
        raise ConfigError(f"option {PRODUCER_CACHE_TIMEOUT!r}: {error}") from None


def _mode(value: Any) -> str:
    if value is None:
        return DEFAULT_MODE
    if not isinstance(value, str):
        raise ConfigError(_bad_mode(value))
    mode = value.strip().lower()
    if mode not in MODES:
        raise ConfigError(_bad_mode(value))
    return mode


def _bad_mode(value: Any) -> str:
    return (f"option {MODE!r} must be {' or '.join(map(repr, MODES))} (default {DEFAULT_MODE!r}), "
            f"got {value!r}; 'arrow' sends whole Arrow batches (mapInArrow), 'rows' one record per "
            f"row (foreachPartition)")
