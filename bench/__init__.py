"""Benchmarks against the peers (DESIGN.md §8). Not part of the package and not timed tests.

``python -m bench.producer`` (``make bench``): the standalone producer benchmark.
"""
