"""The standalone cluster launcher's process bookkeeping (``testing/spark_standalone.py``), without
starting Spark: the cluster itself runs in ``tests/spark/test_standalone_cluster.py``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from spark_kafka_sink.testing import spark_standalone as standalone
from spark_kafka_sink.testing.spark_standalone import SparkStandalone, SparkStandaloneError


def test_a_flag_value_is_the_word_after_it():
    argv = ["java", "-cp", "x", standalone.EXECUTOR_CLASS, "--executor-id", "3", "--app-id", "app-1"]
    assert standalone._flag(argv, "--executor-id") == "3"
    assert standalone._flag(argv, "--app-id") == "app-1"
    assert standalone._flag(argv, "--cores") == ""


def test_descendants_and_their_cpu_are_read_from_proc():
    spin = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\ntime.sleep(30)"
    with subprocess.Popen([sys.executable, "-c", spin]) as child:
        try:
            deadline = 100
            while standalone.cpu_seconds([child.pid]) < 0.25 and deadline:
                subprocess.run(["sleep", "0.05"], check=True)
                deadline -= 1
            assert child.pid in standalone._descendants(standalone.os.getpid())
            assert standalone._cmdline(child.pid)[0] == sys.executable
            assert standalone.cpu_seconds([child.pid]) >= 0.25
        finally:
            child.kill()
    assert standalone.cpu_seconds([child.pid]) == 0  # gone: counts nothing
    assert standalone._cmdline(child.pid) == []


def test_settings_are_checked_and_nothing_runs_before_start(tmp_path):
    with pytest.raises(ValueError, match="at least one worker"):
        SparkStandalone(tmp_path, workers=0)
    cluster = SparkStandalone(tmp_path, workers=2)
    assert "not started" in repr(cluster)
    with pytest.raises(SparkStandaloneError, match="not started"):
        cluster.master_url
    assert cluster.executors() == [] and cluster.executor_logs() == []
    cluster.close()  # nothing to stop


def test_spark_home_is_the_pyspark_package_with_spark_class():
    assert (standalone.spark_home() / "bin" / "spark-class").is_file()
