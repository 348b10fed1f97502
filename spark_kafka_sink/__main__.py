"""``python -m spark_kafka_sink`` runs the ``spark-kafka-sink`` command."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
