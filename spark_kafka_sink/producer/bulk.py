"""The record batch size of bulk writes: ``send_arrow`` and the Spark sink, when the caller has not
set ``batch.size``.

Java's 16 KiB ``batch.size`` suits a producer whose records trickle in: a batch fills in a few
milliseconds and a larger one would only wait (``linger.ms``). A bulk writer already holds whole
Arrow batches, tens of thousands of rows at once; cut into 16 KiB record batches (about 140
records of 100 B), every batch costs the broker its per-batch work (validation, offset
assignment, log append, replication bookkeeping) and the client its per-batch encoding and
bookkeeping: with 16 KiB batches the broker spends far more CPU per row than with 256 KiB ones
(bench/README.md, "Figures behind design choices", has the measurement).

So a bulk write, unless ``batch.size`` is set (then it is honoured exactly), builds batches of up
to :data:`BULK_BATCH_SIZE` (1 MiB, librdkafka's default), and never larger than

- ``max.request.size``: one batch must fit in one Produce request (and the sink's preflight checks
  that ``max.request.size`` does not exceed the topic's ``max.message.bytes``);
- a quarter of ``buffer.memory``, so that several batches can be in flight while the next are
  built;

nor smaller than the configured ``batch.size`` would be. A batch is built from rows at hand, so
it never holds a record back: Arrow batches are queued as soon as they are encoded, and rows
mode's partially filled batches still leave after ``linger.ms``.
"""

from __future__ import annotations

from ..config import ProducerConfig

__all__ = ["BULK_BATCH_SIZE", "bulk_batch_size"]

BULK_BATCH_SIZE = 1 << 20
"""The largest record batch a bulk write builds by default, in bytes (1 MiB)."""


def bulk_batch_size(config: ProducerConfig) -> int:
    """The ``batch.size`` of a bulk write under ``config`` (see the module docstring)."""
    if config.is_set("batch.size"):
        return max(1, config.batch_size)  # batch.size=0 (no batching) works as 1, as everywhere
    cap = min(BULK_BATCH_SIZE, config.max_request_size, config.buffer_memory // 4)
    return max(cap, min(config.batch_size, config.buffer_memory), 1)
