"""The column-wise Avro encoder vs fastavro, record by record: ``python -m bench.avro_encode``.

No broker, no Spark: this measures only the encoding of rows into Confluent-framed Avro bodies
(magic byte, schema id, body). Both paths get the same rows, a 10-field record (an int, a long,
two doubles, three strings, a nullable string, a timestamp with a time zone and a decimal(10, 2)),
with the schema Spark's ``to_avro`` derives for it, and must give the same bytes (checked on
every row of the last run):

- ``columns``: :func:`spark_kafka_sink.avro.encode` on Arrow record batches of ``--batch-rows``
  rows (10,000 by default: Spark's ``spark.sql.execution.arrow.maxRecordsPerBatch``);
- ``fastavro``: ``fastavro.schemaless_writer`` in a loop over the same rows as Python dicts (a new
  ``BytesIO`` per record, the framing written first, as Confluent's serializer does); turning the
  Arrow batches into dicts is not counted.

Figures are rows per CPU second of this process (``time.process_time``, so other processes on a
shared machine do not count), best of ``--repeat`` runs for each path; compare them within one
run. The issue's target is at least five times fastavro's rate.

    python -m bench.avro_encode --rows 1000000
"""

from __future__ import annotations

import argparse
import decimal
import io
import json

import numpy as np
import pyarrow as pa

from spark_kafka_sink.avro import derive_schema, encode, to_json

from .arrow_encode import best_of

SCHEMA_ID = 42
WORDS = np.array(["alpha", "beta", "gamma", "delta", "epsilon", "a longer value of some thirty bytes", ""])


def make_batches(rows: int, batch_rows: int, seed: int = 7) -> list[pa.RecordBatch]:
    """``rows`` rows of the 10-field record in batches of ``batch_rows``."""
    rng = np.random.default_rng(seed)

    def words() -> pa.Array:
        return pa.array(WORDS[rng.integers(0, len(WORDS), rows)])

    nullable = WORDS[rng.integers(0, len(WORDS), rows)].astype(object)
    nullable[rng.random(rows) < 0.3] = None
    unscaled = rng.integers(-10 ** 9, 10 ** 9, rows)
    decimals = pa.Array.from_buffers(pa.decimal128(10, 2), rows, [
        None, pa.py_buffer(np.stack([unscaled, unscaled >> 63], axis=1).astype(np.int64).tobytes())])
    table = pa.table({
        "id": pa.array(rng.integers(0, 2 ** 62, rows)),
        "count": pa.array(rng.integers(-1000, 100_000, rows, dtype=np.int32)),
        "amount": pa.array(rng.normal(100, 50, rows)),
        "weight": pa.array(rng.random(rows)),
        "name": words(),
        "city": words(),
        "country": words(),
        "note": pa.array(nullable.tolist(), pa.string()),
        "at": pa.array(rng.integers(1_600_000_000_000_000, 1_700_000_000_000_000, rows), pa.timestamp("us", "UTC")),
        "price": decimals,
    })
    fields = [pa.field(f.name, f.type, nullable=f.name == "note") for f in table.schema]
    table = table.cast(pa.schema(fields))
    return table.to_batches(max_chunksize=batch_rows)


def encode_columns(batches: list[pa.RecordBatch], schema) -> list[pa.Array]:
    """Every batch's bodies, through the column-wise encoder."""
    return [encode(batch, schema, SCHEMA_ID).check() for batch in batches]


def encode_fastavro(records: list[dict], parsed) -> list[bytes]:
    """Every record's body, one ``schemaless_writer`` call each."""
    import fastavro

    header = b"\x00" + SCHEMA_ID.to_bytes(4, "big")
    write = fastavro.schemaless_writer
    out = []
    for record in records:
        buffer = io.BytesIO()
        buffer.write(header)
        write(buffer, parsed, record)
        out.append(buffer.getvalue())
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.avro_encode", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch-rows", type=int, default=10_000, help="rows per Arrow batch")
    parser.add_argument("--repeat", type=int, default=3, help="runs per path; the best is reported")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    import fastavro

    args = parse_args(argv)
    batches = make_batches(args.rows, args.batch_rows)
    schema = derive_schema(batches[0].schema)
    parsed = fastavro.parse_schema(json.loads(to_json(schema)))
    records = [row for batch in batches for row in batch.to_pylist()]
    assert isinstance(records[0]["price"], decimal.Decimal)
    print(f"{args.rows:,} rows of a 10-field record, batches of {args.batch_rows:,} rows, "
          f"schema id {SCHEMA_ID}, best of {args.repeat}")
    columns_s, columns_out = best_of(args.repeat, lambda: encode_columns(batches, schema))
    fastavro_s, fastavro_out = best_of(args.repeat, lambda: encode_fastavro(records, parsed))
    ours = [body for bodies in columns_out for body in bodies.to_pylist()]
    if ours != fastavro_out:
        first = next(i for i, (a, b) in enumerate(zip(ours, fastavro_out)) if a != b)
        raise SystemExit(f"row {first}: the column-wise body differs from fastavro's")
    size = sum(map(len, fastavro_out))
    print(f"{'path':<10}{'cpu s':>9}{'rows/s':>14}{'bytes':>14}{'ratio':>8}")
    for path, seconds in (("columns", columns_s), ("fastavro", fastavro_s)):
        ratio = f"{fastavro_s / columns_s:.1f}x" if path == "columns" else ""
        print(f"{path:<10}{seconds:>9.3f}{args.rows / seconds:>14,.0f}{size:>14,}{ratio:>8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
