"""The suite's order and xdist groups (tests/scheduling.py): what keeps a costly fixture started
once per run, and the fast layer first."""

from __future__ import annotations

from types import SimpleNamespace

from tests.scheduling import group_of, is_versioned, layer, run_order


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


def test_a_module_fixture_or_a_module_own_session_fixture_keeps_the_module_on_one_worker():
    module = "tests/integration/test_faults.py"
    assert group_of(f"{module}::t[x]", {"cluster": ("module", module)}) == module
    assert group_of(f"{module}::t", {"schemas": ("session", module)}) == module
    # a module fixture wins over a shared broker's group: the module stays whole
    assert group_of(f"{module}::t", {"secured_kafka": ("session", "tests"),
                                     "cluster": ("module", module)}) == module


def test_a_broker_few_tests_need_is_one_group_and_the_common_ones_none():
    assert group_of("tests/integration/test_a.py::t", {"kafka_tv1": ("session", "tests")}) == "kafka-3.9"
    assert group_of("tests/spark/test_b.py::t", {"secured_kafka": ("session", "tests"),
                                                 "spark": ("session", "tests/spark")}) == "secured-kafka"
    assert group_of("tests/spark/test_c.py::t", {"kafka": ("session", "tests"),
                                                 "spark": ("session", "tests/spark")}) is None


def test_versioned_tests_are_the_spark_tests_and_the_units_touching_pyspark_or_pyarrow():
    assert is_versioned("tests/spark/test_sink.py::t", "")
    assert is_versioned("tests/unit/spark/test_options.py::t", "")
    assert is_versioned("tests/unit/record/test_arrow.py::t", "import pyarrow as pa")
    assert not is_versioned("tests/unit/record/test_crc.py::t", "from spark_kafka_sink import crc")
