"""ClusterSnapshot: an immutable view of the cluster as one Metadata response described it.

The partitioner, the accumulator and the sender read a snapshot; the metadata manager replaces
the whole snapshot when a new response arrives, so readers never see a half-applied update and
need no lock. Lookups the hot paths make (leader of a partition, partitions of a topic, partitions
led by a node) are precomputed once per snapshot.

Before the first Metadata response the producer only knows its bootstrap addresses:
``ClusterSnapshot.bootstrap(addresses)`` gives those negative node ids (-1, -2, ...) as the Java
client does, and no partitions.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Mapping

from ..structs import Node, TopicPartition

NO_LEADER = -1


@dataclass(frozen=True)
class PartitionInfo:
    """One partition's state: leader (``NO_LEADER`` when none), epoch and replica sets."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class ClusterSnapshot:
    """Immutable nodes, partitions and per-topic errors; see the module docstring."""

    __slots__ = ("_cluster_id", "_controller_id", "_nodes", "_partitions", "_by_topic",
                 "_available", "_by_node", "_topic_errors", "topics_with_partitions")

    def __init__(self, nodes: Iterable[Node] = (), partitions: Iterable[PartitionInfo] = (), *,
                 cluster_id: str | None = None, controller_id: int = -1,
                 topic_errors: Mapping[str, int] | None = None):
        self._cluster_id = cluster_id
        self._controller_id = controller_id
        self._nodes = MappingProxyType({node.node_id: node for node in nodes})
        self._partitions = MappingProxyType({p.topic_partition: p for p in partitions})
        self._topic_errors = MappingProxyType(dict(topic_errors or {}))
        by_topic: dict[str, list[PartitionInfo]] = {}
        by_node: dict[int, list[TopicPartition]] = {}
        for info in sorted(self._partitions.values(), key=lambda p: (p.topic, p.partition)):
            by_topic.setdefault(info.topic, []).append(info)
            if info.leader in self._nodes:
                by_node.setdefault(info.leader, []).append(info.topic_partition)
        self._by_topic = {topic: tuple(infos) for topic, infos in by_topic.items()}
        # the topics whose partition_count is truthy, as a set: Metadata.used_snapshot tests
        # membership once per record, and a method call costs more than the test
        self.topics_with_partitions: frozenset[str] = frozenset(self._by_topic)
        self._available = {topic: tuple(p.partition for p in infos if p.leader in self._nodes)
                           for topic, infos in self._by_topic.items()}
        self._by_node = {node_id: tuple(tps) for node_id, tps in by_node.items()}

    def with_leaders(self, leaders: Mapping[TopicPartition, tuple[int, int]],
                     nodes: Iterable[Node] = ()) -> tuple["ClusterSnapshot", frozenset[TopicPartition]]:
        """This snapshot with the partitions of ``leaders`` (tp -> (leader id, leader epoch))
        moved to their new leader (KIP-951 hints in a Produce response), and ``nodes`` added or
        refreshed; with the partitions that moved. A hint applies only to a partition this
        snapshot knows, with a newer epoch than it has, to a leader it knows or is given."""
        known_nodes = dict(self._nodes)
        known_nodes.update({node.node_id: node for node in nodes})
        partitions = dict(self._partitions)
        moved = set()
        for tp, (leader, epoch) in leaders.items():
            info = partitions.get(tp)
            if info is None or leader < 0 or leader not in known_nodes:
                continue
            if info.leader_epoch >= 0 and epoch <= info.leader_epoch:
                continue
            partitions[tp] = PartitionInfo(info.topic, info.partition, leader, epoch, info.replicas,
                                           info.isr, info.offline_replicas)
            moved.add(tp)
        if not moved:
            return self, frozenset()
        return (ClusterSnapshot(known_nodes.values(), partitions.values(), cluster_id=self._cluster_id,
                                controller_id=self._controller_id, topic_errors=self._topic_errors),
                frozenset(moved))

    @classmethod
    def bootstrap(cls, addresses: Iterable[tuple[str, int]]) -> "ClusterSnapshot":
        """The cluster before any Metadata: bootstrap addresses as nodes -1, -2, ..."""
        return cls(Node(-(i + 1), host, port) for i, (host, port) in enumerate(addresses))

    @classmethod
    def from_metadata_response(cls, response) -> "ClusterSnapshot":
        """A snapshot of a decoded Metadata response (v4+); topics with an error keep only it."""
        nodes = [Node(b.node_id, b.host, b.port, b.rack) for b in response.brokers]
        partitions, errors = [], {}
        for topic in response.topics:
            if topic.error_code:
                errors[topic.name] = topic.error_code
                continue
            for p in topic.partitions:
                partitions.append(PartitionInfo(
                    topic.name, p.partition_index, p.leader_id, p.leader_epoch,
                    tuple(p.replica_nodes), tuple(p.isr_nodes), tuple(p.offline_replicas)))
        return cls(nodes, partitions, cluster_id=response.cluster_id,
                   controller_id=response.controller_id, topic_errors=errors)

    @property
    def cluster_id(self) -> str | None:
        return self._cluster_id

    @property
    def controller_id(self) -> int:
        return self._controller_id

    @property
    def nodes(self) -> Mapping[int, Node]:
        """node id -> Node."""
        return self._nodes

    @property
    def topics(self) -> frozenset[str]:
        """Topics with partition information."""
        return frozenset(self._by_topic)

    def node(self, node_id: int) -> Node | None:
        return self._nodes.get(node_id)

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        return self._partitions.get(tp)

    def leader_for(self, tp: TopicPartition) -> Node | None:
        """The leader's Node, or ``None`` when the partition is unknown or has no live leader."""
        info = self._partitions.get(tp)
        return None if info is None else self._nodes.get(info.leader)

    def partitions_for(self, topic: str) -> tuple[PartitionInfo, ...]:
        """The topic's partitions in partition order; empty when the topic is unknown."""
        return self._by_topic.get(topic, ())

    def partition_count(self, topic: str) -> int | None:
        """How many partitions ``topic`` has, or ``None`` when it is unknown."""
        infos = self._by_topic.get(topic)
        return None if infos is None else len(infos)

    def available_partitions_for(self, topic: str) -> tuple[int, ...]:
        """Partition numbers of ``topic`` whose leader is a known node."""
        return self._available.get(topic, ())

    def partitions_for_node(self, node_id: int) -> tuple[TopicPartition, ...]:
        """Partitions led by ``node_id``, ordered by topic then partition."""
        return self._by_node.get(node_id, ())

    def topic_error(self, topic: str) -> int:
        """The error code Metadata gave for ``topic`` (0 when none)."""
        return self._topic_errors.get(topic, 0)

    def __repr__(self) -> str:
        return (f"ClusterSnapshot(cluster_id={self._cluster_id!r}, nodes={sorted(self._nodes)}, "
                f"topics={sorted(self._by_topic)}, partitions={len(self._partitions)})")
