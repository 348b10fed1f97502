"""The ApiVersions handshake, shared by the blocking connection and the network client.

A connection first asks for ApiVersions at our highest version. The broker answers with its
version ranges (done), or with UNSUPPORTED_VERSION when it does not know our version: then
(KIP-511) it answers in v0 and names the ApiVersions versions it supports, and we ask again at
the highest version both sides know, or at v0 when it named none. Any other error, or
UNSUPPORTED_VERSION to a v0 request, fails the connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from ..error_codes import ErrorCode
from ..errors import BrokerResponseError, error_for
from ..protocol.apis import API_VERSIONS
from ..protocol.versions import VersionRange, ranges_from_api_versions
from ..version import __version__

FIRST_VERSION = API_VERSIONS.max_version


def api_versions_body(version: int) -> dict[str, str]:
    """ApiVersions v3+ must name the client software (the broker validates both strings)."""
    if version < 3:
        return {}
    return {"client_software_name": "spark-kafka-sink", "client_software_version": __version__}


@dataclass(frozen=True)
class ApiVersionsOutcome:
    """What an ApiVersions response means. Exactly one of: ``versions`` (the broker's ranges,
    the handshake is done), ``retry_version`` (ask again at this version), ``error``."""

    versions: Mapping[int, VersionRange] | None = None
    retry_version: int | None = None
    error: BrokerResponseError | None = None


def interpret_api_versions(response: Any, sent_version: int) -> ApiVersionsOutcome:
    """Decide what to do with an ApiVersions response to a request sent at ``sent_version``."""
    code = response.error_code
    if code == 0:
        return ApiVersionsOutcome(versions=MappingProxyType(ranges_from_api_versions(response)))
    if code == ErrorCode.UNSUPPORTED_VERSION and sent_version > 0:
        theirs = ranges_from_api_versions(response).get(API_VERSIONS.api_key)
        retry = min(theirs.max, API_VERSIONS.max_version) if theirs else 0
        return ApiVersionsOutcome(retry_version=max(min(retry, sent_version - 1), 0))
    return ApiVersionsOutcome(error=error_for(code, "ApiVersions"))
