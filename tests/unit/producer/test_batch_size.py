"""Every batch size the producer uses (``producer/batch_size.py``): per-record sends, bulk writes
(``send_arrow``, the sink) and ``send_arrow`` with a codec, and the parts that ask for them."""

from __future__ import annotations

import pytest

from spark_kafka_sink.config import ProducerConfig
from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.producer.batch_size import BULK_BATCH_SIZE, BatchSize, with_bulk_batch_size
from spark_kafka_sink.producer.compression_ratio import ESTIMATION_FACTOR, CompressionRatioEstimator
from spark_kafka_sink.record.layout import HEADER_SIZE
from spark_kafka_sink.spark.options import SinkConfig

from .threaded_cluster import Cluster

BOOT = {"bootstrap.servers": "127.0.0.1:9092"}
MiB = 1 << 20

# The sizes each config gave before they were decided in one place (computed from the producer,
# the accumulator, send_arrow and the sink's options as they stood), kept as the contract:
# (batch.size, buffer.memory, max.request.size, codec; None: not set) ->
# (records, one_record_per_batch, bulk, arrow at the estimates 1.0 (none yet) / 0.1 / 0.5 / 2.0,
#  the sink's batch.size)
SIZES = [
    # batch.size not set: 16 KiB per record, bulk up to 1 MiB within the request and buffer/4
    ((None, None, None, "none"), (16_384, False, MiB, MiB, MiB, MiB, MiB, MiB)),
    ((None, None, None, "zstd"), (16_384, False, MiB, MiB, 8 * MiB, 1_997_232, MiB, MiB)),
    ((None, None, None, "gzip"), (16_384, False, MiB, MiB, 8 * MiB, 1_997_232, MiB, MiB)),
    ((None, None, 100_000, "none"), (16_384, False, 100_000, 100_000, 100_000, 100_000, 100_000, 100_000)),
    ((None, None, 100_000, "zstd"), (16_384, False, 100_000, 100_000, 951_860, 190_421, 100_000, 100_000)),
    ((None, 2 * MiB, None, "none"), (16_384, False, 524_288, 524_288, 524_288, 524_288, 524_288, 524_288)),
    ((None, 2 * MiB, 100_000, "zstd"), (16_384, False, 100_000, 100_000, 524_288, 190_421, 100_000, 100_000)),
    ((None, 600_000, 100_000, "zstd"), (16_384, False, 100_000, 100_000, 150_000, 150_000, 100_000, 100_000)),
    ((None, 20_000, None, "none"), (16_384, False, 16_384, 16_384, 16_384, 16_384, 16_384, 16_384)),
    ((None, 20_000, 100_000, "zstd"), (16_384, False, 16_384, 16_384, 16_384, 16_384, 16_384, 16_384)),
    # batch.size=0: no batching, sizes of 1 (a codec's budget is one header: still one record)
    ((0, None, None, "none"), (1, True, 1, 1, 1, 1, 1, 0)),
    ((0, None, None, "zstd"), (1, True, 1, 61, 61, 61, 61, 0)),
    ((0, None, None, "gzip"), (1, True, 1, 61, 61, 61, 61, 0)),
    ((0, 20_000, 100_000, "none"), (1, True, 1, 1, 1, 1, 1, 0)),
    ((1, None, None, "none"), (1, False, 1, 1, 1, 1, 1, 1)),
    ((1, None, None, "zstd"), (1, False, 1, 61, 61, 61, 61, 1)),
    # batch.size set: honoured exactly, by bulk writes too; a codec scales send_arrow's budget
    ((8192, None, None, "none"), (8192, False, 8192, 8192, 8192, 8192, 8192, 8192)),
    ((8192, None, None, "zstd"), (8192, False, 8192, 8192, 77_499, 15_548, 8192, 8192)),
    ((8192, 20_000, None, "zstd"), (8192, False, 8192, 8192, 8192, 8192, 8192, 8192)),
    ((16_384, None, None, "none"), (16_384, False, 16_384, 16_384, 16_384, 16_384, 16_384, 16_384)),
    ((16_384, None, None, "zstd"), (16_384, False, 16_384, 16_384, 155_518, 31_152, 16_384, 16_384)),
    ((16_384, 600_000, None, "zstd"), (16_384, False, 16_384, 16_384, 150_000, 31_152, 16_384, 16_384)),
    ((300_000, None, None, "zstd"), (300_000, False, 300_000, 300_000, 2_856_622, 571_373, 300_000, 300_000)),
    ((300_000, 2 * MiB, 100_000, "zstd"), (300_000, False, 300_000, 300_000, 524_288, 524_288, 300_000,
                                           300_000)),
    ((2 * MiB, None, None, "zstd"), (2 * MiB, False, 2 * MiB, 2 * MiB, 8 * MiB, 3_994_520, 2 * MiB, 2 * MiB)),
    ((2 * MiB, None, 4 * MiB, "gzip"), (2 * MiB, False, 2 * MiB, 2 * MiB, 8 * MiB, 3_994_520, 2 * MiB,
                                        2 * MiB)),
]
ESTIMATES = (None, 0.1, 0.5, 2.0)  # None: no batch built yet (1.0)


def properties(batch_size, buffer_memory, max_request_size, codec) -> dict:
    given = {"batch.size": batch_size, "buffer.memory": buffer_memory,
             "max.request.size": max_request_size}
    return {**BOOT, "compression.type": codec, **{k: v for k, v in given.items() if v is not None}}


def estimator(topic: str, ratio: float | None) -> CompressionRatioEstimator:
    ratios = CompressionRatioEstimator()
    for _ in range(300 if ratio is not None else 0):
        ratios.observe(topic, 10_000, int(10_000 * ratio))
    return ratios


@pytest.mark.parametrize("settings, expected", SIZES, ids=lambda v: str(v) if len(v) == 4 else "")
def test_every_batch_size_is_what_it_was(settings, expected):
    records, one_record_per_batch, bulk, *arrow, sink = expected
    config = ProducerConfig(properties(*settings))
    sizes = BatchSize.from_config(config)
    assert (sizes.records, sizes.one_record_per_batch, sizes.bulk) == (records, one_record_per_batch, bulk)
    with_codec = settings[3] != "none"
    assert [sizes.arrow("t", estimator("t", ratio) if with_codec else None)
            for ratio in ESTIMATES] == arrow
    options = {f"kafka.{name}": value for name, value in properties(*settings).items()}
    assert SinkConfig.from_options({**options, "topic": "t"}).producer_config.batch_size == sink
    assert with_bulk_batch_size(config).batch_size == sink


@pytest.mark.parametrize("settings, expected", SIZES, ids=lambda v: str(v) if len(v) == 4 else "")
def test_a_producer_the_sink_configures_sends_bulk_batches_record_by_record_too(settings, expected):
    _, one_record_per_batch, bulk, *arrow, _ = expected
    sizes = BatchSize.from_config(with_bulk_batch_size(ProducerConfig(properties(*settings))))
    assert (sizes.records, sizes.one_record_per_batch, sizes.bulk) == (bulk, one_record_per_batch, bulk)
    with_codec = settings[3] != "none"
    assert [sizes.arrow("t", estimator("t", ratio) if with_codec else None)
            for ratio in ESTIMATES] == arrow


def test_a_compressed_arrow_batch_is_expected_to_shrink_to_the_bulk_size():
    sizes = BatchSize.from_config(ProducerConfig({**BOOT, "batch.size": 16_384, "compression.type": "zstd"}))
    ratios = estimator("t", 0.1)
    budget = sizes.arrow("t", ratios)
    assert budget == HEADER_SIZE + int((16_384 - HEADER_SIZE) / (0.1 * ESTIMATION_FACTOR))  # ~155 KiB
    assert ratios.estimated_size("t", HEADER_SIZE, budget - HEADER_SIZE) <= 16_384 + 1
    assert sizes.arrow("other", ratios) == 16_384                 # per topic: none seen yet


def test_is_set_tells_a_given_property_from_a_default():
    config = ProducerConfig({**BOOT, "batch.size": 16384})
    assert config.is_set("batch.size") and config.is_set("bootstrap.servers")
    assert not config.is_set("linger.ms")
    assert config.with_overrides(linger_ms=7).is_set("batch.size")  # kept by derived configs
    with pytest.raises(ConfigError, match="unknown producer property 'batch.sise'"):
        config.is_set("batch.sise")


@pytest.mark.parametrize("settings, expected", [
    ({}, BULK_BATCH_SIZE),
    ({"batch.size": 16384}, 16384),                      # the default's value, but given: kept
    ({"batch.size": 0}, 1),                              # no batching: one record per batch
    ({"batch.size": 2 << 20, "max.request.size": 4 << 20}, 2 << 20),
    ({"max.request.size": 100_000}, 100_000),
    ({"buffer.memory": 2 << 20}, 512 << 10),
    ({"buffer.memory": 20_000}, 16384),                  # never below the plain batch.size
    ({"buffer.memory": 10_000, "batch.size": 8192}, 8192),
])
def test_bulk_batches_are_up_to_1_mib_within_the_request_and_the_buffer(settings, expected):
    assert BatchSize.from_config(ProducerConfig({**BOOT, **settings})).bulk == expected


@pytest.mark.parametrize("settings", [{}, {"batch.size": 0}, {"batch.size": 8192, "compression.type": "lz4"}])
def test_the_producer_parts_take_their_sizes_from_one_answer(settings):
    cluster = Cluster()
    try:
        producer = cluster.producer(**settings)
        sizes = BatchSize.from_config(producer.config)
        accumulator = producer._accumulator
        assert producer._pool._poolable_size == producer._partitioner.batch_size == sizes.records
        assert (accumulator.batch_size, accumulator._one_record_per_batch) == \
            (sizes.records, sizes.one_record_per_batch)
    finally:
        cluster.close_producers()
