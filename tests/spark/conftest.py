"""One local SparkSession for the Spark tests (DESIGN.md §7 settings); the broker is ``kafka``.

The session is ``local[2]`` on loopback with no UI, two shuffle partitions, a 16 MB driver stack
(stopping a query during foreachBatch overflows the default) and the project's quiet log4j2 file.
``PYSPARK_PYTHON`` is this interpreter (workers need pyarrow and this package) and
``SPARK_LOCAL_IP`` is loopback; both are set before the JVM starts and restored at the end.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

CONF = Path(__file__).resolve().parents[2] / "conf"


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession

    env = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    java_options = f"-Xss16m -Dlog4j2.configurationFile=file:{CONF / 'log4j2.properties'}"
    session = (SparkSession.builder
               .master("local[2]")
               .appName("spark-kafka-sink-tests")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", "768m")
               .config("spark.driver.extraJavaOptions", java_options)
               .config("spark.python.worker.reuse", "true")
               .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("spark-warehouse")))
               .getOrCreate())
    session.sparkContext.setLogLevel("WARN")
    try:
        yield session
    finally:
        session.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
