"""The driver's write of small micro-batches (``spark/driver_write.py``) and how ``KafkaSink``
chooses it: the collection bounded by ``driver.write.max.rows``, the guess after a big batch, and
the writer run as task 0 on the driver (a Spark-free frame stands for the micro-batch)."""

from __future__ import annotations

from types import SimpleNamespace

import pyarrow as pa
import pytest

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.spark import sink as sink_module
from spark_kafka_sink.spark.driver_write import (
    DRIVER_TASK, SmallBatchGuess, collect_arrow, collect_small,
)
from spark_kafka_sink.spark.metrics import SinkTaskMetrics
from spark_kafka_sink.spark.options import DEFAULT_DRIVER_WRITE_MAX_ROWS, SinkConfig
from spark_kafka_sink.spark.schema import Column, Kind, WriteSchema
from spark_kafka_sink.spark.task import Outcome, run_in_transaction


def batch(rows: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"value": [b"v%d" % i for i in range(rows)]})


class Frame:
    """A micro-batch of ``sizes`` Arrow batches (one per Spark partition): ``limit`` keeps what
    Spark's would (at most n rows), ``_collect_as_arrow`` returns them; the calls are kept."""

    schema = None

    def __init__(self, *sizes: int):
        self.sizes = sizes
        self.calls: list[str] = []
        self.limited: int | None = None

    def limit(self, rows: int) -> Frame:
        self.calls.append(f"limit({rows})")
        self.limited = rows
        return self

    def _collect_as_arrow(self) -> list[pa.RecordBatch]:
        self.calls.append("collect")
        left, out = self.limited, []
        for size in self.sizes:
            take = size if left is None else min(size, left)
            out.append(batch(take))
            left = None if left is None else left - take
        return out

    def mapInArrow(self, writer, schema):
        self.calls.append("mapInArrow")
        return SimpleNamespace(collect=lambda: [])


def test_a_frame_within_the_bound_is_collected_whole_in_one_job():
    frame = Frame(3, 0, 2)
    small = collect_small(frame, 5)
    assert frame.calls == ["limit(6)", "collect"]
    assert small.rows == 5 and [b.num_rows for b in small.batches] == [3, 2]  # empty ones dropped


def test_a_frame_over_the_bound_is_not_small_and_zero_never_collects():
    assert collect_small(Frame(4, 4), 7) is None
    frame = Frame(1)
    assert collect_small(frame, 0) is None and frame.calls == []


def test_collect_arrow_uses_what_the_session_has():
    table = pa.table({"value": [b"a", b"b"]})
    connect = SimpleNamespace(toArrow=lambda: table)  # Spark Connect, PySpark 4
    assert [b.num_rows for b in collect_arrow(connect)] == [2]
    assert collect_arrow(SimpleNamespace()) is None   # Spark Connect before PySpark 4
    old_connect = SimpleNamespace(limit=lambda rows: SimpleNamespace())
    assert collect_small(old_connect, 10) is None


def test_the_guess_after_a_big_batch_skips_the_collection_until_a_small_one():
    guess = SmallBatchGuess(100)
    assert guess.try_driver()                 # the first micro-batch: collect first
    guess.saw(101)
    assert not guess.try_driver()
    guess.saw(100)
    assert guess.try_driver()
    assert not SmallBatchGuess(0).try_driver()
    with pytest.raises(ValueError, match="max_rows must be >= 0"):
        SmallBatchGuess(-1)


@pytest.mark.parametrize("value, expected", [(None, DEFAULT_DRIVER_WRITE_MAX_ROWS), ("0", 0),
                                             (" 250 ", 250), (7, 7)])
def test_the_option(value, expected):
    options = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t"}
    if value is not None:
        options["driver.write.max.rows"] = value
    config = SinkConfig.from_options(options)
    assert config.driver_write_max_rows == expected
    assert ("driver.write.max.rows" in config.redacted()) == (expected != DEFAULT_DRIVER_WRITE_MAX_ROWS)


@pytest.mark.parametrize("value", ["-1", "many", "1e3", -5, 2.5, True])
def test_a_bad_option_is_named(value):
    with pytest.raises(ConfigError, match="option 'driver.write.max.rows' must be an integer of at least 0"):
        SinkConfig.from_options({"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t",
                                 "driver.write.max.rows": value})


class Writer:
    """``ArrowWriter`` as the sink builds it: the batches its ``run`` got, as task ``task()``."""

    runs: list = []

    def __init__(self, config, write_schema, *, batch_id=None, flat=False, task=None):
        self.task = task

    def run(self, batches):
        rows = sum(b.num_rows for b in batches)
        Writer.runs.append((self.task(), rows))
        return SimpleNamespace(metrics=lambda: SinkTaskMetrics(records_sent=rows, tasks=1))


@pytest.fixture
def sink(monkeypatch):
    """A sink whose Spark side is a :class:`Frame` and whose writer is :class:`Writer`."""
    monkeypatch.setattr(sink_module, "preflight", lambda config: SimpleNamespace(
        applied=lambda options: options))
    monkeypatch.setattr(sink_module, "validate_schema", lambda schema, config: WriteSchema(
        Column("value", 0, Kind.BINARY)))
    monkeypatch.setattr(sink_module, "sink_frame", lambda df, write_schema, **_: df)
    monkeypatch.setattr(sink_module, "ArrowWriter", Writer)
    monkeypatch.setattr(sink_module, "merge_stats", lambda rows: SinkTaskMetrics(
        records_sent=sum(rows), tasks=1))
    Writer.runs = []
    return sink_module.KafkaSink(**{"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t",
                                    "driver.write.max.rows": 10})


def test_foreach_batch_writes_small_batches_on_the_driver_and_big_ones_as_a_job(sink):
    small, big, after_big, small_again = Frame(4, 6), Frame(8, 8), Frame(2), Frame(3)
    big.mapInArrow = lambda writer, schema: SimpleNamespace(collect=lambda: [16])
    for batch_id, frame in enumerate((small, big, after_big, small_again)):
        sink(frame, batch_id)
    assert small.calls == ["limit(11)", "collect"]
    assert big.calls == ["limit(11)", "collect"]          # 11 rows came back: not small
    assert after_big.calls == ["mapInArrow"]              # guessed big: no collection first
    assert small_again.calls == ["limit(11)", "collect"]  # the job wrote 2 rows: small again
    assert Writer.runs == [(DRIVER_TASK, 10), (DRIVER_TASK, 3)]
    assert [metrics["record-send-total"] for _, metrics in sink.metrics_history] == [10, 16, 0, 3]


def test_a_batch_write_is_always_a_job(sink):
    frame = Frame(3)
    sink.write(frame)
    assert frame.calls == ["mapInArrow"] and Writer.runs == []


class LiveProducer:
    """The driver's transactional producer as ``run_in_transaction`` uses it: the calls kept."""

    def __init__(self):
        self.calls: list[str] = []

    def __getattr__(self, name):
        if name in ("begin_transaction", "flush", "abort_transaction", "close", "commit_transaction"):
            return lambda *args, **kwargs: self.calls.append(name)
        raise AttributeError(name)

    def metrics_snapshot(self):
        return SimpleNamespace(values={})

    def resumable_transaction(self):
        self.calls.append("resumable_transaction")
        return "the open transaction"


def eos_config() -> SinkConfig:
    return SinkConfig.from_options({"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t",
                                    "delivery.guarantee": "exactly-once",
                                    "transactional.id.prefix": "q"})


def test_a_driver_transaction_is_handed_out_open_and_the_producer_kept():
    producer = LiveProducer()
    run = run_in_transaction(eos_config(), producer, DRIVER_TASK, lambda p, outcome: None, Outcome(),
                             created=True)
    assert producer.calls == ["begin_transaction", "flush", "resumable_transaction"]
    assert run.transaction == "the open transaction" and run.producer_created


def test_a_failed_driver_write_aborts_its_transaction_and_leaves_closing_to_the_sink():
    producer = LiveProducer()

    def send(p, outcome):
        raise RuntimeError("the send broke")

    with pytest.raises(RuntimeError, match="the send broke"):
        run_in_transaction(eos_config(), producer, DRIVER_TASK, send, Outcome())
    assert producer.calls == ["begin_transaction", "flush", "abort_transaction"]
