"""KafkaSink: the user-facing sink (DESIGN.md §5).

::

    sink = KafkaSink(**{"kafka.bootstrap.servers": "localhost:9092", "topic": "events"})
    df.writeStream.foreachBatch(sink).option("checkpointLocation", path).start()   # streaming
    sink.write(df)                                                                   # batch
    df.foreachPartition(sink.partition_writer(df.schema))                            # your own

The options are those of :class:`~spark_kafka_sink.spark.options.SinkConfig` (Spark's Kafka sink
options); they are checked when the sink is built. The DataFrame's schema is checked on the
driver (:func:`~spark_kafka_sink.spark.schema.validate_schema`) once per distinct schema, before
any task runs, so a bad column fails the batch without sending anything.

A sink pickles as its options alone (no cache, no Spark objects), so it can be shipped to
executors or stored by Spark as a ``foreachBatch`` function.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Mapping

from .options import SinkConfig
from .partition_writer import PartitionWriter
from .schema import WriteSchema, validate_schema

log = logging.getLogger(__name__)


class KafkaSink:
    """Writes DataFrames to Kafka: ``foreachBatch(sink)``, ``sink.write(df)``, or
    ``df.foreachPartition(sink.partition_writer(df.schema))``.

    Options come as keywords (``KafkaSink(**{"kafka.bootstrap.servers": ...})``), as a mapping
    (``KafkaSink({...})``), or both (keywords win).
    """

    def __init__(self, options: Mapping[str, Any] | None = None, /, **kwargs: Any):
        merged = {**(options or {}), **kwargs}
        self._config = SinkConfig.from_options(merged)
        self._schemas: dict[str, WriteSchema] = {}

    @property
    def config(self) -> SinkConfig:
        """The validated options."""
        return self._config

    def __call__(self, df: Any, batch_id: int) -> None:
        """``foreachBatch``: write micro-batch ``batch_id`` and log one line about it."""
        started = time.monotonic()
        self.write(df)
        log.info("KafkaSink: micro-batch %d written in %.3f s (%s)", batch_id,
                 time.monotonic() - started, self._target())

    def write(self, df: Any) -> None:
        """Write every row of ``df`` (a batch DataFrame) and wait for all of them; a failed task
        fails the call with the task's error."""
        df.foreachPartition(self.partition_writer(df.schema))

    def partition_writer(self, schema: Any) -> PartitionWriter:
        """The picklable function for ``df.foreachPartition`` writing rows of ``schema`` (a
        ``StructType``, usually ``df.schema``); the schema is validated here, on the driver."""
        return PartitionWriter(self._config, self._write_schema(schema))

    def _write_schema(self, schema: Any) -> WriteSchema:
        key = schema.json() if hasattr(schema, "json") else None
        cached = self._schemas.get(key) if key is not None else None
        if cached is None:
            cached = validate_schema(schema, self._config)
            if key is not None:
                self._schemas[key] = cached
        return cached

    def _target(self) -> str:
        return f"topic {self._config.topic!r}" if self._config.topic else "topics from the 'topic' column"

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self._config}

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        self._config = state["config"]
        self._schemas = {}

    def __repr__(self) -> str:
        return f"KafkaSink({self._config!r})"
