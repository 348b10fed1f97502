"""The admin calls the demo, the jobs, the sink and the ``spark-kafka-sink`` command need: create a
topic and wait until it is usable (:func:`create_topic`), describe topics (:func:`describe_topics`:
the sink's preflight, ``topics describe``) and the cluster with its topics
(:func:`describe_cluster`: ``topics list``), read a small partition back whole
(:func:`read_partition`: the exactly-once sink's commit log, read committed), read a bounded run
of records from a topic's partitions (:func:`read_records`: ``tail``), and set client quotas
(:func:`alter_client_quotas`: a throttled cluster, to test against).

A producer can write to a topic only once every partition has a leader, and right after
CreateTopics returns the leaders may not be elected yet; :func:`create_topic` waits for them,
bounded by ``timeout_s``. It speaks the wire protocol through
:class:`~spark_kafka_sink.client.blocking.BlockingConnection`, so it needs no other Kafka client.
On a secured listener pass the same ``config`` the producer takes (``security.protocol``,
``ssl.*``, ``sasl.*``): the connection uses its TLS and SASL settings.

The reads (ListOffsets, then Fetch from each partition's leader) decode batches with
:mod:`~spark_kafka_sink.record`; ``read_committed`` leaves out aborted transactions' records as
Kafka's consumer does (:func:`committed_batches`).
"""

from __future__ import annotations

import heapq
import struct
import time
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Iterator, Mapping, Sequence

from .client.blocking import BlockingConnection
from .client.security import ConnectionSecurity
from .config import ProducerConfig
from .error_codes import ErrorCode
from .errors import (KafkaConnectionError, KafkaError, KafkaTimeoutError,
                     UnknownTopicOrPartitionError, error_for, raise_for_code)
from .protocol import apis
from .protocol.messages.describe_configs import CONFIG_SOURCE_TOPIC, RESOURCE_TOPIC
from .record import read_batches
from .record.layout import TimestampType
from .record.reader import Header, Record, RecordBatch
from .structs import Node

__all__ = ["READ_COMMITTED", "READ_UNCOMMITTED", "ClusterDescription", "CreatedTopic",
           "FetchedRecord", "PartitionRead", "PartitionState", "TopicDescription", "TopicListing",
           "alter_client_quotas", "committed_batches", "create_topic", "describe_cluster",
           "describe_topics", "read_partition", "read_records"]

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
class PartitionState:
    """A partition as Metadata describes it, by broker id: its ``leader`` (-1: none), its
    ``replicas``, the in-sync ones (``isr``) and the ``offline`` ones."""

    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicDescription:
    """What :func:`describe_topics` learnt of a topic: ``exists`` (``False``: the cluster does
    not know it), its partition count and its configuration (name -> value; empty when the topic
    is missing or describing it is not allowed, see ``config_error``). ``replication_factor`` is
    the fewest replicas any of its partitions has (0 when unknown), and ``cluster_brokers`` how
    many brokers the cluster's Metadata answer listed, to judge it by. ``partition_states``: each
    partition's leader and replicas, in partition order; ``overridden``: the names of the configs
    set on the topic itself (the others are the broker's or Kafka's defaults)."""

    name: str
    exists: bool
    partitions: int = 0
    configs: Mapping[str, str | None] = field(default_factory=lambda: MappingProxyType({}))
    config_error: KafkaError | None = None
    replication_factor: int = 0
    cluster_brokers: int = 0
    partition_states: tuple[PartitionState, ...] = ()
    overridden: frozenset[str] = frozenset()


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
    with _connect(bootstrap, connection_security(bootstrap, config), timeout_s) as conn:
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
                replication_factor=min((len(p.replica_nodes) for p in t.partitions), default=0),
                partition_states=_partition_states(t.partitions))
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
                described, configs=MappingProxyType({c.name: c.value for c in result.configs}),
                overridden=frozenset(c.name for c in result.configs
                                     if c.config_source == CONFIG_SOURCE_TOPIC))
    return found


@dataclass(frozen=True)
class TopicListing:
    """A topic as :func:`describe_cluster` lists it: its partition count, the fewest replicas any
    of its partitions has, and whether it is one of Kafka's ``internal`` topics
    (``__consumer_offsets``, ``__transaction_state``)."""

    name: str
    partitions: int
    replication_factor: int
    internal: bool = False


@dataclass(frozen=True)
class ClusterDescription:
    """The cluster as one Metadata answer (all topics) describes it: its id, the controller's
    broker id (-1: not told), its brokers and its topics (by name)."""

    cluster_id: str | None
    controller_id: int
    brokers: tuple[Node, ...]
    topics: tuple[TopicListing, ...]


def describe_cluster(bootstrap: str, *, timeout_s: float = 10.0,
                     config: ProducerConfig | Mapping[str, Any] | None = None,
                     ) -> ClusterDescription:
    """The cluster's brokers and every topic the principal may describe (one Metadata request
    for all topics, to the first bootstrap address that accepts a connection within
    ``timeout_s``, with ``config``'s security). Raises what connecting or authenticating
    raises."""
    with _connect(bootstrap, connection_security(bootstrap, config), timeout_s) as conn:
        response = conn.request(apis.METADATA, {"topics": None, "allow_auto_topic_creation": False})
    raise_for_code(response.error_code, "Metadata for all topics")
    brokers = tuple(sorted((Node(b.node_id, b.host, b.port, b.rack) for b in response.brokers),
                           key=lambda node: node.node_id))
    topics = tuple(sorted(
        (TopicListing(t.name, len(t.partitions),
                      min((len(p.replica_nodes) for p in t.partitions), default=0), t.is_internal)
         for t in response.topics if t.name is not None),
        key=lambda listing: listing.name))
    return ClusterDescription(response.cluster_id, response.controller_id, brokers, topics)


def _partition_states(partitions) -> tuple[PartitionState, ...]:
    return tuple(sorted(
        (PartitionState(p.partition_index, p.leader_id if p.error_code == 0 else -1,
                        tuple(p.replica_nodes), tuple(p.isr_nodes),
                        tuple(p.offline_replicas or ()))
         for p in partitions), key=lambda state: state.partition))


def _connect(bootstrap: str, security: ConnectionSecurity, timeout_s: float) -> BlockingConnection:
    """A connection to the first of ``bootstrap``'s addresses that accepts one within
    ``timeout_s``; the last one's error when none does."""
    addresses = [_first_address(address) for address in bootstrap.split(",") if address.strip()]
    for index, (host, port) in enumerate(addresses):
        try:
            return BlockingConnection(host, port, timeout_s=timeout_s, security=security)
        except (KafkaConnectionError, OSError):
            if index == len(addresses) - 1:
                raise
    raise ValueError(f"bootstrap servers must be host:port[,host:port...], got {bootstrap!r}")


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
    committed = _isolation(isolation_level) == _ISOLATION[READ_COMMITTED]
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
    return [record for batch in _fetch_batches(conn, topic, partition, start, end, deadline,
                                               isolation=isolation)
            for record in batch.records if start <= record.offset < end]


def _fetch_batches(conn: BlockingConnection, topic: str, partition: int, start: int, end: int,
                   deadline: float, *, isolation: int = 0) -> Iterator[RecordBatch]:
    """The data batches holding ``topic``-``partition``'s offsets ``start``..``end`` (end
    excluded), fetched one answer at a time (at read_committed, those of aborted transactions
    left out); their first and last records may lie outside the range."""
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
        yield from (batch for batch in kept if not batch.is_control)
        offset = max(offset, max(batch.last_offset for batch in batches) + 1)


@dataclass(frozen=True)
class FetchedRecord:
    """One record as :func:`read_records` read it: where it sits, its timestamp (milliseconds
    since the epoch) and the type of that timestamp, its key and value (``None``: null) and its
    headers."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True)
class PartitionRead:
    """What :func:`read_records` read of one partition: ``records`` from offset ``first`` on.
    ``log_start`` and ``end`` bound what there was to read (``end``: the high watermark, or at
    read_committed the last stable offset); ``high_watermark`` is the log's end. ``more``: it
    stopped at ``max_records`` before ``end``."""

    partition: int
    log_start: int
    first: int
    end: int
    high_watermark: int
    records: tuple[FetchedRecord, ...]
    more: bool = False

    @property
    def undecided(self) -> bool:
        """At read_committed: a transaction still open holds the records from ``end`` on."""
        return self.end < self.high_watermark


def read_records(bootstrap: str, topic: str, partitions: Sequence[int] | None = None, *,
                 offset: int | None = None, max_records: int | None = None,
                 isolation_level: str = READ_UNCOMMITTED, timeout_s: float = 10.0,
                 config: ProducerConfig | Mapping[str, Any] | None = None,
                 ) -> tuple[PartitionRead, ...]:
    """Records of ``topic``'s ``partitions`` (default: all), one :class:`PartitionRead` each in
    the order asked (once each), read from each leader with ListOffsets and Fetch up to the
    partition's end as of the call; it never waits for new records.

    ``offset``: where each partition's read starts; ``None``: its log start; ``n >= 0``: offset
    ``n`` (clamped between the log start and the end); ``-n``: ``n`` offsets before the end.
    ``max_records``: at most that many records per partition. ``isolation_level`` as a
    consumer's: ``read_committed`` reads up to the last stable offset (a transaction still open
    hides what follows it, see :attr:`PartitionRead.undecided`) and leaves out the records of
    aborted transactions. Bounded by ``timeout_s`` in all: a broker's retriable errors (a leader
    moving) are retried until then; a connection that fails raises ``KafkaConnectionError``, and
    a topic the cluster does not know, or a partition it does not have,
    ``UnknownTopicOrPartitionError``, at once."""
    isolation = _isolation(isolation_level)
    if max_records is not None and max_records < 0:
        raise ValueError(f"max_records must be at least 0, got {max_records}")
    deadline = time.monotonic() + timeout_s
    security = connection_security(bootstrap, config)

    def remaining() -> float:
        return max(0.1, deadline - time.monotonic())

    while True:
        try:
            with _connect(bootstrap, security, remaining()) as conn:
                leaders = _leaders_of(conn, topic)
            wanted = sorted(leaders) if partitions is None else list(dict.fromkeys(partitions))
            missing = [p for p in wanted if p not in leaders]
            if missing:
                raise UnknownTopicOrPartitionError(
                    f"topic {topic!r} has no partition {missing[0]} (it has partitions "
                    f"0..{len(leaders) - 1})")
            read: dict[int, PartitionRead] = {}
            for address in dict.fromkeys(leaders[p] for p in wanted):
                if address is None:
                    raise error_for(5, f"{topic}: a partition has no leader yet")
                with BlockingConnection(*address, timeout_s=remaining(), security=security) as conn:
                    for p in (p for p in wanted if leaders[p] == address):
                        read[p] = _read_partition_run(conn, topic, p, offset, max_records,
                                                      isolation, deadline)
            return tuple(read[p] for p in wanted)
        except (UnknownTopicOrPartitionError, KafkaConnectionError):
            raise
        except KafkaError as error:
            if not getattr(error, "retriable", False) or time.monotonic() > deadline:
                raise
            time.sleep(_POLL_S)


def _isolation(isolation_level: str) -> int:
    if isolation_level not in _ISOLATION:
        raise ValueError(f"isolation_level must be {READ_UNCOMMITTED!r} or {READ_COMMITTED!r}, "
                         f"got {isolation_level!r}")
    return _ISOLATION[isolation_level]


def _leaders_of(conn: BlockingConnection, topic: str) -> dict[int, tuple[str, int] | None]:
    """``topic``'s partitions -> their leader's address (``None``: no leader now);
    ``UnknownTopicOrPartitionError`` when the cluster does not know the topic."""
    response = conn.request(apis.METADATA, {"topics": [{"name": topic}],
                                            "allow_auto_topic_creation": False})
    brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
    leaders: dict[int, tuple[str, int] | None] = {}
    for t in response.topics:
        if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        raise_for_code(t.error_code, f"Metadata for topic {topic}")
        for p in t.partitions:
            leaders[p.partition_index] = brokers.get(p.leader_id) if p.error_code == 0 else None
    if not leaders:
        raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
    return leaders


def _read_partition_run(conn: BlockingConnection, topic: str, partition: int, offset: int | None,
                        max_records: int | None, isolation: int, deadline: float) -> PartitionRead:
    log_start = _list_offset(conn, topic, partition, _EARLIEST)
    high = _list_offset(conn, topic, partition, _LATEST)
    end = _list_offset(conn, topic, partition, _LATEST, isolation=1) if isolation else high
    if offset is None:
        first = log_start
    elif offset < 0:
        first = max(log_start, end + offset)
    else:
        first = min(max(offset, log_start), end)
    limit = end - first if max_records is None else max_records
    records: list[FetchedRecord] = []
    more = False
    if limit > 0:
        for batch in _fetch_batches(conn, topic, partition, first, end, deadline, isolation=isolation):
            kind = batch.timestamp_type
            for r in batch.records:
                if not first <= r.offset < end:
                    continue
                if len(records) == limit:
                    more = True
                    break
                records.append(FetchedRecord(topic, partition, r.offset, r.timestamp_ms, kind,
                                             r.key, r.value, r.headers))
            if more:
                break
    else:
        more = first < end
    return PartitionRead(partition, log_start, first, end, high, tuple(records), more)


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
