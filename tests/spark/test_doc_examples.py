"""Every Python example of README.md and docs/*.md runs (``tests/doc_examples.py``): a page's
blocks in order, in one namespace, against the session's broker (its topics created first) and,
where a page builds a SparkSession, the session's ``spark`` (``getOrCreate`` returns it), where a
page uses a schema registry, the session's ``registry``. A block that fails names its page and
line. The README's quickstart runs in ``test_quickstart.py``, as pasted."""

from __future__ import annotations

import os
import time
import traceback

import pytest

from spark_kafka_sink import admin

from .. import doc_examples

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.heavy, pytest.mark.timeout(240)]

PAGES = [path for path in doc_examples.pages()
         if doc_examples.runnable(doc_examples.page_blocks(path))]


@pytest.mark.parametrize("path", PAGES, ids=[doc_examples.relative(path) for path in PAGES])
def test_the_pages_python_examples_run(path, kafka, request):
    blocks = doc_examples.page_blocks(path)
    bootstrap = kafka.bootstrap_servers.split(",")[0]
    for spec in doc_examples.broker_topics(blocks):
        admin.create_topic(kafka.bootstrap_servers, spec.name, spec.partitions, exist_ok=True)
    spark = request.getfixturevalue("spark") if doc_examples.needs_spark(blocks) else None
    registry = request.getfixturevalue("registry") if doc_examples.needs_registry(blocks) else None
    queries_before = {query.id for query in spark.streams.active} if spark is not None else set()
    saved_environ = dict(os.environ)
    namespace: dict = {"__name__": "__main__"}
    try:
        for block in doc_examples.runnable(blocks):
            code = doc_examples.rebind(block.code, bootstrap, registry.url if registry else None)
            started = time.monotonic()
            try:
                # blank lines first, so that a traceback's line numbers are the page's
                exec(compile("\n" * block.line + code, block.page, "exec"), namespace)
            except Exception as exc:
                pytest.fail(f"{block.where} failed: {type(exc).__name__}: {exc}\n"
                            f"{traceback.format_exc()}", pytrace=False)
            print(f"{block.where}: {time.monotonic() - started:.2f} s")
    finally:
        os.environ.clear()
        os.environ.update(saved_environ)
        if spark is not None:
            for query in spark.streams.active:
                if query.id not in queries_before:
                    query.stop()
