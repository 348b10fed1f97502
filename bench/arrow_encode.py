"""Arrow batch encoding vs the row builder: ``python -m bench.arrow_encode``.

No broker: this measures only the encoding of one partition's rows into record batches. Both
paths get the same rows (values of ``--value-size`` bytes, keys ``k0..k99``, one timestamp) and
produce the same bytes (checked on the first batch of each run):

- ``arrow``: :func:`spark_kafka_sink.record.arrow.encode_batches` on Arrow columns, then
  ``build()`` of every batch (header, CRC and compression);
- ``rows``: a ``RecordBatchBuilder.append_record`` loop over Python bytes, a new builder when one
  refuses a record, then ``build()``: the per-record work ``send()`` does to encode.

Figures are rows per CPU second of this process (``time.process_time``, so other processes on a
shared machine do not count), best of ``--repeat`` runs; compare them within one run.
``--batch-size`` is the batches' ``batch.size`` (256 KiB by default, as in ``make bench``; the
producer's own default is 16 KiB, where the per-batch work weighs more).

    python -m bench.arrow_encode --rows 1000000 --codecs none,lz4 --batch-size 16384
"""

from __future__ import annotations

import argparse
import time
from typing import Callable

import numpy as np
import pyarrow as pa

from spark_kafka_sink.record import RecordBatchBuilder
from spark_kafka_sink.record.arrow import encode_batches

DEFAULT_BATCH_SIZE = 256 * 1024
TIMESTAMP_MS = 1_700_000_000_000


def make_rows(rows: int, value_size: int) -> tuple[pa.Array, pa.Array]:
    """The value and key columns: ``value_size`` bytes of ``x``, keys ``k0..k99`` cycling."""
    data = np.full(rows * value_size, ord("x"), dtype=np.uint8)
    offsets = np.arange(0, (rows + 1) * value_size, value_size, dtype=np.int32)
    values = pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    names = pa.array([f"k{i}".encode() for i in range(100)], pa.binary())
    keys = names.take(pa.array(np.arange(rows) % 100))
    return values, keys


def encode_arrow(values: pa.Array, keys: pa.Array, codec: str, batch_size: int) -> list[bytes]:
    """Every batch's bytes, through the Arrow encoder."""
    batches = encode_batches(values, keys, timestamp_ms=TIMESTAMP_MS, batch_size=batch_size,
                             compression_type=codec)
    return [batch.builder.build() for batch in batches]


def encode_rows(values: list[bytes], keys: list[bytes], codec: str, batch_size: int) -> list[bytes]:
    """Every batch's bytes, through one ``append_record`` call per row."""
    built = []
    builder = RecordBatchBuilder(compression_type=codec, batch_size=batch_size)
    for key, value in zip(keys, values):
        if builder.append_record(TIMESTAMP_MS, key, value) is None:
            built.append(builder.build())
            builder = RecordBatchBuilder(compression_type=codec, batch_size=batch_size)
            builder.append_record(TIMESTAMP_MS, key, value)
    built.append(builder.build())
    return built


def best_of(repeat: int, run: Callable[[], list[bytes]]) -> tuple[float, list[bytes]]:
    """The least CPU time of ``repeat`` runs, and the last run's batches."""
    best, out = float("inf"), []
    for _ in range(repeat):
        began = time.process_time()
        out = run()
        best = min(best, time.process_time() - began)
    return best, out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.arrow_encode", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--codecs", default="none,lz4", help="comma list of compression types")
    parser.add_argument("--repeat", type=int, default=3, help="runs per path; the best is reported")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, help="batch.size in bytes")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    values, keys = make_rows(args.rows, args.value_size)
    value_list, key_list = values.to_pylist(), keys.to_pylist()
    print(f"{args.rows:,} rows x {args.value_size} B values, keys k0..k99, batch.size {args.batch_size:,}")
    print(f"{'codec':<8}{'path':<8}{'cpu s':>9}{'rows/s':>14}{'batches':>9}{'bytes':>14}{'speed-up':>10}")
    for codec in args.codecs.split(","):
        arrow_s, arrow_out = best_of(args.repeat, lambda: encode_arrow(values, keys, codec, args.batch_size))
        rows_s, rows_out = best_of(args.repeat,
                                   lambda: encode_rows(value_list, key_list, codec, args.batch_size))
        if arrow_out != rows_out:
            raise SystemExit(f"{codec}: the Arrow encoder's batches differ from the row builder's")
        for path, seconds, out in (("arrow", arrow_s, arrow_out), ("rows", rows_s, rows_out)):
            speed_up = f"{rows_s / arrow_s:.1f}x" if path == "arrow" else ""
            print(f"{codec:<8}{path:<8}{seconds:>9.3f}{args.rows / seconds:>14,.0f}{len(out):>9}"
                  f"{sum(map(len, out)):>14,}{speed_up:>10}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
