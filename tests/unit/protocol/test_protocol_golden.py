"""Golden bytes worked out by hand from the protocol guide (kafka.apache.org/protocol)."""

from __future__ import annotations

import uuid

from spark_kafka_sink.protocol import (
    API_VERSIONS, METADATA, PRODUCE, ClientFraming, ServerFraming,
)


def _hex(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


def test_api_versions_v0_request_with_header():
    out = ClientFraming(client_id="abc", first_correlation_id=1).send(API_VERSIONS, 0, {})
    assert out.data == (
        _hex("0000000d")                  # size 13
        + _hex("0012 0000")               # api_key 18, api_version 0
        + _hex("00000001")                # correlation id 1
        + _hex("0003 616263"))            # client_id "abc" (request header v1, empty body)


def test_api_versions_v3_request_with_header():
    body = {"client_software_name": "x", "client_software_version": "1.0"}
    out = ClientFraming(client_id="abc", first_correlation_id=7).send(API_VERSIONS, 3, body)
    expected = (
        _hex("00000015")                  # size 21
        + _hex("0012 0003 00000007")      # api_key 18, version 3, correlation id 7
        + _hex("0003 616263")             # client_id stays a non-compact string in header v2
        + _hex("00")                      # header tagged fields
        + _hex("02 78")                   # COMPACT_STRING "x"
        + _hex("04 312e30")               # COMPACT_STRING "1.0"
        + _hex("00"))                     # body tagged fields
    assert out.data == expected


def test_metadata_v12_request_with_header():
    body = {"topics": [{"topic_id": uuid.UUID(int=0), "name": "t"}],
            "allow_auto_topic_creation": True, "include_topic_authorized_operations": False}
    out = ClientFraming(client_id="c", first_correlation_id=2).send(METADATA, 12, body)
    expected = (
        _hex("00000023")                  # size 35
        + _hex("0003 000c 00000002 0001 63 00")    # key 3, v12, id 2, "c", header tags
        + _hex("02")                      # COMPACT_ARRAY of 1 topic
        + bytes(16)                       #   topic_id: the zero uuid
        + _hex("02 74")                   #   name: COMPACT_NULLABLE_STRING "t"
        + _hex("00")                      #   topic tagged fields
        + _hex("01")                      # allow_auto_topic_creation true
        + _hex("00")                      # include_topic_authorized_operations false
        + _hex("00"))                     # tagged fields
    assert out.data == expected


def test_metadata_v4_request_all_topics_is_a_null_array():
    assert METADATA.encode_request(4, {"topics": None}) == _hex("ffffffff 01")
    # v9: compact null array, allow auto creation, the two v8+ booleans, tagged fields
    assert METADATA.encode_request(9, {"topics": None}) == _hex("00 01 00 00 00")


def test_api_versions_v0_response_frame():
    frame = ServerFraming.encode_response(
        API_VERSIONS, 0, 1, {"api_keys": [{"api_key": 0, "min_version": 3, "max_version": 12}]})
    assert frame == _hex("""
        00000010 00000001
        0000 00000001 0000 0003 000c
    """)


def test_api_versions_v3_response_uses_header_v0():
    body = {"api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}],
            "finalized_features_epoch": 3}
    frame = ServerFraming.encode_response(API_VERSIONS, 3, 5, body)
    assert frame == (
        _hex("0000001d 00000005")         # size 29, correlation id 5, NO header tags
        + _hex("0000")                    # error_code
        + _hex("02 0012 0000 0004 00")    # api_keys: 1 entry with its tagged fields
        + _hex("00000000")                # throttle_time_ms
        + _hex("01 01 08 0000000000000003"))   # 1 tagged field: tag 1, 8 bytes, epoch 3


def test_produce_v3_request_body():
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": b"\xaa\xbb\xcc"}]}]}
    assert PRODUCE.encode_request(3, body) == _hex("""
        ffff ffff 00007530
        00000001 0001 74
        00000001 00000000 00000003 aabbcc
    """)


def test_produce_v9_request_body_is_compact():
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": b"\xaa\xbb\xcc"}]}]}
    assert PRODUCE.encode_request(9, body) == _hex("""
        00 ffff 00007530
        02 02 74
        02 00000000 04 aabbcc 00
        00
        00
    """)


def test_produce_v10_response_with_tagged_current_leader():
    body = {"responses": [{"name": "t", "partition_responses": [{
        "index": 0, "error_code": 6, "base_offset": -1, "log_start_offset": 0,
        "current_leader": {"leader_id": 2, "leader_epoch": 5}}]}]}
    assert PRODUCE.encode_response(10, body) == _hex("""
        02 02 74
        02 00000000 0006 ffffffffffffffff ffffffffffffffff 0000000000000000
           01 00
           01 00 09 00000002 00000005 00
        00
        00000000
        00
    """)
