"""A model-based (stateful property) test of the producer core: hypothesis drives a real
``KafkaProducer`` in lockstep with its sender thread (``lockstep.py``) through sends, flushes,
closes, time jumps, per-request broker answers (success, retriable and fatal errors, unknown
codes, a reply lost after the write), lost connections, metadata changes (partitions added,
leaders moved, a node leaving and coming back) and callbacks that raise, exit, flush, send or
close, and checks after every step:

- every future completes exactly once (its callback runs once), and no later than its
  ``delivery.timeout.ms`` plus a small bound once the sender has run past that;
- no partition is muted without a request for it in flight;
- buffer memory is all returned once nothing is pending;
- every acknowledged record is in the broker's log at the offset it was given; with idempotence
  each partition's log is in send order with no duplicate;
- no request is sent after ``close()`` returns; the sender thread lives until ``close()`` and
  never stalls (every step it is granted comes back to ``poll``).

Profiles: ``make test`` runs ``ci`` (bounded, under a minute); ``make fuzz`` sets
``SKS_FUZZ=1`` for ``fuzz`` (many more examples, longer runs). A failure prints the shortest
sequence of steps that shows it: add it as a named regression test.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test,
)

from spark_kafka_sink.errors import IllegalStateError, KafkaError, ProducerClosedError
from spark_kafka_sink.protocol import PRODUCE
from spark_kafka_sink.structs import TopicPartition

from .lockstep import LOST_REPLY, LockstepCluster

DELIVERY_TIMEOUT_MS = 3_000
REQUEST_TIMEOUT_MS = 1_000
SLACK_MS = 500            # expiry after a step that ran past the deadline: one retry backoff at most
BUFFER_MEMORY = 64 * 1024
UNKNOWN_CODE = 12_345
ANSWERS = {"success": None, "not-leader": 6, "not-enough-replicas": 19, "timed-out": 7,
           "corrupt": 2, "unknown-code": UNKNOWN_CODE, "too-large": 10, "out-of-order": 45,
           "lost-reply": LOST_REPLY}
CALLBACKS = ("none", "none", "none", "raise", "sys.exit", "flush", "send", "close")

settings.register_profile("ci", max_examples=300, stateful_step_count=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("fuzz", max_examples=5_000, stateful_step_count=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
FUZZ = bool(os.environ.get("SKS_FUZZ"))
PROFILE = settings.get_profile("fuzz" if FUZZ else "ci")


@dataclass
class Sent:
    """One record handed to ``send()`` and what became of it."""

    ident: int
    value: bytes
    future: object
    sent_ms: int
    callbacks: list = field(default_factory=list)   # (metadata, exception) per call


class ProducerModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.cluster: LockstepCluster | None = None
        self.sent: list[Sent] = []
        self.next_ident = 0
        self.closed = False
        self.closing_from_callback = False
        self.requests_at_close = 0
        self.problems: list[str] = []       # what callbacks saw that they must not
        self.last_step_ms = 0

    # --- set-up -----------------------------------------------------------------------------------

    @initialize(idempotent=st.booleans(), in_flight=st.sampled_from([1, 5]),
                batch_size=st.sampled_from([0, 150, 400, 1024]), linger_ms=st.sampled_from([0, 5, 50]))
    def start(self, idempotent, in_flight, batch_size, linger_ms):
        config = {"enable.idempotence": idempotent, "max.in.flight.requests.per.connection": in_flight,
                  "batch.size": batch_size, "linger.ms": linger_ms, "buffer.memory": BUFFER_MEMORY,
                  "delivery.timeout.ms": DELIVERY_TIMEOUT_MS, "request.timeout.ms": REQUEST_TIMEOUT_MS,
                  "max.block.ms": 0, "retry.backoff.ms": 50, "retry.backoff.max.ms": 200,
                  "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 100,
                  "metadata.max.age.ms": 60_000}
        self.idempotent = idempotent
        self.batch_size = max(batch_size, 64)
        self.cluster = LockstepCluster(config, topics={"t": 2})
        self.producer = self.cluster.producer
        self.producer._metadata.add_topic("t", self.cluster.clock.monotonic_ms())
        for _ in range(50):
            if self.producer._metadata.snapshot.partition_count("t"):
                break
            self._step()
            self.cluster.clock.advance(10)
        assert self.producer._metadata.snapshot.partition_count("t") == 2

    def teardown(self) -> None:
        if self.cluster is None:
            return
        if not self.closed:
            self._close(0, steps=200)
        self.cluster.selector.grant()                      # never leave a thread parked

    # --- helpers ----------------------------------------------------------------------------------

    def _step(self, times: int = 1) -> None:
        for _ in range(times):
            self.cluster.step()
            self.last_step_ms = self.cluster.clock.monotonic_ms()

    def _callback(self, record: Sent, action: str):
        def callback(metadata, exception):
            record.callbacks.append((metadata, exception))
            if action == "raise":
                raise RuntimeError("a callback that raises")
            if action == "sys.exit":
                raise SystemExit(1)
            if action == "flush":
                try:
                    self.producer.flush()
                    self.problems.append("flush() in a callback returned instead of raising")
                except IllegalStateError:
                    pass
            elif action == "send":
                try:
                    self._send(b"from-callback", partition=0, action="none")
                except KafkaError:
                    pass                                   # closed, or memory full: refused at once
            elif action == "close":
                self.closing_from_callback = True
                self.producer.close()
        return callback

    def _send(self, value: bytes, *, key=None, partition=None, action: str) -> None:
        ident = self.next_ident
        self.next_ident += 1
        record = Sent(ident, b"%d:" % ident + value, None, self.cluster.clock.monotonic_ms())
        record.future = self.producer.send("t", record.value, key=key, partition=partition,
                                           callback=self._callback(record, action))
        self.sent.append(record)

    def _close(self, timeout, *, steps: int) -> None:
        self.cluster.run_in_thread(lambda: self.producer.close(timeout), steps=steps,
                                   started=lambda: self.producer._accumulator.closed,
                                   finished=lambda: not self.cluster.thread.is_alive())

    @property
    def live(self) -> bool:
        return not self.closed and not self.closing_from_callback

    # --- rules ------------------------------------------------------------------------------------

    @precondition(lambda self: self.live)
    @rule(kind=st.sampled_from(["keyed", "unkeyed", "explicit"]), size=st.integers(1, 1024),
          key=st.integers(0, 9), partition=st.integers(0, 3), action=st.sampled_from(CALLBACKS))
    def send(self, kind, size, key, partition, action):
        size = min(size, self.batch_size)
        try:
            self._send(b"x" * size, key=b"k%d" % key if kind == "keyed" else None,
                       partition=partition if kind == "explicit" else None, action=action)
        except KafkaError:
            pass     # refused at once (memory full with max.block.ms=0, partition not there yet)

    @precondition(lambda self: self.live)
    @rule(times=st.integers(1, 3))
    def step(self, times):
        self._step(times)

    @precondition(lambda self: self.live)
    @rule(answer=st.sampled_from(sorted(ANSWERS)))
    def broker_answers(self, answer):
        self.cluster.answer(ANSWERS[answer])
        self._step()

    @precondition(lambda self: self.live)
    @rule(node=st.sampled_from([1, 2]))
    def connection_drops(self, node):
        self.cluster.drop(node)
        self._step()

    @precondition(lambda self: self.live)
    @rule(ms=st.sampled_from([1, 10, 60, 250]))
    def a_little_time_passes(self, ms):
        self.cluster.clock.advance(ms)
        self._step()

    @precondition(lambda self: self.live)
    @rule(ms=st.sampled_from([REQUEST_TIMEOUT_MS + 1, DELIVERY_TIMEOUT_MS + 1]), steps=st.integers(1, 2))
    def time_passes_a_deadline(self, ms, steps):
        self.cluster.clock.advance(ms)
        self._step(steps)

    @precondition(lambda self: self.live)
    @rule(partition=st.integers(0, 3))
    def leader_moves(self, partition):
        if partition >= self.cluster.topics["t"]:
            return
        tp = TopicPartition("t", partition)
        self.cluster.leaders[("t", partition)] = 3 - self.cluster.leader_of(tp)
        self.producer._metadata.request_update(self.cluster.clock.monotonic_ms())
        self._step()

    @precondition(lambda self: self.live and not self.cluster.gone)
    @rule(node=st.sampled_from([1, 2]))
    def node_goes_away(self, node):
        self.cluster.node_goes(node)
        self.producer._metadata.request_update(self.cluster.clock.monotonic_ms())
        self._step()

    @precondition(lambda self: self.live and self.cluster.gone)
    @rule()
    def node_comes_back(self):
        self.cluster.node_returns(next(iter(self.cluster.gone)))
        self.producer._metadata.request_update(self.cluster.clock.monotonic_ms())
        self._step()

    @precondition(lambda self: self.live and self.cluster.topics["t"] < 4)
    @rule()
    def partition_added(self):
        self.cluster.topics["t"] += 1
        self.producer._metadata.request_update(self.cluster.clock.monotonic_ms())
        self._step()

    @precondition(lambda self: self.live)
    @rule()
    def flush(self):
        pending = [r for r in self.sent]
        accumulator = self.producer._accumulator
        self.cluster.run_in_thread(self.producer.flush, steps=2_000,
                                   started=lambda: accumulator.flush_in_progress,
                                   finished=lambda: not accumulator.has_incomplete())
        for record in pending:
            assert record.future.done(), f"record {record.ident} not done after flush()"
        self.last_step_ms = self.cluster.clock.monotonic_ms()

    @precondition(lambda self: not self.closed and len(self.sent) >= 8)   # most runs do things first
    @rule(timeout=st.sampled_from([None, 0]))
    def close(self, timeout):
        self._close(timeout, steps=2_000)
        self.closed = True
        assert not self.cluster.thread.is_alive(), "the sender thread outlived close()"
        self.requests_at_close = self.cluster.produce_requests
        for record in self.sent:
            assert record.future.done(), f"record {record.ident} not done after close()"
        with pytest.raises(ProducerClosedError):
            self.producer.send("t", b"after close", partition=0)

    @precondition(lambda self: self.closing_from_callback and not self.closed)
    @rule()
    def after_close_in_a_callback(self):
        self._step(3)
        assert not self.cluster.thread.is_alive(), "close() in a callback did not end the thread"
        self.closed = True
        self.requests_at_close = self.cluster.produce_requests
        for record in self.sent:
            assert record.future.done(), f"record {record.ident} not done after close()"

    @precondition(lambda self: self.closed)
    @rule()
    def time_passes_after_close(self):
        self.cluster.clock.advance(REQUEST_TIMEOUT_MS)
        self._step()                                       # a no-op: the thread has ended

    # --- invariants -------------------------------------------------------------------------------

    @invariant()
    def callbacks_see_nothing_wrong(self):
        assert not self.problems, self.problems

    @invariant()
    def every_future_completes_exactly_once_and_in_time(self):
        if self.cluster is None:
            return
        for record in self.sent:
            assert len(record.callbacks) <= 1, f"record {record.ident}: {len(record.callbacks)} calls"
            if record.future.done():
                assert len(record.callbacks) == 1, f"record {record.ident} done, callback not run"
            elif self.live:
                overdue = self.last_step_ms - record.sent_ms - DELIVERY_TIMEOUT_MS
                assert overdue <= SLACK_MS, f"record {record.ident} pending {overdue} ms past its deadline"

    @invariant()
    def no_partition_is_muted_without_a_request_in_flight(self):
        if self.cluster is None or not self.cluster.thread.is_alive():
            return
        in_flight = set()
        for queue in self.producer._client._in_flight._requests.values():
            for request in queue:
                if request.request.api is PRODUCE:
                    for topic in request.request.body["topic_data"]:
                        in_flight.update(TopicPartition(topic["name"], p["index"])
                                         for p in topic["partition_data"])
        muted = self.producer._accumulator._muted
        assert muted <= in_flight, f"muted without a request in flight: {muted - in_flight}"

    @invariant()
    def memory_comes_back_once_nothing_is_pending(self):
        if self.cluster is None:
            return
        if all(r.future.done() for r in self.sent) and not self.producer._accumulator.has_incomplete():
            assert self.producer._pool.available_memory == BUFFER_MEMORY

    @invariant()
    def acknowledged_records_are_in_the_log_in_order(self):
        if self.cluster is None:
            return
        for record in self.sent:
            future = record.future
            if future.done() and future.exception(0) is None:
                metadata = future.result(0)
                log = self.cluster.log[TopicPartition(metadata.topic, metadata.partition)]
                if metadata.offset >= 0:
                    assert log[metadata.offset] == record.value, (
                        f"record {record.ident} acknowledged at offset {metadata.offset} of "
                        f"{metadata.partition}, which holds {log[metadata.offset]!r}")
                else:
                    assert record.value in log
        if self.idempotent:
            for tp, log in self.cluster.log.items():
                idents = [int(value.split(b":")[0]) for value in log if b":" in value]
                assert idents == sorted(set(idents)), f"{tp}: reordered or duplicated {idents}"

    @invariant()
    def the_sender_lives_until_close_and_nothing_is_sent_after(self):
        if self.cluster is None:
            return
        if self.closed:
            assert self.cluster.produce_requests == self.requests_at_close
        elif not self.closing_from_callback:
            assert self.cluster.thread.is_alive(), "the sender thread died before close()"


@pytest.mark.timeout(0 if FUZZ else 300)    # ci: under a minute; the stall detector guards hangs
def test_the_producer_core_keeps_its_invariants():
    run_state_machine_as_test(ProducerModel, settings=PROFILE)
