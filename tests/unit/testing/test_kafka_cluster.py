"""KafkaCluster without a broker: argument checks, and clear errors before start."""

from __future__ import annotations

import pytest

from spark_kafka_sink.testing import KafkaCluster


def test_needs_at_least_one_node():
    with pytest.raises(ValueError, match="nodes must be at least 1"):
        KafkaCluster(nodes=0)


def test_views_before_start_say_it_is_not_started():
    cluster = KafkaCluster(nodes=3, proxied=True)
    for view in (lambda: cluster.bootstrap_servers, lambda: cluster.embedded,
                 lambda: cluster.node_ids, lambda: cluster.leader_of("t", 0)):
        with pytest.raises(RuntimeError, match="not started"):
            view()
    assert "size=3" in repr(cluster) and "stopped" in repr(cluster)
    cluster.close()  # closing an unstarted cluster is a no-op


def test_proxy_needs_a_proxied_cluster():
    with pytest.raises(RuntimeError, match="proxied=True"):
        KafkaCluster(nodes=1).proxy(1)
