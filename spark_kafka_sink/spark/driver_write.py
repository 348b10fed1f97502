"""Small micro-batches written from the driver (option ``driver.write.max.rows``; docs/spark-sink.md,
"Small micro-batches").

A distributed write of a micro-batch of a few thousand rows costs more in its fixed part (a Python
worker per task, Arrow both ways, a stats row back) than in its rows. So before the distributed
job, ``KafkaSink`` (arrow mode, in ``foreachBatch``; ``write(df)`` is a batch job's, always
distributed) collects at most ``max_rows + 1`` rows of the sink's frame to the driver as Arrow:
one Spark job, in the JVM alone (:func:`collect_small`). When at most ``max_rows`` came back,
that is the whole micro-batch: the driver writes it with the writer a task runs
(:class:`~.arrow_writer.ArrowWriter`, as task 0, attempt 0), so it is checked, counted,
dead-lettered and (exactly-once) transacted as a task's partition is: at least once through the
driver's pooled producer, exactly once through :func:`transactional_producer`'s, which the sink
keeps between such micro-batches and commits with. When more came back, the rows collected are
dropped and the batch goes the distributed way; its upstream is then computed again (the first
time only up to the first ``max_rows + 1`` rows of each Spark partition, as Spark's ``limit``
stops early).

:class:`SmallBatchGuess` spares a stream that runs big that second computation: after a
micro-batch of more than ``max_rows`` rows the next one goes the distributed way at once; after a
small one (and for the first) the driver collects first. A distributed micro-batch counts as
small when its tasks wrote at most ``max_rows`` records (sent or failed), so a stream that slows
down comes back to the driver. ``max_rows=0`` turns it off. Spark Connect sessions before
PySpark 4.0 cannot collect as Arrow (:func:`collect_arrow` returns ``None``): their batches go
the distributed way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..producer.producer import KafkaProducer
from .options import SinkConfig
from .task import TaskInfo

__all__ = ["DRIVER_TASK", "SmallBatch", "SmallBatchGuess", "collect_arrow", "collect_small",
           "transactional_producer"]

DRIVER_TASK = TaskInfo(partition_id=0, attempt=0)
"""What the driver's write counts as: Spark partition 0, first attempt (exactly-once: the
transactional id ``<prefix>-0``, which the commit log's recovery fences as any task's)."""


@dataclass(frozen=True)
class SmallBatch:
    """A whole micro-batch collected to the driver: its Arrow batches and their row count."""

    batches: tuple[Any, ...]
    rows: int


def collect_arrow(frame: Any) -> list[Any] | None:
    """``frame``'s rows as a list of ``pyarrow.RecordBatch`` (one Spark job, no Python worker),
    or ``None`` where this session cannot collect as Arrow (Spark Connect before PySpark 4.0)."""
    collect = getattr(frame, "_collect_as_arrow", None)
    if collect is not None:  # classic PySpark
        return list(collect())
    to_arrow = getattr(frame, "toArrow", None)
    if to_arrow is not None:  # Spark Connect, PySpark 4.0 and newer
        return list(to_arrow().to_batches())
    return None


def collect_small(frame: Any, max_rows: int) -> SmallBatch | None:
    """The whole of ``frame`` when it has at most ``max_rows`` rows; ``None`` when it has more
    (or when it cannot be collected as Arrow here)."""
    if max_rows <= 0:
        return None
    batches = collect_arrow(frame.limit(max_rows + 1))
    if batches is None:
        return None
    rows = sum(batch.num_rows for batch in batches)
    if rows > max_rows:
        return None
    return SmallBatch(tuple(batch for batch in batches if batch.num_rows), rows)


class SmallBatchGuess:
    """Whether the next micro-batch should be collected first (see the module docstring): yes
    unless the last one was bigger than ``max_rows``; never with ``max_rows=0``."""

    __slots__ = ("max_rows", "_last_big")

    def __init__(self, max_rows: int) -> None:
        if max_rows < 0:
            raise ValueError(f"max_rows must be >= 0, got {max_rows}")
        self.max_rows = max_rows
        self._last_big = False

    def try_driver(self) -> bool:
        """Whether to collect the next micro-batch first."""
        return self.max_rows > 0 and not self._last_big

    def saw(self, rows: int) -> None:
        """The last micro-batch had ``rows`` rows."""
        self._last_big = rows > self.max_rows


def transactional_producer(config: SinkConfig, task: TaskInfo) -> KafkaProducer:
    """Exactly once: the driver's producer for ``task``'s transactional id, its transactions
    initialised (which fences and aborts what an earlier holder of the id left open). The sink
    keeps it between the micro-batches the driver writes, so each begins its transaction without
    InitProducerId, on warm connections, and commits it with the same producer."""
    producer = KafkaProducer(config.transactional_config(task.partition_id))
    try:
        producer.init_transactions()
    except BaseException:
        producer.close(0)
        raise
    return producer
