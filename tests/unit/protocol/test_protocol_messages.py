"""Every API x every declared version x request and response: encode -> decode -> equal, and
encode(decode(bytes)) == bytes, for a full body and a sparse one (nulls, empty arrays)."""

from __future__ import annotations

import pytest

from spark_kafka_sink.protocol import ALL_APIS, BY_KEY, BY_NAME

from .bodies import expected, make_body

CASES = [
    pytest.param(api, version, kind, style, id=f"{api.name}-v{version}-{kind}-{style}")
    for api in ALL_APIS
    for version in range(api.min_version, api.max_version + 1)
    for kind in ("request", "response")
    for style in ("full", "sparse")
]


def _codec(api, kind):
    if kind == "request":
        return api.request, api.encode_request, api.decode_request
    return api.response, api.encode_response, api.decode_response


@pytest.mark.parametrize("api, version, kind, style", CASES)
def test_round_trip(api, version, kind, style):
    schema, encode, decode = _codec(api, kind)
    body = make_body(schema, version, style)
    data = encode(version, body)
    decoded = decode(version, data)
    assert decoded.to_dict() == expected(schema, version, body)
    assert encode(version, decoded) == data
    assert decode(version, bytearray(data)) == decoded


@pytest.mark.parametrize("api, version, kind, style", CASES[::7])
def test_round_trip_of_defaults_only(api, version, kind, style):
    """An empty body is valid: every top-level field has a usable default."""
    schema, encode, decode = _codec(api, kind)
    data = encode(version, {})
    assert encode(version, decode(version, data)) == data


def test_registry_matches_the_declared_ranges():
    ranges = {api.name: (api.api_key, api.min_version, api.max_version, api.flexible_from)
              for api in ALL_APIS}
    assert ranges == {
        "ApiVersions": (18, 0, 4, 3),
        "Metadata": (3, 4, 13, 9),
        "Produce": (0, 3, 12, 9),
        "Fetch": (1, 4, 11, 12),
        "ListOffsets": (2, 1, 5, 6),
        "InitProducerId": (22, 3, 5, 2),
        "CreateTopics": (19, 2, 7, 5),
        "DescribeConfigs": (32, 1, 4, 4),
        "FindCoordinator": (10, 0, 6, 3),
        "AddPartitionsToTxn": (24, 0, 5, 3),
        "EndTxn": (26, 0, 5, 3),
        "SaslHandshake": (17, 0, 1, None),
        "SaslAuthenticate": (36, 0, 2, 2),
        "AlterClientQuotas": (49, 0, 1, 1),
    }
    assert set(BY_KEY) == {api.api_key for api in ALL_APIS}
    assert BY_NAME["Metadata"] is BY_KEY[3]


@pytest.mark.parametrize("api", ALL_APIS, ids=lambda api: api.name)
def test_header_versions_follow_flexibility(api):
    for version in range(api.min_version, api.max_version + 1):
        flexible = api.is_flexible(version)
        assert api.request_header_version(version) == (2 if flexible else 1)
        expected_response = 0 if api.name == "ApiVersions" else (1 if flexible else 0)
        assert api.response_header_version(version) == expected_response
