"""Admin helpers for tests that need topics on a real broker (over BlockingConnection)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from spark_kafka_sink import admin
from spark_kafka_sink.client.blocking import BlockingConnection
from spark_kafka_sink.errors import CorruptMessageError, KafkaError, for_code, raise_for_code
from spark_kafka_sink.protocol import apis

T = TypeVar("T")


# Tests write fixed, historical record timestamps (reproducible data, edge cases such as 0). Under
# the default retention.ms (7 days) the broker would roll and delete those segments within one
# retention check (10 s on the embedded broker) and readers would find records missing.
KEEP_FOREVER = {"retention.ms": "-1"}


def addresses(bootstrap: str) -> list[tuple[str, int]]:
    """``"h1:p1,h2:p2"`` → ``[("h1", p1), ("h2", p2)]``."""
    out = []
    for item in bootstrap.split(","):
        host, port = item.strip().rsplit(":", 1)
        out.append((host, int(port)))
    return out


def wait_for(check: Callable[[], T | None], timeout_s: float, what: str, interval_s: float = 0.1) -> T:
    """Call ``check`` until it returns something truthy; AssertionError naming ``what`` on timeout.

    Exceptions from ``check`` (a node that is down, a leader not yet elected) count as "not yet".
    """
    deadline = time.monotonic() + timeout_s
    last: object = None
    while True:
        try:
            result = check()
            if result:
                return result
            last = result
        except (OSError, KafkaError) as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what} (last: {last!r})")
        time.sleep(interval_s)


def metadata(bootstrap: str, topics: list[str], timeout_s: float = 5.0):
    """One Metadata response for ``topics``, from the first address of ``bootstrap`` that answers."""
    last: Exception | None = None
    for host, port in addresses(bootstrap):
        try:
            with BlockingConnection(host, port, timeout_s=timeout_s) as conn:
                return conn.request(apis.METADATA, {"topics": [{"name": t} for t in topics],
                                                    "allow_auto_topic_creation": False})
        except (OSError, KafkaError) as exc:
            last = exc
    raise KafkaError(f"no broker of {bootstrap} answered Metadata: {last!r}")


def partition_leaders(bootstrap: str, topic: str, timeout_s: float = 5.0) -> dict[int, int]:
    """``{partition: leader id}`` from one Metadata response of the first address that answers."""
    for found in metadata(bootstrap, [topic], timeout_s).topics:
        raise_for_code(found.error_code, f"Metadata for topic {topic}")
        return {p.partition_index: p.leader_id for p in found.partitions}
    return {}


def leader_address(bootstrap: str, topic: str, partition: int, timeout_s: float = 5.0) -> tuple[str, int]:
    """``(host, port)`` of the current leader of ``topic``-``partition``."""
    resp = metadata(bootstrap, [topic], timeout_s)
    brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
    for found in resp.topics:
        raise_for_code(found.error_code, f"Metadata for topic {topic}")
        for p in found.partitions:
            if p.partition_index == partition and p.leader_id in brokers:
                return brokers[p.leader_id]
    raise KafkaError(f"{topic}-{partition} has no leader in the Metadata of {bootstrap}")


def produce(bootstrap: str, topic: str, partition: int, batch: bytes, *, acks: int = -1,
            attempts: int = 20):
    """One Produce of ``batch`` to the partition's leader; the partition's response.

    Right after a topic is created a broker may briefly answer NOT_LEADER_OR_FOLLOWER before it
    has applied its own leadership, so retriable errors are retried (a bounded number of times);
    CORRUPT_MESSAGE and every other outcome are returned as they are.
    """
    for _ in range(attempts):
        host, port = leader_address(bootstrap, topic, partition)
        with BlockingConnection(host, port) as conn:
            response = conn.request(apis.PRODUCE, {
                "acks": acks, "timeout_ms": 30_000,
                "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
            })
        part = response.responses[0].partition_responses[0]
        error = for_code(part.error_code)
        if error is None or not error.retriable or error is CorruptMessageError:
            return part
        time.sleep(0.1)
    return part


def create_topic(bootstrap: str, name: str, partitions: int = 1, replication_factor: int = 1, *,
                 configs: Mapping[str, str] | None = None, exist_ok: bool = False,
                 timeout_s: float = 30.0) -> dict[int, int]:
    """Create ``name`` and wait until every partition has a leader (``spark_kafka_sink.admin``).

    Topics keep their data forever (``KEEP_FOREVER``) unless ``configs`` says otherwise.

    Returns ``{partition: leader id}``. Raises the broker's error (e.g. ``TopicAlreadyExistsError``
    unless ``exist_ok``).
    """
    created = admin.create_topic(bootstrap, name, partitions, replication_factor=replication_factor,
                                 configs={**KEEP_FOREVER, **(configs or {})}, exist_ok=exist_ok,
                                 timeout_s=timeout_s)
    return dict(created.leaders)
