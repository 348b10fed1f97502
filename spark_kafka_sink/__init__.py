"""spark-kafka-sink: write Spark DataFrames to Apache Kafka with a pure-Python producer.

``__all__`` is the public surface of the package root (docs/ARCHITECTURE.md, "Public names").
Each of its names but ``__version__`` is imported on first use (PEP 562), so tools that need only
a corner of the package (the embedded broker, the CLI) do not load the producer's dependencies.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .version import __version__

__all__ = (
    "KafkaSink",
    "KafkaDataSource",
    "KafkaProducer",
    "DeliveryTally",
    "ProducerConfig",
    "RecordMetadata",
    "TopicPartition",
    "ResumableTransaction",
    "commit_resumable",
    "abort_resumable",
    "notebook_logging",
    "__version__",
)

# name -> the module it is imported from, on first use
_EXPORTS = {
    "KafkaSink": "spark_kafka_sink.spark.sink",
    "KafkaDataSource": "spark_kafka_sink.spark.datasource",
    "KafkaProducer": "spark_kafka_sink.producer.producer",
    "DeliveryTally": "spark_kafka_sink.producer.tally",
    "ResumableTransaction": "spark_kafka_sink.producer.transactions.resumable",
    "commit_resumable": "spark_kafka_sink.producer.transactions.resumable",
    "abort_resumable": "spark_kafka_sink.producer.transactions.resumable",
    "ProducerConfig": "spark_kafka_sink.config",
    "RecordMetadata": "spark_kafka_sink.structs",
    "TopicPartition": "spark_kafka_sink.structs",
    "notebook_logging": "spark_kafka_sink.notebook",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from .config import ProducerConfig
    from .notebook import notebook_logging
    from .producer.producer import KafkaProducer
    from .producer.transactions.resumable import ResumableTransaction, abort_resumable, commit_resumable
    from .producer.tally import DeliveryTally
    from .spark.datasource import KafkaDataSource
    from .spark.sink import KafkaSink
    from .structs import RecordMetadata, TopicPartition
