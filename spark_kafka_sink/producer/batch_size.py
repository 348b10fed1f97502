"""``batch.size`` as the producer applies it: every record batch size is decided here, once per
producer, and every part asks :class:`BatchSize` (made by :meth:`BatchSize.from_config`).

- Per-record sends (``send()``): :attr:`BatchSize.records`, ``batch.size`` itself. ``batch.size=0``
  disables batching, as in Java: the buffer pool, the sticky partitioner and the accumulator work
  with 1 (Java's ``Math.max(1, batchSize)``), and :attr:`BatchSize.one_record_per_batch` tells the
  accumulator to close every batch after its first record.
- Bulk writes (``send_arrow``; the Spark sink, whose rows mode sends record by record, takes the
  same size through :func:`with_bulk_batch_size`): :attr:`BatchSize.bulk`, below.
- ``send_arrow`` with a codec: :meth:`BatchSize.arrow`, the uncompressed bytes expected to
  compress to the bulk size under the topic's estimated ratio (:mod:`.compression_ratio`; Java
  counts a compressed batch's estimated compressed size against ``batch.size``), at most
  :attr:`BatchSize.arrow_cap`, never below the bulk size.

Bulk batches
------------
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

from dataclasses import dataclass

from ..config import ProducerConfig
from ..record.layout import HEADER_SIZE
from .compression_ratio import ESTIMATION_FACTOR, CompressionRatioEstimator

__all__ = ["BULK_BATCH_SIZE", "BatchSize", "with_bulk_batch_size"]

BULK_BATCH_SIZE = 1 << 20
"""The largest record batch a bulk write builds by default, in bytes (1 MiB)."""


@dataclass(frozen=True)
class BatchSize:
    """The batch sizes of one producer, in bytes; see the module docstring.

    ``records``: per-record sends (the pool's lease size, the sticky partitioner's switch, the
    accumulator's batches), at least 1; ``one_record_per_batch``: ``batch.size=0``;
    ``bulk``: ``send_arrow``'s batches without a codec; ``arrow_cap``: the most
    :meth:`arrow` gives with one.
    """

    records: int
    one_record_per_batch: bool
    bulk: int
    arrow_cap: int

    @classmethod
    def from_config(cls, config: ProducerConfig) -> BatchSize:
        records = max(1, config.batch_size)
        if config.is_set("batch.size"):
            bulk = records
        else:
            cap = min(BULK_BATCH_SIZE, config.max_request_size, config.buffer_memory // 4)
            bulk = max(cap, min(config.batch_size, config.buffer_memory), 1)
        return cls(records=records, one_record_per_batch=config.batch_size == 0, bulk=bulk,
                   arrow_cap=max(bulk, config.buffer_memory // 4))

    def arrow(self, topic: str, ratios: CompressionRatioEstimator | None) -> int:
        """The uncompressed bytes (header included) of a batch ``send_arrow`` builds for
        ``topic``: :attr:`bulk`; with a codec (``ratios``, the accumulator's estimates), as many
        as are expected to compress to :attr:`bulk`, within ``[bulk, arrow_cap]``."""
        if ratios is None:
            return self.bulk
        room = max(0, self.bulk - HEADER_SIZE)
        budget = HEADER_SIZE + int(room / (ratios.estimate(topic) * ESTIMATION_FACTOR))
        return max(self.bulk, min(self.arrow_cap, budget))


def with_bulk_batch_size(config: ProducerConfig) -> ProducerConfig:
    """``config`` for a bulk writer that also sends record by record (the Spark sink's rows
    mode): ``batch.size`` set to :attr:`BatchSize.bulk` unless the caller set it, so every send
    of the writer builds bulk batches and its logged config shows the size in use."""
    if config.is_set("batch.size"):
        return config
    return config.with_overrides({"batch.size": BatchSize.from_config(config).bulk})
