"""Running a streaming query through a sink to completion, for the Spark tests."""

from __future__ import annotations


def run_available_now(stream, sink, checkpoint: str, *, timeout_s: float = 120) -> list[dict]:
    """Write ``stream`` with ``foreachBatch(sink)`` and ``trigger(availableNow=True)`` until it ends;
    the progress entries of the micro-batches that had input rows. Fails if the query did not
    finish in ``timeout_s`` or ended with an exception."""
    query = (stream.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(timeout_s), f"the availableNow query did not finish in {timeout_s} s"
    finally:
        query.stop()
    assert query.exception() is None
    return [p for p in query.recentProgress if p["numInputRows"] > 0]
