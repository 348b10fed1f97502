"""spark_kafka_sink.notebook_logging: the sink's per-write line (and the package's warnings) on the
notebook's output, once however often it is called, and gone again when asked; no Spark."""

from __future__ import annotations

import io
import logging
import sys

import pytest

import spark_kafka_sink
from spark_kafka_sink.notebook import PACKAGE_LOGGER, SINK_LOGGER, NotebookHandler, notebook_logging

LINE = "KafkaSink: micro-batch 3 written in 0.412 s: record-send-total=1000 byte-total=48000"


@pytest.fixture(autouse=True)
def removed_after():
    sink = logging.getLogger(SINK_LOGGER)
    level = sink.level
    yield
    notebook_logging(False)
    sink.setLevel(level)


def ours() -> list[logging.Handler]:
    return [h for h in logging.getLogger(PACKAGE_LOGGER).handlers if isinstance(h, NotebookHandler)]


def test_the_sinks_line_reaches_stdout_and_the_producers_info_does_not(capsys):
    assert spark_kafka_sink.notebook_logging is notebook_logging  # the package root exports it
    logging.getLogger("spark_kafka_sink.spark.sink").info("%s", LINE)
    assert capsys.readouterr().out == ""  # Python's default: INFO dropped
    handler = notebook_logging()
    logging.getLogger("spark_kafka_sink.spark.sink").info("%s", LINE)
    logging.getLogger("spark_kafka_sink.client.network_client").info("node 1 disconnected")
    logging.getLogger("spark_kafka_sink.client.network_client").warning("bootstrap broker down")
    out = capsys.readouterr().out
    assert out == f"{LINE}\nWARNING spark_kafka_sink.client.network_client: bootstrap broker down\n"
    assert ours() == [handler] and handler.stream is None


def test_the_stream_is_looked_up_at_each_line():
    notebook_logging()
    first, second = io.StringIO(), io.StringIO()
    saved = sys.stdout
    try:
        sys.stdout = first  # as a kernel does, per cell
        logging.getLogger("spark_kafka_sink.spark.sink").info("one")
        sys.stdout = second
        logging.getLogger("spark_kafka_sink.spark.datasource").info("two")
    finally:
        sys.stdout = saved
    assert (first.getvalue(), second.getvalue()) == ("one\n", "two\n")


def test_calling_again_keeps_one_handler_and_false_restores_the_level():
    sink = logging.getLogger(SINK_LOGGER)
    sink.setLevel(logging.ERROR)
    stream = io.StringIO()
    first = notebook_logging()
    again = notebook_logging(stream=stream, level="DEBUG")
    assert again is first and ours() == [first] and sink.level == logging.DEBUG
    logging.getLogger("spark_kafka_sink.spark.sink").debug("detail")
    assert stream.getvalue() == "detail\n"
    assert notebook_logging(False) is None and ours() == [] and sink.level == logging.ERROR
    assert notebook_logging(False) is None  # removing twice is harmless
    logging.getLogger("spark_kafka_sink.spark.sink").error("after removal")
    assert stream.getvalue() == "detail\n"


def test_an_exception_is_written_under_its_line():
    stream = io.StringIO()
    notebook_logging(stream=stream)
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("spark_kafka_sink.spark.sink").exception("abort failed")
    text = stream.getvalue()
    assert text.startswith("ERROR spark_kafka_sink.spark.sink: abort failed\nTraceback")
    assert text.rstrip().endswith("ValueError: boom")


def test_a_level_that_is_none_is_refused():
    with pytest.raises(ValueError, match="level must be a logging level"):
        notebook_logging(level="loud")
    assert ours() == []
