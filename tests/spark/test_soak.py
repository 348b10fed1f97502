"""The soak's short form (issue 6): ``python -m bench.soak`` for 42 s, in CI.

``make soak`` runs the same soak for 10 minutes. Here it streams 200 records a second through
``foreachBatch(KafkaSink(...))`` for 42 s into the session's broker (the ``kafka`` fixture, so no
second broker), with a 14 s warm-up (both Python workers serve their producers by then: 4 s into
the stream on an idle machine, 10 s on a loaded one), a sample every second (so about 28
post-warm-up samples) and one eviction probe, 1 s after the warm-up (the soak starts a probe only
while it can end before the run does: warm-up + interval + its budget of 3 triggers + 2 cache
timeouts + 15 s must stay under the duration; here it may start up to 3 s late). It runs in its
own process, as ``make soak`` does: its own Spark JVM and Python workers, whose ``/proc`` figures
nothing else in the test session disturbs, and a producer pool holding only the soak's producer
(a pooled producer left by another test would keep its broker connections open for its 10 minute
timeout).

The tolerances are those of the long run (bench/soak.py, bench/soak_check.py): RSS within ±15 %
of the post-warm-up baseline (for a worker after its producer's eviction, at most 15 % above), threads, fds and sockets at most a small fixed slack above it, the
Spark JVM's two BlockManager pools under their cap. 42 s cannot show a slow leak the way ten
minutes do; it does show a leak per micro-batch (up to 42 of them) or per producer created and
evicted (the probe evicts every worker's producer, and the samples after it are held to the
same baseline).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.heavy

REPO = Path(__file__).resolve().parents[2]
CACHE_TIMEOUT_S = 3
SHORT_SOAK = ["--duration", "42", "--warmup", "14", "--rate", "200", "--trigger", "1", "--sample-every", "1",
              "--baseline-samples", "5", "--evict-every", "1", "--cache-timeout", str(CACHE_TIMEOUT_S)]
RUN_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def soak(kafka, tmp_path_factory):
    """The short soak's JSON report and its printed output."""
    out = tmp_path_factory.mktemp("soak") / "soak.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-m", "bench.soak", *SHORT_SOAK, "--bootstrap", kafka.bootstrap_servers,
         "--json", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    output = proc.stdout + "\n--- stderr (tail) ---\n" + proc.stderr[-4000:]
    assert out.exists(), f"the soak wrote no report (exit {proc.returncode}):\n{output}"
    return json.loads(out.read_text()), proc.returncode, output, proc.stdout


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_short_soak_passes(soak):
    report, returncode, output, stdout = soak
    assert report["error"] is None, output
    assert report["passed"] and returncode == 0, output
    assert stdout.rstrip().endswith("SOAK PASSED"), output


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_rss_stays_within_15_percent_and_counts_stay_flat(soak):
    report, _, output, _ = soak
    checks = {check["name"]: check for check in report["checks"]}
    post_warmup = [r for r in report["rounds"] if not r["warmup"]]
    assert len(post_warmup) >= 20, f"only {len(post_warmup)} post-warm-up samples:\n{output}"
    # every process is covered: the driver's two, and at least one worker (local[2]: usually two)
    for name in ("driver python RSS", "driver JVM RSS", "driver python threads", "driver JVM threads (other)",
                 "driver python fds", "driver JVM fds", "driver JVM Spark pool threads", "worker processes"):
        assert name in checks, f"no {name!r} check:\n{output}"
    workers = [name for name in checks if name.startswith("worker ") and name.endswith(" RSS")]
    assert workers, output
    for name, check in checks.items():
        assert check["passed"], f"{name}: {check['detail']} (limit {check['limit']})\n{output}"
        if name.endswith("RSS"):
            assert check["limit"] == "baseline ±15%"
            assert check["low"] <= check["high"] <= 1.15 * check["baseline"]
            if "sample(s) only" not in check["detail"]:  # a worker after its eviction: upper bound only
                assert 0.85 * check["baseline"] <= check["low"]


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_eviction_closes_the_workers_broker_connections_and_a_new_producer_follows(soak):
    report, _, output, _ = soak
    probes = report["probes"]
    assert probes, f"no eviction probe ran:\n{output}"
    for probe in probes:
        assert probe["connections_before"] >= 1, f"no worker connection to the broker to evict: {probe}"
        assert probe["closed_after_s"] is not None, f"connections stayed open: {probe}\n{output}"
        # evicted within 2 x producer.cache.timeout of the last release (plus the close itself)
        assert probe["closed_after_s"] <= 2 * CACHE_TIMEOUT_S + 10, probe
        assert probe["held_s"] >= probe["closed_after_s"], f"the workers were not idle all along: {probe}"
        assert probe["workers_after"] == probe["workers_before"], f"Spark replaced a worker meanwhile: {probe}"
        assert probe["created_on_resume"] >= 1, f"the next micro-batch reused a producer: {probe}"


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_every_record_is_delivered_exactly_once(soak):
    report, _, output, _ = soak
    delivery = report["delivery"]
    assert report["batches"] >= 15, f"only {report['batches']} micro-batches written:\n{output}"
    assert report["written"] == delivery["expected"] > 0
    assert delivery["read"] == delivery["unique"] == delivery["expected"], delivery
    assert delivery["duplicates"] == delivery["missing"] == delivery["unexpected"] == delivery["bad_values"] == 0
