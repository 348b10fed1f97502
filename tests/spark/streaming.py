"""Running a streaming query through a sink to completion, for the Spark tests."""

from __future__ import annotations


class RunningQuery:
    """An ``availableNow`` query started by :func:`start_available_now`."""

    def __init__(self, query):
        self.query = query

    def wait(self, *, timeout_s: float = 120) -> list[dict]:
        """Wait for the query to end; the progress entries of the micro-batches that had input
        rows. Fails if it did not finish in ``timeout_s`` or ended with an exception."""
        try:
            assert self.query.awaitTermination(timeout_s), \
                f"the availableNow query did not finish in {timeout_s} s"
        finally:
            self.query.stop()
        assert self.query.exception() is None
        return [p for p in self.query.recentProgress if p["numInputRows"] > 0]


def start_available_now(stream, sink, checkpoint: str) -> RunningQuery:
    """Start writing ``stream`` with ``foreachBatch(sink)`` and ``trigger(availableNow=True)``."""
    return RunningQuery(stream.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
                        .trigger(availableNow=True).start())


def run_available_now(stream, sink, checkpoint: str, *, timeout_s: float = 120) -> list[dict]:
    """Write ``stream`` with ``foreachBatch(sink)`` and ``trigger(availableNow=True)`` until it ends
    (:meth:`RunningQuery.wait`)."""
    return start_available_now(stream, sink, checkpoint).wait(timeout_s=timeout_s)
