"""Asking a node for Metadata: the readiness check and the leader view the tests use."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..client.blocking import BlockingConnection
from ..errors import raise_for_code
from ..protocol.apis import METADATA
from .config import HOST


@dataclass(frozen=True)
class MetadataView:
    """What one Metadata response says: live brokers, the controller and partition leaders."""

    broker_ids: tuple[int, ...]
    controller_id: int
    cluster_id: str | None
    # topic -> partition -> leader id (-1: no leader); topics that answered with an error are absent.
    leaders: dict[str, dict[int, int]] = field(default_factory=dict)
    # topic -> error code, for the topics that answered with one.
    topic_errors: dict[str, int] = field(default_factory=dict)


def fetch_metadata(port: int, topics: list[str] | None = None, *, host: str = HOST,
                   timeout_s: float = 5.0) -> MetadataView:
    """One Metadata request to ``host:port`` (all topics when ``topics`` is ``None``).

    Raises ``OSError`` / ``KafkaError`` when the node does not answer.
    """
    body = {"topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False}
    with BlockingConnection(host, port, client_id="spark-kafka-sink-embedded", timeout_s=timeout_s) as conn:
        resp = conn.request(METADATA, body)
    raise_for_code(getattr(resp, "error_code", 0), f"Metadata from {host}:{port}")  # v13+
    leaders: dict[str, dict[int, int]] = {}
    errors: dict[str, int] = {}
    for topic in resp.topics or ():
        if topic.error_code:
            errors[topic.name] = topic.error_code
        else:
            leaders[topic.name] = {p.partition_index: p.leader_id for p in topic.partitions}
    return MetadataView(
        broker_ids=tuple(sorted(b.node_id for b in resp.brokers)),
        controller_id=resp.controller_id,
        cluster_id=getattr(resp, "cluster_id", None),
        leaders=leaders,
        topic_errors=errors,
    )


def metadata_broker_ids(port: int, *, host: str = HOST, timeout_s: float = 5.0) -> tuple[int, ...]:
    """The node ids of the live (unfenced) brokers that ``host:port`` reports."""
    return fetch_metadata(port, [], host=host, timeout_s=timeout_s).broker_ids
