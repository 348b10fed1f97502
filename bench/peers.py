"""The per-record send loops, one per Python client; each runs in its own process.

    python -m bench.peers CLIENT BOOTSTRAP TOPIC RECORDS VALUE_SIZE MAX_SECONDS [COMPRESSION]

prints one JSON line: ``{"client", "status", "sent", "seconds", "cpu_seconds", "detail"}``.
``seconds`` runs from the first ``send`` to the end of ``flush`` (producer construction excluded);
``cpu_seconds`` is the process's CPU (every thread: the client's own I/O threads too) over the
same span. ``status`` is ``ok``,
``partial`` (the time cap stopped the loop, or flush timed out), ``unavailable`` (our producer is
not importable yet) or ``error``. The parent counts what landed on the broker itself.

Every client gets the same settings (``SETTINGS``): acks=all, linger 5 ms, batch 256 KiB,
idempotence on, no compression; keys ``k0..k99`` in turn, one constant value; no per-record
callback (the futures and delivery reports are dropped; the parent checks the landed count).
Each client's loop calls its send API directly, as a user's loop does (:data:`SendRange`).
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

KEYS = [b"k%d" % i for i in range(100)]
_CHECK_EVERY = 4096  # records between two looks at the clock
_FLUSH_CAP_S = 60.0  # flush gets the time left, but at least this much


@dataclass(frozen=True)
class Settings:
    acks: str = "all"
    linger_ms: int = 5
    batch_size: int = 256 * 1024
    idempotence: bool = True
    compression: str = "none"

    def as_properties(self) -> dict[str, str]:
        """The settings as Java producer properties with string values: the one spelling that
        Spark's ``kafka.*`` options, our ``KafkaSink`` and librdkafka all accept."""
        return {"acks": self.acks, "linger.ms": str(self.linger_ms), "batch.size": str(self.batch_size),
                "enable.idempotence": str(self.idempotence).lower(), "compression.type": self.compression}


SETTINGS = Settings()


@dataclass
class LoopResult:
    client: str
    status: str
    sent: int = 0
    seconds: float = 0.0
    cpu_seconds: float | None = None
    detail: str = ""


@dataclass(frozen=True)
class Job:
    bootstrap: str
    topic: str
    records: int
    value_size: int
    max_seconds: float


@dataclass(frozen=True)
class Span:
    """When the timed span began, on the wall clock and on the process's CPU clock (every
    thread)."""

    began: float
    cpu_began: float

    @classmethod
    def start(cls) -> "Span":
        return cls(time.monotonic(), time.process_time())

    def ended(self) -> tuple[float, float]:
        """(wall seconds, CPU seconds) since the start."""
        return time.monotonic() - self.began, time.process_time() - self.cpu_began


SendRange = Callable[[int, int, bytes], None]
"""``send_range(start, end, value)``: the client's own loop over records ``start .. end - 1`` (key
``KEYS[i % 100]``), calling its send API directly, as a user's loop would: no wrapper call per
record, so the figures are the client's, not the harness's."""


def _loop(send_range: SendRange, job: Job) -> tuple[int, Span, bool]:
    """Send up to ``job.records`` records, ``_CHECK_EVERY`` at a time between two looks at the
    clock; (sent, the timed span, capped)."""
    value = b"x" * job.value_size
    span = Span.start()
    stop_at = span.began + job.max_seconds
    sent = 0
    while sent < job.records:
        end = min(job.records, sent + _CHECK_EVERY)
        send_range(sent, end, value)
        sent = end
        if time.monotonic() > stop_at:
            return sent, span, True
    return sent, span, False


def _flush_budget(span: Span, job: Job) -> float:
    return max(_FLUSH_CAP_S, span.began + job.max_seconds - time.monotonic())


def run_ours(job: Job) -> LoopResult:
    try:
        from spark_kafka_sink import KafkaProducer
    except ImportError:
        try:
            from spark_kafka_sink.producer.producer import KafkaProducer
        except ImportError as exc:
            return LoopResult("ours", "unavailable", detail=f"{type(exc).__name__}: {exc}")
    producer = KafkaProducer({
        "bootstrap.servers": job.bootstrap, "acks": SETTINGS.acks, "linger.ms": SETTINGS.linger_ms,
        "batch.size": SETTINGS.batch_size, "enable.idempotence": SETTINGS.idempotence,
        "compression.type": SETTINGS.compression})
    topic, send = job.topic, producer.send

    def send_range(start: int, end: int, value: bytes) -> None:
        for i in range(start, end):
            send(topic, value, key=KEYS[i % 100])

    try:
        sent, span, capped = _loop(send_range, job)
        producer.flush(_flush_budget(span, job))
        seconds, cpu = span.ended()
    finally:
        producer.close()
    return LoopResult("ours", "partial" if capped else "ok", sent, seconds, cpu)


ARROW_CHUNK_ROWS = 65_536  # rows per send_arrow call (Spark hands over 10,000 per Arrow batch)


def run_ours_arrow(job: Job) -> LoopResult:
    """``send_arrow`` over the same records, already in an Arrow table (as Spark hands them over):
    the table is built before the clock starts; each call takes a zero-copy slice."""
    import numpy as np
    import pyarrow as pa

    from spark_kafka_sink import KafkaProducer

    n, size = job.records, job.value_size
    offsets = pa.py_buffer((np.arange(n + 1, dtype=np.int64) * size).tobytes())
    values = pa.Array.from_buffers(pa.large_binary(), n, [None, offsets, pa.py_buffer(b"x" * (n * size))])
    keys = pa.array(KEYS, pa.binary()).take(pa.array(np.arange(n) % len(KEYS)))
    data = pa.table({"key": keys, "value": values})
    producer = KafkaProducer({
        "bootstrap.servers": job.bootstrap, "acks": SETTINGS.acks, "linger.ms": SETTINGS.linger_ms,
        "batch.size": SETTINGS.batch_size, "enable.idempotence": SETTINGS.idempotence,
        "compression.type": SETTINGS.compression})
    try:
        span = Span.start()
        results, sent, capped = [], 0, False
        while sent < job.records:
            chunk = data.slice(sent, ARROW_CHUNK_ROWS)
            results.append(producer.send_arrow(job.topic, chunk))
            sent += chunk.num_rows
            if time.monotonic() > span.began + job.max_seconds:
                capped = True
                break
        producer.flush(_flush_budget(span, job))
        seconds, cpu = span.ended()
        failed = sum(result.failed for result in results)
    finally:
        producer.close()
    detail = f"{len(results)} send_arrow calls of up to {ARROW_CHUNK_ROWS} rows"
    if failed:
        detail += f"; {failed} rows failed"
    return LoopResult("ours-arrow", "partial" if capped or failed else "ok", sent, seconds, cpu, detail)


def run_kafka_python(job: Job) -> LoopResult:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=job.bootstrap, acks=SETTINGS.acks, linger_ms=SETTINGS.linger_ms,
        batch_size=SETTINGS.batch_size, enable_idempotence=SETTINGS.idempotence,
        compression_type=None if SETTINGS.compression == "none" else SETTINGS.compression)
    topic, send = job.topic, producer.send

    def send_range(start: int, end: int, value: bytes) -> None:
        for i in range(start, end):
            send(topic, value=value, key=KEYS[i % 100])

    try:
        sent, span, capped = _loop(send_range, job)
        producer.flush(_flush_budget(span, job))
        seconds, cpu = span.ended()
    finally:
        producer.close(timeout=10)
    return LoopResult("kafka-python", "partial" if capped else "ok", sent, seconds, cpu)


def run_confluent(job: Job) -> LoopResult:
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": job.bootstrap, "acks": SETTINGS.acks, "linger.ms": SETTINGS.linger_ms,
        "batch.size": SETTINGS.batch_size, "enable.idempotence": SETTINGS.idempotence,
        "compression.type": SETTINGS.compression})
    topic, produce, poll = job.topic, producer.produce, producer.poll
    full_waits = 0

    def produce_when_room(key: bytes, value: bytes) -> None:
        """A full local queue: serve delivery reports until there is room (at most 50 s)."""
        nonlocal full_waits
        for _ in range(10_000):
            full_waits += 1
            poll(0.005)
            try:
                produce(topic, value, key)
                return
            except BufferError:
                pass
        raise TimeoutError("librdkafka's queue stayed full for 50 s")

    def send_range(start: int, end: int, value: bytes) -> None:
        for i in range(start, end):
            key = KEYS[i % 100]
            try:
                produce(topic, value, key)
            except BufferError:
                produce_when_room(key, value)
            poll(0)

    sent, span, capped = _loop(send_range, job)
    left = producer.flush(_flush_budget(span, job))
    seconds, cpu = span.ended()
    status = "partial" if capped or left else "ok"
    return LoopResult("confluent-kafka", status, sent, seconds, cpu,
                      f"{full_waits} BufferError waits; {left} undelivered after flush")


RUNNERS: dict[str, Callable[[Job], LoopResult]] = {
    "ours": run_ours, "ours-arrow": run_ours_arrow, "kafka-python": run_kafka_python,
    "confluent": run_confluent,
}


def main(argv: list[str]) -> int:
    global SETTINGS
    client, bootstrap, topic, records, value_size, max_seconds, *rest = argv
    if rest:  # the codec, when the parent runs with --compression
        SETTINGS = replace(SETTINGS, compression=rest[0])
    job = Job(bootstrap, topic, int(records), int(value_size), float(max_seconds))
    try:
        result = RUNNERS[client](job)
    except Exception as exc:  # noqa: BLE001 - reported as this client's row
        traceback.print_exc()
        result = LoopResult(client, "error", detail=f"{type(exc).__name__}: {exc}")
    print(json.dumps(asdict(result)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
