"""Metadata: the producer's current view of the cluster, shared by user threads and the sender.

User threads read :attr:`Metadata.snapshot` (an immutable :class:`ClusterSnapshot`, swapped whole
on every update, so reads need no lock) and block in :meth:`Metadata.await_topic` on the first
send to a topic. The network thread asks :meth:`time_to_next_update` when to refresh, sends a
Metadata request for :attr:`topics`, and hands the answer to :meth:`update` (or reports
:meth:`failed_update`). Every method that changes state holds one Condition, which also wakes
the waiters.

Refresh timing (monotonic ms): an update is due at once before the first success and whenever one
was requested, else ``metadata.max.age.ms`` after the last success; but never sooner than the
backoff after the last attempt (``retry.backoff.ms`` after a success, growing exponentially, ×2
±20% up to ``retry.backoff.max.ms``, with consecutive failures; a new topic skips it).

Topics: the producer's topics are remembered with the time they were last used; one unused for
``metadata.max.idle.ms`` is dropped at the next update (and fetched again if used again).
A response that reports a retriable error for a topic or a partition (no leader yet, unknown
topic) asks for another update, subject to the backoff.

Partitions (:meth:`Metadata.await_partition`): a partition above the cached count may have just
been added, so the wait asks for an answer fetched after the wait began. If that one still lacks
the partition it does not exist: ``InvalidPartitionError`` at once, naming the count, rather than
waiting ``max.block.ms`` as Java does; later waits for it fail at once too, until an answer shows
the topic with a different partition count.

Timeouts say why: the bootstrap addresses tried and the last connection error while no broker has
answered; or that the topic does not exist (auto-creation off), or has fewer partitions.

The cluster id: every answer's cluster id is compared with the last one seen (a rebootstrap
forgets the brokers, not the cluster id). A different one means the cluster behind the same
addresses was replaced: the answer replaces the snapshot whole, as every answer does, a WARNING
names both ids, and :attr:`Metadata.cluster_change` records the change with a new generation,
for the sender to act on. KIP-951 leader hints carry the generation their request was sent in
(:meth:`Metadata.update_leaders`): a hint from the old cluster is not applied to the new one.

Errors for a topic that waiting cannot fix (TOPIC_AUTHORIZATION_FAILED, INVALID_TOPIC_EXCEPTION)
and fatal errors (:meth:`fatal_error`, e.g. the broker supports no Metadata version we speak, or
a failed authentication) are raised to the threads waiting in :meth:`await_topic`; a successful
update clears a fatal error not raised yet.
"""

from __future__ import annotations

import logging
import random
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from ..clock import Clock
from ..error_codes import ErrorCode
from ..errors import (
    BrokerResponseError, InvalidPartitionError, KafkaError, MetadataTimeoutError, error_for, for_code,
)
from .backoff import ExponentialBackoff, UniformSource
from ..structs import Node, TopicPartition
from .cluster_snapshot import ClusterSnapshot

log = logging.getLogger(__name__)

FATAL_TOPIC_ERRORS = frozenset({ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.INVALID_TOPIC_EXCEPTION})


@dataclass(frozen=True)
class ClusterChange:
    """A Metadata answer named another cluster id than the one before: the cluster behind the
    same addresses was replaced. ``generation`` counts the changes (the first is 1)."""

    previous: str
    current: str
    generation: int


class Metadata:
    """Thread-safe cluster metadata with refresh timing and topic tracking; see module doc."""

    def __init__(self, bootstrap: Iterable[tuple[str, int]] | ClusterSnapshot, *,
                 metadata_max_age_ms: int = 300_000, metadata_max_idle_ms: int = 300_000,
                 retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 1000,
                 rng: UniformSource | None = None):
        # the current immutable view: read it without a lock; only this class replaces it (a
        # plain attribute, not a property: send() reads it per record)
        self.snapshot = (bootstrap if isinstance(bootstrap, ClusterSnapshot)
                         else ClusterSnapshot.bootstrap(bootstrap))
        self._bootstrap_snapshot = self.snapshot
        self.rebootstraps = 0                      # times the bootstrap list was used again
        self._failing_since_ms: int | None = None  # first failed attempt since the last success
        self._max_age_ms = metadata_max_age_ms
        self._max_idle_ms = metadata_max_idle_ms
        self._backoff = ExponentialBackoff(retry_backoff_ms, retry_backoff_max_ms,
                                           rng=rng if rng is not None else random.Random())
        self._cond = threading.Condition()
        self._topics: dict[str, int] = {}          # topic -> when it expires (ms)
        self._new_topics: set[str] = set()
        self._version = 0
        self._need_update = True
        self._attempts = 0                         # failed attempts since the last success
        self._allowed_at_ms: int | None = None     # no update before this (None: any time)
        self._last_success_ms: int | None = None
        self._fatal: KafkaError | None = None
        self._closed = False
        self._waker: Callable[[], None] | None = None
        self._bootstrap = tuple(f"{n.host}:{n.port}" for n in self.snapshot.nodes.values())
        self._connection_errors: dict[str, str] = {}  # address -> its last connection error
        self._requests_sent = 0                    # Metadata requests sent so far
        self._answered = 0                         # _requests_sent when the last update was applied
        self._missing: dict[str, int] = {}         # topic -> partition count an answer confirmed
        self._cluster_id: str | None = None        # the last cluster id an answer carried
        self._cluster_change: ClusterChange | None = None

    # --- reads ----------------------------------------------------------------------------------

    @property
    def update_version(self) -> int:
        """Bumped by every successful update."""
        return self._version

    @property
    def cluster_id(self) -> str | None:
        """The cluster id of the last answer that had one (kept across a rebootstrap)."""
        return self._cluster_id

    @property
    def cluster_change(self) -> ClusterChange | None:
        """The last change of cluster id (see the module doc), or None."""
        return self._cluster_change

    @property
    def cluster_generation(self) -> int:
        """How many times the cluster id changed: 0 until it does."""
        change = self._cluster_change
        return 0 if change is None else change.generation

    @property
    def last_successful_update_ms(self) -> int | None:
        return self._last_success_ms

    @property
    def topics(self) -> tuple[str, ...]:
        """The topics to ask Metadata for, sorted."""
        with self._cond:
            return tuple(sorted(self._topics))

    @property
    def update_requested(self) -> bool:
        return self._need_update

    def time_to_next_update(self, now_ms: int) -> int:
        """Ms until an update is due (0: now)."""
        with self._cond:
            if self._need_update or self._last_success_ms is None:
                expires_in = 0
            else:
                expires_in = max(self._last_success_ms + self._max_age_ms - now_ms, 0)
            allowed_in = 0 if self._allowed_at_ms is None else max(self._allowed_at_ms - now_ms, 0)
            return max(expires_in, allowed_in)

    # --- requests from the producer and the sender ----------------------------------------------

    def set_waker(self, waker: Callable[[], None] | None) -> None:
        """Called (outside the lock) when an update is wanted at once: wakes the sender's poll."""
        self._waker = waker

    def add_topic(self, topic: str, now_ms: int) -> bool:
        """Track ``topic`` (or refresh its last use). True when it is new: an update is then
        requested at once, skipping the backoff."""
        with self._cond:
            is_new = self._touch(topic, now_ms)
        if is_new:
            self._wake()
        return is_new

    def request_update(self, now_ms: int) -> int:
        """Ask for an update as soon as the backoff allows (``now_ms`` is when the need arose,
        kept for logging). Returns the current update version: an update has arrived once
        :attr:`update_version` is above it."""
        with self._cond:
            self._need_update = True
            log.debug("metadata update requested at %d ms (version %d)", now_ms, self._version)
            return self._version

    def used_snapshot(self, topic: str, now_ms: int) -> ClusterSnapshot | None:
        """The lock-free fast path of :meth:`await_topic` for ``send()``: the current snapshot
        when ``topic`` has partitions in it and was already marked used at ``now_ms`` (its idle
        expiry is then exactly what :meth:`await_topic` would set); ``None`` otherwise, and the
        caller goes through :meth:`await_topic`. A busy producer thus takes the lock once per
        millisecond and topic instead of once per record.

        Reads only: a ``dict.get`` and the snapshot reference, both atomic under the GIL."""
        snapshot = self.snapshot
        # topics_with_partitions: exactly the topics with a truthy partition_count, without a call
        if (self._topics.get(topic) == now_ms + self._max_idle_ms
                and topic in snapshot.topics_with_partitions):
            return snapshot
        return None

    def await_topic(self, topic: str, max_wait_ms: int, clock: Clock, *,
                    partition: int | None = None) -> ClusterSnapshot:
        """Block until ``topic`` has partitions (more than ``partition`` when given); returns that
        snapshot. Raises MetadataTimeoutError after ``max_wait_ms``, the topic's fatal error, or
        KafkaError when the metadata is closed (see module doc)."""
        start_ms = clock.monotonic_ms()
        with self._cond:
            self._raise_if_invalid(topic)
            self._touch(topic, start_ms)
            if _has_partition(self.snapshot, topic, partition):
                return self.snapshot
        while True:
            version = self._request_update_for(topic)
            self._wake()
            with self._cond:
                self._wait_for_version(version, topic, partition, max_wait_ms, start_ms, clock)
                self._raise_for_topic(topic)
                if _has_partition(self.snapshot, topic, partition):
                    return self.snapshot
                if clock.monotonic_ms() - start_ms >= max_wait_ms:
                    raise self._timeout(topic, partition, max_wait_ms)

    def await_partition(self, topic: str, partition: int, max_wait_ms: int,
                        clock: Clock) -> ClusterSnapshot:
        """Block until ``topic`` has ``partition``, checked against an answer fetched after this
        call began (see the module doc); returns that snapshot. Raises
        :class:`InvalidPartitionError` when such an answer (or an earlier one, for a partition
        already confirmed missing) lacks it, MetadataTimeoutError after ``max_wait_ms``."""
        start_ms = clock.monotonic_ms()
        with self._cond:
            self._touch(topic, start_ms)
            count = self.snapshot.partition_count(topic) or 0
            if partition < count:
                return self.snapshot
            if count and self._missing.get(topic) == count:
                raise InvalidPartitionError(topic, partition, count)
            sent_before = self._requests_sent
            while self._answered <= sent_before:   # an answer to a request sent before us: again
                self._need_update = True
                self._wake()
                self._wait_for_version(self._version, topic, partition, max_wait_ms, start_ms, clock)
            self._raise_for_topic(topic)
            count = self.snapshot.partition_count(topic) or 0
            if partition < count:
                return self.snapshot
            if not count:
                raise self._timeout(topic, partition, max_wait_ms)
            self._missing[topic] = count
            raise InvalidPartitionError(topic, partition, count)

    # --- updates from the network thread --------------------------------------------------------

    def request_sent(self) -> None:
        """A Metadata request went out (the network client sends one at a time)."""
        with self._cond:
            self._requests_sent += 1

    def connection_failed(self, address: str, reason: str) -> None:
        """A connection to ``address`` failed or dropped: kept for the timeout errors."""
        with self._cond:
            self._connection_errors[address] = reason

    def update(self, response: Any, now_ms: int) -> ClusterSnapshot:
        """Apply a decoded Metadata response: a new snapshot, topic expiry, wake the waiters."""
        snapshot = ClusterSnapshot.from_metadata_response(response)
        with self._cond:
            if self._closed:
                return self.snapshot
            change = self._note_cluster_id(snapshot.cluster_id)
            self._version += 1
            self._answered = self._requests_sent
            self._connection_errors.clear()
            for topic, count in list(self._missing.items()):
                if snapshot.partition_count(topic) != count:
                    del self._missing[topic]   # the topic changed: look again on the next send
            self._attempts = 0
            self._failing_since_ms = None
            self._fatal = None                     # a later success ends an earlier fatal error
            self._last_success_ms = now_ms
            self._new_topics.difference_update(t.name for t in response.topics)
            self._expire_topics(now_ms)
            self._need_update = _needs_another_update(response)
            self._allowed_at_ms = now_ms + self._backoff.backoff(0)
            if self._new_topics:      # added after this request went out: ask again at once
                self._request_immediate_update()
            self.snapshot = snapshot
            self._cond.notify_all()
        if change is not None:
            log.warning("the cluster behind bootstrap.servers (%s) changed: cluster id %s, now %s. "
                        "Its metadata replaces the old cluster's whole; records acknowledged "
                        "before are in cluster %s, not in %s", ", ".join(self._bootstrap),
                        change.previous, change.current, change.previous, change.current)
        _log_topic_errors(response)
        return snapshot

    def update_leaders(self, leaders: Mapping[TopicPartition, tuple[int, int]],
                       nodes: Iterable[Node] = (), *,
                       cluster_generation: int | None = None) -> frozenset[TopicPartition]:
        """Apply KIP-951 leader hints (a Produce response's current leaders and node endpoints)
        without waiting for a Metadata round trip; the partitions that moved
        (:meth:`ClusterSnapshot.with_leaders`). Not an update: the version and refresh timing stay.
        ``cluster_generation``: :attr:`cluster_generation` when the request was sent; hints from a
        cluster that was replaced since are ignored."""
        with self._cond:
            if self._closed:
                return frozenset()
            if cluster_generation is not None and cluster_generation != self.cluster_generation:
                log.debug("ignoring leader hints from cluster %s: it was replaced",
                          self._cluster_change.previous if self._cluster_change else None)
                return frozenset()
            snapshot, moved = self.snapshot.with_leaders(leaders, nodes)
            self.snapshot = snapshot
            if moved:
                self._cond.notify_all()
        return moved

    def failed_update(self, now_ms: int) -> None:
        """An attempt failed (no node, a disconnect, an empty answer): back off before the next."""
        with self._cond:
            self._attempts += 1
            if self._failing_since_ms is None:
                self._failing_since_ms = now_ms
            self._allowed_at_ms = now_ms + self._backoff.backoff(self._attempts - 1)

    def failing_for_ms(self, now_ms: int) -> int:
        """How long updates have been failing without a success in between (0: they are not)."""
        with self._cond:
            return 0 if self._failing_since_ms is None else now_ms - self._failing_since_ms

    def rebootstrap(self, now_ms: int, reason: str) -> None:
        """Forget the brokers the cluster named and start again from ``bootstrap.servers``
        (KIP-899): the nodes of the bootstrap snapshot, an update due at once. The tracked
        topics stay; their partitions come back with the next answer."""
        with self._cond:
            if self._closed:
                return
            self.rebootstraps += 1
            self.snapshot = self._bootstrap_snapshot
            self._need_update = True
            self._attempts = 0
            self._failing_since_ms = None
            self._allowed_at_ms = None
        log.warning("rebootstrapping from bootstrap.servers (%s): %s", ", ".join(self._bootstrap), reason)
        self._wake()

    def fatal_error(self, error: KafkaError) -> None:
        """An error no retry can fix: raised once to the threads waiting in await_topic."""
        with self._cond:
            self._fatal = error
            self._cond.notify_all()

    def close(self) -> None:
        """Wake every waiter with an error; later updates are ignored."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # --- internals (call with the lock held unless noted) -----------------------------------------

    def _note_cluster_id(self, cluster_id: str | None) -> ClusterChange | None:
        """Remember ``cluster_id``; the change when it differs from the last one seen."""
        previous = self._cluster_id
        if not cluster_id:
            return None
        self._cluster_id = cluster_id
        if previous is None or previous == cluster_id:
            return None
        self._cluster_change = ClusterChange(previous, cluster_id, self.cluster_generation + 1)
        self._missing.clear()          # partition counts the old cluster confirmed
        return self._cluster_change

    def _touch(self, topic: str, now_ms: int) -> bool:
        is_new = topic not in self._topics
        self._topics[topic] = now_ms + self._max_idle_ms
        if is_new:
            self._new_topics.add(topic)
            self._request_immediate_update()
        return is_new

    def _request_immediate_update(self) -> None:
        self._need_update = True
        self._allowed_at_ms = None

    def _request_update_for(self, topic: str) -> int:
        """(Takes the lock.) A new topic skips the backoff; a known one waits for it."""
        with self._cond:
            self._need_update = True
            if topic in self._new_topics:
                self._allowed_at_ms = None
            return self._version

    def _wait_for_version(self, version: int, topic: str, partition: int | None,
                          max_wait_ms: int, start_ms: int, clock: Clock) -> None:
        while self._version <= version:
            if self._closed:
                raise _closed_error(topic)
            if self._fatal is not None:
                error, self._fatal = self._fatal, None
                raise error
            remaining_ms = max_wait_ms - (clock.monotonic_ms() - start_ms)
            if remaining_ms <= 0 or not self._cond.wait(remaining_ms / 1000):
                raise self._timeout(topic, partition, max_wait_ms)

    def _raise_if_invalid(self, topic: str) -> None:
        if self.snapshot.topic_error(topic) == ErrorCode.INVALID_TOPIC_EXCEPTION:
            raise _topic_error(ErrorCode.INVALID_TOPIC_EXCEPTION, topic)

    def _raise_for_topic(self, topic: str) -> None:
        if self._closed:
            raise _closed_error(topic)
        code = self.snapshot.topic_error(topic)
        if code in FATAL_TOPIC_ERRORS:
            raise _topic_error(code, topic)

    def _expire_topics(self, now_ms: int) -> None:
        expired = [t for t, expires in self._topics.items()
                   if expires <= now_ms and t not in self._new_topics]
        for topic in expired:
            del self._topics[topic]
        if expired:
            log.debug("stopped tracking metadata for topics unused for %d ms: %s",
                      self._max_idle_ms, expired)

    def _timeout(self, topic: str, partition: int | None, max_wait_ms: int) -> MetadataTimeoutError:
        """Java's message, then why (lock held): see the module doc."""
        if partition is None:
            what = f"Topic {topic} not present in metadata after {max_wait_ms} ms"
        else:
            what = f"Partition {partition} of topic {topic} is not present in metadata after {max_wait_ms} ms"
        return MetadataTimeoutError(f"{what}: {self._why_missing(topic)}")

    def _why_missing(self, topic: str) -> str:
        if self._last_success_ms is None:
            tried = ", ".join(self._bootstrap) or "none"
            errors = "; ".join(f"{address}: {reason}" for address, reason in
                               self._connection_errors.items())
            last = f"connection errors: {errors}" if errors else "no connection error seen yet"
            return f"no broker has answered yet (bootstrap.servers tried: {tried}; {last})"
        code = self.snapshot.topic_error(topic)
        if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return (f"the cluster answered, and topic {topic} does not exist "
                    "(UNKNOWN_TOPIC_OR_PARTITION); this producer never creates topics: create it first")
        count = self.snapshot.partition_count(topic)
        if count:
            return f"the cluster answered, and topic {topic} has {count} partition(s)"
        detail = f" ({error_for(code)})" if code else ""
        return f"the cluster answered, but not with topic {topic}'s partitions yet{detail}"

    def _wake(self) -> None:
        waker = self._waker
        if waker is not None:
            waker()


def _has_partition(snapshot: ClusterSnapshot, topic: str, partition: int | None) -> bool:
    count = snapshot.partition_count(topic)
    return bool(count) and (partition is None or partition < count)


def _closed_error(topic: str) -> KafkaError:
    return KafkaError(f"the producer's metadata was closed while waiting for topic {topic}")


def _topic_error(code: int, topic: str) -> BrokerResponseError:
    return error_for(code, f"topic {topic}")


def _needs_another_update(response: Any) -> bool:
    """A retriable topic or partition error (no leader yet, unknown topic) calls for a retry."""
    for topic in response.topics:
        if _invalidates(topic.error_code):
            return True
        if not topic.error_code and any(_invalidates(p.error_code) for p in topic.partitions):
            return True
    return False


def _invalidates(code: int) -> bool:
    cls = for_code(code)
    return cls is not None and cls.invalid_metadata


def _log_topic_errors(response: Any) -> None:
    """Errors a retry may fix (a topic being created) at debug level, the others as warnings."""
    errors = {t.name: t.error_code for t in response.topics if t.error_code}
    lasting = {name: code for name, code in errors.items() if not _invalidates(code)}
    if lasting:
        log.warning("Metadata reported errors for topics (name: error code): %s", lasting)
    elif errors:
        log.debug("Metadata reported retriable errors for topics (name: error code): %s", errors)
