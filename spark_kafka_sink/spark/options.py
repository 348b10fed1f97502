"""The sink's options: what ``KafkaSink(**options)`` (or ``.option(k, v)``) accepts, as a frozen value.

The options mirror Spark's built-in Kafka sink (``KafkaSourceProvider``); the README's "Options"
table gives each one's meaning and default. What :class:`SinkConfig` makes of them:

- ``kafka.<property>``: a producer property (``config.ProducerConfig``), prefix stripped
  (``kafka.linger.ms=20`` -> ``linger.ms=20``); ``kafka.bootstrap.servers`` is required. Unless
  ``kafka.batch.size`` is given, the sink sets it for bulk writes (``producer/batch_size.py``).
- ``topic`` (blanks trimmed) overrides the ``topic`` column, which is then not read at all.
- Sink-only: ``producer.cache.timeout``, a duration (``"10m"``, ``"30s"``, ``"1h"``, ``"500ms"``;
  no suffix: ms) or an int of ms, default ``10m`` as Spark's ``spark.kafka.producer.cache.timeout``;
  ``mode``, ``arrow`` (the default) or ``rows``, case and blanks aside (the Data Source writes
  rows either way); ``delivery.guarantee`` (``spark/exactly_once.py``) with
  ``transactional.id.prefix`` (up to 200 characters, no blanks or control characters) and
  ``commit.topic`` (default ``spark-kafka-sink-commits.<prefix>``); ``preflight``
  (``spark/preflight.py``); ``driver.write.max.rows`` (``spark/driver_write.py``).
- ``key.format`` / ``value.format`` and their ``<side>.avro.*`` / ``<side>.schema.id``
  (:class:`FormatOptions`); the registry's settings under Confluent's names (``schema.registry.*``,
  ``auto.register.schemas``, ...) make a ``RegistryConfig``, needed exactly when a side is framed.
- Kafka Connect's per-record error policy (``spark/dead_letters.py``): ``errors.tolerance``,
  ``errors.deadletterqueue.topic.name``, ``errors.deadletterqueue.context.headers.enable``,
  ``errors.deadletterqueue.topic.replication.factor`` (when set, the driver creates a missing
  dead-letter topic) and ``errors.log.enable``.

Rules, following Spark where it has one:

- Option names match without case, as Spark's (``CaseInsensitiveMap``); the same name given
  twice in different cases is an error here (Spark keeps one of them arbitrarily).
- ``kafka.key.serializer`` / ``kafka.value.serializer`` are refused, as in Spark (records are
  bytes: serialize in the DataFrame); so are other Java-only producer properties, by name
  (``partitioner.class``, ``interceptor.classes``, ...), which Spark passes to its Java producer.
- ``kafka.transactional.id`` is refused: the tasks writing in parallel would fence each other
  (exactly-once gives each task its own id, and ``kafka.transaction.timeout.ms`` defaults to
  :data:`EXACTLY_ONCE_TRANSACTION_TIMEOUT_MS` there).
- An unknown option is an error naming the nearest names (Spark ignores it silently), with a
  message of its own for Spark's Kafka *source* options (``subscribe``, ``startingOffsets``, ...).
  ``checkpointLocation`` (added by Spark's streaming writer) is ignored; a ``None`` value is unset.

Errors are :class:`~spark_kafka_sink.errors.ConfigError` naming the option; no error, repr or
:meth:`SinkConfig.redacted` view shows a secret's value (``kafka.sasl.jaas.config``, passwords).
"""

from __future__ import annotations

import copy
import difflib
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..avro.schema import TOP_LEVEL_RECORD, parse_schema, valid_name
from ..config import JAVA_ONLY, PROPERTIES, ProducerConfig
from ..errors import ConfigError
from ..schema_registry.config import REGISTRY_OPTION_NAMES, RegistryConfig, is_registry_option
from ..producer.batch_size import with_bulk_batch_size
from ..producer.topics import topic_name_problem

KAFKA_PREFIX = "kafka."
TOPIC = "topic"
PRODUCER_CACHE_TIMEOUT = "producer.cache.timeout"
DEFAULT_PRODUCER_CACHE_TIMEOUT_MS = 10 * 60 * 1000  # "10m"
MODE = "mode"
ARROW, ROWS = "arrow", "rows"
MODES = (ARROW, ROWS)
DEFAULT_MODE = ARROW
DELIVERY_GUARANTEE = "delivery.guarantee"
AT_LEAST_ONCE, EXACTLY_ONCE = "at-least-once", "exactly-once"
GUARANTEES = (AT_LEAST_ONCE, EXACTLY_ONCE)
TXN_PREFIX = "transactional.id.prefix"
COMMIT_TOPIC = "commit.topic"
COMMIT_TOPIC_PREFIX = "spark-kafka-sink-commits."
MAX_PREFIX_LENGTH = 200
EXACTLY_ONCE_TRANSACTION_TIMEOUT_MS = 10 * 60 * 1000
"""``transaction.timeout.ms`` of the tasks' producers in exactly-once mode unless
``kafka.transaction.timeout.ms`` is given: a micro-batch's transactions stay open from the task's
first record until the driver commits them, which must fit (brokers refuse more than their
``transaction.max.timeout.ms``, 15 minutes by default)."""
DRIVER_WRITE_MAX_ROWS = "driver.write.max.rows"
DEFAULT_DRIVER_WRITE_MAX_ROWS = 5_000
"""A micro-batch of at most this many rows is written by the driver itself, in arrow mode
(``spark/driver_write.py``); 0 turns that off."""
ERRORS_TOLERANCE = "errors.tolerance"
TOLERANCE_NONE, TOLERANCE_ALL = "none", "all"
DLQ_TOPIC = "errors.deadletterqueue.topic.name"
DLQ_CONTEXT_HEADERS = "errors.deadletterqueue.context.headers.enable"
DLQ_REPLICATION_FACTOR = "errors.deadletterqueue.topic.replication.factor"
ERRORS_LOG = "errors.log.enable"
PREFLIGHT = "preflight"
KEY, VALUE = "key", "value"
BYTES, AVRO = "bytes", "avro"
FORMAT_NAMES = (BYTES, AVRO)
"""What ``key.format`` / ``value.format`` take (the formats of ``spark_kafka_sink.avro.format``)."""
CONFLUENT, NO_FRAMING = "confluent", "none"
FRAMINGS = (CONFLUENT, NO_FRAMING)
FORMAT_SUFFIXES = ("format", "avro.schema", "schema.id", "avro.framing", "avro.record.name",
                   "avro.record.namespace")
"""Each side's format options: ``key.<suffix>`` and ``value.<suffix>``."""
FORMAT_OPTIONS = tuple(f"{side}.{suffix}" for side in (KEY, VALUE) for suffix in FORMAT_SUFFIXES)
SINK_OPTIONS = (TOPIC, PRODUCER_CACHE_TIMEOUT, MODE, DELIVERY_GUARANTEE, TXN_PREFIX, COMMIT_TOPIC,
                ERRORS_TOLERANCE, DLQ_TOPIC, DLQ_CONTEXT_HEADERS, DLQ_REPLICATION_FACTOR, ERRORS_LOG,
                PREFLIGHT, DRIVER_WRITE_MAX_ROWS, *FORMAT_OPTIONS)


@dataclass(frozen=True)
class ErrorPolicy:
    """What a task does with a record that cannot be written (Kafka Connect's options):
    ``tolerance`` ``"none"`` fails the task, ``"all"`` sends it to ``dlq_topic`` (with context
    headers when ``context_headers``) or skips it without one; ``log`` writes a WARN line per
    bad record. ``dlq_replication_factor``: create the dead-letter topic when missing.
    ``dlq_max_message_bytes`` is no option: the dead-letter topic's ``max.message.bytes`` as the
    driver's preflight read it, for the tasks to size dead letters by (``None``: not known)."""

    tolerance: str = TOLERANCE_NONE
    dlq_topic: str | None = None
    context_headers: bool = True
    dlq_replication_factor: int | None = None
    log: bool = False
    dlq_max_message_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.tolerance not in (TOLERANCE_NONE, TOLERANCE_ALL):
            raise ConfigError(f"option {ERRORS_TOLERANCE!r} must be 'none' or 'all' (default "
                              f"'none'), got {self.tolerance!r}")
        if self.dlq_topic is not None:
            if problem := topic_name_problem(self.dlq_topic):
                raise ConfigError(f"option {DLQ_TOPIC!r}: {problem}")
            if self.tolerance != TOLERANCE_ALL:
                raise ConfigError(f"option {DLQ_TOPIC!r} is set but {ERRORS_TOLERANCE!r} is "
                                  f"'none', which fails the task at the first bad record: set "
                                  f"{ERRORS_TOLERANCE}=all to send bad records there")
        factor = self.dlq_replication_factor
        if factor is not None:
            if isinstance(factor, bool) or not isinstance(factor, int) or not 1 <= factor <= 32767:
                raise ConfigError(f"option {DLQ_REPLICATION_FACTOR!r} must be an integer from 1 "
                                  f"to 32767, got {factor!r}")
            if self.dlq_topic is None:
                raise ConfigError(f"option {DLQ_REPLICATION_FACTOR!r} is set but "
                                  f"{DLQ_TOPIC!r} is not")

        limit = self.dlq_max_message_bytes
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
                                  or self.dlq_topic is None):
            raise ValueError(f"dlq_max_message_bytes must be an int >= 0 with a dead-letter topic, "
                             f"got {limit!r}")

    @property
    def tolerant(self) -> bool:
        return self.tolerance == TOLERANCE_ALL


@dataclass(frozen=True)
class FormatOptions:
    """How one side (``side``: ``"key"`` or ``"value"``) of the records is written: ``format``
    ``"bytes"`` (the column's bytes, string as UTF-8) or ``"avro"``. For Avro: ``avro_schema``, a
    JSON schema checked against the column on the driver (else the schema comes from the registry
    by ``schema_id`` or ``use.latest.version``, or is derived from the column's type, the record
    named ``record_name`` in ``record_namespace``); ``framing`` ``"confluent"`` (magic byte and
    schema id before each body: needs the registry) or ``"none"`` (plain bodies)."""

    side: str
    format: str = BYTES
    avro_schema: str | None = None
    schema_id: int | None = None
    framing: str = CONFLUENT
    record_name: str = TOP_LEVEL_RECORD
    record_namespace: str = ""

    def __post_init__(self) -> None:
        side = self.side
        if side not in (KEY, VALUE):
            raise ValueError(f"side must be 'key' or 'value', got {side!r}")
        if self.format not in FORMAT_NAMES:
            raise ConfigError(f"option '{side}.format' must be {' or '.join(map(repr, FORMAT_NAMES))} "
                              f"(default {BYTES!r}), got {self.format!r}")
        if self.format == BYTES:
            default = FormatOptions(side, AVRO)
            for suffix, attr in zip(FORMAT_SUFFIXES[1:], ("avro_schema", "schema_id", "framing",
                                                          "record_name", "record_namespace")):
                if getattr(self, attr) != getattr(default, attr):
                    raise ConfigError(f"option '{side}.{suffix}' is set but '{side}.format' is "
                                      f"{BYTES!r}: set {side}.format=avro to write the {side} as Avro")
            return
        if self.framing not in FRAMINGS:
            raise ConfigError(f"option '{side}.avro.framing' must be {' or '.join(map(repr, FRAMINGS))} "
                              f"(default {CONFLUENT!r}), got {self.framing!r}")
        schema_id = self.schema_id
        if schema_id is not None:
            if isinstance(schema_id, bool) or not isinstance(schema_id, int) or not 0 <= schema_id < 2**31:
                raise ConfigError(f"option '{side}.schema.id' must be an integer in [0, {2**31 - 1}], "
                                  f"got {schema_id!r}")
            if self.avro_schema is not None:
                raise ConfigError(f"set option '{side}.avro.schema' or '{side}.schema.id', not both: "
                                  f"the id names a registered schema")
            if self.framing == NO_FRAMING:
                raise ConfigError(f"option '{side}.schema.id' names a registered schema, but "
                                  f"'{side}.avro.framing' is 'none' (no registry): give the schema "
                                  f"as '{side}.avro.schema'")
        if self.avro_schema is not None:
            if not isinstance(self.avro_schema, str):
                raise ConfigError(f"option '{side}.avro.schema' must be a JSON string, got "
                                  f"{type(self.avro_schema).__name__}")
            try:
                parse_schema(self.avro_schema)
            except ConfigError as error:
                raise ConfigError(f"option '{side}.avro.schema': {error}") from None
        name, namespace = self.record_name, self.record_namespace
        if not (isinstance(name, str) and valid_name(name)):
            raise ConfigError(f"option '{side}.avro.record.name' must be an Avro name (a letter or _, "
                              f"then letters, digits or _), got {name!r}")
        if not isinstance(namespace, str) or (namespace and not all(map(valid_name, namespace.split(".")))):
            raise ConfigError(f"option '{side}.avro.record.namespace' must be Avro names separated by "
                              f"dots (each a letter or _, then letters, digits or _), got {namespace!r}")

    @property
    def avro(self) -> bool:
        return self.format == AVRO

    @property
    def framed(self) -> bool:
        """Whether each body carries the Confluent header (a schema id from the registry)."""
        return self.format == AVRO and self.framing == CONFLUENT

    def options(self) -> dict[str, Any]:
        """The options that differ from the defaults, by option name (for ``redacted``)."""
        default = FormatOptions(self.side)
        attrs = ("format", "avro_schema", "schema_id", "framing", "record_name", "record_namespace")
        return {f"{self.side}.{suffix}": getattr(self, attr) for suffix, attr in zip(FORMAT_SUFFIXES, attrs)
                if getattr(self, attr) != getattr(default, attr)}


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
    ``mode`` is ``"arrow"`` or ``"rows"`` (see the module docstring); ``delivery_guarantee``,
    ``transactional_id_prefix`` and ``commit_topic`` configure exactly-once writes;
    ``driver_write_max_rows`` bounds the micro-batches the driver writes itself. Build it with
    :meth:`from_options`; the constructor validates too.
    """

    producer_config: ProducerConfig
    topic: str | None = None
    producer_cache_timeout_ms: int = DEFAULT_PRODUCER_CACHE_TIMEOUT_MS
    mode: str = DEFAULT_MODE
    delivery_guarantee: str = AT_LEAST_ONCE
    transactional_id_prefix: str | None = None
    commit_topic: str | None = None
    error_policy: ErrorPolicy = ErrorPolicy()
    preflight: bool = True
    key_format: FormatOptions = FormatOptions(KEY)
    value_format: FormatOptions = FormatOptions(VALUE)
    registry: RegistryConfig | None = None
    driver_write_max_rows: int = DEFAULT_DRIVER_WRITE_MAX_ROWS

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
        rows = self.driver_write_max_rows
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
            raise ConfigError(f"option {DRIVER_WRITE_MAX_ROWS!r} must be an integer of at least 0 "
                              f"(0: never write from the driver), got {rows!r}")
        if self.delivery_guarantee not in GUARANTEES:
            raise ConfigError(_bad_guarantee(self.delivery_guarantee))
        if not isinstance(self.error_policy, ErrorPolicy):
            raise TypeError(f"error_policy must be an ErrorPolicy, got "
                            f"{type(self.error_policy).__name__}")
        if not isinstance(self.preflight, bool):
            raise ConfigError(f"option {PREFLIGHT!r} must be true or false, got {self.preflight!r}")
        self._check_formats()
        if not self.exactly_once:
            for name, value in ((TXN_PREFIX, self.transactional_id_prefix), (COMMIT_TOPIC, self.commit_topic)):
                if value is not None:
                    raise ConfigError(f"option {name!r} is set but {DELIVERY_GUARANTEE!r} is "
                                      f"{AT_LEAST_ONCE!r}: set {DELIVERY_GUARANTEE}={EXACTLY_ONCE!r} "
                                      "to write in transactions, or remove it")
            return
        if self.transactional_id_prefix is None:
            raise ConfigError(f"{DELIVERY_GUARANTEE}={EXACTLY_ONCE!r} needs option {TXN_PREFIX!r}: a "
                              "name for this query's transactional ids (task p writes with "
                              "'<prefix>-<p>'); give each query its own")
        if problem := prefix_problem(self.transactional_id_prefix):
            raise ConfigError(f"option {TXN_PREFIX!r}: {problem}")
        if self.commit_topic is None:
            raise ConfigError(f"option {COMMIT_TOPIC!r} is not set: build the config with "
                              "SinkConfig.from_options, which derives it from the prefix")
        if problem := topic_name_problem(self.commit_topic):
            raise ConfigError(f"option {COMMIT_TOPIC!r} ({self.commit_topic!r}): {problem}")
        self.transactional_config(0)             # the producer rules, checked on the driver

    def _check_formats(self) -> None:
        """The formats' sides, and a registry exactly when a side writes the wire format."""
        for side, options in ((KEY, self.key_format), (VALUE, self.value_format)):
            if not isinstance(options, FormatOptions) or options.side != side:
                raise TypeError(f"{side}_format must be the FormatOptions of side {side!r}, got {options!r}")
        framed = [options.side for options in self.formats if options.framed]
        if self.registry is None:
            if framed:
                side = framed[0]
                raise ConfigError(
                    f"option '{side}.format' is 'avro' in the Confluent wire format (each body after a "
                    f"magic byte and the schema's registry id), which needs option "
                    f"'schema.registry.url'; set it, or set {side}.avro.framing=none to write plain "
                    f"Avro bodies without a registry")
            return
        if not isinstance(self.registry, RegistryConfig):
            raise TypeError(f"registry must be a RegistryConfig, got {type(self.registry).__name__}")
        if not framed:
            raise ConfigError("option 'schema.registry.url' is set but no side is written through the "
                              "registry: set value.format=avro (or key.format=avro), whose default "
                              "framing is the Confluent wire format, or remove the registry options")
        for options in self.formats:
            if options.framed and options.schema_id is not None and self.registry.use_latest_version:
                raise ConfigError(f"set option '{options.side}.schema.id' or 'use.latest.version=true', "
                                  f"not both")

    def for_tasks(self) -> SinkConfig:
        """This config as the tasks get it: without the registry's settings (its credentials, a
        token function that may live only on the driver). The driver learns the schema ids
        (``spark/formats.py``) and the tasks never call the registry; so the copy skips the rule
        that a framed side needs ``schema.registry.url``."""
        if self.registry is None:
            return self
        tasks = copy.copy(self)
        object.__setattr__(tasks, "registry", None)
        return tasks

    @property
    def formats(self) -> tuple[FormatOptions, FormatOptions]:
        """The key's and the value's format options."""
        return (self.key_format, self.value_format)

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee == EXACTLY_ONCE

    def transactional_id(self, partition_id: int) -> str:
        """The transactional id of the task writing Spark partition ``partition_id``."""
        return f"{self.transactional_id_prefix}-{partition_id}"

    def transactional_config(self, partition_id: int) -> ProducerConfig:
        """The producer config of the task writing Spark partition ``partition_id`` in
        exactly-once mode: the sink's, with that task's transactional id."""
        try:
            return self.producer_config.with_overrides(
                {"transactional.id": self.transactional_id(partition_id)})
        except ConfigError as error:
            raise ConfigError(f"{DELIVERY_GUARANTEE}={EXACTLY_ONCE!r}: producer option (kafka.*): "
                              f"{error}") from None

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> SinkConfig:
        """The config for the sink options ``options`` (see the module docstring for the rules)."""
        if not isinstance(options, Mapping):
            raise TypeError(f"options must be a mapping, got {type(options).__name__}")
        given = _fold_case(options)
        properties: dict[str, Any] = {}
        sink: dict[str, Any] = {}
        registry: dict[str, Any] = {}
        for name, (original, value) in given.items():
            if name.startswith(KAFKA_PREFIX):
                properties[_property_name(name, original)] = value
            elif name in SINK_OPTIONS:
                sink[name] = value
            elif is_registry_option(name):
                registry[original] = value
            elif name not in IGNORED_OPTIONS:
                raise ConfigError(_unknown_option(original))
        if "bootstrap.servers" not in properties:
            raise ConfigError("option 'kafka.bootstrap.servers' is required: the brokers to start from, "
                              "as a comma-separated list of host:port")
        guarantee = _guarantee(sink.get(DELIVERY_GUARANTEE))
        if guarantee == EXACTLY_ONCE and "transaction.timeout.ms" not in properties:
            properties["transaction.timeout.ms"] = EXACTLY_ONCE_TRANSACTION_TIMEOUT_MS
        try:
            producer_config = ProducerConfig.from_properties(properties)
        except ConfigError as error:  # name the option as the user wrote it: kafka.<property>
            raise ConfigError(f"producer option (kafka.*): {error}") from None
        if producer_config.oauth_cb is not None:
            _check_shippable(producer_config.oauth_cb, given.get("kafka.oauth_cb", ("kafka.oauth_cb",))[0])
        producer_config = with_bulk_batch_size(producer_config)  # unless kafka.batch.size is set
        prefix = sink.get(TXN_PREFIX)
        if prefix is not None and not isinstance(prefix, str):
            raise ConfigError(f"option {TXN_PREFIX!r} must be a string, got {type(prefix).__name__}")
        commit_topic = sink.get(COMMIT_TOPIC)
        if commit_topic is not None:
            commit_topic = _topic(commit_topic, COMMIT_TOPIC)
        elif guarantee == EXACTLY_ONCE and prefix is not None and not prefix_problem(prefix):
            commit_topic = COMMIT_TOPIC_PREFIX + prefix
            if problem := topic_name_problem(commit_topic):
                raise ConfigError(f"the commit topic derived from option {TXN_PREFIX!r}, "
                                  f"{commit_topic!r}, is not a valid topic name ({problem}); set "
                                  f"option {COMMIT_TOPIC!r}")
        return cls(producer_config, _topic(sink.get(TOPIC)), _timeout(sink.get(PRODUCER_CACHE_TIMEOUT)),
                   _mode(sink.get(MODE)), guarantee, prefix, commit_topic, _error_policy(sink),
                   _flag(sink, PREFLIGHT, True), _format_options(sink, KEY), _format_options(sink, VALUE),
                   RegistryConfig(registry) if registry else None,
                   _count(sink, DRIVER_WRITE_MAX_ROWS, DEFAULT_DRIVER_WRITE_MAX_ROWS))

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
        if self.exactly_once:
            out[DELIVERY_GUARANTEE] = self.delivery_guarantee
            out[TXN_PREFIX] = self.transactional_id_prefix
            out[COMMIT_TOPIC] = self.commit_topic
        policy, default = self.error_policy, ErrorPolicy()
        for name, attr in ((ERRORS_TOLERANCE, "tolerance"), (DLQ_TOPIC, "dlq_topic"),
                           (DLQ_CONTEXT_HEADERS, "context_headers"),
                           (DLQ_REPLICATION_FACTOR, "dlq_replication_factor"), (ERRORS_LOG, "log")):
            if getattr(policy, attr) != getattr(default, attr):
                out[name] = getattr(policy, attr)
        if not self.preflight:
            out[PREFLIGHT] = False
        if self.driver_write_max_rows != DEFAULT_DRIVER_WRITE_MAX_ROWS:
            out[DRIVER_WRITE_MAX_ROWS] = self.driver_write_max_rows
        for options in self.formats:
            out.update(options.options())
        if self.registry is not None:
            out.update(self.registry.redacted())
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


def _check_shippable(callback: Any, option: str) -> None:
    """The token function goes to every executor with the sink: refuse one that cannot be
    pickled (as PySpark pickles functions: by value, closures included) now, naming the option."""
    try:
        from pyspark import cloudpickle as pickler  # noqa: PLC0415 - Spark's own pickler, when present
    except ImportError:  # pragma: no cover - the sink runs under PySpark
        import pickle as pickler  # noqa: PLC0415
    try:
        pickler.dumps(callback)
    except Exception as exc:  # noqa: BLE001 - any pickling failure means the same thing
        raise ConfigError(f"option {option!r}: the token function cannot be sent to the executors "
                          f"({type(exc).__name__}: {exc}); name a module-level function with "
                          f"'kafka.sasl.oauthbearer.token.provider' = 'module:function' instead") from None


def _property_name(name: str, original: str) -> str:
    """The producer property of a ``kafka.*`` option, or a ConfigError naming the option."""
    prop = name[len(KAFKA_PREFIX):]
    if prop == "transactional.id":
        raise ConfigError(
            f"option {original!r} is not supported: the tasks of a write run in parallel, and "
            "tasks sharing one transactional id would fence each other. For transactions set "
            f"{DELIVERY_GUARANTEE}={EXACTLY_ONCE!r} and {TXN_PREFIX!r}: each task then gets its own "
            "id")
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
    close = difflib.get_close_matches(lower, [*SINK_OPTIONS, *(KAFKA_PREFIX + p for p in PROPERTIES),
                                              *sorted(REGISTRY_OPTION_NAMES)], n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else "."
    return (f"unknown option {original!r}{hint} The sink takes {', '.join(map(repr, SINK_OPTIONS))}, "
            f"'kafka.<producer property>' and the schema registry's settings (Confluent's names).")


def _topic(value: Any, option: str = TOPIC) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"option {option!r} must be a string, got {type(value).__name__}")
    topic = value.strip()  # as Spark
    problem = topic_name_problem(topic)
    if problem:
        raise ConfigError(f"option {option!r}: {problem}")
    return topic


def prefix_problem(prefix: str) -> str | None:
    """What is wrong with ``prefix`` as a ``transactional.id.prefix``, or None."""
    if not prefix:
        return "must not be empty"
    if len(prefix) > MAX_PREFIX_LENGTH:
        return f"must be at most {MAX_PREFIX_LENGTH} characters, got {len(prefix)}"
    if any(c.isspace() or not c.isprintable() for c in prefix):
        return f"must not contain blanks or control characters, got {prefix!r}"
    return None


def _format_options(sink: Mapping[str, Any], side: str) -> FormatOptions:
    """A side's :class:`FormatOptions` from its ``<side>.*`` options (strings as Spark passes
    them: names trimmed and lowercased, the schema id an integer)."""
    def word(suffix: str, default: str) -> str:
        value = sink.get(f"{side}.{suffix}", default)
        if not isinstance(value, str):
            raise ConfigError(f"option '{side}.{suffix}' must be a string, got {value!r}")
        return value.strip().lower()

    schema_id = sink.get(f"{side}.schema.id")
    if isinstance(schema_id, str):
        if re.fullmatch(r"\s*-?[0-9]+\s*", schema_id) is None:
            raise ConfigError(f"option '{side}.schema.id' must be an integer, got {schema_id!r}")
        schema_id = int(schema_id)   # FormatOptions checks its range
    name = sink.get(f"{side}.avro.record.name", TOP_LEVEL_RECORD)
    namespace = sink.get(f"{side}.avro.record.namespace", "")
    return FormatOptions(side, word("format", BYTES), sink.get(f"{side}.avro.schema"), schema_id,
                         word("avro.framing", CONFLUENT),
                         name.strip() if isinstance(name, str) else name,
                         namespace.strip() if isinstance(namespace, str) else namespace)


def _error_policy(sink: Mapping[str, Any]) -> ErrorPolicy:
    tolerance = sink.get(ERRORS_TOLERANCE, TOLERANCE_NONE)
    if not isinstance(tolerance, str):
        raise ConfigError(f"option {ERRORS_TOLERANCE!r} must be 'none' or 'all', got {tolerance!r}")
    dlq = sink.get(DLQ_TOPIC)
    factor = sink.get(DLQ_REPLICATION_FACTOR)
    if isinstance(factor, str):
        try:
            factor = int(factor.strip())
        except ValueError:
            raise ConfigError(f"option {DLQ_REPLICATION_FACTOR!r} must be an integer, got "
                              f"{factor!r}") from None
    return ErrorPolicy(tolerance.strip().lower(), None if dlq is None else _topic(dlq, DLQ_TOPIC),
                       _flag(sink, DLQ_CONTEXT_HEADERS, True), factor, _flag(sink, ERRORS_LOG, False))


def _flag(sink: Mapping[str, Any], name: str, default: bool) -> bool:
    """A boolean option: a bool, or ``"true"``/``"false"`` in any case (Spark passes strings)."""
    value = sink.get(name, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"option {name!r} must be true or false, got {value!r}")


def _count(sink: Mapping[str, Any], name: str, default: int) -> int:
    """An integer option of at least 0: an int, or its digits as a string (Spark passes strings)."""
    value = sink.get(name, default)
    if isinstance(value, str):
        text = value.strip()
        if not text.isdigit():
            raise ConfigError(f"option {name!r} must be an integer of at least 0, got {value!r}")
        return int(text)
    return value


def _guarantee(value: Any) -> str:
    if value is None:
        return AT_LEAST_ONCE
    if not isinstance(value, str) or value.strip().lower() not in GUARANTEES:
        raise ConfigError(_bad_guarantee(value))
    return value.strip().lower()


def _bad_guarantee(value: Any) -> str:
    return (f"option {DELIVERY_GUARANTEE!r} must be {' or '.join(map(repr, GUARANTEES))} (default "
            f"{AT_LEAST_ONCE!r}), got {value!r}")


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
