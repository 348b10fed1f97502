"""The key and value formats of a write: checked against the columns, resolved once on the driver.

With ``value.format=avro`` (or ``key.format``) the column may be of any type Spark's ``to_avro``
writes (:mod:`.arrow_types`). Three steps:

1. :func:`column_encoder`, where the schema is validated (:func:`~.schema.validate_schema`): the
   column's Arrow type, and the schema to write it with: ``<side>.avro.schema`` checked against
   the type (an error names the field that does not fit), or the one Spark's ``to_avro`` would
   derive (the record named ``<side>.avro.record.name`` in ``.namespace``). With
   ``<side>.avro.framing=none`` that is all: plain bodies, no registry.
2. :class:`FormatResolver`, on the driver, once per query and topic: the registry's id for each
   topic's subject (registered, looked up, the latest version or the explicit
   ``<side>.schema.id``; a schema read from the registry is checked against the column too). The
   result is cached across micro-batches; the tasks get a :class:`ColumnEncoder` holding the ids
   and never call the registry. :func:`needs_topics` says when the driver must learn the topics
   of a ``topic`` column first (a subject per topic).
3. In the tasks, :meth:`ColumnEncoder.for_topic` gives the format
   (:class:`~spark_kafka_sink.avro.format.AvroFormat`) that ``send_arrow`` encodes a batch's
   column with (rows mode encodes chunks of rows: :mod:`.row_formats`).

A null key or value stays null (no key, a tombstone), as with Spark's ``to_avro`` and Confluent's
serializer.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import pyarrow as pa

from ..avro.derive import derive_schema
from ..avro.format import AvroFormat
from ..errors import AvroSchemaError, ConfigError, SchemaError
from ..schema_registry.client import RegistryClient
from ..schema_registry.subjects import SubjectNameStrategy, record_name
from .arrow_types import arrow_type
from .options import KEY, FormatOptions, SinkConfig, topic_name_problem

__all__ = ["ColumnEncoder", "FormatResolver", "column_encoder", "distinct_topics", "needs_topics"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ColumnEncoder:
    """How the tasks turn one side's column (``side``: ``"key"`` or ``"value"``) into record
    bytes. ``arrow_type``: the column's, as the driver sees it; ``template``: the format checked
    against it (``None`` while the schema is the registry's to give); ``framed``: bodies carry a
    registry id, so the driver must resolve them (:class:`FormatResolver`) before tasks run.
    ``default`` is the format for every topic, ``by_topic`` each topic's own (a subject per
    topic). ``nullable``: Spark's schema lets the column be null (a ``struct(...)`` it built
    cannot be)."""

    side: str
    arrow_type: pa.DataType
    template: AvroFormat | None = None
    framed: bool = False
    default: AvroFormat | None = None
    by_topic: tuple[tuple[str, AvroFormat], ...] = ()
    nullable: bool = True

    @property
    def resolved(self) -> bool:
        """Whether the tasks can encode with it: no id to learn, or ids learnt."""
        return not self.framed or self.default is not None or bool(self.by_topic)

    def for_topic(self, topic: str) -> AvroFormat | None:
        """The format for ``topic``'s records, or ``None`` when the driver resolved no id for
        that topic (a topic that was not in the data when the driver looked)."""
        if self.default is not None:
            return self.default
        for name, found in self.by_topic:
            if name == topic:
                return found
        return None

    def __repr__(self) -> str:
        if not self.framed:
            ids = "plain"
        elif self.default is not None:
            ids = f"id {self.default.schema_id}"
        else:
            ids = ", ".join(f"{topic}: id {fmt.schema_id}" for topic, fmt in self.by_topic) or "no id yet"
        return f"ColumnEncoder({self.side}, {ids})"


def column_encoder(options: FormatOptions, data_type: Any, nullable: bool = True) -> ColumnEncoder:
    """Step 1 (see the module docstring) for a column of Spark type ``data_type`` (``nullable``
    as Spark's schema says); raises :class:`~spark_kafka_sink.errors.SchemaError` naming the
    field that cannot be written."""
    side = options.side
    kind = arrow_type(data_type, side)
    try:
        derived = derive_schema(kind, record_name=options.record_name, namespace=options.record_namespace,
                                column=side)
        template = None
        if options.avro_schema is not None:
            template = AvroFormat.for_type(kind, options.avro_schema, column=side)
        elif options.schema_id is None:
            template = AvroFormat.for_type(kind, derived, column=side)
    except AvroSchemaError as error:
        source = (f"option '{side}.avro.schema' does not fit column {side!r}" if options.avro_schema
                  else f"column {side!r} has no Avro type")
        raise SchemaError(f"{source}: {error}") from None
    if options.framed:
        return ColumnEncoder(side, kind, template, framed=True, nullable=nullable)
    return ColumnEncoder(side, kind, template, default=template, nullable=nullable)


def needs_topics(config: SinkConfig, encoders: Iterable[ColumnEncoder | None]) -> bool:
    """Whether resolving ``encoders`` needs the topics the rows go to: a framed side without an
    explicit schema id whose subject names the topic, when the ``topic`` option is not set."""
    if config.topic is not None or config.registry is None:
        return False
    for encoder in encoders:
        if encoder is None or not encoder.framed:
            continue
        options = _options(config, encoder.side)
        if options.schema_id is None and config.registry.strategy(encoder.side == KEY) \
                is not SubjectNameStrategy.RECORD:
            return True
    return False


def distinct_topics(frame: Any) -> list[str]:
    """The distinct valid topic names of a DataFrame's ``topic`` column (a Spark job; null and
    invalid names are left for the tasks to refuse, row by row)."""
    names = [row[0] for row in frame.select("topic").distinct().collect()]
    return sorted(name for name in names if isinstance(name, str) and topic_name_problem(name) is None)


class FormatResolver:
    """The driver's registry step (see the module docstring): one per sink, holding the registry
    client and every id learnt, so a subject is asked once per query."""

    def __init__(self, config: SinkConfig, client: RegistryClient | None = None):
        self._config = config
        self._client = client
        self._resolved: dict[tuple[Any, ...], AvroFormat] = {}

    @property
    def client(self) -> RegistryClient:
        if self._client is None:
            if self._config.registry is None:
                raise ConfigError("no schema registry is configured (schema.registry.url)")
            self._client = RegistryClient(self._config.registry)
        return self._client

    def with_schema_ids(self, write_schema: Any, learn_topics: Callable[[], Iterable[str]]) -> Any:
        """``write_schema`` as the tasks need it: unchanged without a framed side; else resolved
        for the ``topic`` option's topic, or, where a subject names the topic of a ``topic``
        column (:func:`needs_topics`), for the topics ``learn_topics()`` gives (it raises where
        the caller cannot learn them)."""
        if not any(encoder.framed for encoder in write_schema.encoders):
            return write_schema
        topics: Iterable[str] = [] if self._config.topic is None else [self._config.topic]
        if needs_topics(self._config, write_schema.encoders):
            topics = learn_topics()
        return self.resolve_schema(write_schema, topics)

    def resolve_schema(self, write_schema: Any, topics: Iterable[str]) -> Any:
        """A :class:`~.schema.WriteSchema` with its Avro sides resolved (see :meth:`resolve`)."""
        topics = list(topics)
        return dataclasses.replace(write_schema, **{
            f"{encoder.side}_encoder": self.resolve(encoder, topics) for encoder in write_schema.encoders})

    def resolve(self, encoder: ColumnEncoder | None, topics: Iterable[str]) -> ColumnEncoder | None:
        """``encoder`` with the ids its tasks need: one for every topic, or one per topic of
        ``topics`` when the subject names the topic (unused otherwise)."""
        if encoder is None or not encoder.framed:
            return encoder
        options = _options(self._config, encoder.side)
        is_key = encoder.side == KEY
        if options.schema_id is not None:
            return dataclasses.replace(encoder, default=self._by_id(encoder, options.schema_id))
        strategy = self._config.registry.strategy(is_key)
        if strategy is SubjectNameStrategy.RECORD:
            return dataclasses.replace(encoder, default=self._for_subject(encoder, None))
        names = sorted(set(topics))
        if not names:
            return dataclasses.replace(encoder, by_topic=())
        return dataclasses.replace(encoder, by_topic=tuple((topic, self._for_subject(encoder, topic))
                                                           for topic in names))

    def _by_id(self, encoder: ColumnEncoder, schema_id: int) -> AvroFormat:
        key = ("id", encoder.side, encoder.arrow_type, schema_id)
        found = self._resolved.get(key)
        if found is None:
            text = self.client.schema_by_id(schema_id)
            found = self._fit(encoder, text, schema_id, f"the schema registered as id {schema_id} "
                                                         f"(option '{encoder.side}.schema.id')")
            self._resolved[key] = found
        return found

    def _for_subject(self, encoder: ColumnEncoder, topic: str | None) -> AvroFormat:
        """The format of ``topic``'s subject (``None``: the record strategy, any topic)."""
        is_key = encoder.side == KEY
        naming = encoder.template.schema_json if encoder.template is not None else None
        registry = self._config.registry
        strategy = registry.strategy(is_key)
        key = ("subject", encoder.side, encoder.arrow_type, naming, topic)
        found = self._resolved.get(key)
        if found is not None:
            return found
        if topic is None:   # RecordNameStrategy: the subject is the record's full name
            subject = record_name(naming)
        else:
            subject = strategy.subject(topic, is_key, None if naming is None else record_name(naming))
        client = self.client
        if registry.use_latest_version:
            latest = client.latest(subject)
            found = self._fit(encoder, latest.schema, latest.schema_id,
                              f"the latest schema of subject {subject!r} (version {latest.version}, "
                              f"id {latest.schema_id})")
        else:
            schema_id = (client.register(subject, naming) if registry.auto_register_schemas
                         else client.lookup(subject, naming))
            found = encoder.template.with_schema_id(schema_id)
            log.info("KafkaSink: %s schema of %s is id %d in subject %r", encoder.side,
                     "every topic" if topic is None else f"topic {topic!r}", schema_id, subject)
        self._resolved[key] = found
        return found

    @staticmethod
    def _fit(encoder: ColumnEncoder, text: str, schema_id: int, what: str) -> AvroFormat:
        try:
            return AvroFormat.for_type(encoder.arrow_type, text, schema_id=schema_id, column=encoder.side)
        except AvroSchemaError as error:
            raise SchemaError(f"{what} does not fit column {encoder.side!r}: {error}") from None


def _options(config: SinkConfig, side: str) -> FormatOptions:
    return config.key_format if side == KEY else config.value_format
