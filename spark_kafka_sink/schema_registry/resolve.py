"""The driver's one step per query: each topic's schema id (and schema text), from the registry.

:func:`resolve_registry_schemas` takes the registry settings, the topics the query writes, key or
value, and where the schema comes from, and gives one :class:`TopicSchema` per topic:

- an explicit id (``value.schema.id``): the schema registered under it, read once, for every
  topic (no subject involved);
- ``use.latest.version=true``: each subject's latest version, its id and schema (the schema
  given, if any, only names the record for the record strategies);
- otherwise the schema given (JSON text), registered under each topic's subject
  (``auto.register.schemas=true``, the default) or looked up there (``false``: it must be
  registered already).

One subject per topic under ``TopicNameStrategy``; under ``RecordNameStrategy`` every topic shares
the schema's subject, which is asked once. The executors get the ids (and texts) and never call
the registry. ``client`` reuses a :class:`~.client.RegistryClient` (and its cache) across calls (made
with ``config``); without one a client is made for the call. Errors are ConfigErrors naming the options
(``key.``/``value.`` + ``schema.id`` / ``avro.schema``) or :mod:`.errors`' registry errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import ConfigError
from .client import RegistryClient
from .config import RegistryConfig
from .subjects import record_name

__all__ = ["TopicSchema", "resolve_registry_schemas"]


@dataclass(frozen=True)
class TopicSchema:
    """What a topic's records carry: ``schema_id`` (the wire format's), the ``schema`` text to
    encode with, and where they came from (``subject`` and ``version``: None for an explicit id;
    ``version`` is known for ``use.latest.version``)."""

    topic: str
    schema_id: int
    schema: str
    subject: str | None = None
    version: int | None = None


def resolve_registry_schemas(config: RegistryConfig | Mapping[str, Any], topics: Iterable[str] | str, *,
                             is_key: bool, schema: str | None = None, schema_id: int | None = None,
                             client: RegistryClient | None = None,
                             clock: Clock = SYSTEM_CLOCK) -> dict[str, TopicSchema]:
    """Each topic's schema id and text, by topic in the order given; see the module docstring."""
    side = "key" if is_key else "value"
    if client is None:
        client = RegistryClient(config, clock=clock)
    elif config is not client.config and RegistryConfig.coerce(config) != client.config:
        raise ValueError("resolve_registry_schemas: the client passed in was made with other settings "
                         "than the config passed in")
    settings = client.config
    names = _topics(topics)
    if schema_id is not None:
        if schema is not None:
            raise ConfigError(f"set {side}.avro.schema or {side}.schema.id, not both: the id names a "
                              f"registered schema")
        if settings.use_latest_version:
            raise ConfigError(f"set {side}.schema.id or use.latest.version=true, not both")
        known = _explicit_id(schema_id, side)
        text = client.schema_by_id(known)
        return {topic: TopicSchema(topic, known, text) for topic in names}
    record = _record_name(schema, side) if schema is not None else None
    out: dict[str, TopicSchema] = {}
    for topic in names:
        subject = client.subject_name(topic, is_key, record)
        if settings.use_latest_version:
            latest = client.latest(subject)
            out[topic] = TopicSchema(topic, latest.schema_id, latest.schema, subject, latest.version)
            continue
        if schema is None:
            raise ConfigError(f"the {side} schema of topic {topic!r} is not known: give "
                              f"{side}.avro.schema, {side}.schema.id or use.latest.version=true")
        found = (client.register(subject, schema) if settings.auto_register_schemas
                 else client.lookup(subject, schema))
        out[topic] = TopicSchema(topic, found, schema, subject)
    return out


def _topics(topics: Iterable[str] | str) -> list[str]:
    names = [topics] if isinstance(topics, str) else list(topics)
    if not names:
        raise ConfigError("no topic to resolve a schema for")
    for name in names:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a topic name is a non-empty string, got {name!r}")
    return list(dict.fromkeys(names))


def _explicit_id(schema_id: Any, side: str) -> int:
    if isinstance(schema_id, str) and schema_id.strip().isdigit():
        schema_id = int(schema_id.strip())
    if isinstance(schema_id, bool) or not isinstance(schema_id, int) or not 0 <= schema_id < 2**31:
        raise ConfigError(f"{side}.schema.id must be an integer in [0, {2**31 - 1}], got {schema_id!r}")
    return schema_id


def _record_name(schema: str, side: str) -> str:
    if not isinstance(schema, str):
        raise ConfigError(f"{side}.avro.schema must be a JSON string, got {type(schema).__name__}")
    try:
        return record_name(schema)
    except ConfigError as exc:
        raise ConfigError(f"{side}.avro.schema: {exc}") from None
