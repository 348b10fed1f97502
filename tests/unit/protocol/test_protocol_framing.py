"""ClientFraming / ServerFraming: ordering, splitting at every byte, limits, EOF, errors."""

from __future__ import annotations

import pytest

from spark_kafka_sink.errors import (
    CorrelationIdMismatchError, EncodeError, FrameTooLargeError, ProtocolError,
)
from spark_kafka_sink.protocol import (
    API_VERSIONS, FIND_COORDINATOR, METADATA, PRODUCE, SASL_HANDSHAKE, ClientFraming,
    ServerFraming,
)
from spark_kafka_sink.protocol.framing import frame
from spark_kafka_sink.protocol.headers import ResponseHeader
from spark_kafka_sink.protocol.primitives import INT32

METADATA_REPLY = {"brokers": [{"node_id": 1, "host": "localhost", "port": 9092}],
                  "cluster_id": "c", "controller_id": 1,
                  "topics": [{"name": "t", "partitions": [
                      {"partition_index": 0, "leader_id": 1, "replica_nodes": [1],
                       "isr_nodes": [1]}]}]}
API_VERSIONS_REPLY = {"api_keys": [{"api_key": 3, "min_version": 0, "max_version": 13}]}
SASL_REPLY = {"error_code": 33, "mechanisms": ["PLAIN", "SCRAM-SHA-512"]}


def _exchange(client: ClientFraming, server: ServerFraming, calls) -> bytes:
    """Send each (api, version, body, reply) from the client and return the server's replies."""
    stream = b""
    for api, version, body, reply in calls:
        server.receive_data(client.send(api, version, body).data)
        request = server.next_request()
        assert request.api is api and request.version == version
        stream += server.respond(request, reply)
    return stream


CALLS = [
    (API_VERSIONS, 3, {"client_software_name": "a", "client_software_version": "1"},
     API_VERSIONS_REPLY),
    (METADATA, 12, {"topics": None}, METADATA_REPLY),
    (SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, SASL_REPLY),
    (METADATA, 8, {"topics": []}, METADATA_REPLY),
]


def _drain(client: ClientFraming) -> list:
    out = []
    while (response := client.next_response()) is not None:
        out.append(response)
    return out


def test_in_memory_exchange():
    client, server = ClientFraming(client_id="me"), ServerFraming()
    stream = _exchange(client, server, CALLS)
    assert client.in_flight == 4
    client.receive_data(stream)
    responses = _drain(client)
    assert [r.correlation_id for r in responses] == [0, 1, 2, 3]
    assert [(r.api.name, r.version) for r in responses] == [
        ("ApiVersions", 3), ("Metadata", 12), ("SaslHandshake", 1), ("Metadata", 8)]
    assert responses[1].body.topics[0].partitions[0].leader_id == 1
    assert responses[2].body.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert client.in_flight == 0


def test_server_sees_client_id_and_body():
    client, server = ClientFraming(client_id=None), ServerFraming()
    server.receive_data(client.send(METADATA, 12, {"topics": [{"name": "x"}]}).data)
    request = server.next_request()
    assert request.client_id is None and request.body.topics[0].name == "x"
    assert server.next_request() is None


def test_stream_split_at_every_byte_boundary():
    client, server = ClientFraming(), ServerFraming()
    stream = _exchange(client, server, CALLS)
    expected = None
    for cut in range(len(stream) + 1):
        client, server = ClientFraming(), ServerFraming()
        assert _exchange(client, server, CALLS) == stream
        got = []
        for chunk in (stream[:cut], stream[cut:]):
            if chunk:                         # b"" would mean end of stream
                client.receive_data(chunk)
            got += _drain(client)
        bodies = [r.body for r in got]
        expected = expected or bodies
        assert bodies == expected and len(bodies) == 4


def test_stream_fed_one_byte_at_a_time():
    client, server = ClientFraming(), ServerFraming()
    stream = _exchange(client, server, CALLS)
    got = []
    for i in range(len(stream)):
        client.receive_data(stream[i:i + 1])
        got += _drain(client)
    assert [r.correlation_id for r in got] == [0, 1, 2, 3]
    client.receive_data(b"")
    assert client.next_response() is None and client.eof


def test_eof_mid_frame():
    client, server = ClientFraming(), ServerFraming()
    stream = _exchange(client, server, CALLS[:1])
    client.receive_data(stream[:-3])
    assert client.next_response() is None
    with pytest.raises(ProtocolError, match=rf"connection closed mid-frame: got {len(stream) - 7} "
                                            rf"of {len(stream) - 4} bytes"):
        client.receive_data(b"")


def test_eof_inside_the_size_prefix():
    client = ClientFraming()
    client.send(METADATA, 12, {})
    client.receive_data(b"\x00\x00")
    with pytest.raises(ProtocolError, match="got 2 of 4 size bytes"):
        client.receive_data(b"")


def test_eof_after_complete_frames_then_partial():
    client, server = ClientFraming(), ServerFraming()
    stream = _exchange(client, server, CALLS[:2])
    client.receive_data(stream[:-1])
    client.receive_data(b"")
    assert client.next_response().correlation_id == 0
    with pytest.raises(ProtocolError, match="connection closed mid-frame"):
        client.next_response()


def test_data_after_eof_is_an_error():
    client = ClientFraming()
    client.receive_data(b"")
    with pytest.raises(ProtocolError, match="after the end of the stream"):
        client.receive_data(b"\x00")


@pytest.mark.parametrize("size", [1001, -1, -2 ** 31])
def test_frame_size_over_max_fails_as_soon_as_the_prefix_arrives(size):
    client = ClientFraming(max_frame_bytes=1000)
    client.send(METADATA, 12, {})
    client.receive_data(INT32.pack(size)[:3])
    with pytest.raises(FrameTooLargeError) as info:
        client.receive_data(INT32.pack(size)[3:])
    assert str(size) in str(info.value) and "1000" in str(info.value)


def test_frame_size_over_max_behind_a_good_frame():
    client, server = ClientFraming(max_frame_bytes=1000), ServerFraming()
    stream = _exchange(client, server, CALLS[:1])
    client.receive_data(stream + INT32.pack(5000))
    with pytest.raises(FrameTooLargeError, match="5000"):
        client.next_response()


def test_unexpected_correlation_id_names_both():
    client = ClientFraming()
    client.send(METADATA, 12, {})
    client.receive_data(ServerFraming.encode_response(METADATA, 12, 42, METADATA_REPLY))
    with pytest.raises(CorrelationIdMismatchError,
                       match=r"correlation id 0 \(Metadata v12\), got correlation id 42"):
        client.next_response()


def test_response_with_nothing_pending():
    client = ClientFraming()
    client.receive_data(ServerFraming.encode_response(METADATA, 12, 0, METADATA_REPLY))
    with pytest.raises(ProtocolError, match=r"correlation id 0\) but no request is pending"):
        client.next_response()


def test_trailing_bytes_name_api_and_version():
    client = ClientFraming()
    client.send(FIND_COORDINATOR, 6, {"key_type": 1, "coordinator_keys": ["txn"]})
    body = FIND_COORDINATOR.encode_response(6, {"coordinators": []})
    client.receive_data(frame(ResponseHeader(0).encode(1), body + b"\x07\x07"))
    with pytest.raises(ProtocolError, match="FindCoordinator v6 response: 2 trailing bytes"):
        client.next_response()


def test_truncated_body_names_api_and_version():
    client = ClientFraming()
    client.send(METADATA, 12, {})
    body = METADATA.encode_response(12, METADATA_REPLY)
    client.receive_data(frame(ResponseHeader(0).encode(1), body[:-6]))
    with pytest.raises(ProtocolError, match="Metadata v12 response: .*truncated"):
        client.next_response()


def test_framing_is_unusable_after_an_error():
    client = ClientFraming()
    client.receive_data(ServerFraming.encode_response(METADATA, 12, 0, METADATA_REPLY))
    with pytest.raises(ProtocolError):
        client.next_response()
    with pytest.raises(ProtocolError, match="unusable after an earlier error"):
        client.next_response()
    with pytest.raises(ProtocolError, match="unusable"):
        client.send(METADATA, 12, {})


def test_requests_without_response_are_not_tracked():
    client, server = ClientFraming(), ServerFraming()
    body = {"acks": 0, "timeout_ms": 100, "topic_data": []}
    first = client.send(PRODUCE, 9, body, expect_response=False)
    second = client.send(METADATA, 12, {})
    assert (first.correlation_id, second.correlation_id, client.in_flight) == (0, 1, 1)
    server.receive_data(first.data + second.data)
    assert server.next_request().api is PRODUCE
    reply = server.respond(server.next_request(), METADATA_REPLY)
    client.receive_data(reply)
    assert client.next_response().correlation_id == 1


def test_correlation_ids_wrap_at_int32_max():
    client = ClientFraming(first_correlation_id=2 ** 31 - 2)
    ids = [client.send(METADATA, 12, {}, expect_response=False).correlation_id for _ in range(3)]
    assert ids == [2 ** 31 - 2, 2 ** 31 - 1, 0]


def test_encode_errors_do_not_consume_a_correlation_id():
    client = ClientFraming()
    with pytest.raises(EncodeError):
        client.send(METADATA, 12, {"bogus": 1})
    assert client.send(METADATA, 12, {}).correlation_id == 0 and client.in_flight == 1


def test_api_versions_falls_back_to_v0_response():
    """KIP-511: a broker that does not speak our ApiVersions version answers in v0."""
    client, server = ClientFraming(), ServerFraming()
    server.receive_data(client.send(API_VERSIONS, 4, {"client_software_name": "a",
                                                      "client_software_version": "1"}).data)
    request = server.next_request()
    error = {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}]}
    client.receive_data(server.respond(request, error, version=0))
    response = client.next_response()
    assert response.version == 0 and response.body.error_code == 35
    assert response.body.api_keys[0].max_version == 2


def test_server_keeps_unknown_versions_undecoded():
    client, server = ClientFraming(), ServerFraming()
    body = {"client_software_name": "a", "client_software_version": "1"}
    out = client.send(API_VERSIONS, 4, body)
    data = bytearray(out.data)
    data[6:8] = (9).to_bytes(2, "big")        # pretend the client asked for ApiVersions v9
    server.receive_data(bytes(data))
    request = server.next_request()
    assert request.version == 9 and request.body is None and request.client_id == "spark-kafka-sink"


def test_server_rejects_unknown_api_keys():
    server = ServerFraming()
    server.receive_data(frame(b"\x03\xe7\x00\x00\x00\x00\x00\x01\xff\xff", b""))
    with pytest.raises(ProtocolError, match="unknown api key 999"):
        server.next_request()
