"""Producer metrics: stats and their windows, the sender hooks, gauges, snapshots and merging."""

from __future__ import annotations

import math
import pickle
import threading

import pytest

from spark_kafka_sink.producer.buffer_pool import BufferPool
from spark_kafka_sink.producer.metrics import GuardedMetrics, ProducerMetrics
from spark_kafka_sink.producer.metrics_snapshot import MetricsSnapshot, merge_snapshots
from spark_kafka_sink.producer.stats import Avg, Max, Rate, Sensor, Total
from spark_kafka_sink.producer.producer_batch import ProducerBatch
from spark_kafka_sink.record import RecordBatchBuilder
from spark_kafka_sink.record.layout import HEADER_SIZE
from spark_kafka_sink.structs import TopicPartition

from ..fakes import FakeClock

WINDOW = 30_000  # Java's default sample window; two samples


def batch(topic: str = "t", records: int = 3, value: bytes = b"v" * 10, created_ms: int = 1_000,
          drained_ms: int = 1_000, compression: str = "none") -> ProducerBatch:
    b = ProducerBatch(TopicPartition(topic, 0), RecordBatchBuilder(compression_type=compression),
                      created_ms)
    for _ in range(records):
        assert b.try_append(1_700_000_000_000, b"k", value, None, None) is not None
    b.drained(drained_ms)
    b.close()
    return b


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(monotonic_ms=1_000_000)


@pytest.fixture
def metrics(clock) -> ProducerMetrics:
    return ProducerMetrics(clock=clock, client_id="producer-1")


def now(clock: FakeClock) -> int:
    return clock.monotonic_ms()


# --- stats ------------------------------------------------------------------------------------

def test_total_accumulates_from_zero():
    total = Total()
    assert total.measure(0) == 0
    total.record(3, 0)
    total.record(4, 10**9)
    assert total.measure(10**9) == 7


def test_avg_and_max_are_nan_without_samples():
    assert math.isnan(Avg().measure(0))
    assert math.isnan(Max().measure(0))
    assert Rate().measure(0) == 0


def test_avg_weighs_by_count():
    avg = Avg()
    avg.record(30, 0, count=3)  # three events worth 30 in all
    avg.record(5, 0)
    assert avg.measure(0) == 35 / 4
    assert avg.parts(0) == (35, 4)


def test_windowed_stats_forget_samples_after_samples_times_window():
    avg, mx = Avg(2, WINDOW), Max(2, WINDOW)
    for stat in (avg, mx):
        stat.record(10, 0)
        stat.record(2, WINDOW)  # the first sample is complete: a second one starts
    assert avg.measure(WINDOW) == 6 and mx.measure(WINDOW) == 10
    assert avg.measure(2 * WINDOW - 1) == 6  # the first sample is still live
    assert avg.measure(2 * WINDOW) == 2 and mx.measure(2 * WINDOW) == 2  # ... now forgotten
    assert math.isnan(avg.measure(3 * WINDOW)) and math.isnan(mx.measure(3 * WINDOW))


def test_a_new_sample_reuses_the_oldest_slot():
    mx = Max(2, WINDOW)
    mx.record(100, 0)
    mx.record(1, WINDOW)
    mx.record(2, 2 * WINDOW)  # rolls over the sample holding 100
    assert mx.measure(2 * WINDOW) == 2


def test_rate_counts_at_least_one_full_window_like_java():
    rate = Rate(2, WINDOW)
    rate.record(300, 0)
    assert rate.measure(0) == 300 / 30  # a fresh rate is spread over (samples - 1) windows
    assert rate.window_size_ms(15_000) == 45_000  # elapsed, plus the missing full window
    assert rate.measure(15_000) == 300 / 45
    rate.record(150, 40_000)
    assert rate.window_size_ms(45_000) == 45_000
    assert rate.measure(45_000) == pytest.approx(450 / 45)
    # at 60 s the first sample is forgotten: 150 since 40 s, plus one missing full window
    assert rate.window_size_ms(61_000) == 21_000 + WINDOW
    assert rate.measure(61_000) == pytest.approx(150 / 51)


def test_sensor_records_all_its_stats():
    sensor = Sensor({"x-avg": Avg(), "x-max": Max(), "x-total": Total()})
    sensor.record(4, 0)
    sensor.record(8, 0)
    values, averages = {}, {}
    sensor.measure_into(0, values, averages, "p.")
    assert values == {"x-avg": 6, "x-max": 8, "x-total": 12}
    assert averages == {"p.x-avg": (12, 2)}


# --- hooks ------------------------------------------------------------------------------------

def test_fresh_metrics_report_zero_totals_and_nan_averages(metrics):
    values = metrics.snapshot().values
    for name in ("record-send-total", "record-error-total", "record-retry-total", "byte-total",
                 "request-total", "record-send-rate"):
        assert values[name] == 0, name
    for name in ("batch-size-avg", "batch-size-max", "records-per-request-avg",
                 "compression-rate-avg", "record-queue-time-avg", "request-latency-avg",
                 "request-latency-max", "record-size-avg"):
        assert math.isnan(values[name]), name


def test_on_produce_request_records_batch_and_request_metrics(metrics, clock):
    b1 = batch("a", records=3, created_ms=now(clock) - 40, drained_ms=now(clock) - 10)
    b2 = batch("b", records=1, created_ms=now(clock) - 5, drained_ms=now(clock))
    metrics.on_produce_request(1, [b1, b2], now(clock))
    metrics.on_produce_request(2, [batch("a", records=2)], now(clock))
    snap = metrics.snapshot()
    sizes = [b1.size_in_bytes, b2.size_in_bytes, batch("a", records=2).size_in_bytes]
    v = snap.values
    assert v["record-send-total"] == 6
    assert v["records-per-request-avg"] == 3
    assert v["byte-total"] == sum(sizes)
    assert v["batch-size-avg"] == sum(sizes) / 3
    assert v["batch-size-max"] == max(sizes)
    assert v["record-queue-time-max"] == 30
    assert v["compression-rate-avg"] == 1.0  # uncompressed: sent size == estimate
    record_bytes = sum(s - HEADER_SIZE for s in sizes)
    assert v["record-size-avg"] == record_bytes / 6
    assert v["record-send-rate"] == 6 / 30  # a fresh rate: over one full window
    assert snap.topics["a"]["record-send-total"] == 5
    assert snap.topics["a"]["byte-total"] == sizes[0] + sizes[2]
    assert snap.topics["b"]["record-send-total"] == 1
    assert snap.topics["b"]["compression-rate"] == 1.0


def test_compression_rate_is_sent_over_uncompressed_size(metrics, clock):
    b = batch(records=50, value=b"a" * 100, compression="gzip")
    assert b.size_in_bytes < b.estimated_size_in_bytes
    metrics.on_produce_request(1, [b], now(clock))
    snap = metrics.snapshot()
    ratio = b.size_in_bytes / b.estimated_size_in_bytes
    assert snap.values["compression-rate-avg"] == pytest.approx(ratio)
    assert snap.topics["t"]["compression-rate"] == pytest.approx(ratio)
    assert snap.values["byte-total"] == b.size_in_bytes  # the bytes sent, compressed


def test_empty_request_records_nothing(metrics, clock):
    metrics.on_produce_request(1, [], now(clock))
    assert math.isnan(metrics.snapshot().values["records-per-request-avg"])


def test_on_response_records_latency_globally_and_per_node(metrics):
    metrics.on_response(1, 10.0)
    metrics.on_response(1, 30.0)
    metrics.on_response(2, 5.0)
    snap = metrics.snapshot()
    assert snap.values["request-latency-avg"] == 15
    assert snap.values["request-latency-max"] == 30
    assert snap.values["request-total"] == 3
    assert snap.nodes[1]["request-latency-avg"] == 20
    assert snap.nodes[1]["request-latency-max"] == 30
    assert snap.nodes[1]["request-total"] == 2
    assert snap.nodes[2]["request-latency-avg"] == 5


def test_on_retry_and_on_error_count_records_per_topic(metrics):
    metrics.on_retry("a", 4)
    metrics.on_retry("b", 1)
    metrics.on_error("a", 7)
    snap = metrics.snapshot()
    assert snap.values["record-retry-total"] == 5
    assert snap.values["record-error-total"] == 7
    assert snap.values["record-error-rate"] == 7 / 30
    assert snap.topics["a"]["record-retry-total"] == 4
    assert snap.topics["a"]["record-error-total"] == 7
    assert snap.topics["b"]["record-retry-total"] == 1
    assert snap.topics["b"]["record-error-total"] == 0
    assert snap.topics["a"]["record-send-total"] == 0  # a topic can fail before any send


def test_windowed_metrics_forget_old_samples_but_totals_do_not(metrics, clock):
    metrics.on_response(1, 100.0)
    clock.advance(2 * WINDOW)
    metrics.on_response(1, 1.0)
    v = metrics.snapshot().values
    assert v["request-latency-max"] == 1 and v["request-latency-avg"] == 1
    assert v["request-total"] == 2
    clock.advance(2 * WINDOW)
    v = metrics.snapshot().values
    assert math.isnan(v["request-latency-max"]) and v["request-rate"] == 0
    assert v["request-total"] == 2


def test_snapshot_at_an_explicit_time(metrics, clock):
    metrics.on_response(1, 100.0)
    assert metrics.snapshot(now(clock) + 2 * WINDOW - 1).values["request-latency-avg"] == 100
    assert math.isnan(metrics.snapshot(now(clock) + 2 * WINDOW).values["request-latency-avg"])


# --- gauges -----------------------------------------------------------------------------------

class StubMetadata:
    last_successful_update_ms: int | None = None


class StubClient:
    in_flight = 0

    def in_flight_request_count(self, node_id=None):
        return self.in_flight


def test_gauges_are_evaluated_at_snapshot_time(metrics, clock):
    pool = BufferPool(10_000, 1_000, clock=clock)
    metadata, client = StubMetadata(), StubClient()
    metrics.register_gauges(buffer_pool=pool, metadata=metadata, client=client)
    v = metrics.snapshot().values
    assert v["buffer-available-bytes"] == 10_000
    assert v["buffer-total-bytes"] == 10_000
    assert v["bufferpool-wait-time-ns-total"] == 0
    assert v["waiting-threads"] == 0
    assert math.isnan(v["metadata-age"])  # no successful update yet
    assert v["requests-in-flight"] == 0

    lease = pool.allocate(1_000, 0)
    metadata.last_successful_update_ms = now(clock)
    client.in_flight = 3
    clock.advance(2_500)
    v = metrics.snapshot().values
    assert v["buffer-available-bytes"] == 9_000
    assert v["metadata-age"] == 2.5  # seconds, as Java
    assert v["requests-in-flight"] == 3
    pool.deallocate(lease)
    assert metrics.snapshot().values["buffer-available-bytes"] == 10_000


def test_gauges_only_for_the_parts_given(metrics):
    metrics.register_gauges(client=StubClient())
    v = metrics.snapshot().values
    assert "requests-in-flight" in v and "buffer-available-bytes" not in v


def test_custom_gauge_gets_now(metrics, clock):
    metrics.register_gauge("now", lambda now_ms: now_ms)
    assert metrics.snapshot(123).values["now"] == 123


# --- snapshots --------------------------------------------------------------------------------

def test_as_dict_uses_java_style_keys(metrics, clock):
    metrics.on_produce_request(1, [batch("orders", records=2)], now(clock))
    metrics.on_response(3, 7.0)
    flat = metrics.snapshot().as_dict()
    assert flat["record-send-total"] == 2
    assert flat["topic.orders.record-send-total"] == 2
    assert flat["topic.orders.byte-total"] > 0
    assert "topic.orders.compression-rate" in flat
    assert flat["node-3.request-latency-avg"] == 7
    assert all(isinstance(value, float) for value in flat.values())


def test_snapshot_is_frozen(metrics):
    snap = metrics.snapshot()
    with pytest.raises(TypeError):
        snap.values["record-send-total"] = 1  # type: ignore[index]
    with pytest.raises(AttributeError):
        snap.values = {}  # type: ignore[misc]


def same(a: dict[str, float], b: dict[str, float]) -> bool:
    """Equal, NaN equal to NaN."""
    return a.keys() == b.keys() and all(
        (math.isnan(x) and math.isnan(b[k])) if math.isnan(x) else x == b[k] for k, x in a.items())


def test_snapshot_pickles(metrics, clock):
    metrics.on_produce_request(1, [batch("a")], now(clock))
    metrics.on_response(1, 3.0)
    snap = metrics.snapshot()
    copy = pickle.loads(pickle.dumps(snap))
    assert isinstance(copy, MetricsSnapshot)
    assert same(copy.as_dict(), snap.as_dict())
    assert dict(copy.averages) == dict(snap.averages)
    with pytest.raises(TypeError):
        copy.topics["a"]["byte-total"] = 0  # type: ignore[index]


def test_merge_adds_totals_weighs_averages_and_takes_maxima(clock):
    one = ProducerMetrics(clock=clock, client_id="one")
    two = ProducerMetrics(clock=clock, client_id="two")
    one.on_response(1, 10.0)
    one.on_response(1, 20.0)
    two.on_response(1, 60.0)
    two.on_response(2, 1.0)
    one.on_produce_request(1, [batch("a", records=4)], now(clock))
    two.on_produce_request(1, [batch("a", records=1), batch("b", records=1)], now(clock))
    one.on_error("a", 2)
    two.on_error("a", 3)
    metadata_one, metadata_two = StubMetadata(), StubMetadata()
    metadata_one.last_successful_update_ms = now(clock) - 1_000
    metadata_two.last_successful_update_ms = now(clock) - 9_000
    one.register_gauges(metadata=metadata_one, client=StubClient())
    two.register_gauges(metadata=metadata_two)

    merged = one.snapshot().merge(two.snapshot())
    v = merged.values
    assert v["request-total"] == 4
    assert v["request-latency-avg"] == (10 + 20 + 60 + 1) / 4  # weighted, not (15 + 30.5) / 2
    assert v["request-latency-max"] == 60
    assert v["record-send-total"] == 6
    assert v["records-per-request-avg"] == 3  # (4 + 2) records over 2 requests
    assert v["record-error-total"] == 5
    assert v["metadata-age"] == 9  # the stalest
    assert v["requests-in-flight"] == 0  # only one side has it
    assert merged.topics["a"]["record-send-total"] == 5
    assert merged.topics["a"]["record-error-total"] == 5
    assert merged.topics["b"]["record-send-total"] == 1
    assert merged.nodes[1]["request-latency-avg"] == 30
    assert merged.nodes[2]["request-latency-avg"] == 1
    assert merged.averages["node-1.request-latency-avg"] == (90, 3)


def test_merge_is_exact_against_one_producer_seeing_everything(clock):
    single = ProducerMetrics(clock=clock, client_id="all")
    parts = [ProducerMetrics(clock=clock, client_id=f"p{i}") for i in range(3)]
    for i, latency in enumerate([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]):
        single.on_response(i % 2, latency)
        parts[i % 3].on_response(i % 2, latency)
    merged = merge_snapshots(p.snapshot() for p in parts).as_dict()
    expected = single.snapshot().as_dict()
    assert same(merged, expected)  # rates too: all producers started together here


def test_merge_handles_nan_and_missing_sides(metrics):
    empty = ProducerMetrics(clock=FakeClock(), client_id="x").snapshot()
    metrics.on_response(1, 5.0)
    merged = empty.merge(metrics.snapshot())
    assert merged.values["request-latency-max"] == 5
    assert merged.values["request-latency-avg"] == 5
    assert math.isnan(merged.values["batch-size-avg"])
    assert merged.nodes[1]["request-total"] == 1


def test_merge_of_nothing_is_empty():
    assert merge_snapshots([]).as_dict() == {}
    assert merge_snapshots([]) == MetricsSnapshot()


# --- threads ----------------------------------------------------------------------------------

@pytest.mark.timeout(30)
def test_concurrent_updates_keep_exact_totals(metrics, clock):
    threads_n, rounds = 8, 500
    shared = batch("a", records=2)
    start = threading.Barrier(threads_n)

    def work(i: int) -> None:
        start.wait()
        for _ in range(rounds):
            metrics.on_produce_request(i, [shared], now(clock))
            metrics.on_response(i, 1.0)
            metrics.on_retry("a", 1)
            metrics.on_error(f"t{i}", 1)
            metrics.snapshot()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snap = metrics.snapshot()
    n = threads_n * rounds
    assert snap.values["record-send-total"] == 2 * n
    assert snap.values["request-total"] == n
    assert snap.values["record-retry-total"] == n
    assert snap.values["record-error-total"] == n
    assert snap.topics["a"]["byte-total"] == n * shared.size_in_bytes
    assert all(snap.nodes[i]["request-total"] == rounds for i in range(threads_n))
    assert all(snap.topics[f"t{i}"]["record-error-total"] == rounds for i in range(threads_n))


def test_the_sender_sees_its_metrics_through_guarded_hooks_that_never_raise(caplog):
    class Broken:
        def __getattr__(self, name):
            def hook(*args):
                raise RuntimeError(f"bug in {name}")
            return hook

    guarded = GuardedMetrics(Broken())
    guarded.on_drain(0)
    guarded.on_split("t")
    assert "error in producer metrics (on_drain)" in caplog.text
    assert "error in producer metrics (on_split)" in caplog.text
    GuardedMetrics(None).on_produce_request(1, [], 0)          # no metrics: nothing to do
