"""A write whose tasks cannot import the sink's code in Spark's Python workers fails with a
ConfigError that names the fix, chained to Spark's own error, in both modes, on the tests' local[2]
session.

The workers here have the package, so the test makes what they lack: the writer's class is moved
into a module that exists on the driver only (``sys.modules``), so Spark's workers fail to
unpickle it exactly as a worker Python without the package (or with an older version) does. A
session whose workers run another Python would be the whole story, at the price of a Spark
driver of its own; the texts such a session gives are in the unit tests.
"""

from __future__ import annotations

import sys
import types

import pytest

from spark_kafka_sink import KafkaSink
from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.spark import sink as sink_module

pytestmark = [pytest.mark.spark]

DRIVER_ONLY = "spark_kafka_sink.spark.absent_on_workers"


@pytest.fixture
def driver_only_writers(monkeypatch):
    """The sink's two writer classes, as subclasses living in :data:`DRIVER_ONLY`."""
    module = types.ModuleType(DRIVER_ONLY)
    module.__file__ = "absent_on_workers.py"
    monkeypatch.setitem(sys.modules, DRIVER_ONLY, module)
    for name in ("ArrowWriter", "PartitionWriter"):
        moved = type(name, (getattr(sink_module, name),), {"__module__": DRIVER_ONLY})
        setattr(module, name, moved)
        monkeypatch.setattr(sink_module, name, moved)


@pytest.mark.parametrize("mode", ["arrow", "rows"])
def test_a_worker_that_cannot_import_the_writer_gives_the_fix(spark, driver_only_writers, mode):
    sink = KafkaSink(**{"kafka.bootstrap.servers": "127.0.0.1:9", "topic": "t", "mode": mode,
                        "preflight": "false"})  # the tasks fail before any connection
    df = spark.range(0, 4, 1, 1).selectExpr("cast(id AS string) AS value")
    with pytest.raises(ConfigError) as raised:
        sink.write(df)
    text = str(raised.value)
    assert text.startswith("Spark's Python workers have another version of spark_kafka_sink"), text
    assert f"theirs has no '{DRIVER_ONLY}'" in text and "PYSPARK_PYTHON" in text and "make dist" in text
    assert f"No module named '{DRIVER_ONLY}'" in str(raised.value.__cause__)  # Spark's, chained
    assert sink.metrics_history == []
