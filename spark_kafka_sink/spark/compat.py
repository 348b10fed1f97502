"""Which PySpark is running, and what it can do: the sink's feature gates.

The sink supports PySpark 3.4 and newer (Databricks Runtime 13.3 LTS and newer). ``foreachBatch``,
``KafkaSink.write``, ``partition_writer`` and both modes (``mapInArrow`` since 3.3,
``foreachPartition``) work on every supported version. What needs a newer Spark says so here,
with the version it needs, instead of failing later on a missing name:

- the Python Data Source (:mod:`.datasource`, ``df.write.format("spark_kafka_sink")``): PySpark
  4.0 (on Databricks: Runtime 15.4 LTS and newer, which back-port it);
- the Arrow writer of the Data Source's streaming path: where PySpark has
  ``DataSourceArrowWriter`` the Data Source checks it itself;
- rows mode on Spark Connect (``DataFrame.foreachPartition`` there): PySpark 4.0. Arrow mode
  (``mapInArrow``) works on Spark Connect from 3.4; exactly-once needs classic Spark.
"""

from __future__ import annotations

import importlib.util

MIN_PYSPARK = (3, 4)
"""The oldest PySpark the sink supports."""
DATA_SOURCE_PYSPARK = (4, 0)
"""The first PySpark with the Python Data Source API (``pyspark.sql.datasource``)."""
CONNECT_FOREACH_PARTITION_PYSPARK = (4, 0)
"""The first PySpark whose Spark Connect DataFrame has ``foreachPartition`` (rows mode)."""


def pyspark_version() -> tuple[int, int]:
    """``(major, minor)`` of the installed PySpark."""
    import pyspark

    return _major_minor(pyspark.__version__)


def _major_minor(version: str) -> tuple[int, int]:
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits or 0))
    return (parts + [0, 0])[0], (parts + [0, 0])[1]


def _shown(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def require_supported() -> None:
    """``ImportError`` on a PySpark older than :data:`MIN_PYSPARK`."""
    version = pyspark_version()
    if version < MIN_PYSPARK:
        import pyspark

        raise ImportError(f"spark-kafka-sink needs PySpark {_shown(MIN_PYSPARK)} or newer; this is "
                          f"PySpark {pyspark.__version__}")


def has_data_source_api() -> bool:
    """Whether this PySpark has the Python Data Source API."""
    return importlib.util.find_spec("pyspark.sql.datasource") is not None


def require_data_source_api() -> None:
    """``ImportError`` naming what to use instead when the Python Data Source API is missing."""
    if has_data_source_api():
        return
    import pyspark

    raise ImportError(
        f"the spark_kafka_sink Data Source needs PySpark {_shown(DATA_SOURCE_PYSPARK)} or newer "
        f"(the Python Data Source API; on Databricks, Runtime 15.4 LTS or newer); this is PySpark "
        f"{pyspark.__version__}. KafkaSink works on this version: df.writeStream.foreachBatch(sink), "
        f"sink.write(df) or df.foreachPartition(sink.partition_writer(df.schema))")


def is_spark_connect(df: object) -> bool:
    """Whether ``df`` is a Spark Connect DataFrame (``pyspark.sql.connect``), not a classic one."""
    return type(df).__module__.startswith("pyspark.sql.connect")


def require_foreach_partition(df: object) -> None:
    """``ConfigError`` when rows mode cannot run on ``df``: a Spark Connect DataFrame before
    PySpark 4.0, where ``foreachPartition`` is missing."""
    if not is_spark_connect(df) or pyspark_version() >= CONNECT_FOREACH_PARTITION_PYSPARK:
        return
    import pyspark

    from ..errors import ConfigError

    raise ConfigError(
        f"mode='rows' on Spark Connect needs PySpark {_shown(CONNECT_FOREACH_PARTITION_PYSPARK)} or newer "
        f"(DataFrame.foreachPartition); this is PySpark {pyspark.__version__}. Use mode='arrow' (the "
        f"default), which runs on Spark Connect from PySpark {_shown(MIN_PYSPARK)}")
