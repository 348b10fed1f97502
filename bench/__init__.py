"""Benchmarks against the peers (bench/README.md). Not part of the package and not timed tests.

``python -m bench.producer`` (``make bench-producer``): the standalone producer benchmark.
``python -m bench.spark`` (``make bench-spark``): the Spark sink against its peers.
``python -m bench.soak`` (``make soak``): ten minutes through the sink, then a verdict.
"""
