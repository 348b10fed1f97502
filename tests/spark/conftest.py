"""One local[2] SparkSession for the Spark tests (settings in ``session.py``); the broker is ``kafka``;
the schema registry (the testing kit's Apicurio, started on first use) is ``registry``; Spark's
class-data archive made before the first Spark JVM of the run.

``PYSPARK_PYTHON`` and ``SPARK_LOCAL_IP`` are set before the JVM starts and restored at the end.
"""

from __future__ import annotations

import os

import pytest

from spark_kafka_sink.spark import cds as spark_cds
from spark_kafka_sink.testing import SchemaRegistry

from .session import SPARK_ENV, build_session


@pytest.fixture(scope="session", autouse=True)
def spark_class_archive():
    """Spark's class-data archive, dumped once per machine and pyspark before the first Spark JVM
    of the run (every later one maps it: seconds less each; see ``spark_kafka_sink.spark.cds``). Waits for a dump
    another worker or the run's start began."""
    return spark_cds.ensure_archive()


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    saved = {name: os.environ.get(name) for name in SPARK_ENV}
    os.environ.update(SPARK_ENV)
    session = build_session("local[2]", str(tmp_path_factory.mktemp("spark-warehouse")), quick_start=True)
    try:
        yield session
    finally:
        session.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(scope="session")
def registry(tmp_path_factory):
    with SchemaRegistry(work_dir=tmp_path_factory.mktemp("registry")) as running:
        yield running
