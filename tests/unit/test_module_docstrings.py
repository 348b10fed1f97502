"""A module's docstring says what the module is for and its contracts.

At most :data:`MAX_LINES` lines: a screen's worth, enough for the purpose, the rules a caller
relies on and the thread and time contracts (the longest module docstrings fit in it once the
reasoning behind them moved to docs/ARCHITECTURE.md and the user-facing tables to the README).

Benchmark figures do not belong there: they go stale unnoticed, and they live in
bench/README.md ("Figures behind design choices"), with what was measured. The pattern below is
conservative: it catches the shapes such figures take (rates, bandwidths, speed-ups, per-call
timings, CPU per rows, start-up times against each other), not every number.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "spark_kafka_sink"

MAX_LINES = 40

FIGURE = re.compile(r"""
    \d[\d.,]*\s*[kKM]?\s*(?:records|rows|msgs|messages|batches|requests)/s\b  # a rate
  | \d[\d.,]*\s*[KMG]i?B/s\b                                                # a bandwidth
  | \d[\d.,]*\s*(?:x|×)\s+(?:faster|slower)\b                               # a speed-up
  | \d[\d.,]*\s*%\s+(?:faster|slower)\b
  | \d[\d.,]*\s*(?:µs|us|ns)(?:/|\s+per\s+)(?:record|row|call|batch)\b       # a cost per item
  | ~\s*\d[\d.,]*\s*(?:µs|ns)\b
  | \b(?:s|seconds)\s+of\s+CPU\b | \bCPU\s+per\s+1M\b                     # CPU per rows
  | \d[\d.,]*\s*(?:ms|s)\s+instead\s+of\s+(?:about\s+|~)?\d                 # before and after
""", re.X)


def _docstrings() -> list[tuple[str, str]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(), filename=str(path)))
        if doc:
            found.append((str(path.relative_to(PACKAGE)), doc))
    return found


@pytest.mark.parametrize("sentence", [
    "sent at 1.20M rows/s", "about 140k records/s", "reads 450 MB/s", "is 3.5x faster",
    "was 10-25 % slower", "~0.9 µs on CPython 3.11", "costs 2 µs per record", "1.2 us/record",
    "the broker spent 1.4-1.6 s of CPU per 1M rows", "Python CPU per 1M rows 0.55",
    "starts in ~1.3 s instead of ~2.2 s", "take about 7 s instead of about 11 s",
])
def test_the_pattern_catches_benchmark_figures(sentence):
    assert FIGURE.search(sentence), sentence


@pytest.mark.parametrize("sentence", [
    "``linger.ms``=5", "``max.block.ms`` (60 s by default)", "16 KiB batches", "(10 minutes)",
    "at about 80% of its lifetime", "``timestamp[us, tz=<zone>]``", "one tally per 1M rows",
    "``txn-commit-time-ns-total``", "retry after 100 ms",
])
def test_the_pattern_leaves_settings_and_units_alone(sentence):
    assert not FIGURE.search(sentence), sentence


def test_no_module_docstring_carries_a_benchmark_figure():
    offenders = [f"{name}: {line.strip()}"
                 for name, doc in _docstrings() for line in doc.splitlines() if FIGURE.search(line)]
    assert not offenders, "move these to bench/README.md:\n" + "\n".join(offenders)


def test_the_package_docstrings_are_found():
    assert len(_docstrings()) > 100, "the package's docstrings were not found"


def test_no_module_docstring_runs_past_the_limit():
    long = [f"{name}: {len(doc.splitlines())} lines"
            for name, doc in _docstrings() if len(doc.splitlines()) > MAX_LINES]
    assert not long, (f"module docstrings over {MAX_LINES} lines (keep purpose and contracts; the "
                      "reasoning goes to docs/ARCHITECTURE.md):\n" + "\n".join(long))
