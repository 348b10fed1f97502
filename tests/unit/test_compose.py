"""docker-compose.yml cannot run here (no Docker daemon in CI), so its invariants are checked as
data: three KRaft nodes that agree on the quorum, advertised ports that match the published ones,
and a Spark image whose Dockerfile copies only paths that exist."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
BROKERS = {name: service for name, service in SERVICES.items() if name.startswith("kafka-")}


def test_three_kraft_nodes_agree_on_the_quorum():
    assert sorted(BROKERS) == ["kafka-1", "kafka-2", "kafka-3"]
    voters = {service["environment"]["KAFKA_CONTROLLER_QUORUM_VOTERS"] for service in BROKERS.values()}
    assert len(voters) == 1
    expected = ",".join(f"{n}@kafka-{n}:9093" for n in (1, 2, 3))
    assert voters == {expected}
    for name, service in BROKERS.items():
        env = service["environment"]
        assert env["KAFKA_NODE_ID"] == int(name.split("-")[1])
        assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
        assert env["KAFKA_DEFAULT_REPLICATION_FACTOR"] == 3 and env["KAFKA_MIN_INSYNC_REPLICAS"] == 2


def test_external_listeners_are_published_on_the_advertised_ports():
    bootstrap = []
    for name, service in BROKERS.items():
        env = service["environment"]
        external = re.search(r"EXTERNAL://localhost:(\d+)", env["KAFKA_ADVERTISED_LISTENERS"]).group(1)
        assert f"EXTERNAL://:{external}" in env["KAFKA_LISTENERS"]
        assert service["ports"] == [f"{external}:{external}"]
        assert f"INTERNAL://{name}:9092" in env["KAFKA_ADVERTISED_LISTENERS"]
        bootstrap.append(f"localhost:{external}")
    header = (ROOT / "docker-compose.yml").read_text()
    assert f"KAFKA_BOOTSTRAP={','.join(bootstrap)}" in header  # what the comment tells users


def test_spark_image_copies_existing_paths_and_points_at_the_brokers():
    build = SERVICES["spark"]["build"]
    dockerfile = ROOT / build["context"] / build["dockerfile"]
    text = dockerfile.read_text()
    for line in text.splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), f"{dockerfile.name} copies {source}, which does not exist"
    assert "KAFKA_BOOTSTRAP=kafka-1:9092,kafka-2:9092,kafka-3:9092" in text
