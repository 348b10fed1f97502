"""The admin calls the demo, the jobs and the sink need: create a topic and wait until it is
usable (:func:`create_topic`), read a small partition back whole (:func:`read_partition`: the
exactly-once sink's commit log, read committed), describe topics (:func:`describe_topics`: the sink's
preflight), and set client quotas (:func:`alter_client_quotas`: a throttled cluster, to test
against).

A producer can write to a topic only once every partition has a leader, and right after
CreateTopics returns the leaders may not be elected yet; :func:`create_topic` waits for them,
bounded by ``timeout_s``. It speaks the wire protocol through
:class:`~spark_kafka_sink.client.blocking.BlockingConnection`, so it needs no other Kafka client.
On a secured listener pass the same ``config`` the producer takes (``security.protocol``,
``ssl.*``, ``sasl.*``): the connection uses its TLS and SASL settings.
"""

from __future__ import annotations

import heapq
import struct
import time
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Mapping

from .client.blocking import BlockingConnection
from .client.security import ConnectionSecurity
from .config import ProducerConfig
from .error_codes import ErrorCode
from .errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, error_for, raise_for_code
from .protocol import apis
from .protocol.messages.describe_configs import RESOURCE_TOPIC
from .record import read_batches
from .record.reader import Record, RecordBatch

__all__ = ["READ_COMMITTED", "READ_UNCOMMITTED", "CreatedTopic", "TopicDescription",
           "alter_client_quotas", "committed_batches", "create_topic", "describe_topics",
           "read_partition"]

_POLL_S = 0.1
BROKER_DEFAULT = -1
"""``partitions`` / ``replication_factor`` value meaning the broker's default (KIP-464)."""


@dataclass(frozen=True)
class CreatedTopic:
    """A topic ready to write: its ``leaders`` by partition, and whether this call ``created`` it
    (``False``: it already existed and ``exist_ok`` was given)."""

    name: str
    leaders: Mapping[int, int]
    created: bool

    @property
    def partitions(self) -> int:
        return len(self.leaders)


def _first_address(bootstrap: str) -> tuple[str, int]:
    first = bootstrap.split(",")[0].strip()
    host, sep, port = first.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"bootstrap servers must be host:port[,host:port...], got {bootstrap!r}")
    return host.strip("[]"), int(port)


def create_topic(bootstrap: str, name: str, partitions: int, *,
                 replication_factor: int = BROKER_DEFAULT, configs: Mapping[str, str] | None = None,
                 exist_ok: bool = False, timeout_s: float = 30.0,
                 config: ProducerConfig | Mapping[str, Any] | None = None) -> CreatedTopic:
    """Create ``name`` with ``partitions`` partitions (CreateTopics to the first bootstrap address)
    and return once every partition has a leader.

    ``replication_factor`` defaults to the broker's ``default.replication.factor``. Raises the
    broker's error (``TopicAlreadyExistsError`` unless ``exist_ok``), or :class:`KafkaError` when
    the leaders are not all elected within ``timeout_s``. ``config``: producer properties (or a
    ``ProducerConfig``) whose security settings apply; ``bootstrap.servers`` may be left out.
    """
    host, port = _first_address(bootstrap)
    security = connection_security(bootstrap, config)
    body = {"topics": [{"name": name, "num_partitions": partitions,
                        "replication_factor": replication_factor, "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout_ms": int(timeout_s * 1000), "validate_only": False}
    deadline = time.monotonic() + timeout_s
    created = True
    with BlockingConnection(host, port, timeout_s=timeout_s + 5, security=security) as conn:
        for result in conn.request(apis.CREATE_TOPICS, body).topics:
            if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and exist_ok:
                created = False
                continue
            raise_for_code(result.error_code, f"CreateTopics {name}: {result.error_message or ''}")
        while True:
            leaders = _leaders(conn, name)
            if leaders and (partitions == BROKER_DEFAULT or len(leaders) >= partitions) \
                    and all(leader >= 0 for leader in leaders.values()):
                return CreatedTopic(name, MappingProxyType(leaders), created)
            if time.monotonic() > deadline:
                raise KafkaError(f"topic {name}: not every partition has a leader after {timeout_s} s "
                                 f"(leaders: {leaders})")
            time.sleep(_POLL_S)


def alter_client_quotas(bootstrap: str, entity: Mapping[str, str | None],
                        quotas: Mapping[str, float | None], *, timeout_s: float = 30.0,
                        config: ProducerConfig | Mapping[str, Any] | None = None) -> None:
    """Set (or, for a ``None`` value, remove) ``quotas`` of ``entity`` (AlterClientQuotas,
    KIP-546), e.g. ``alter_client_quotas(bootstrap, {"client-id": None},
    {"producer_byte_rate": 1_048_576})`` for every client's default: the broker then throttles
    producers above 1 MiB/s. ``entity`` maps ``user``, ``client-id`` or ``ip`` to a name, or to
    ``None`` for that type's default. Raises the broker's error for the entity."""
    if not entity or not quotas:
        raise ValueError("alter_client_quotas needs an entity and at least one quota")
    host, port = _first_address(bootstrap)
    body = {"entries": [{
        "entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity.items()],
        "ops": [{"key": key, "value": 0.0 if value is None else float(value), "remove": value is None}
                for key, value in quotas.items()]}],
        "validate_only": False}
    with BlockingConnection(host, port, timeout_s=timeout_s,
                            security=connection_security(bootstrap, config)) as conn:
        for result in conn.request(apis.ALTER_CLIENT_QUOTAS, body).entries:
            raise_for_code(result.error_code,
                           f"AlterClientQuotas {dict(entity)}: {result.error_message or ''}")


@dataclass(frozen=True)
class TopicDescription:
    """What :func:`describe_topics` learnt of a topic: ``exists`` (``False``: the cluster does
    not know it), its partition count and its configuration (name -> value; empty when the topic
    is missing or describing it is not allowed, see ``config_error``). ``replication_factor`` is
    the fewest replicas any of its partitions has (0 when unknown), and ``cluster_brokers`` how
    many brokers the cluster's Metadata answer listed, to judge it by."""

    name: str
    exists: bool
    partitions: int = 0
    configs: Mapping[str, str | None] = field(default_factory=lambda: MappingProxyType({}))
    config_error: KafkaError | None = None
    replication_factor: int = 0
    cluster_brokers: int = 0


def describe_topics(bootstrap: str, topics: list[str], *, config_names: list[str] | None = None,
                    timeout_s: float = 10.0, auto_create: bool = False,
                    config: ProducerConfig | Mapping[str, Any] | None = None,
                    ) -> dict[str, TopicDescription]:
    """Each of ``topics`` as the cluster sees it (Metadata, then DescribeConfigs for those that
    exist; ``config_names``: only these configs). One connection, to the first bootstrap address
    that accepts one, with ``config``'s security (TLS, SASL), within ``timeout_s`` per address:
    it raises what connecting to the last or authenticating raises (``KafkaConnectionError``,
    ``AuthenticationError``). ``auto_create``: let the broker create a missing topic, as a
    producer's metadata request does. A topic the principal may not describe raises
    ``TopicAuthorizationFailedError``."""
    security = connection_security(bootstrap, config)
    addresses = [_first_address(address) for address in bootstrap.split(",") if address.strip()]
    for index, (host, port) in enumerate(addresses):
        try:
            conn = BlockingConnection(host, port, timeout_s=timeout_s, security=security)
        except (KafkaConnectionError, OSError):
            if index == len(addresses) - 1:
                raise
            continue
        break
    with conn:
        response = conn.request(apis.METADATA, {"topics": [{"name": t} for t in topics],
                                                "allow_auto_topic_creation": auto_create})
        found: dict[str, TopicDescription] = {}
        brokers = len(response.brokers)
        for t in response.topics:
            if t.error_code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_TOPIC_EXCEPTION):
                found[t.name] = TopicDescription(t.name, False, cluster_brokers=brokers)
                continue
            if t.error_code != ErrorCode.LEADER_NOT_AVAILABLE:     # that one: being created
                raise_for_code(t.error_code, f"Metadata for topic {t.name}")
            found[t.name] = TopicDescription(
                t.name, True, len(t.partitions), cluster_brokers=brokers,
                replication_factor=min((len(p.replica_nodes) for p in t.partitions), default=0))
        existing = [name for name in topics if found.get(name) and found[name].exists]
        if not existing:
            return found
        body = {"resources": [{"resource_type": RESOURCE_TOPIC, "resource_name": name,
                               "configuration_keys": config_names} for name in existing],
                "include_synonyms": False, "include_documentation": False}
        for result in conn.request(apis.DESCRIBE_CONFIGS, body).results:
            described = found[result.resource_name]
            if result.error_code != ErrorCode.NONE:
                error = error_for(result.error_code, f"DescribeConfigs for topic "
                                  f"{result.resource_name}: {result.error_message or ''}")
                found[result.resource_name] = replace(described, config_error=error)
                continue
            found[result.resource_name] = replace(
                described, configs=MappingProxyType({c.name: c.value for c in result.configs}))
    return found


def connection_security(bootstrap: str, config: ProducerConfig | Mapping[str, Any] | None,
                        ) -> ConnectionSecurity:
    """The TLS/SASL settings of ``config`` (plain TCP when None)."""
    if config is None:
        return ConnectionSecurity()
    if not isinstance(config, ProducerConfig):
        config = ProducerConfig({"bootstrap.servers": bootstrap, **config})
    return ConnectionSecurity.from_config(config)


def _leaders(conn: BlockingConnection, topic: str) -> dict[int, int]:
    response = conn.request(apis.METADATA, {"topics": [{"name": topic}],
                                            "allow_auto_topic_creation": False})
    return {p.partition_index: (p.leader_id if p.error_code == 0 else -1)
            for t in response.topics if t.error_code == 0 for p in t.partitions}


_READ_MAX_BYTES = 1 << 20
_LATEST, _EARLIEST = -1, -2
READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"
_ISOLATION = {READ_UNCOMMITTED: 0, READ_COMMITTED: 1}
_ABORT_MARKER = 0
"""A control record's type (the second int16 of its key): 0 aborts, 1 commits."""


def read_partition(bootstrap: str, topic: str, partition: int = 0, *, timeout_s: float = 30.0,
                   config: ProducerConfig | Mapping[str, Any] | None = None,
                   isolation_level: str = READ_UNCOMMITTED) -> list[Record]:
    """Every record of ``topic``-``partition`` from its log start to its end as of the call
    (control records left out), read from the leader with ListOffsets and Fetch. Meant for small,
    compacted topics: it holds them in memory. Retriable errors (a leader moving, a partition
    still loading) are retried until ``timeout_s``; others raise.

    ``isolation_level`` as a consumer's ``isolation.level``: ``read_uncommitted`` (the default)
    reads every record; ``read_committed`` leaves out the records of aborted transactions and
    first waits, up to ``timeout_s``, until every transaction with records below the end as of
    the call is decided (the last stable offset reaches that end), so that it returns every
    record committed before the call, never a stale view; a transaction still open then raises
    ``KafkaTimeoutError`` naming its first offset."""
    if isolation_level not in _ISOLATION:
        raise ValueError(f"isolation_level must be {READ_UNCOMMITTED!r} or {READ_COMMITTED!r}, "
                         f"got {isolation_level!r}")
    committed = isolation_level == READ_COMMITTED
    deadline = time.monotonic() + timeout_s
    security = connection_security(bootstrap, config)
    host, port = _first_address(bootstrap)
    end: int | None = None                       # read_committed: the end as of the call
    while True:
        try:
            with BlockingConnection(host, port, timeout_s=timeout_s, security=security) as conn:
                leader = _leader_address(conn, topic, partition)
            with BlockingConnection(*leader, timeout_s=timeout_s, security=security) as conn:
                start = _list_offset(conn, topic, partition, _EARLIEST)
                high = _list_offset(conn, topic, partition, _LATEST)
                if not committed:
                    return _fetch_range(conn, topic, partition, start, high, deadline)
                end = high if end is None else end
                stable = _list_offset(conn, topic, partition, _LATEST, isolation=1)
                if stable >= end:
                    return _fetch_range(conn, topic, partition, start, stable, deadline,
                                        isolation=1)
            if time.monotonic() > deadline:
                raise KafkaTimeoutError(
                    f"reading {topic}-{partition} read_committed: a transaction open since offset "
                    f"{stable} is still undecided after {timeout_s:.0f} s (the log ends at {end}); "
                    "it ends when its producer commits or aborts, when another producer with its "
                    "transactional.id initializes, or after its transaction.timeout.ms")
            time.sleep(_POLL_S)
        except KafkaError as error:
            if not getattr(error, "retriable", False) or time.monotonic() > deadline:
                raise
            time.sleep(_POLL_S)


def _leader_address(conn: BlockingConnection, topic: str, partition: int) -> tuple[str, int]:
    response = conn.request(apis.METADATA, {"topics": [{"name": topic}],
                                            "allow_auto_topic_creation": False})
    brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
    for t in response.topics:
        raise_for_code(t.error_code, f"Metadata for topic {topic}")
        for p in t.partitions:
            if p.partition_index == partition:
                raise_for_code(p.error_code, f"Metadata for {topic}-{partition}")
                if p.leader_id in brokers:
                    return brokers[p.leader_id]
    raise error_for(5, f"{topic}-{partition} has no leader yet")   # LEADER_NOT_AVAILABLE


def _list_offset(conn: BlockingConnection, topic: str, partition: int, timestamp: int, *,
                 isolation: int = 0) -> int:
    response = conn.request(apis.LIST_OFFSETS, {
        "replica_id": -1, "isolation_level": isolation, "topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "timestamp": timestamp}]}]})
    for t in response.topics:
        for p in t.partitions:
            raise_for_code(p.error_code, f"ListOffsets for {topic}-{partition}")
            return p.offset
    raise KafkaError(f"ListOffsets for {topic}-{partition}: no answer for the partition")


def _fetch_range(conn: BlockingConnection, topic: str, partition: int, start: int, end: int,
                 deadline: float, *, isolation: int = 0) -> list[Record]:
    records: list[Record] = []
    offset = start
    while offset < end:
        if time.monotonic() > deadline:
            raise KafkaError(f"reading {topic}-{partition}: offsets {offset}..{end} not read in time")
        response = conn.request(apis.FETCH, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": _READ_MAX_BYTES,
            "isolation_level": isolation,
            "topics": [{"topic": topic, "partitions": [
                {"partition": partition, "fetch_offset": offset,
                 "partition_max_bytes": _READ_MAX_BYTES}]}],
            "forgotten_topics_data": []})
        raise_for_code(response.error_code, f"Fetch for {topic}-{partition}")
        data = next(p for t in response.responses for p in t.partitions
                    if p.partition_index == partition)
        raise_for_code(data.error_code, f"Fetch for {topic}-{partition} at offset {offset}")
        batches = list(read_batches(data.records or b""))
        if not any(batch.last_offset >= offset for batch in batches):
            raise KafkaError(f"reading {topic}-{partition}: no batch at offset {offset} (end {end}): "
                             "a record larger than the fetch size?")
        kept = batches if not isolation else committed_batches(
            batches, [(a.producer_id, a.first_offset) for a in data.aborted_transactions or ()])
        records.extend(r for batch in kept if not batch.is_control
                       for r in batch.records if offset <= r.offset < end)
        offset = max(offset, max(batch.last_offset for batch in batches) + 1)
    return records


def committed_batches(batches: list[RecordBatch],
                      aborted: list[tuple[int, int]]) -> list[RecordBatch]:
    """The batches of one read_committed Fetch answer that are not part of an aborted
    transaction, in order (control batches included). ``aborted``: the answer's aborted
    transactions, ``(producer_id, first_offset)``. Kafka's consumer does the same: a producer's
    transactional batches are dropped from its aborted transaction's first offset until its
    abort marker."""
    pending = sorted((first, producer_id) for producer_id, first in aborted)
    aborting: set[int] = set()
    kept = []
    for batch in batches:
        if batch.producer_id >= 0:
            while pending and pending[0][0] <= batch.last_offset:
                aborting.add(heapq.heappop(pending)[1])
            if batch.is_control and _is_abort_marker(batch):
                aborting.discard(batch.producer_id)
            elif batch.is_transactional and batch.producer_id in aborting:
                continue
        kept.append(batch)
    return kept


def _is_abort_marker(batch: RecordBatch) -> bool:
    key = batch.records[0].key if batch.records else None
    return key is not None and len(key) >= 4 and struct.unpack(">hh", key[:4])[1] == _ABORT_MARKER
