"""Apicurio Registry resolution bookkeeping: the cache layout, the marker, the lock, the unpack."""

from __future__ import annotations

import io
import tarfile
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from spark_kafka_sink.embedded import apicurio
from spark_kafka_sink.embedded.errors import JarResolutionError

VERSION = "9.9.9-test"


def _write_archive(path: Path, members: dict[str, bytes], links: dict[str, str] | None = None) -> None:
    """A tar.gz holding ``members`` (name -> content) and symbolic ``links`` (name -> target)."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)


APP = {"quarkus-run.jar": b"PK-run", "lib/main/a.jar": b"PK-a", "app/registry.jar": b"PK-app"}


@pytest.fixture
def fake_maven(monkeypatch):
    """Replace Maven by a slow fake that writes a small archive; records every call."""
    calls = []

    def fetch(version, into, java):
        calls.append((version, into.parent))
        time.sleep(0.3)
        _write_archive(into / apicurio.archive_name(version), APP)

    monkeypatch.setattr(apicurio, "_fetch_with_maven", fetch)
    return calls


def test_fetched_once_under_a_lock_unpacked_then_read_from_the_marker(tmp_path, fake_maven):
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        apicurio.resolve_apicurio(VERSION, tmp_path, method="maven", java="java"))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert fake_maven == [(VERSION, tmp_path)]  # downloaded beside the target, in the cache root
    assert len(set(results)) == 1
    found = results[0]
    assert found.directory == tmp_path / f"apicurio-registry-{VERSION}"
    assert found.run_jar.read_bytes() == b"PK-run"
    assert (found.directory / "lib" / "main" / "a.jar").read_bytes() == b"PK-a"
    assert found.method == "maven"
    # The archive and its download directory are gone; the lock file stays.
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"apicurio-registry-{VERSION}", f"apicurio-registry-{VERSION}.lock"]
    assert apicurio.resolve_apicurio(VERSION, tmp_path, method="maven", java="java") == found
    assert len(fake_maven) == 1


def test_a_failed_fetch_leaves_no_marker_and_the_next_one_starts_afresh(tmp_path, fake_maven, monkeypatch):
    def broken(version, into, java):
        (into / "half").write_bytes(b"x")
        raise JarResolutionError("network down")

    monkeypatch.setattr(apicurio, "_fetch_with_maven", broken)
    with pytest.raises(JarResolutionError, match="network down"):
        apicurio.resolve_apicurio(VERSION, tmp_path, method="maven", java="java")
    assert [p.name for p in tmp_path.iterdir()] == [f"apicurio-registry-{VERSION}.lock"]

    (tmp_path / f"apicurio-registry-{VERSION}").mkdir()
    (tmp_path / f"apicurio-registry-{VERSION}" / "stale.jar").write_bytes(b"old")
    monkeypatch.setattr(apicurio, "_fetch_with_maven", lambda v, into, j: _write_archive(
        into / apicurio.archive_name(v), APP))
    found = apicurio.resolve_apicurio(VERSION, tmp_path, method="maven", java="java")
    assert not (found.directory / "stale.jar").exists()  # the half-done directory was emptied

    found.run_jar.unlink()
    assert apicurio.read_marker(found.directory, VERSION) is None
    assert apicurio.read_marker(found.directory, "1.0.0") is None


def test_a_fetch_without_the_archive_or_without_quarkus_run_is_a_failure(tmp_path, monkeypatch):
    monkeypatch.setattr(apicurio, "_fetch_with_maven", lambda v, into, j: None)
    with pytest.raises(JarResolutionError, match=f"fetched no {apicurio.archive_name(VERSION)}"):
        apicurio.resolve_apicurio(VERSION, tmp_path, method="maven", java="java")
    monkeypatch.setattr(apicurio, "_fetch_with_maven", lambda v, into, j: _write_archive(
        into / apicurio.archive_name(v), {"lib/a.jar": b"PK"}))
    with pytest.raises(JarResolutionError, match="holds no quarkus-run.jar"):
        apicurio.resolve_apicurio(VERSION, tmp_path, method="maven", java="java")


@pytest.mark.parametrize("members, links", [
    ({"../escape.jar": b"x"}, None),
    ({"/abs.jar": b"x"}, None),
    ({}, {"lib/link.jar": "/etc/passwd"}),
], ids=["dot-dot", "absolute", "symlink"])
def test_unpack_refuses_what_could_leave_the_target(tmp_path, members, links):
    archive = tmp_path / "bad.tar.gz"
    _write_archive(archive, {"quarkus-run.jar": b"PK", **members}, links)
    with pytest.raises(JarResolutionError, match="refusing member"):
        apicurio.unpack(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "escape.jar").exists()


def test_a_corrupt_archive_is_a_resolution_error(tmp_path):
    archive = tmp_path / "corrupt.tar.gz"
    archive.write_bytes(b"not a tarball")
    with pytest.raises(JarResolutionError, match="could not unpack corrupt.tar.gz"):
        apicurio.unpack(archive, tmp_path / "out")


def test_the_coordinates_and_the_ivy_module_name_the_all_tarball_alone():
    assert apicurio.coordinates("3.3.3") == "io.apicurio:apicurio-registry-app:3.3.3:tar.gz:all"
    assert apicurio.archive_name("3.3.3") == "apicurio-registry-app-3.3.3-all.tar.gz"
    root = ET.fromstring(apicurio.registry_ivy_module("3.3.3"))
    (dep,) = root.iter("dependency")
    assert (dep.get("org"), dep.get("name"), dep.get("rev"), dep.get("transitive")) == (
        "io.apicurio", "apicurio-registry-app", "3.3.3", "false")
    (artifact,) = dep.iter("artifact")
    assert (artifact.get("type"), artifact.get("ext"),
            artifact.get("{http://ant.apache.org/ivy/maven}classifier")) == ("tar.gz", "tar.gz", "all")


def test_unknown_method_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="auto, maven or ivy"):
        apicurio.resolve_apicurio(VERSION, tmp_path, method="gradle")
