"""Jar resolution bookkeeping: the cache layout, the completion marker and the resolve lock."""

from __future__ import annotations

import threading
import time
import xml.etree.ElementTree as ET

import pytest

from spark_kafka_sink.embedded import jars
from spark_kafka_sink.embedded.errors import JarResolutionError

VERSION = "9.9.9-test"


@pytest.fixture
def fake_maven(monkeypatch):
    """Replace Maven by a slow fake that writes two jars; records every call."""
    calls = []

    def resolve(version, target, java):
        calls.append(version)
        time.sleep(0.3)
        (target / f"kafka_2.13-{version}.jar").write_bytes(b"PK")
        (target / "scala-library-2.13.16.jar").write_bytes(b"PK")

    monkeypatch.setattr(jars, "_resolve_with_maven", resolve)
    return calls


def test_resolves_once_under_a_lock_then_reads_the_marker(tmp_path, fake_maven):
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        jars.resolve_kafka_jars(VERSION, tmp_path, method="maven", java="java"))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert fake_maven == [VERSION]
    assert len({r.jars for r in results}) == 1
    found = results[0]
    assert found.directory == tmp_path / f"kafka-{VERSION}"
    assert found.jars == (f"kafka_2.13-{VERSION}.jar", "scala-library-2.13.16.jar")
    assert found.classpath == str(found.directory / "*")
    assert (found.directory / ".complete").is_file()
    assert jars.resolve_kafka_jars(VERSION, tmp_path, method="maven", java="java") == found
    assert fake_maven == [VERSION]


def test_no_marker_without_success_and_a_missing_jar_means_resolve_again(tmp_path, fake_maven, monkeypatch):
    def broken(version, target, java):
        (target / "half.jar").write_bytes(b"PK")
        raise JarResolutionError("network down")

    monkeypatch.setattr(jars, "_resolve_with_maven", broken)
    with pytest.raises(JarResolutionError, match="network down"):
        jars.resolve_kafka_jars(VERSION, tmp_path, method="maven", java="java")
    assert not (tmp_path / f"kafka-{VERSION}" / ".complete").exists()

    monkeypatch.undo()
    monkeypatch.setattr(jars, "_resolve_with_maven", lambda v, t, j: (t / f"kafka_2.13-{v}.jar").write_bytes(b""))
    found = jars.resolve_kafka_jars(VERSION, tmp_path, method="maven", java="java")
    assert found.jars == (f"kafka_2.13-{VERSION}.jar",)  # the half-done directory was emptied

    (found.directory / found.jars[0]).unlink()
    assert jars._read_marker(found.directory, VERSION) is None


def test_a_run_without_the_kafka_jar_is_a_failure(tmp_path, monkeypatch):
    monkeypatch.setattr(jars, "_resolve_with_maven", lambda v, t, j: None)
    with pytest.raises(JarResolutionError, match="holds no kafka_2.13"):
        jars.resolve_kafka_jars(VERSION, tmp_path, method="maven", java="java")


def test_cache_root_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_KAFKA_SINK_CACHE", str(tmp_path / "c"))
    assert jars.default_cache_root() == tmp_path / "c"
    monkeypatch.delenv("SPARK_KAFKA_SINK_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert jars.default_cache_root() == tmp_path / "x" / "spark-kafka-sink"


def test_ivy_module_lists_the_pom_dependencies_at_the_requested_version():
    deps = jars.pom_dependencies("4.0.0")
    assert ("org.apache.kafka", "kafka_2.13", "4.0.0") in deps
    assert any(a == "log4j-slf4j-impl" for _, a, _ in deps)  # slf4j 1.x binding (Kafka logs via slf4j 1.7)
    root = ET.fromstring(jars.ivy_module("4.0.0"))
    found = [(d.get("org"), d.get("name"), d.get("rev"), d.get("conf")) for d in root.iter("dependency")]
    assert [(g, a, v) for g, a, v, _ in found] == deps
    assert {conf for *_, conf in found} == {"default->default"}


def test_unknown_method_is_rejected(tmp_path):
    with pytest.raises(ValueError):
        jars.resolve_kafka_jars(VERSION, tmp_path, method="gradle")
