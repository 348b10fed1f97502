"""The sink's log lines in a notebook's output (see docs/notebooks.md).

::

    import spark_kafka_sink
    spark_kafka_sink.notebook_logging()        # once; again is harmless
    sink.write(df)    # prints: KafkaSink: write written in 0.412 s: record-send-total=1000 ...
    spark_kafka_sink.notebook_logging(False)   # back as it was

After each micro-batch (or ``write``) ``KafkaSink`` logs one line at INFO (logger
``spark_kafka_sink.spark.sink``), which Python's default logging drops (only WARNING and above
reach stderr). :func:`notebook_logging` puts one :class:`NotebookHandler` on the package's logger
``spark_kafka_sink`` and sets the Spark layer's logger (``spark_kafka_sink.spark``) to INFO: the
sink's lines and every warning of the package reach the cell's output, the producer's and the
client's INFO lines do not. The handler writes to the ``sys.stdout`` of the moment of each line
(a notebook replaces it per kernel), or to the stream given. Calling it again keeps the one
handler (its stream and level updated); ``notebook_logging(False)`` removes it and gives the
Spark layer's logger back the level it had. Records still propagate to the root logger: a
root handler configured by the application shows them as well.

Only the driver's lines: the executors' (tasks) log in their own processes, and the Data Source
logs its commit line in Spark's commit worker (docs/notebooks.md). Imports nothing of the package.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

__all__ = ["notebook_logging", "NotebookHandler", "PACKAGE_LOGGER", "SINK_LOGGER"]

PACKAGE_LOGGER = "spark_kafka_sink"
SINK_LOGGER = "spark_kafka_sink.spark"
"""The logger whose level :func:`notebook_logging` sets: the sink's driver-side lines."""


class NotebookHandler(logging.Handler):
    """Writes each record as one line to ``stream``, or to ``sys.stdout`` as it is when the
    record comes (``stream=None``). INFO lines are the message alone; WARNING and above name
    their level and logger."""

    def __init__(self, stream: TextIO | None = None, level: int = logging.INFO):
        super().__init__(level)
        self.stream = stream
        self.previous_level = logging.NOTSET
        """The Spark layer logger's level before :func:`notebook_logging` set it."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + logging.Formatter().formatException(record.exc_info)
        if record.levelno < logging.WARNING:
            return message
        return f"{record.levelname} {record.name}: {message}"

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = self.stream if self.stream is not None else sys.stdout
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:  # noqa: BLE001 - logging's contract: report, never raise
            self.handleError(record)


def notebook_logging(enable: bool = True, *, stream: TextIO | None = None,
                     level: int | str = logging.INFO) -> NotebookHandler | None:
    """Show the sink's per-write summary line (and the package's warnings) in the notebook:
    ``enable`` installs or updates the one :class:`NotebookHandler` and returns it; ``False``
    removes it and returns ``None``. ``stream``: where to write (default: ``sys.stdout`` at each
    line); ``level``: the Spark layer's level and the handler's (``INFO``; ``DEBUG`` for more)."""
    package = logging.getLogger(PACKAGE_LOGGER)
    sink = logging.getLogger(SINK_LOGGER)
    installed = next((h for h in package.handlers if isinstance(h, NotebookHandler)), None)
    if not enable:
        if installed is not None:
            package.removeHandler(installed)
            sink.setLevel(installed.previous_level)
        return None
    number = logging.getLevelName(level) if isinstance(level, str) else level
    if not isinstance(number, int):
        raise ValueError(f"level must be a logging level (INFO, DEBUG, 20, ...), got {level!r}")
    if installed is None:
        installed = NotebookHandler(stream, number)
        installed.previous_level = sink.level
        package.addHandler(installed)
    else:
        installed.stream = stream
        installed.setLevel(number)
    sink.setLevel(number)
    return installed
