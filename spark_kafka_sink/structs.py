"""Small immutable values shared by every layer."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class TopicPartition:
    """A partition of a topic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class Node:
    """A broker as advertised in Metadata. ``rack`` is ``None`` when the broker has none."""

    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class RecordMetadata:
    """Where a record landed: its partition, offset and the timestamp the broker kept."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    serialized_key_size: int = -1
    serialized_value_size: int = -1
