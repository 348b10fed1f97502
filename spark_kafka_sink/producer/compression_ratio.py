"""How much the producer expects a batch to shrink when compressed, per topic: Java's
``CompressionRatioEstimator``, with its steps.

Java counts a compressed batch's *estimated compressed* size against ``batch.size``: the bytes
appended times the topic's estimated ratio (compressed over uncompressed) times 1.05. So with a
codec a batch holds as many records as fit in ``batch.size`` bytes once compressed, and a
compressible stream gets fewer, larger batches (each costing the broker the same fixed work). The
estimate starts at 1.0 (no gain assumed) and follows every batch built: when a batch compressed
better than expected the estimate improves by at most :data:`IMPROVING_STEP`, when worse it
deteriorates at once, by at least :data:`DETERIORATING_STEP`, so a surprise costs one oversized
batch at most.

``send_arrow`` sizes its batches with it (:meth:`.batch_size.BatchSize.arrow`) and the
accumulator feeds it the ratio of every batch it builds at drain, and uses it for the
drain's ``max.request.size`` check. Reads and writes are single float stores (the GIL makes each
atomic); a read racing an update sees the old or the new estimate, both valid.
"""

from __future__ import annotations

__all__ = ["CompressionRatioEstimator", "DETERIORATING_STEP", "ESTIMATION_FACTOR", "IMPROVING_STEP"]

ESTIMATION_FACTOR = 1.05
"""The margin on the estimated ratio (Java's ``COMPRESSION_RATE_ESTIMATION_FACTOR``)."""
IMPROVING_STEP = 0.005
"""The most the estimate improves per batch (Java's ``COMPRESSION_RATIO_IMPROVING_STEP``)."""
DETERIORATING_STEP = 0.05
"""The least the estimate deteriorates per worse batch (``COMPRESSION_RATIO_DETERIORATE_STEP``)."""


class CompressionRatioEstimator:
    """The estimated compression ratio of each topic under one codec (one per producer)."""

    __slots__ = ("_ratios",)

    def __init__(self) -> None:
        self._ratios: dict[str, float] = {}

    def estimate(self, topic: str) -> float:
        """The ratio expected for ``topic`` (1.0 until a batch of it was built)."""
        return self._ratios.get(topic, 1.0)

    def observe(self, topic: str, uncompressed: int, compressed: int) -> float:
        """Fold in a built batch of ``topic`` (its records section sizes, before and after
        compression); the new estimate."""
        if uncompressed <= 0:
            return self.estimate(topic)
        observed = compressed / uncompressed
        current = self.estimate(topic)
        if observed > current:
            current = max(current + DETERIORATING_STEP, observed)
        elif observed < current:
            current = max(current - IMPROVING_STEP, observed)
        self._ratios[topic] = current
        return current

    def estimated_size(self, topic: str, header: int, uncompressed: int) -> int:
        """A batch of ``uncompressed`` record bytes and a ``header`` once compressed, as expected."""
        return header + int(uncompressed * self.estimate(topic) * ESTIMATION_FACTOR)
