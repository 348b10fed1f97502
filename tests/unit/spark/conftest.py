"""The Data Source's unit tests need PySpark's Data Source API (4.0+): on an older PySpark (the
compatibility runs, ``make compat``) they are not collected, and ``test_compat.py`` checks the
error that the Data Source module gives there instead."""

from spark_kafka_sink.spark.compat import has_data_source_api

collect_ignore = [] if has_data_source_api() else ["test_datasource.py"]
