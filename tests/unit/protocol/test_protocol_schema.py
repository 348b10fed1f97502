"""Schema rules: defaults, absent fields, nullability, tagged fields, errors, and Struct."""

from __future__ import annotations

import pickle
import uuid

import pytest

from spark_kafka_sink.errors import EncodeError, ProtocolError, UnsupportedVersionError
from spark_kafka_sink.protocol import (
    API_VERSIONS, CREATE_TOPICS, FIND_COORDINATOR, METADATA, PRODUCE, Field, Schema, Struct,
)
from spark_kafka_sink.protocol.primitives import encode_uvarint
from spark_kafka_sink.protocol.types import INT32, STRING, Array

BROKERS = [{"node_id": 1, "host": "h1", "port": 9092}]


def test_absent_non_default_field_names_field_and_version():
    with pytest.raises(UnsupportedVersionError) as info:
        METADATA.encode_request(7, {"topics": None, "include_topic_authorized_operations": True})
    text = str(info.value)
    assert "include_topic_authorized_operations" in text and "version 7" in text
    assert "v8+" in text


def test_absent_field_with_its_default_value_is_fine():
    body = {"topics": None, "include_cluster_authorized_operations": False}
    data = METADATA.encode_request(11, body)
    assert METADATA.decode_request(11, data).include_cluster_authorized_operations is False


def test_missing_fields_take_declared_defaults():
    body = METADATA.decode_request(4, METADATA.encode_request(4, {"topics": []}))
    assert body.allow_auto_topic_creation is True
    resp = CREATE_TOPICS.decode_request(2, CREATE_TOPICS.encode_request(2, {}))
    assert resp.timeout_ms == 60000 and resp.validate_only is False and resp.topics == ()


def test_nullable_fields_default_to_null_and_arrays_to_empty():
    produce = PRODUCE.decode_request(3, PRODUCE.encode_request(3, {"acks": 1, "timeout_ms": 5}))
    assert produce.transactional_id is None and produce.topic_data == ()


def test_decode_fills_absent_fields_with_defaults():
    body = {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 5}]}]}
    resp = PRODUCE.decode_response(3, PRODUCE.encode_response(3, body))
    part = resp.responses[0].partition_responses[0]
    assert part.log_start_offset == -1 and part.log_append_time_ms == -1
    assert part.record_errors == () and part.error_message is None
    assert part.current_leader.leader_id == -1 and part.current_leader.leader_epoch == -1
    assert resp.node_endpoints == ()


def test_unknown_keys_are_rejected():
    with pytest.raises(EncodeError, match=r"unknown field\(s\) \['topcs'\] for MetadataRequest"):
        METADATA.encode_request(12, {"topcs": []})


def test_null_where_not_nullable_names_the_path():
    with pytest.raises(EncodeError, match=r"topics\[0\]\.name: null is not allowed"):
        METADATA.encode_request(9, {"topics": [{"name": None}]})
    assert METADATA.encode_request(10, {"topics": [{"name": None}]})


def test_wrong_types_and_ranges_name_the_path():
    with pytest.raises(EncodeError, match=r"brokers\[0\]\.port: expected int32"):
        METADATA.encode_response(12, {"brokers": [{"node_id": 1, "host": "h", "port": 2 ** 31}]})
    with pytest.raises(EncodeError, match="expected str"):
        METADATA.encode_response(12, {"brokers": [{"node_id": 1, "host": b"h", "port": 1}]})
    with pytest.raises(EncodeError, match="expected a list"):
        METADATA.encode_response(12, {"brokers": "nope"})
    with pytest.raises(EncodeError, match="expected bool"):
        METADATA.encode_request(12, {"allow_auto_topic_creation": 1})
    with pytest.raises(EncodeError, match="expected uuid.UUID"):
        METADATA.encode_request(12, {"topics": [{"topic_id": "x", "name": "t"}]})


def test_versions_outside_our_range_are_refused():
    with pytest.raises(UnsupportedVersionError, match=r"Metadata v3 is not supported .*v4-v13"):
        METADATA.encode_request(3, {})
    with pytest.raises(UnsupportedVersionError):
        PRODUCE.decode_response(13, b"")


def _api_versions_v3_response(extra_tags: bytes = b"", count: int = 0) -> bytes:
    return (b"\x00\x00"                              # error_code
            + b"\x02" + b"\x00\x12\x00\x00\x00\x04\x00"  # api_keys: [(18, 0, 4)], tags
            + b"\x00\x00\x00\x00"                    # throttle_time_ms
            + encode_uvarint(count) + extra_tags)


def test_unknown_tags_are_skipped():
    plain = API_VERSIONS.decode_response(3, _api_versions_v3_response())
    unknown = encode_uvarint(9) + b"\x03abc" + encode_uvarint(200) + b"\x00"
    assert API_VERSIONS.decode_response(3, _api_versions_v3_response(unknown, 2)) == plain


def test_known_tags_are_read_and_written_in_tag_order():
    body = {"api_keys": [], "zk_migration_ready": True, "finalized_features_epoch": 7}
    data = API_VERSIONS.encode_response(3, body)
    # tags section: 2 fields, tag 1 (8 bytes) before tag 3 (1 byte)
    assert data.endswith(b"\x02" + b"\x01\x08" + (7).to_bytes(8, "big") + b"\x03\x01\x01")
    decoded = API_VERSIONS.decode_response(3, data)
    assert decoded.zk_migration_ready is True and decoded.finalized_features_epoch == 7


def test_tagged_field_with_unused_bytes_is_an_error():
    bad = encode_uvarint(3) + b"\x02\x01\x00"      # zk_migration_ready in 2 bytes
    with pytest.raises(ProtocolError, match=r"zk_migration_ready \(tag 3\): 1 unused bytes"):
        API_VERSIONS.decode_response(3, _api_versions_v3_response(bad, 1))


def test_tagged_fields_are_ignored_before_flexible_versions():
    data = API_VERSIONS.encode_response(2, {"api_keys": []})
    assert data == b"\x00\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"


def test_decode_errors_name_the_api_version_and_field():
    data = METADATA.encode_response(12, {"brokers": BROKERS})
    with pytest.raises(ProtocolError) as info:
        METADATA.decode_response(12, data[:11])
    assert str(info.value).startswith("Metadata v12 response: brokers[0].host: truncated")
    with pytest.raises(ProtocolError, match="Metadata v12 response: 2 trailing bytes"):
        METADATA.decode_response(12, data + b"\x00\x00")


def test_null_array_where_not_nullable_is_an_error():
    with pytest.raises(ProtocolError, match="null array"):
        FIND_COORDINATOR.decode_response(4, b"\x00\x00\x00\x00" + b"\x00" + b"\x00")


def test_records_decode_zero_copy_from_bytes_and_accept_any_buffer():
    batch = bytes(range(50))
    for records in (batch, bytearray(batch), memoryview(batch)):
        data = PRODUCE.encode_request(9, {"acks": -1, "timeout_ms": 1, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": records}]}]})
        got = PRODUCE.decode_request(9, data).topic_data[0].partition_data[0].records
        assert isinstance(got, memoryview) and got.readonly and got == batch
        mutable = PRODUCE.decode_request(9, bytearray(data)).topic_data[0].partition_data[0]
        assert isinstance(mutable.records, bytes) and mutable.records == batch


def test_struct_behaviour():
    resp = METADATA.decode_response(12, METADATA.encode_response(12, {"brokers": BROKERS}))
    assert resp.brokers[0].node_id == 1 and resp["brokers"][0]["host"] == "h1"
    assert "cluster_id" in resp and resp.type_name == "MetadataResponse"
    assert resp.fields[:3] == ("throttle_time_ms", "brokers", "cluster_id")
    with pytest.raises(AttributeError, match="immutable"):
        resp.brokers = ()
    with pytest.raises(AttributeError, match="has no field 'nope'"):
        resp.nope
    again = METADATA.decode_response(12, METADATA.encode_response(12, resp))
    assert again == resp and hash(again) == hash(resp)
    assert resp.replace(controller_id=3).controller_id == 3 and resp.controller_id == -1
    assert "MetadataResponseBroker(node_id=1, host='h1', port=9092, rack=None)" in repr(resp)
    assert resp.to_dict()["brokers"] == [{"node_id": 1, "host": "h1", "port": 9092, "rack": None}]
    assert pickle.loads(pickle.dumps(resp)) == resp


def test_struct_repr_shortens_bytes():
    s = Struct("X", {"records": memoryview(bytes(40))})
    assert repr(s) == "X(records=<40 bytes 00000000000000000000000000000000...>)"


def test_schemas_reject_bad_declarations():
    with pytest.raises(ValueError, match="duplicate field"):
        Schema("S", [Field("a", INT32), Field("a", INT32)])
    with pytest.raises(ValueError, match="tag and tagged_versions"):
        Field("a", INT32, "0+", tag=1)
    with pytest.raises(ValueError, match="duplicate tags"):
        Schema("S", [Field("a", INT32, tag=0, tagged_versions="0+"),
                     Field("b", INT32, tag=0, tagged_versions="0+")])


def test_a_small_schema_end_to_end():
    schema = Schema("Pair", [
        Field("left", STRING, "0+"),
        Field("right", Array(INT32), "1+", nullable_versions="1+"),
        Field("id", INT32, "2+", tag=5, tagged_versions="2+", default=-1),
    ], flexible_versions="2+")
    assert schema.encode(0, {"left": "é"}) == b"\x00\x02\xc3\xa9"
    assert schema.encode(1, {"left": "", "right": None}) == b"\x00\x00\xff\xff\xff\xff"
    assert schema.encode(2, {"left": "a", "right": [7], "id": 9}) == (
        b"\x02a" + b"\x02\x00\x00\x00\x07" + b"\x01\x05\x04\x00\x00\x00\x09")
    assert schema.decode(2, b"\x02a\x00\x00").to_dict() == {"left": "a", "right": None, "id": -1}
    assert schema.decode(0, b"\x00\x00") == Struct("Pair", {"left": "", "right": (), "id": -1})
    assert schema.encode(2, {"left": "a", "right": [], "id": -1}) == b"\x02a\x01\x00"


def test_metadata_v13_top_level_error_code():
    data = METADATA.encode_response(13, {"brokers": BROKERS, "error_code": 129})
    assert data.endswith(b"\x00\x81\x00")
    assert METADATA.decode_response(13, data).error_code == 129
    assert METADATA.decode_response(12, METADATA.encode_response(12, {})).error_code == 0


def test_topic_ids_round_trip():
    topic_id = uuid.UUID("12345678-9abc-def0-1234-56789abcdef0")
    data = METADATA.encode_request(12, {"topics": [{"topic_id": topic_id, "name": None}]})
    assert topic_id.bytes in data
    assert METADATA.decode_request(12, data).topics[0].topic_id == topic_id
