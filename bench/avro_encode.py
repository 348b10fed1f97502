"""The column-wise Avro encoder vs record-by-record encoders: ``python -m bench.avro_encode``.

No broker, no Spark: this measures only the encoding of rows into Confluent-framed Avro bodies
(magic byte, schema id, body). Every path gets the same rows, a 10-field record (an int, a long,
two doubles, three strings, a nullable string, a timestamp with a time zone and a decimal(10, 2)),
with the schema Spark's ``to_avro`` derives for it, and must give the same bytes (checked on
every row of the last run):

- ``columns``: :func:`spark_kafka_sink.avro.encode` on Arrow record batches of ``--batch-rows``
  rows (10,000 by default: Spark's ``spark.sql.execution.arrow.maxRecordsPerBatch``);
- ``fastavro``: ``fastavro.schemaless_writer`` in a loop over the same rows as Python dicts (a new
  ``BytesIO`` per record, the framing written first, as Confluent's serializer does); turning the
  Arrow batches into dicts is not counted;
- ``confluent``: confluent-kafka's own ``AvroSerializer`` called on each dict, as a producer loop
  would call it, with the subject ``<topic>-value`` (``TopicNameStrategy``) registered by a first,
  untimed call on confluent-kafka's in-memory registry client (a ``mock://`` URL: no server; the
  registry is called once either way, so a real one would change nothing in the loop). Its
  schema id is the one the other two paths frame with.

Figures are rows per CPU second of this process (``time.process_time``, so other processes on a
shared machine do not count), best of ``--repeat`` runs for each path; the ratios are of the same
run. The issue's target is at least five times fastavro's rate.

    python -m bench.avro_encode --rows 1000000
"""

from __future__ import annotations

import argparse
import decimal
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from spark_kafka_sink.avro import derive_schema, encode, to_json

from .arrow_encode import best_of

TOPIC = "bench-avro"
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


def encode_columns(batches: list[pa.RecordBatch], schema, schema_id: int) -> list[pa.Array]:
    """Every batch's bodies, through the column-wise encoder."""
    return [encode(batch, schema, schema_id).check() for batch in batches]


def encode_fastavro(records: list[dict], parsed, schema_id: int) -> list[bytes]:
    """Every record's body, one ``schemaless_writer`` call each."""
    import fastavro

    header = b"\x00" + schema_id.to_bytes(4, "big")
    write = fastavro.schemaless_writer
    out = []
    for record in records:
        buffer = io.BytesIO()
        buffer.write(header)
        write(buffer, parsed, record)
        out.append(buffer.getvalue())
    return out


@dataclass(frozen=True)
class ConfluentPath:
    """confluent-kafka's ``AvroSerializer`` with its subject registered, and the id it got."""

    serializer: Callable[[Any, Any], bytes]
    context: Any  # SerializationContext(TOPIC, VALUE)
    schema_id: int


def confluent_serializer(schema_json: str, first: dict) -> ConfluentPath:
    """An ``AvroSerializer`` on confluent-kafka's in-memory registry client (``mock://``, no
    server), the subject ``<TOPIC>-value`` registered by serializing ``first`` (untimed)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient, topic_subject_name_strategy
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient.new_client({"url": "mock://bench-avro"})
    serializer = AvroSerializer(client, schema_json, conf={"auto.register.schemas": True,
                                                           "subject.name.strategy": topic_subject_name_strategy})
    context = SerializationContext(TOPIC, MessageField.VALUE)
    framed = serializer(first, context)
    if framed[:1] != b"\x00":
        raise SystemExit("confluent-kafka's AvroSerializer did not write the Confluent framing")
    return ConfluentPath(serializer, context, int.from_bytes(framed[1:5], "big"))


def encode_confluent(records: list[dict], path: ConfluentPath) -> list[bytes]:
    """Every record through the serializer, one call each (as a produce loop calls it)."""
    serialize, context = path.serializer, path.context
    return [serialize(record, context) for record in records]


def first_difference(expected: list[bytes], got: list[bytes]) -> int | None:
    """The first row where ``got`` differs from ``expected`` (a missing row counts), else None."""
    for row, (a, b) in enumerate(zip(expected, got)):
        if a != b:
            return row
    return None if len(expected) == len(got) else min(len(expected), len(got))


def ratio(slow_s: float, fast_s: float) -> str:
    return f"{slow_s / fast_s:.1f}x" if fast_s > 0 else "n/a"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.avro_encode", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch-rows", type=int, default=10_000, help="rows per Arrow batch")
    parser.add_argument("--repeat", type=int, default=3, help="runs per path; the best is reported")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.batch_rows < 1 or args.repeat < 1:
        parser.error("--rows, --batch-rows and --repeat must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    import fastavro

    args = parse_args(argv)
    batches = make_batches(args.rows, args.batch_rows)
    schema = derive_schema(batches[0].schema)
    schema_json = to_json(schema)
    parsed = fastavro.parse_schema(json.loads(schema_json))
    records = [row for batch in batches for row in batch.to_pylist()]
    assert isinstance(records[0]["price"], decimal.Decimal)
    confluent = confluent_serializer(schema_json, records[0])
    schema_id = confluent.schema_id
    print(f"{args.rows:,} rows of a 10-field record, batches of {args.batch_rows:,} rows, subject "
          f"{TOPIC}-value registered as schema id {schema_id}, best of {args.repeat}", flush=True)
    columns_s, columns_out = best_of(args.repeat, lambda: encode_columns(batches, schema, schema_id))
    fastavro_s, fastavro_out = best_of(args.repeat, lambda: encode_fastavro(records, parsed, schema_id))
    confluent_s, confluent_out = best_of(args.repeat, lambda: encode_confluent(records, confluent))
    ours = [body for bodies in columns_out for body in bodies.to_pylist()]
    for path, out in (("column-wise", ours), ("fastavro", fastavro_out)):
        row = first_difference(confluent_out, out)
        if row is not None:
            raise SystemExit(f"row {row}: the {path} frame differs from confluent-kafka's AvroSerializer's")
    size = sum(map(len, confluent_out))
    print(f"{'path':<11}{'cpu s':>9}{'rows/s':>14}{'bytes':>14}{'vs fastavro':>13}{'vs confluent':>14}")
    for path, seconds in (("columns", columns_s), ("fastavro", fastavro_s), ("confluent", confluent_s)):
        print(f"{path:<11}{seconds:>9.3f}{args.rows / seconds:>14,.0f}{size:>14,}"
              f"{ratio(fastavro_s, seconds):>13}{ratio(confluent_s, seconds):>14}")
    print(f"column-wise / fastavro: {ratio(fastavro_s, columns_s)} (target >= 5x); column-wise / confluent "
          f"AvroSerializer: {ratio(confluent_s, columns_s)}; all {args.rows:,} frames byte-identical "
          f"across the three paths (5-byte header + body)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
