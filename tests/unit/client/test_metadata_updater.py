"""The metadata updater's log of a bootstrap address that keeps failing: once, then at most once
per REPEAT_LOG_MS with the count since, and once when metadata arrives after the failures."""

from __future__ import annotations

import logging

from spark_kafka_sink.client.metadata_updater import REPEAT_LOG_MS, MetadataUpdater
from spark_kafka_sink.protocol import METADATA

from .fake_selector import metadata_body
from .test_metadata import make

LOGGER = "spark_kafka_sink.client.metadata_updater"


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_a_failing_bootstrap_address_is_logged_once_then_with_a_count(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    metadata = make()
    updater = MetadataUpdater(metadata, request_timeout_ms=30_000)
    (bootstrap,) = [n for n in metadata.snapshot.nodes.values() if n.node_id < 0]
    for attempt in range(130):                     # a reconnect every 100 ms for 13 s
        updater.handle_server_disconnect(attempt * 100, bootstrap.node_id)
    assert _lines(caplog) == [f"bootstrap broker {bootstrap.address} (node {bootstrap.node_id}) disconnected"]
    updater.handle_server_disconnect(REPEAT_LOG_MS, bootstrap.node_id)
    assert _lines(caplog)[1:] == [
        f"bootstrap broker {bootstrap.address} (node {bootstrap.node_id}) disconnected 130 more "
        f"time(s) in the last 30 s (131 in all)"]
    assert all(r.levelno == logging.WARNING for r in caplog.records)

    caplog.clear()
    body = metadata_body([(1, "b1", 9092)], {"t": 1})
    updater.handle_response(METADATA.decode_response(13, METADATA.encode_response(13, body)),
                            REPEAT_LOG_MS + 1)
    assert _lines(caplog) == [f"metadata received after 131 disconnect(s) from bootstrap broker "
                              f"{bootstrap.address}"]


def test_a_broker_known_from_metadata_is_not_a_bootstrap_failure(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    updater = MetadataUpdater(make(), request_timeout_ms=30_000)
    updater.handle_server_disconnect(0, 1)
    assert _lines(caplog) == []
