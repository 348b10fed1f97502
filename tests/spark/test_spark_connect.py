"""KafkaSink on Spark Connect (``remote("local[2]")``, in its own process): both modes write every
row; arrow mode brings its metrics back as stats rows, where rows mode, without accumulators,
has none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from ..helpers import create_topic
from ..verify import consume_all
from .session import CONF, SPARK_ENV

pytestmark = [pytest.mark.spark, pytest.mark.broker]

ROOT = Path(__file__).resolve().parents[2]
ROWS = 3_000
TIMEOUT_S = 240


def connect_conf(directory: Path) -> Path:
    """spark-defaults.conf for the local Spark Connect server: the project's (loopback, no UI),
    plus the gRPC server on loopback."""
    directory.mkdir()
    defaults = (CONF / "spark-defaults.conf").read_text()
    (directory / "spark-defaults.conf").write_text(
        defaults + "\nspark.connect.grpc.binding.address 127.0.0.1\n"
        f"spark.driver.extraJavaOptions -Xss16m -Dlog4j2.configurationFile={(CONF / 'log4j2.properties').as_uri()}\n")
    return directory


def test_both_modes_write_and_arrow_mode_has_metrics(kafka, tmp_path):
    bootstrap = kafka.bootstrap_servers
    topics = [f"connect-{mode}-{uuid.uuid4().hex[:8]}" for mode in ("arrow", "rows")]
    for topic in topics:
        create_topic(bootstrap, topic, 2)
    out = tmp_path / "metrics.json"
    env = {**os.environ, **SPARK_ENV, "SPARK_CONF_DIR": str(connect_conf(tmp_path / "conf")),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "tests.spark.connect_job", bootstrap, *topics, str(ROWS), str(out)]
    with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as job:
        try:
            output, _ = job.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            job.kill()
            output, _ = job.communicate()
            pytest.fail(f"the Spark Connect job did not finish in {TIMEOUT_S} s:\n{output[-4000:]}")
    assert job.returncode == 0, f"the Spark Connect job failed:\n{output[-4000:]}"

    result = json.loads(out.read_text())
    assert result["session"] == "pyspark.sql.connect.session"
    assert result["arrow"]["record-send-total"] == ROWS and result["arrow"]["task-total"] == 2
    assert result["rows"] is None  # no accumulators on Spark Connect
    for topic in topics:
        records = consume_all(bootstrap, topic, 2, expected_count=ROWS)
        got = sorted((r.key, r.value) for part in records.values() for r in part)
        assert got == sorted((str(i).encode(), f"v{i}".encode()) for i in range(ROWS))
