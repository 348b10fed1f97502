"""The generated server.properties for one and three nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_kafka_sink.embedded import BrokerSecurity, EmbeddedKafka
from spark_kafka_sink.embedded.embedded_kafka import new_cluster_id
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


# --- per-node listeners: advertised (proxied) PLAINTEXT, INTERNAL, secured listeners -----------

PROXIED = NodeAddress(2, 9094, 9095, advertised_port=19094, internal_port=9098)
SECURED = NodeAddress(1, 9092, 9093, secure_ports={"SASL_SSL": 9201, "SSL": 9200, "SASL_PLAINTEXT": 9202})


def test_advertised_port_moves_inter_broker_traffic_to_an_internal_listener():
    props = server_properties(PROXIED, [ONE[0], PROXIED], Path("/d"))
    assert props["listeners"] == ("PLAINTEXT://127.0.0.1:9094,INTERNAL://127.0.0.1:9098,"
                                  "CONTROLLER://127.0.0.1:9095")
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:19094,INTERNAL://127.0.0.1:9098"
    assert props["listener.security.protocol.map"] == (
        "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT")
    assert props["inter.broker.listener.name"] == "INTERNAL"
    assert props["controller.listener.names"] == "CONTROLLER"
    assert PROXIED.client_port("PLAINTEXT") == 19094
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9093,2@127.0.0.1:9095"


def test_secured_listeners_are_bound_and_advertised_in_a_fixed_order():
    props = server_properties(SECURED, [SECURED], Path("/d"), security={"sasl.enabled.mechanisms": "PLAIN"})
    assert props["listeners"] == (
        "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9200,SASL_PLAINTEXT://127.0.0.1:9202,"
        "SASL_SSL://127.0.0.1:9201,CONTROLLER://127.0.0.1:9093")
    assert props["advertised.listeners"] == (
        "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9200,SASL_PLAINTEXT://127.0.0.1:9202,"
        "SASL_SSL://127.0.0.1:9201")
    assert props["listener.security.protocol.map"] == (
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT")
    assert props["inter.broker.listener.name"] == "PLAINTEXT"  # never a secured one
    assert props["sasl.enabled.mechanisms"] == "PLAIN"
    assert [SECURED.client_port(p) for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")] == [
        9092, 9200, 9202, 9201]
    extra_wins = server_properties(SECURED, [SECURED], Path("/d"), {"sasl.enabled.mechanisms": "X"},
                                   {"sasl.enabled.mechanisms": "PLAIN"})
    assert extra_wins["sasl.enabled.mechanisms"] == "X"


def test_node_address_refuses_half_or_unknown_listeners():
    with pytest.raises(ValueError, match="advertised_port and internal_port go together"):
        NodeAddress(1, 9092, 9093, advertised_port=19092)
    with pytest.raises(ValueError, match=r"unknown secure listener\(s\) \['SASL_TLS'\]"):
        NodeAddress(1, 9092, 9093, secure_ports={"SASL_TLS": 1})
    with pytest.raises(KeyError, match="node 1 has no SSL listener"):
        ONE[0].client_port("SSL")


@pytest.mark.parametrize("kwargs, message", [
    ({"advertised_ports": [1, 2]}, r"advertised_ports needs one port per node \(3\)"),
    ({"advertised_ports": [5, 5, 6]}, "advertised_ports must differ"),
    ({"advertised_ports": [5, 6, 0]}, r"advertised_ports must be ports in 1..65535"),
    ({"advertised_ports": [5, 6, 7], "ports": [7, 8, 9]}, r"advertised_ports \[7\] are also listener ports"),
    ({"security": {"ssl": True}}, "security must be a BrokerSecurity"),
])
def test_cluster_options_are_checked_before_anything_starts(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        EmbeddedKafka(3, **kwargs)


def test_picked_ports_are_distinct_for_every_listener_of_every_node():
    cluster = EmbeddedKafka(3, advertised_ports=[20001, 20002, 20003], security=BrokerSecurity())
    addresses = cluster._addresses()
    bound = [port for a in addresses for port in a.bound_ports().values()]
    assert len(bound) == len(set(bound)) == 3 * 6  # PLAINTEXT, SSL, SASL x2, INTERNAL, CONTROLLER
    assert [a.advertised_port for a in addresses] == [20001, 20002, 20003]
    assert not {20001, 20002, 20003} & set(bound)
    with pytest.raises(RuntimeError, match="not started"):
        cluster.bootstrap_for("SSL")
    with pytest.raises(ValueError, match="no SASL_SSL listener"):
        EmbeddedKafka(1, security=BrokerSecurity(ssl=False)).bootstrap_for("SASL_SSL")
    with pytest.raises(ValueError, match="protocol must be one of"):
        cluster.bootstrap_for("TLS")
