"""The benchmarks' printed tables: one cell's text."""

from __future__ import annotations


def cell(value: float | None, spec: str) -> str:
    """``value`` formatted with ``spec`` (``format(value, spec)``), or ``-`` when there is none."""
    return "-" if value is None else format(value, spec)
