"""``make dist``'s wheel (README, "Install"; docs/install.md): built as the Makefile builds it,
it holds every module and data file of the package, declares the extras and the
``spark-kafka-sink`` command, and imports on its own (from the wheel, not from the repository)."""

from __future__ import annotations

import email
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "spark_kafka_sink"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    (built,) = out.glob("spark_kafka_sink-*-py3-none-any.whl")
    return built


def test_the_wheel_holds_every_module_and_data_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {str(path.relative_to(ROOT)) for path in PACKAGE.rglob("*")
                if path.suffix in (".py", ".xml", ".properties") and "__pycache__" not in path.parts}
    assert expected - names == set()
    assert not {name for name in names if name.startswith(("tests/", "bench/", "demo/"))}


def test_the_wheel_declares_its_version_extras_and_command(wheel):
    from spark_kafka_sink.version import __version__

    archive = zipfile.ZipFile(wheel)
    info = f"spark_kafka_sink-{__version__}.dist-info"
    metadata = email.message_from_bytes(archive.read(f"{info}/METADATA"))
    assert metadata["Version"] == __version__
    assert {"spark", "zstd", "snappy", "msk"} <= set(metadata.get_all("Provides-Extra"))
    assert "spark-kafka-sink = spark_kafka_sink.cli:main" in archive.read(f"{info}/entry_points.txt").decode()


def test_the_package_imports_from_the_wheel_alone(wheel, tmp_path):
    code = ("import spark_kafka_sink, spark_kafka_sink.producer.transactions, spark_kafka_sink.client.auth;"
            "print(spark_kafka_sink.__file__)")
    env = {**os.environ, "PYTHONPATH": str(wheel)}
    found = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, check=True,
                           capture_output=True, text=True, timeout=60).stdout.strip()
    assert found.startswith(str(wheel)), found
