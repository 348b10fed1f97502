"""Subject name strategies: under which subject a topic's key or value schema is registered.

Confluent's three, by their short names or their Java class names
(``io.confluent.kafka.serializers.subject.TopicNameStrategy``; names match without case):

- ``TopicNameStrategy`` (the default): ``<topic>-key`` / ``<topic>-value``;
- ``RecordNameStrategy``: the schema's record name, whatever the topic;
- ``TopicRecordNameStrategy``: ``<topic>-<record name>``.

A schema's record name (:func:`record_name`) is Confluent's ``AvroSchema.name()``: the full name
(``namespace.name``) of a record, enum or fixed; the type's name (``string``, ``array``, ...)
for any other schema, a union's being ``union``.
"""

from __future__ import annotations

import enum
import json
from typing import Any

from ..errors import ConfigError

__all__ = ["SubjectNameStrategy", "record_name", "JAVA_PACKAGE", "STRATEGY_CHOICES"]

JAVA_PACKAGE = "io.confluent.kafka.serializers.subject"
_NAMED = ("record", "enum", "fixed")


class SubjectNameStrategy(enum.Enum):
    """A subject name strategy; ``value`` is Confluent's short class name."""

    TOPIC = "TopicNameStrategy"
    RECORD = "RecordNameStrategy"
    TOPIC_RECORD = "TopicRecordNameStrategy"

    @property
    def java_class(self) -> str:
        return f"{JAVA_PACKAGE}.{self.value}"

    @property
    def needs_record_name(self) -> bool:
        return self is not SubjectNameStrategy.TOPIC

    @classmethod
    def find(cls, value: Any) -> SubjectNameStrategy | None:
        """The strategy named by its short or Java class name (without case), or None."""
        if isinstance(value, cls):
            return value
        text = value.strip().lower() if isinstance(value, str) else None
        for strategy in cls:
            if text in (strategy.value.lower(), strategy.java_class.lower()):
                return strategy
        return None

    def subject(self, topic: str, is_key: bool, record: str | None = None) -> str:
        """The subject of ``topic``'s key (``is_key``) or value schema whose record name is
        ``record``; ConfigError when the strategy needs a record name and none is given."""
        if not isinstance(topic, str) or not topic:
            raise ConfigError(f"a subject needs a topic name, got {topic!r}")
        if self is SubjectNameStrategy.TOPIC:
            return f"{topic}-{'key' if is_key else 'value'}"
        if not record:
            raise ConfigError(f"{self.value} names the subject after the schema's record name, but "
                              f"no schema was given for the {'key' if is_key else 'value'} of topic "
                              f"{topic!r}")
        return record if self is SubjectNameStrategy.RECORD else f"{topic}-{record}"


STRATEGY_CHOICES = (f"one of {', '.join(s.value for s in SubjectNameStrategy)} "
                    f"(or its class name in {JAVA_PACKAGE})")
"""What a setting naming a strategy may say, as errors put it."""


def record_name(schema: str | Any) -> str:
    """The record name of an Avro schema, given as JSON text or already parsed (a dict or a
    list; a parsed string is the text's JSON value): see the module docstring. ConfigError when
    the text is not JSON or not an Avro schema's shape."""
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError as exc:
            raise ConfigError(f"the schema is not JSON: {exc}") from None
    return _name_of(schema)


def _name_of(parsed: Any) -> str:
    if isinstance(parsed, str):
        return parsed                       # a primitive, or a named type referred to by name
    if isinstance(parsed, list):
        return "union"
    if not isinstance(parsed, dict) or not isinstance(parsed.get("type"), (str, dict, list)):
        raise ConfigError("an Avro schema is a JSON string, object with a \"type\", or array (a union)")
    kind = parsed["type"]
    if kind in _NAMED:
        name = parsed.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"an Avro {kind} schema needs a \"name\"")
        namespace = parsed.get("namespace")
        if "." in name or not namespace:
            return name
        if not isinstance(namespace, str):
            raise ConfigError(f"the \"namespace\" of Avro {kind} {name!r} must be a string")
        return f"{namespace}.{name}"
    return kind if isinstance(kind, str) else _name_of(kind)
