"""Asking a node for Metadata: the readiness check and the leader view the tests use."""

from __future__ import annotations

from ..client.blocking import BlockingConnection
from ..client.cluster_snapshot import ClusterSnapshot
from ..errors import raise_for_code
from ..protocol.apis import METADATA
from .config import HOST


def fetch_metadata(port: int, topics: list[str] | None = None, *, host: str = HOST,
                   timeout_s: float = 5.0) -> ClusterSnapshot:
    """One Metadata request to ``host:port`` (all topics when ``topics`` is ``None``).

    Raises ``OSError`` / ``KafkaError`` when the node does not answer.
    """
    body = {"topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False}
    with BlockingConnection(host, port, client_id="spark-kafka-sink-embedded", timeout_s=timeout_s) as conn:
        resp = conn.request(METADATA, body)
    raise_for_code(getattr(resp, "error_code", 0), f"Metadata from {host}:{port}")  # v13+
    return ClusterSnapshot.from_metadata_response(resp)

