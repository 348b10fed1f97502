"""Round trip through a real Apache Kafka broker, one codec at a time.

A plain socket (BlockingConnection) negotiates ApiVersions, creates a 3-partition topic, reads
Metadata and produces batches built by ``record/`` with acks=all. confluent-kafka's consumer, an
independent client with CRC checking on, reads every partition back and every field is compared.
"""

from __future__ import annotations

import uuid

import pytest

from spark_kafka_sink import errors
from spark_kafka_sink.client.blocking import BlockingConnection
from spark_kafka_sink.protocol import apis
from spark_kafka_sink.record import CompressionType, RecordBatchBuilder, read_batches

from ..helpers import addresses, create_topic, produce
from ..verify import consume_all

pytestmark = pytest.mark.broker

PARTITIONS = 3
TIMESTAMP_CREATE_TIME = 1  # confluent_kafka.TIMESTAMP_CREATE_TIME
BASE_TS = 1_700_000_000_000


def _records_for(partition: int) -> list[dict]:
    """Keys, values, headers and timestamps covering the edge cases, different per partition."""
    records = [
        {"key": None, "value": None, "headers": [], "ts": BASE_TS},
        {"key": b"", "value": b"", "headers": [], "ts": BASE_TS + 1},
        {"key": b"k", "value": None, "headers": [("h", None)], "ts": BASE_TS + 2},
        {"key": None, "value": b"v" * 300, "headers": [("dup", b"1"), ("dup", b"2"), ("dup", None)],
         "ts": BASE_TS - 5_000},
        {"key": "ключ".encode(), "value": bytes(range(256)), "headers": [("ü-key", b"\x00\xff")],
         "ts": 0},
    ]
    for i in range(200):
        records.append({"key": f"key-{partition}-{i % 7}".encode(),
                        "value": f"value-{partition}-{i}".encode() * (1 + i % 5),
                        "headers": [("i", str(i).encode())] if i % 3 else [],
                        "ts": BASE_TS + 10 * i})
    return records


def _build_batches(records: list[dict], codec: CompressionType) -> list[bytes]:
    """Two batches per partition (the broker takes one batch per partition per Produce request)."""
    half = len(records) // 2
    batches = []
    for chunk in (records[:half], records[half:]):
        builder = RecordBatchBuilder(compression_type=codec, batch_size=1 << 20)
        for rec in chunk:
            assert builder.append(rec["ts"], rec["key"], rec["value"], rec["headers"]) is not None
        batches.append(builder.build())
    return batches


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name.lower())
def test_produce_batches_read_back_by_confluent_kafka(kafka, codec):
    topic = f"roundtrip-{codec.name.lower()}-{uuid.uuid4().hex[:8]}"
    with BlockingConnection(*addresses(kafka.bootstrap_servers)[0]) as conn:
        # ApiVersions was negotiated on connect: the broker's ranges and ours overlap.
        assert conn.version_for(apis.PRODUCE) >= 7, "zstd needs Produce v7+; the broker offers it"
        assert conn.version_for(apis.METADATA) >= 9
    leaders = create_topic(kafka.bootstrap_servers, topic, PARTITIONS)
    assert sorted(leaders) == list(range(PARTITIONS))

    expected = {}
    for partition in range(PARTITIONS):
        records = _records_for(partition)
        expected[partition] = records
        base_offset = 0
        for batch in _build_batches(records, codec):
            part = produce(kafka.bootstrap_servers, topic, partition, batch)
            assert (part.index, part.error_code, part.base_offset) == (partition, 0, base_offset), part
            base_offset += next(read_batches(batch)).record_count

    consumed = consume_all(kafka.bootstrap_servers, topic, PARTITIONS,
                           expected_count=sum(len(r) for r in expected.values()))
    for partition, records in expected.items():
        got = consumed[partition]
        assert [m.offset for m in got] == list(range(len(records)))
        assert [m.key for m in got] == [r["key"] for r in records]
        assert [m.value for m in got] == [r["value"] for r in records]
        assert [m.headers for m in got] == [r["headers"] for r in records]
        assert [m.timestamp_ms for m in got] == [r["ts"] for r in records]
        assert {m.timestamp_type for m in got} == {TIMESTAMP_CREATE_TIME}


def test_corrupted_crc_is_rejected_by_the_broker(kafka):
    topic = f"corrupt-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, 1)

    builder = RecordBatchBuilder(compression_type=CompressionType.NONE)
    for i in range(10):
        builder.append(BASE_TS + i, f"k{i}".encode(), f"v{i}".encode(), [])
    corrupted = bytearray(builder.build())
    corrupted[-3] ^= 0xFF                      # inside the last record, covered by the CRC

    with pytest.raises(errors.CorruptRecordError, match="(?i)crc"):
        list(read_batches(bytes(corrupted)))

    part = produce(kafka.bootstrap_servers, topic, 0, bytes(corrupted))
    code = part.error_code
    assert code == errors.CorruptMessageError.code == 2
    with pytest.raises(errors.CorruptMessageError):
        errors.raise_for_code(code, topic)

    assert consume_all(kafka.bootstrap_servers, topic, 1, expected_count=0)[0] == []
