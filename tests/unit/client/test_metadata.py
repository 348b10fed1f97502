"""Metadata: refresh timing, topic tracking and expiry, await_topic (success, timeout, errors)."""

from __future__ import annotations

import threading
import time

import pytest

from spark_kafka_sink.client.metadata import Metadata
from spark_kafka_sink.errors import (
    InvalidTopicExceptionError, KafkaError, KafkaTimeoutError, MetadataTimeoutError,
    TopicAuthorizationFailedError, UnsupportedVersionError,
)
from spark_kafka_sink.protocol import METADATA
from spark_kafka_sink.structs import TopicPartition

from ..fakes import FakeClock
from .fake_selector import metadata_body

BROKERS = [(1, "b1", 9092), (2, "b2", 9092)]


class NoJitter:
    def uniform(self, a, b):
        return (a + b) / 2


def response(topics: dict, brokers=BROKERS, version: int = 12, **body):
    data = METADATA.encode_response(version, metadata_body(brokers, topics, **body))
    return METADATA.decode_response(version, data)


def make(**kw) -> Metadata:
    defaults = dict(metadata_max_age_ms=300_000, metadata_max_idle_ms=300_000,
                    retry_backoff_ms=100, retry_backoff_max_ms=1000, rng=NoJitter())
    return Metadata([("b1", 9092)], **{**defaults, **kw})


def test_starts_from_bootstrap_and_wants_an_update_at_once():
    md = make()
    assert [n.node_id for n in md.snapshot.nodes.values()] == [-1]
    assert md.time_to_next_update(5) == 0 and md.update_version == 0


def test_refresh_every_max_age_with_backoff_after_success():
    md = make(metadata_max_age_ms=10_000)
    md.update(response({}), 1_000)
    assert md.update_version == 1 and sorted(md.snapshot.nodes) == [1, 2]
    assert md.time_to_next_update(1_000) == 10_000
    assert md.time_to_next_update(10_999) == 1
    assert md.time_to_next_update(11_000) == 0
    assert md.request_update(1_010) == 1
    assert md.time_to_next_update(1_010) == 90          # retry.backoff.ms since the last refresh
    assert md.time_to_next_update(1_100) == 0


def test_failed_attempts_back_off_exponentially_up_to_the_max():
    md = make(retry_backoff_ms=100, retry_backoff_max_ms=1000)
    waits = []
    now = 0
    for _ in range(6):
        md.failed_update(now)
        waits.append(md.time_to_next_update(now))
        now += waits[-1]
    assert waits == [100, 200, 400, 800, 1000, 1000]
    md.update(response({}), now)
    md.request_update(now)
    assert md.time_to_next_update(now) == 100           # reset by the success


def test_a_new_topic_skips_the_backoff_and_wakes_the_sender():
    md = make()
    wakes = []
    md.set_waker(lambda: wakes.append(1))
    md.update(response({}), 1_000)
    assert md.add_topic("t", 1_001) is True
    assert md.time_to_next_update(1_001) == 0 and wakes == [1]
    assert md.add_topic("t", 1_002) is False and wakes == [1]
    assert md.topics == ("t",)


def test_unused_topics_expire_at_the_next_update():
    md = make(metadata_max_idle_ms=5_000)
    md.add_topic("old", 0)
    md.add_topic("used", 0)
    md.update(response({"old": 1, "used": 1}), 100)
    md.add_topic("used", 4_000)                          # used again: its idle clock restarts
    md.update(response({"old": 1, "used": 1}), 5_000)
    assert md.topics == ("used",)
    md.update(response({"used": 1}), 9_001)
    assert md.topics == ()


def test_a_new_topic_is_kept_and_asked_for_until_a_response_names_it():
    md = make(metadata_max_idle_ms=5_000)
    md.add_topic("t", 0)
    md.update(response({}), 10_000)                      # sent before t was added
    assert md.topics == ("t",)
    assert md.time_to_next_update(10_000) == 0           # t is still wanted, no backoff
    md.update(response({"t": 1}), 10_001)
    assert md.time_to_next_update(10_001) == 300_000      # then only the periodic refresh


def test_retriable_topic_or_partition_errors_ask_for_another_update():
    md = make()
    md.update(response({"t": (0, 3)}), 1_000)            # UNKNOWN_TOPIC_OR_PARTITION
    assert md.update_requested and md.time_to_next_update(1_000) == 100
    md.update(response({"t": 2}), 2_000)
    assert not md.update_requested
    md.update(response({"t": 2}, brokers=[(1, "b1", 9092)]), 3_000)
    assert not md.update_requested


def test_await_topic_returns_at_once_when_known():
    clock = FakeClock()
    md = make()
    md.update(response({"t": 3}), clock.monotonic_ms())
    snap = md.await_topic("t", 60_000, clock)
    assert snap.partition_count("t") == 3 and md.topics == ("t",)


def _update_later(md: Metadata, resp, wakes: list | None = None) -> threading.Thread:
    """A thread that answers ``resp`` as the sender does: once a waiter has asked for an update
    (the metadata's waker called; ``wakes`` records the calls). An answer that came before the
    waiter asked would be the one it already saw, and it would wait for the next."""
    asked = threading.Event()

    def waker() -> None:
        if wakes is not None:
            wakes.append(1)
        asked.set()

    def run():
        if asked.wait(5):
            md.update(resp, 0)
    md.set_waker(waker)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_await_topic_waits_for_the_update_that_brings_it():
    clock = FakeClock()
    md = make()
    wakes = []
    thread = _update_later(md, response({"t": 4}), wakes)
    snap = md.await_topic("t", 10_000, clock)
    thread.join(5)
    assert snap.partition_count("t") == 4 and wakes
    assert md.topics == ("t",)


def test_await_topic_waits_for_a_high_enough_partition_count():
    clock = FakeClock()
    md = make()
    md.update(response({"t": 2}), 0)
    thread = _update_later(md, response({"t": 6}))
    snap = md.await_topic("t", 10_000, clock, partition=5)
    thread.join(5)
    assert snap.partition_count("t") == 6


def test_await_topic_times_out_naming_topic_and_wait():
    clock = FakeClock()
    md = make()
    started = time.monotonic()
    with pytest.raises(MetadataTimeoutError) as info:
        md.await_topic("orders", 50, clock)
    assert str(info.value).startswith("Topic orders not present in metadata after 50 ms: ")
    assert isinstance(info.value, KafkaTimeoutError) and isinstance(info.value, TimeoutError)
    assert time.monotonic() - started < 2


def test_await_topic_times_out_by_the_clock_when_updates_never_bring_the_topic():
    clock = FakeClock()
    md = make()

    def keep_updating():
        for _ in range(40):
            time.sleep(0.005)
            clock.advance(10)
            md.update(response({"t": (0, 3)}), clock.monotonic_ms())
    thread = threading.Thread(target=keep_updating, daemon=True)
    thread.start()
    with pytest.raises(MetadataTimeoutError, match="Topic t not present in metadata after 100 ms"):
        md.await_topic("t", 100, clock)
    thread.join(5)


@pytest.mark.parametrize("code, error", [(29, TopicAuthorizationFailedError),
                                         (17, InvalidTopicExceptionError)])
def test_await_topic_raises_the_topics_fatal_error(code, error):
    clock = FakeClock()
    md = make()
    thread = _update_later(md, response({"t": (0, code)}))
    with pytest.raises(error, match="topic t"):
        md.await_topic("t", 10_000, clock)
    thread.join(5)


def test_an_invalid_topic_already_known_fails_without_waiting():
    clock = FakeClock()
    md = make()
    md.update(response({"bad name": (0, 17)}), 0)
    with pytest.raises(InvalidTopicExceptionError):
        md.await_topic("bad name", 60_000, clock)


def test_fatal_error_reaches_waiters_once():
    clock = FakeClock()
    md = make()
    timer = threading.Timer(0.05, md.fatal_error, [UnsupportedVersionError("no Metadata")])
    timer.start()
    with pytest.raises(UnsupportedVersionError, match="no Metadata"):
        md.await_topic("t", 10_000, clock)
    with pytest.raises(MetadataTimeoutError):
        md.await_topic("t", 20, clock)


def test_close_wakes_waiters():
    clock = FakeClock()
    md = make()
    timer = threading.Timer(0.05, md.close)
    timer.start()
    with pytest.raises(KafkaError, match="closed while waiting for topic t"):
        md.await_topic("t", 10_000, clock)
    md.update(response({"t": 1}), 0)                     # ignored after close
    assert md.snapshot.partition_count("t") is None


def test_used_snapshot_is_the_lock_free_path_of_await_topic_within_one_millisecond():
    clock = FakeClock()
    md = make(metadata_max_idle_ms=5_000)
    now = clock.monotonic_ms()
    assert md.used_snapshot("t", now) is None             # unknown topic: await_topic must run
    md.add_topic("t", now)
    md.update(response({"t": 3}), now)
    snapshot = md.await_topic("t", 1_000, clock)          # marks t used at `now`
    assert md.used_snapshot("t", now) is snapshot         # same millisecond: nothing to record
    assert md.used_snapshot("t", now + 1) is None         # a later use must be recorded: slow path
    assert md.used_snapshot("other", now) is None


def test_used_snapshot_keeps_idle_expiry_exact():
    clock = FakeClock()
    md = make(metadata_max_idle_ms=5_000)
    start = clock.monotonic_ms()
    md.add_topic("t", start)
    md.update(response({"t": 1}), start)
    for _ in range(3):                                    # one send per ms through the fast path
        clock.advance(1_000)
        now = clock.monotonic_ms()
        if md.used_snapshot("t", now) is None:
            md.await_topic("t", 1_000, clock)
        assert md.used_snapshot("t", now) is not None
    md.update(response({"t": 1}), start + 3_000 + 4_999)  # last use + idle - 1 ms: still tracked
    assert md.topics == ("t",)
    md.update(response({"t": 1}), start + 3_000 + 5_000)  # idle for exactly max.idle.ms: dropped
    assert md.topics == ()
    assert md.used_snapshot("t", start + 8_000) is None   # expired: back to the waiting path


def test_a_successful_update_resets_the_failing_clock():
    md = make()
    md.update(response({}), 0)
    md.failed_update(1_000)
    assert md.failing_for_ms(2_000) == 1_000
    md.update(response({}), 2_000)
    assert md.failing_for_ms(2_500) == 0
    md.failed_update(3_000)                       # failing again: counted from here, not from 1 000
    assert md.failing_for_ms(3_500) == 500


# --- the cluster id ---------------------------------------------------------------------------------

def test_a_new_cluster_id_behind_the_same_addresses_is_a_cluster_change(caplog):
    md = make()
    md.update(response({"t": 1}, cluster_id="A"), 0)
    md.update(response({"t": 1}, cluster_id="A"), 10)
    assert (md.cluster_id, md.cluster_change, md.cluster_generation) == ("A", None, 0)
    md.rebootstrap(20, "no broker the cluster named can be reached")
    assert md.cluster_id == "A"                   # the brokers are forgotten, not the cluster
    with caplog.at_level("WARNING"):
        md.update(response({"t": 1}, cluster_id="B"), 30)
    assert md.cluster_change.previous == "A" and md.cluster_change.current == "B"
    assert md.cluster_generation == 1 and md.snapshot.cluster_id == "B"
    assert "cluster id A, now B" in caplog.text
    md.update(response({"t": 1}, cluster_id=None), 40)     # an answer without one changes nothing
    assert md.cluster_id == "B" and md.cluster_generation == 1


def test_the_new_clusters_lower_leader_epochs_replace_the_old_ones_and_old_hints_are_ignored():
    """Nothing of cluster A's partitions survives B's first answer: B's epochs (lower than A's)
    stand, B's hints above them apply, and a hint from a request sent to A does not."""
    md = make()
    tp = TopicPartition("t", 0)
    md.update(response({"t": 1}, cluster_id="A", leader_epoch=7), 0)
    old_generation = md.cluster_generation
    md.update(response({"t": 1}, cluster_id="B", leader_epoch=0), 10)
    assert md.snapshot.partition(tp).leader_epoch == 0
    assert md.update_leaders({tp: (2, 8)}, cluster_generation=old_generation) == frozenset()
    assert md.snapshot.partition(tp).leader_epoch == 0
    assert md.update_leaders({tp: (2, 1)}, cluster_generation=md.cluster_generation) == {tp}
    assert md.snapshot.leader_for(tp).node_id == 2 and md.snapshot.partition(tp).leader_epoch == 1
