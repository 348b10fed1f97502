"""An error code missing from the error table is UNKNOWN_SERVER_ERROR, never success: one test per
handler that reads a broker error code (Java's ``Errors.forCode``). ``admin``, ``blocking``, the
embedded broker's probe and ``testing.kafka_cluster`` raise through ``raise_for_code``, tested first."""

from __future__ import annotations

import pickle
from types import SimpleNamespace

import pytest

from spark_kafka_sink.client.api_versions import interpret_api_versions
from spark_kafka_sink.client.cluster_snapshot import ClusterSnapshot
from spark_kafka_sink.client.metadata_updater import MetadataUpdater
from spark_kafka_sink.errors import (
    AuthenticationError, MetadataTimeoutError, UnknownBrokerError, UnknownServerErrorError,
    error_for, for_code, raise_for_code,
)
from spark_kafka_sink.producer.transactions.states import TransactionState
from spark_kafka_sink.producer.produce_handler import PartitionResult
from spark_kafka_sink.protocol import METADATA
from spark_kafka_sink.structs import TopicPartition

from .client.fake_selector import metadata_body
from .client.test_metadata import make as make_metadata
from .client.test_sasl_client import harness as sasl_harness
from .fakes import FakeClock
from .producer.sender_harness import INIT_PRODUCER_ID, MEMORY, PRODUCE, Harness

UNKNOWN = 12_345
T0 = TopicPartition("t", 0)


def _is_unknown_server_error(error: BaseException) -> None:
    assert isinstance(error, UnknownServerErrorError), repr(error)
    assert error.code == -1 and error.name == "UNKNOWN_SERVER_ERROR" and not error.retriable
    assert f"error code {UNKNOWN}" in str(error)


def test_the_table_maps_an_unknown_code_to_unknown_server_error_and_only_zero_to_success():
    assert for_code(0) is None and error_for(0) is None
    assert for_code(UNKNOWN) is UnknownServerErrorError
    error = error_for(UNKNOWN, "Produce to t-0")
    _is_unknown_server_error(error)
    assert isinstance(error, UnknownBrokerError) and error.broker_code == UNKNOWN
    assert str(error).startswith("[Error -1] UNKNOWN_SERVER_ERROR: Produce to t-0 (")
    copy = pickle.loads(pickle.dumps(error))               # Spark ships errors between processes
    assert (type(copy), str(copy), copy.broker_code) == (UnknownBrokerError, str(error), UNKNOWN)
    with pytest.raises(UnknownServerErrorError, match="CreateTopics t"):
        raise_for_code(UNKNOWN, "CreateTopics t")
    raise_for_code(0, "no error")


def test_init_producer_id_with_an_unknown_code_fails_instead_of_taking_producer_id_minus_one():
    h = Harness(idempotent=True)
    h.bootstrap()
    h.init_answers = [UNKNOWN]
    future = h.append(T0)
    h.run_until(future.done)
    _is_unknown_server_error(future.exception(0))
    assert "InitProducerId failed" in str(future.exception(0))
    assert h.transaction_manager.state is not TransactionState.READY
    assert h.requests(PRODUCE) == [] and len(h.requests(INIT_PRODUCER_ID)) == 1
    assert h.pool.available_memory == MEMORY


@pytest.mark.parametrize("idempotent", [False, True])
def test_a_produce_answer_with_an_unknown_code_fails_the_batch_once_and_later_records_go_on(idempotent):
    h = Harness(idempotent=idempotent)
    h.bootstrap()
    h.script(T0, {"error_code": UNKNOWN})
    failed = h.append(T0)
    h.run_until(failed.done)
    _is_unknown_server_error(failed.exception(0))
    assert "partition t-0" in str(failed.exception(0))
    assert len(h.requests(PRODUCE)) == 1                   # not retried
    later = h.append(T0)
    h.run_until(later.done)
    assert later.result(0).offset == 0
    result = PartitionResult(UNKNOWN)
    assert result.error_class is UnknownServerErrorError
    assert not result.retriable and not result.invalid_metadata


def test_api_versions_with_an_unknown_code_is_an_error_naming_it():
    outcome = interpret_api_versions(SimpleNamespace(error_code=UNKNOWN, api_keys=[]), 3)
    assert outcome.versions is None and outcome.retry_version is None
    _is_unknown_server_error(outcome.error)
    assert "ApiVersions" in str(outcome.error)


@pytest.mark.parametrize("step", ["handshake", "authenticate"])
def test_sasl_with_an_unknown_code_is_an_authentication_error_naming_it(step):
    h, sasl = sasl_harness("PLAIN")
    if step == "handshake":
        sasl.handshake = lambda request: {"error_code": UNKNOWN, "mechanisms": ["PLAIN"]}
    else:
        sasl.authenticate = lambda request: {"error_code": UNKNOWN, "auth_bytes": b"",
                                             "error_message": "refused"}
    sasl.install(h.brokers[1])
    for _ in range(5):
        h.poll()
    error = h.client.authentication_error(-1)
    assert isinstance(error, AuthenticationError), error
    assert "UNKNOWN_SERVER_ERROR" in str(error) and f"error code {UNKNOWN}" in str(error)


def _metadata_response(topics: dict, *, top_level: int = 0):
    body = metadata_body([(1, "b1", 9092)], topics)
    body["error_code"] = top_level
    return METADATA.decode_response(13, METADATA.encode_response(13, body))


def test_a_metadata_topic_error_with_an_unknown_code_is_no_topic_and_the_timeout_names_it():
    snapshot = ClusterSnapshot.from_metadata_response(_metadata_response({"t": (0, UNKNOWN)}))
    assert snapshot.partition_count("t") in (None, 0) and snapshot.topic_error("t") == UNKNOWN
    metadata = make_metadata()
    metadata.update(_metadata_response({"t": (0, UNKNOWN)}), 0)
    with pytest.raises(MetadataTimeoutError) as info:
        metadata.await_topic("t", 20, FakeClock())
    assert "UNKNOWN_SERVER_ERROR" in str(info.value) and f"error code {UNKNOWN}" in str(info.value)


def test_a_metadata_answer_with_an_unknown_top_level_code_is_a_failed_update():
    metadata = make_metadata()
    updater = MetadataUpdater(metadata, request_timeout_ms=30_000)
    updater.handle_response(_metadata_response({"t": 2}, top_level=UNKNOWN), 0)
    assert metadata.update_version == 0 and metadata.snapshot.partition_count("t") in (None, 0)
