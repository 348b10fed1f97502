"""Version ranges and negotiation."""

from __future__ import annotations

import pytest

from spark_kafka_sink.errors import UnsupportedVersionError
from spark_kafka_sink.protocol import (
    API_VERSIONS, METADATA, PRODUCE, VersionRange, negotiate, ranges_from_api_versions,
)
from spark_kafka_sink.protocol.versions import OPEN_END


def test_parse():
    assert VersionRange.parse("3+") == VersionRange(3, OPEN_END)
    assert VersionRange.parse("0-3") == VersionRange(0, 3)
    assert VersionRange.parse("5") == VersionRange(5, 5)
    assert VersionRange.parse("none").is_empty
    assert 4 in VersionRange.parse("3+") and 2 not in VersionRange.parse("3+")
    assert str(VersionRange(0, 3)) == "v0-v3" and str(VersionRange(9, OPEN_END)) == "v9+"
    with pytest.raises(ValueError):
        VersionRange.parse("three")


def test_negotiate_picks_the_highest_common_version():
    assert negotiate(METADATA, {3: VersionRange(0, 12)}) == 12
    assert negotiate(METADATA, {3: VersionRange(0, 20)}) == 13
    assert negotiate(PRODUCE, {0: VersionRange(3, 3)}) == 3


def test_negotiate_without_overlap_names_everything():
    with pytest.raises(UnsupportedVersionError) as info:
        negotiate(METADATA, {3: VersionRange(0, 3)})
    assert str(info.value) == ("no common version of Metadata (api key 3): this client supports "
                               "v4-v13, the broker supports v0-v3")


def test_negotiate_with_an_api_the_broker_lacks():
    with pytest.raises(UnsupportedVersionError, match="does not support Produce .* at all"):
        negotiate(PRODUCE, {})


def test_ranges_from_an_api_versions_response():
    body = {"api_keys": [{"api_key": 0, "min_version": 3, "max_version": 12},
                         {"api_key": 3, "min_version": 0, "max_version": 13}]}
    resp = API_VERSIONS.decode_response(4, API_VERSIONS.encode_response(4, body))
    ranges = ranges_from_api_versions(resp)
    assert ranges == {0: VersionRange(3, 12), 3: VersionRange(0, 13)}
    assert negotiate(PRODUCE, ranges) == 12 and negotiate(METADATA, ranges) == 13
