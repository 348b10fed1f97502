"""The shared body of ``jobs/stream_to_kafka.py`` and ``jobs/batch_to_kafka.py``.

The two scripts are thin so that everything here can be tested without ``spark-submit``:

- :mod:`.args`: :func:`parse_job_args` turns the command line into a :class:`JobSpec`;
- :mod:`.frame`: reading the source, :func:`match_source_columns` and :func:`to_kafka_frame`;
- :mod:`.run`: :func:`run_stream` / :func:`run_batch`, the :class:`JobResult`, :func:`summary`
  and the scripts' entry point :func:`main`.

How the demo and the tests launch the scripts is not the jobs' business: see
:mod:`spark_kafka_sink.spark.submit`.
"""

from ...errors import JobError
from .args import BOOTSTRAP_ENV, FORMATS, Columns, JobSpec, Source, Trigger, parse_job_args, parse_trigger
from .frame import match_source_columns, to_kafka_frame
from .run import BatchReport, JobResult, main, run_batch, run_stream, summary, total_metrics, write_metrics_json

__all__ = [
    "BOOTSTRAP_ENV", "FORMATS", "BatchReport", "Columns", "JobError", "JobResult", "JobSpec",
    "Source", "Trigger", "main", "match_source_columns", "parse_job_args", "parse_trigger",
    "run_batch", "run_stream", "summary", "to_kafka_frame", "total_metrics", "write_metrics_json",
]
