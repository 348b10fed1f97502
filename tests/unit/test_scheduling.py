"""The suite's order (tests/scheduling.py): the fast layer first, the heavy tests first in each
layer; and which tests make compat runs."""

from __future__ import annotations

from types import SimpleNamespace

from tests.scheduling import is_versioned, layer, run_order


def _item(nodeid: str, heavy: bool = False):
    return SimpleNamespace(nodeid=nodeid,
                           get_closest_marker=lambda name: object() if heavy and name == "heavy" else None)


def test_units_run_first_then_broker_then_spark_tests_heavy_ones_first_in_each():
    items = [_item("tests/spark/test_a.py::t"), _item("tests/integration/test_b.py::t"),
             _item("tests/spark/test_c.py::t", heavy=True), _item("tests/unit/test_d.py::t"),
             _item("tests/integration/test_e.py::t", heavy=True), _item("tests/unit/test_f.py::t")]
    assert [i.nodeid for i in run_order(items)] == [
        "tests/unit/test_d.py::t", "tests/unit/test_f.py::t", "tests/integration/test_e.py::t",
        "tests/integration/test_b.py::t", "tests/spark/test_c.py::t", "tests/spark/test_a.py::t"]
    assert layer("bench/test_x.py::t") == 3


def test_versioned_tests_are_the_spark_tests_and_the_units_touching_pyspark_or_pyarrow():
    assert is_versioned("tests/spark/test_sink.py::t", "")
    assert is_versioned("tests/unit/spark/test_options.py::t", "")
    assert is_versioned("tests/unit/record/test_arrow.py::t", "import pyarrow as pa")
    assert not is_versioned("tests/unit/record/test_crc.py::t", "from spark_kafka_sink import crc")
