"""Topic names as Kafka allows them, checked before a topic reaches the producer's metadata.

Kafka's ``Topic.validate``: 1 to 249 characters, each an ASCII letter, a digit, ``.``, ``_`` or
``-``, and not ``.`` nor ``..``. The broker answers INVALID_TOPIC_EXCEPTION for any other name;
checking here first gives an error that says which rule the name breaks, and keeps the name out
of the producer's metadata, which would otherwise ask the broker about it at every refresh.
Anything but a ``str`` would break the metadata request itself, so it is a ``TypeError`` here.
"""

from __future__ import annotations

import re
from typing import Any

from .. import errors

__all__ = ["MAX_TOPIC_LENGTH", "check_topic", "topic_name_problem"]

MAX_TOPIC_LENGTH = 249
_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot be a Kafka topic (Kafka's own rules), or ``None`` if it can."""
    if not isinstance(name, str):
        return f"a topic must be a string, got {type(name).__name__}"
    if not name:
        return "a topic name must not be empty"
    if name in (".", ".."):
        return f"a topic cannot be named {name!r}"
    if len(name) > MAX_TOPIC_LENGTH:
        return f"a topic name has at most {MAX_TOPIC_LENGTH} characters, got {len(name)}"
    if not _TOPIC_CHARS.fullmatch(name):
        return f"topic {name!r} has characters other than ASCII letters, digits, '.', '_' and '-'"
    return None


def check_topic(name: Any) -> None:
    """Raise unless ``name`` is a valid topic name: ``TypeError`` for a non-``str``, else the
    broker's own ``InvalidTopicError`` (code 17) saying which rule the name breaks."""
    problem = topic_name_problem(name)
    if problem is None:
        return
    if not isinstance(name, str):
        raise TypeError(problem)
    raise errors.InvalidTopicError(problem)
