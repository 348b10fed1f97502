"""The PySpark feature gates (``spark/compat.py``), on whichever PySpark runs the suite."""

from __future__ import annotations

import importlib

import pyspark
import pytest

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.spark import compat


@pytest.mark.parametrize("text, version", [("3.4.1", (3, 4)), ("3.5.7", (3, 5)), ("4.1.0.dev2", (4, 1)),
                                           ("4.0.0rc1", (4, 0)), ("4", (4, 0))])
def test_versions_are_read_as_major_minor(text, version):
    assert compat._major_minor(text) == version


def test_this_pyspark_is_supported():
    assert compat.pyspark_version() >= compat.MIN_PYSPARK
    compat.require_supported()


def test_an_older_pyspark_is_refused_naming_both_versions(monkeypatch):
    monkeypatch.setattr(pyspark, "__version__", "3.3.2")
    with pytest.raises(ImportError, match="needs PySpark 3.4 or newer; this is PySpark 3.3.2"):
        compat.require_supported()


def test_the_data_source_module_loads_exactly_where_the_api_exists():
    has_api = compat.has_data_source_api()
    assert has_api == (compat.pyspark_version() >= compat.DATA_SOURCE_PYSPARK)
    if has_api:
        assert importlib.import_module("spark_kafka_sink.spark.datasource").NAME == "spark_kafka_sink"
        return
    with pytest.raises(ImportError, match=r"needs PySpark 4\.0 or newer .*Runtime 15\.4 LTS.*"
                                          r"KafkaSink works on this version"):
        importlib.import_module("spark_kafka_sink.spark.datasource")


def _frame_from(module: str) -> object:
    return type("DataFrame", (), {"__module__": module})()


def test_rows_mode_on_spark_connect_needs_4_0_and_names_arrow_mode(monkeypatch):
    connect, classic = _frame_from("pyspark.sql.connect.dataframe"), _frame_from("pyspark.sql.dataframe")
    assert compat.is_spark_connect(connect) and not compat.is_spark_connect(classic)
    monkeypatch.setattr(pyspark, "__version__", "3.5.2")
    compat.require_foreach_partition(classic)
    with pytest.raises(ConfigError, match=r"mode='rows' on Spark Connect needs PySpark 4\.0 or newer "
                                          r".*this is PySpark 3\.5\.2\. Use mode='arrow'"):
        compat.require_foreach_partition(connect)
    monkeypatch.setattr(pyspark, "__version__", "4.0.0")
    compat.require_foreach_partition(connect)
