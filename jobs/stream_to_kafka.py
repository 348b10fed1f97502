"""Stream the files of a directory to a Kafka topic: Structured Streaming with
``foreachBatch(KafkaSink(...))``.

Run it with ``spark-submit`` from the repository root, Spark set up as docs/ARCHITECTURE.md
says ("Spark in tests and local runs": workers on
the venv's Python, loopback only, the project's Spark defaults, and the quiet log4j2 file added
to the ``-Xss16m`` the defaults already put in the driver's Java options)::

    PYSPARK_PYTHON=.venv/bin/python SPARK_LOCAL_IP=127.0.0.1 \\
    .venv/bin/spark-submit --properties-file conf/spark-defaults.conf \\
        --driver-java-options "-Xss16m -Dlog4j2.configurationFile=file:$PWD/conf/log4j2.properties" \\
        jobs/stream_to_kafka.py --source data/clicks --format json --topic clicks \\
        --bootstrap 127.0.0.1:9092 --key-column user_id --checkpoint /tmp/clicks-checkpoint \\
        --trigger availableNow --max-files-per-trigger 2 --metrics-json /tmp/clicks-metrics.json

``--trigger availableNow`` (the default) writes what is there now, in as many micro-batches as
``--max-files-per-trigger`` makes, then ends; ``--trigger '10 seconds'`` keeps watching the
directory until Ctrl-C. A restart with the same ``--checkpoint`` resumes where the last run
stopped. Without ``--value-column`` each record's value is its row as JSON; ``--key-column``
makes a column the key (so one user's events stay in one partition). Producer settings come
from ``conf/producer.properties`` (``--producer-properties`` for another file) and
``--option kafka.<property>=<value>``; the address from ``--bootstrap`` or ``$KAFKA_BOOTSTRAP``.
``--help`` lists every argument. The logic lives in :mod:`spark_kafka_sink.spark.jobs`.
"""

import sys
from pathlib import Path

from spark_kafka_sink.spark.jobs import main

PRODUCER_PROPERTIES = Path(__file__).resolve().parents[1] / "conf" / "producer.properties"

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], streaming=True, default_properties=PRODUCER_PROPERTIES))
