"""The ``spark-submit`` jobs of the repository's ``jobs/`` folder, as ``spark-kafka-sink --help``
lists them, so they can be found from the command line.

They are scripts of the repository, not of the installed package: ``spark-submit`` runs them
from a clone's root, with Spark set up as :mod:`spark_kafka_sink.spark.submit` sets it up (the
venv's Python for workers and driver, loopback only, ``conf/spark-defaults.conf`` and the quiet
``conf/log4j2.properties``). Their logic is :mod:`spark_kafka_sink.spark.jobs`.
"""

from __future__ import annotations

import textwrap

JOBS = (
    ("jobs/stream_to_kafka.py",
     "stream a directory's json/csv/parquet files to a topic (Structured Streaming, "
     "foreachBatch(KafkaSink), availableNow or an interval trigger, with a checkpoint)"),
    ("jobs/batch_to_kafka.py",
     "write a directory's files to a topic in one batch job (KafkaSink.write)"),
)
"""Each job's path in the repository and what it does."""

SUBMIT = ("PYSPARK_PYTHON=.venv/bin/python SPARK_LOCAL_IP=127.0.0.1 \\\n"
          ".venv/bin/spark-submit --properties-file conf/spark-defaults.conf \\\n"
          "  --driver-java-options \"-Xss16m "
          "-Dlog4j2.configurationFile=file:$PWD/conf/log4j2.properties\" \\\n"
          "  jobs/JOB.py ARGUMENTS...")
"""How to run one from a clone's root."""
_WIDTH = 96


def jobs_help() -> str:
    """The ``--help`` epilog: the jobs, and how to run them."""
    width = max(len(path) for path, _ in JOBS)
    lines = ["jobs (spark-submit scripts in the repository's jobs/ folder; each one's docstring",
             "has a full command line):"]
    for path, what in JOBS:
        wrapped = textwrap.wrap(what, _WIDTH - width - 4)
        lines.append(f"  {path:<{width}}  {wrapped[0]}")
        lines.extend(" " * (width + 4) + more for more in wrapped[1:])
    lines.append("")
    lines.append("run one from a clone's root (.venv/bin/python jobs/JOB.py --help lists its")
    lines.append("arguments):")
    lines.extend("  " + line for line in SUBMIT.splitlines())
    return "\n".join(lines)
