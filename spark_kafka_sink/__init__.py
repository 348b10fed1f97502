"""spark-kafka-sink: write Spark DataFrames to Apache Kafka with a pure-Python producer."""

__version__ = "0.1.0"
