"""Spark's workers that cannot import the package: the failure read out of Spark's error texts (as
PySpark 4.3 and older lines word them) and turned into a ConfigError naming the fix, by KafkaSink's
writes; the Data Source's look-ahead for a local master. No SparkSession."""

from __future__ import annotations

import pickle
import sys

import pytest

from spark_kafka_sink import KafkaSink
from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.spark import sink as sink_module
from spark_kafka_sink.spark.worker_import import (
    DEPENDENCY_KIND,
    PACKAGE_KIND,
    VERSION_KIND,
    WorkerImportFailure,
    find_worker_import_failure,
    local_workers_problem,
    worker_import_error,
)

ZIP = "/venv/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip/pyspark"
UNPICKLE = f"""Traceback (most recent call last):
  File "{ZIP}/worker.py", line 4207, in invoke_udf
    func, profiler, deserializer, serializer = read_udfs(
  File "{ZIP}/worker_util.py", line 75, in read_command
    command = serializer.loads(file)
  File "{ZIP}/serializers.py", line 483, in loads
    return cloudpickle.loads(obj, encoding=encoding)
"""
ARROW_MODE = ("An exception was thrown from the Python worker:\n" + UNPICKLE
              + "ModuleNotFoundError: No module named 'spark_kafka_sink'")
"""PySpark 4.3's PythonException text, arrow mode, a worker Python without the package."""
DATA_SOURCE = ("[PYTHON_DATA_SOURCE_ERROR] Failed to initialize Python data source writer: " + UNPICKLE
               + "ModuleNotFoundError: No module named 'spark_kafka_sink'\n SQLSTATE: 38000")
NO_NUMPY = (f"""An exception was thrown from the Python worker:
{UNPICKLE}  File "/src/spark_kafka_sink/spark/partition_writer.py", line 52, in <module>
    from .producer_pool import ProducerPool, get_pool
  File "/src/spark_kafka_sink/producer/arrow/input.py", line 16, in <module>
    import numpy as np
ModuleNotFoundError: No module named 'numpy'""")
"""Rows mode: the package found (on PYTHONPATH), its dependency not."""
PY4J_ROWS = ("An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
             ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 "
             "failed 1 times, most recent failure: Lost task 0.0 in stage 3.0 (TID 3) (127.0.0.1 "
             "executor driver): org.apache.spark.api.python.PythonException: " + UNPICKLE
             + "ModuleNotFoundError: No module named 'spark_kafka_sink'\n\n\tat org.apache.spark.api."
             "python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:572)")
"""PySpark 3.x rows mode: a Py4JJavaError carrying the Java stack and the worker's traceback."""


@pytest.mark.parametrize("text, expected", [
    (ARROW_MODE, WorkerImportFailure("spark_kafka_sink", PACKAGE_KIND)),
    (DATA_SOURCE, WorkerImportFailure("spark_kafka_sink", PACKAGE_KIND)),
    (PY4J_ROWS, WorkerImportFailure("spark_kafka_sink", PACKAGE_KIND)),
    (NO_NUMPY, WorkerImportFailure("numpy", DEPENDENCY_KIND)),
    (UNPICKLE + "ModuleNotFoundError: No module named 'spark_kafka_sink.spark.formats'",
     WorkerImportFailure("spark_kafka_sink.spark.formats", VERSION_KIND)),
    (UNPICKLE + "AttributeError: Can't get attribute 'ArrowWriter' on <module "
                "'spark_kafka_sink.spark.arrow_writer' from '/old/arrow_writer.py'>",
     WorkerImportFailure("spark_kafka_sink.spark.arrow_writer.ArrowWriter", VERSION_KIND)),
])
def test_the_failure_is_found_in_sparks_text(text, expected):
    assert find_worker_import_failure(text) == expected


@pytest.mark.parametrize("text", [
    # the user's own UDF misses a module: not ours to explain
    UNPICKLE + '  File "/home/me/etl/udfs.py", line 3, in <module>\n    import geo\n'
               "ModuleNotFoundError: No module named 'geo'",
    UNPICKLE + "ModuleNotFoundError: No module named 'spark_kafka_sink_extras'",
    "[Error 3] UNKNOWN_TOPIC_OR_PARTITION: topic 'events'",
    "AttributeError: Can't get attribute 'Thing' on <module 'mylib'>",
])
def test_other_failures_are_left_alone(text):
    assert find_worker_import_failure(text) is None


class SparkError(Exception):
    """Stands for Spark's exception types (their ``str`` is the text the tests give)."""


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("the JVM is gone")


def test_the_error_names_the_cause_and_the_fixes():
    error = worker_import_error(SparkError(ARROW_MODE), workers_python="python3",
                                driver_python="/home/me/.venv/bin/python")
    assert isinstance(error, ConfigError)
    text = str(error)
    assert text.startswith("Spark's Python workers cannot import spark_kafka_sink")
    assert "Spark starts them with 'python3'" in text and "/home/me/.venv/bin/python" in text
    assert "PYSPARK_PYTHON" in text and "sys.executable" in text and "spark.pyspark.python" in text
    assert "make dist" in text and "every executor" in text and "Databricks" in text
    assert "-py3-none-any.whl" in text
    same = str(worker_import_error(SparkError(ARROW_MODE), workers_python=sys.executable))
    assert "Spark starts them" not in same  # a cluster's executors: the driver's path, other nodes


def test_version_and_dependency_messages_say_what_differs():
    version = str(worker_import_error(SparkError(
        UNPICKLE + "ModuleNotFoundError: No module named 'spark_kafka_sink.spark.formats'")))
    assert "another version of spark_kafka_sink" in version and "'spark_kafka_sink.spark.formats'" in version
    dependency = str(worker_import_error(SparkError(NO_NUMPY)))
    assert "import spark_kafka_sink but not 'numpy'" in dependency and "make dist" in dependency


def test_chained_and_unprintable_errors():
    try:
        try:
            raise SparkError(PY4J_ROWS)
        except SparkError as inner:
            raise RuntimeError("the write failed") from inner
    except RuntimeError as outer:
        chained = outer
    assert worker_import_error(chained) is not None
    wrapped = Unprintable()
    wrapped.__context__ = SparkError(ARROW_MODE)
    assert worker_import_error(wrapped) is not None
    assert worker_import_error(Unprintable()) is None
    assert worker_import_error(SparkError("Task failed: [Error 29] TOPIC_AUTHORIZATION_FAILED")) is None


class FailingFrame:
    """What KafkaSink touches of a DataFrame whose job fails in Spark's Python workers."""

    def __init__(self, error: BaseException):
        from pyspark.sql.types import StringType, StructField, StructType

        self.schema = StructType([StructField("value", StringType())])
        self.sparkSession = self
        self.sparkContext = self
        self.pythonExec = "python3"
        self.error = error

    def mapInArrow(self, writer, schema):
        pickle.dumps(writer)
        raise self.error

    def foreachPartition(self, writer):
        pickle.dumps(writer)
        raise self.error

    def accumulator(self, value, param):
        return None


@pytest.mark.parametrize("mode", ["arrow", "rows"])
def test_a_sink_write_raises_the_fix_chained_to_sparks_error(monkeypatch, mode):
    monkeypatch.setattr(sink_module, "sink_frame", lambda df, write_schema, **_: df)  # no JVM here
    sink = KafkaSink(**{"kafka.bootstrap.servers": "localhost:9092", "topic": "t", "mode": mode,
                        "preflight": "false", "driver.write.max.rows": 0})
    spark_error = SparkError(ARROW_MODE)
    with pytest.raises(ConfigError, match="Spark starts them with 'python3'") as raised:
        sink.write(FailingFrame(spark_error))
    assert raised.value.__cause__ is spark_error
    other = SparkError("Task failed: [Error 3] UNKNOWN_TOPIC_OR_PARTITION")
    with pytest.raises(SparkError) as raised:
        sink(FailingFrame(other), 4)
    assert raised.value is other and sink.metrics_history == []


class LocalContext:
    def __init__(self, python, master="local[2]"):
        self.sparkContext = self
        self.pythonExec = python
        self.master = master


class ConnectSession:
    @property
    def sparkContext(self):
        raise NotImplementedError("[JVM_ATTRIBUTE_NOT_SUPPORTED] sparkContext")


def fake_python(tmp_path, stderr: str, code: int = 1) -> str:
    """An executable that answers like a Python without the package (or with it, code 0)."""
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\ncat >&2 <<'EOF'\n{stderr}\nEOF\nexit {code}\n")
    path.chmod(0o755)
    return str(path)


def test_register_look_ahead_runs_the_workers_python_once_locally(tmp_path):
    missing = fake_python(tmp_path, "ModuleNotFoundError: No module named 'spark_kafka_sink'")
    problem = local_workers_problem(LocalContext(missing))
    assert problem.startswith("Spark's Python workers cannot import spark_kafka_sink")
    assert f"Spark starts them with {missing!r}" in problem
    assert local_workers_problem(LocalContext(fake_python(tmp_path, "", 0))) is None
    no_numpy = fake_python(tmp_path, NO_NUMPY.split(":\n", 1)[1])
    assert "not 'numpy'" in local_workers_problem(LocalContext(no_numpy))
    gone = str(tmp_path / "no-such-python")
    assert "starting" in local_workers_problem(LocalContext(gone)) and gone in local_workers_problem(
        LocalContext(gone))


def test_register_look_ahead_says_nothing_where_it_cannot_know(tmp_path):
    missing = fake_python(tmp_path, "ModuleNotFoundError: No module named 'spark_kafka_sink'")
    assert local_workers_problem(LocalContext(missing, master="spark://127.0.0.1:7077")) is None
    assert local_workers_problem(LocalContext(missing, master="yarn")) is None
    assert local_workers_problem(ConnectSession()) is None
    assert local_workers_problem(LocalContext(sys.executable)) is None  # no child process then
