"""What KIP-951 leader hints save: the time from a leader move to the first acknowledged record.

    python -m bench.leader_move [--rounds 5]

A 3-node cluster (RF 3), one partition. A producer sends a record every 2 ms and waits for
nothing; at a chosen moment the partition's leader is shut down cleanly (controlled shutdown:
it hands leadership over and answers NOT_LEADER_OR_FOLLOWER, naming the new leader, until it
stops). Measured: the longest pause between two acknowledgements after the stop (the producer's
outage). Each round alternates the producer's leader hints on and off (``SenderSettings``), and
the node is started again before the next round. The lines printed give the median per side and
their ratio; every record of every round is checked to be acknowledged.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import threading
import time
import uuid

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.testing import KafkaCluster

_SEND_EVERY_S = 0.002
_MAX_ROUND_S = 60.0


def one_round(cluster: KafkaCluster, hints: bool) -> float:
    """The longest pause between two acknowledgements around a clean stop of the leader (the
    producer's outage), hints on or off; every record must be acknowledged."""
    topic = f"move-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 1)
    leader = cluster.leader_of(topic, 0)
    acks: list[float] = []
    producer = KafkaProducer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0})
    # not a user setting: the sender's switch, flipped only to measure what the hints save
    settings = producer._sender._settings
    producer._sender._settings = dataclasses.replace(settings, use_leader_hints=hints)
    futures = []
    try:
        started = time.monotonic()
        stopper = threading.Thread(target=cluster.stop, args=(leader,), daemon=True)
        while time.monotonic() - started < _MAX_ROUND_S:
            future = producer.send(topic, b"x")
            future.add_done_callback(lambda f: acks.append(time.monotonic()))
            futures.append(future)
            elapsed = time.monotonic() - started
            if not stopper.is_alive() and stopper.ident is None and elapsed > 1.0:
                stop_at = time.monotonic()
                stopper.start()
            if stopper.ident is not None and not stopper.is_alive() and elapsed > 3.0:
                break
            time.sleep(_SEND_EVERY_S)
        producer.flush(60)
        assert all(f.exception(0) is None for f in futures), "a record failed"
        after = sorted(t for t in acks if t >= stop_at)
        return max(b - a for a, b in zip(after, after[1:]))
    finally:
        producer.close()
        cluster.restart(leader)
        cluster.wait_for_isr(topic)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.leader_move", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds per side (5)")
    args = parser.parse_args(argv)
    times: dict[bool, list[float]] = {True: [], False: []}
    with KafkaCluster(3, heap="256m") as cluster:
        for round_ in range(args.rounds):
            for hints in (True, False) if round_ % 2 == 0 else (False, True):
                seconds = one_round(cluster, hints)
                times[hints].append(seconds)
                print(f"  round {round_ + 1}, hints {'on' if hints else 'off'}: {seconds * 1000:.0f} ms", flush=True)
    on, off = statistics.median(times[True]), statistics.median(times[False])
    print(f"longest pause in acknowledgements around a leader stop, median of {args.rounds}: hints on {on * 1000:.0f} ms, "
          f"hints off {off * 1000:.0f} ms ({off / on:.2f}x)")


if __name__ == "__main__":
    main()
