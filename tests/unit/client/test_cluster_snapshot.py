"""ClusterSnapshot: lookups precomputed from a Metadata response; bootstrap view."""

from __future__ import annotations

import pytest

from spark_kafka_sink.client.cluster_snapshot import NO_LEADER, ClusterSnapshot, PartitionInfo
from spark_kafka_sink.protocol import apis
from spark_kafka_sink.structs import Node, TopicPartition


def _metadata_response(version: int = 12):
    body = {
        "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9001, "rack": "r1"},
                    {"node_id": 2, "host": "127.0.0.1", "port": 9002}],
        "cluster_id": "abc", "controller_id": 2,
        "topics": [
            {"name": "t", "error_code": 0, "partitions": [
                {"partition_index": 1, "leader_id": 2, "leader_epoch": 7, "replica_nodes": [2, 1],
                 "isr_nodes": [2], "offline_replicas": [1]},
                {"partition_index": 0, "leader_id": 1, "leader_epoch": 3, "replica_nodes": [1, 2],
                 "isr_nodes": [1, 2]},
                {"partition_index": 2, "error_code": 5, "leader_id": NO_LEADER, "replica_nodes": [1]},
            ]},
            {"name": "missing", "error_code": 3, "partitions": []},
        ],
    }
    data = apis.METADATA.encode_response(version, body)
    return apis.METADATA.decode_response(version, data)


def test_from_metadata_response_indexes_leaders_topics_and_nodes():
    snap = ClusterSnapshot.from_metadata_response(_metadata_response())
    assert snap.cluster_id == "abc" and snap.controller_id == 2
    assert snap.nodes[1] == Node(1, "127.0.0.1", 9001, "r1")
    assert [p.partition for p in snap.partitions_for("t")] == [0, 1, 2]
    assert snap.partition_count("t") == 3
    assert snap.available_partitions_for("t") == (0, 1)
    assert snap.leader_for(TopicPartition("t", 1)) == snap.nodes[2]
    assert snap.leader_for(TopicPartition("t", 2)) is None
    assert snap.partition(TopicPartition("t", 1)) == PartitionInfo("t", 1, 2, 7, (2, 1), (2,), (1,))
    assert snap.partitions_for_node(1) == (TopicPartition("t", 0),)
    assert snap.partitions_for_node(2) == (TopicPartition("t", 1),)
    assert snap.topics == frozenset({"t"})
    assert snap.topic_error("missing") == 3 and snap.topic_error("t") == 0


def test_unknown_topic_and_partition():
    snap = ClusterSnapshot.from_metadata_response(_metadata_response())
    assert snap.partitions_for("nope") == ()
    assert snap.partition_count("nope") is None
    assert snap.available_partitions_for("nope") == ()
    assert snap.leader_for(TopicPartition("t", 99)) is None
    assert snap.partitions_for_node(42) == ()


def test_a_leader_absent_from_brokers_is_not_available():
    snap = ClusterSnapshot([Node(1, "h", 1)], [PartitionInfo("t", 0, 1), PartitionInfo("t", 1, 3)])
    assert snap.available_partitions_for("t") == (0,)
    assert snap.leader_for(TopicPartition("t", 1)) is None
    assert snap.partitions_for_node(3) == ()


def test_bootstrap_uses_negative_ids_and_knows_no_partitions():
    snap = ClusterSnapshot.bootstrap([("127.0.0.1", 9092), ("127.0.0.2", 9093)])
    assert sorted(snap.nodes) == [-2, -1]
    assert snap.node(-2) == Node(-2, "127.0.0.2", 9093)
    assert snap.topics == frozenset()


def test_snapshot_cannot_be_mutated():
    snap = ClusterSnapshot([Node(1, "h", 1)])
    with pytest.raises(TypeError):
        snap.nodes[2] = Node(2, "h", 2)
    with pytest.raises(AttributeError):
        snap.cluster_id = "other"
    assert "nodes=[1]" in repr(snap)


def test_topics_with_partitions_is_exactly_the_topics_with_a_partition_count():
    snap = ClusterSnapshot([Node(1, "h", 1)], [PartitionInfo("t", 0, 1), PartitionInfo("t", 1, 1),
                                               PartitionInfo("no-leader", 0, -1)],
                           topic_errors={"bad": 3})
    assert snap.topics_with_partitions == {"t", "no-leader"}
    for topic in ("t", "no-leader", "bad", "nope"):
        assert (topic in snap.topics_with_partitions) == bool(snap.partition_count(topic))
    assert ClusterSnapshot().topics_with_partitions == frozenset()


def test_a_leader_hint_naming_a_node_with_no_known_address_is_ignored():
    snap = ClusterSnapshot.from_metadata_response(_metadata_response())
    tp = TopicPartition("t", 0)                                  # led by node 1, epoch 3
    same, moved = snap.with_leaders({tp: (9, 4)})                # node 9: no address known
    assert same is snap and moved == frozenset()
    assert snap.leader_for(tp) == snap.nodes[1]
    hinted, moved = snap.with_leaders({tp: (9, 4)}, [Node(9, "127.0.0.1", 9009)])
    assert moved == {tp} and hinted.leader_for(tp) == Node(9, "127.0.0.1", 9009)
