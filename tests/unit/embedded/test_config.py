"""The generated server.properties for one and three nodes."""

from __future__ import annotations

from pathlib import Path

from spark_kafka_sink.embedded.cluster import new_cluster_id
from spark_kafka_sink.embedded.config import NodeAddress, render, server_properties
from spark_kafka_sink.embedded.java import _min_heap

ONE = [NodeAddress(1, 9092, 9093)]
THREE = [NodeAddress(1, 9092, 9093), NodeAddress(2, 9094, 9095), NodeAddress(3, 9096, 9097)]


def test_single_node_is_combined_on_loopback_with_replication_1():
    props = server_properties(ONE[0], ONE, Path("/d"))
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092"
    for key in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                "default.replication.factor", "min.insync.replicas", "transaction.state.log.min.isr"):
        assert props[key] == "1", key
    assert props["group.initial.rebalance.delay.ms"] == "0"
    assert props["auto.create.topics.enable"] == "false"
    assert props["log.dirs"] == "/d"


def test_three_nodes_share_a_static_voter_set_with_rf_3_and_min_isr_2():
    props = [server_properties(me, THREE, Path(f"/d{me.node_id}")) for me in THREE]
    assert {p["controller.quorum.voters"] for p in props} == {
        "1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097"}
    assert [p["node.id"] for p in props] == ["1", "2", "3"]
    for p in props:
        assert p["default.replication.factor"] == p["offsets.topic.replication.factor"] == "3"
        assert p["min.insync.replicas"] == p["transaction.state.log.min.isr"] == "2"
        assert int(p["broker.session.timeout.ms"]) > int(p["broker.heartbeat.interval.ms"])


def test_extra_properties_win_and_render_escapes():
    props = server_properties(ONE[0], ONE, Path("/d"), {"num.partitions": 4, "x": "a\\b"})
    assert props["num.partitions"] == "4"
    text = render(props)
    assert "num.partitions=4\n" in text and "x=a\\\\b\n" in text


def test_cluster_id_is_base64url_of_16_bytes():
    ids = {new_cluster_id() for _ in range(2000)}
    assert len(ids) == 2000
    for cid in ids:
        assert not cid.startswith("-")  # StorageTool would parse it as an option
        assert len(cid) == 22 and "=" not in cid and set(cid) <= set(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_initial_heap_is_capped_at_128m():
    assert _min_heap("384m") == "128m"
    assert _min_heap("1g") == "128m"
    assert _min_heap("64m") == "64m"
