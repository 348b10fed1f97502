"""The ApiVersions handshake, shared by the blocking connection and the network client.

A connection first asks for ApiVersions at our highest version. The broker answers with its
version ranges (done), or with UNSUPPORTED_VERSION when it does not know our version: then
(KIP-511) it answers in v0 and names the ApiVersions versions it supports, and we ask again at
the highest version both sides know, or at v0 when it named none. Any other error, or
UNSUPPORTED_VERSION to a v0 request, fails the connection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
class FinalizedFeatures:
    """The cluster's finalized feature levels as one broker last saw them (ApiVersions v3+):
    ``levels`` maps a feature name (``metadata.version``, ``transaction.version``...) to its
    finalized max version level; ``epoch`` orders answers from different brokers (-1: none)."""

    epoch: int = -1
    levels: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    def level(self, name: str) -> int:
        """The finalized level of feature ``name``; 0 when the broker finalized none (as Java)."""
        return self.levels.get(name, 0)


NO_FEATURES = FinalizedFeatures()


@dataclass(frozen=True)
class ApiVersionsOutcome:
    """What an ApiVersions response means. Exactly one of: ``versions`` (the broker's ranges,
    the handshake is done; ``features`` then holds its finalized features), ``retry_version``
    (ask again at this version), ``error``."""

    versions: Mapping[int, VersionRange] | None = None
    retry_version: int | None = None
    error: BrokerResponseError | None = None
    features: FinalizedFeatures = NO_FEATURES


def interpret_api_versions(response: Any, sent_version: int) -> ApiVersionsOutcome:
    """Decide what to do with an ApiVersions response to a request sent at ``sent_version``."""
    code = response.error_code
    if code == 0:
        return ApiVersionsOutcome(versions=MappingProxyType(ranges_from_api_versions(response)),
                                  features=_finalized_features(response))
    if code == ErrorCode.UNSUPPORTED_VERSION and sent_version > 0:
        theirs = ranges_from_api_versions(response).get(API_VERSIONS.api_key)
        retry = min(theirs.max, API_VERSIONS.max_version) if theirs else 0
        return ApiVersionsOutcome(retry_version=max(min(retry, sent_version - 1), 0))
    return ApiVersionsOutcome(error=error_for(code, "ApiVersions"))


def _finalized_features(response: Any) -> FinalizedFeatures:
    finalized = getattr(response, "finalized_features", None)
    if not finalized:
        return NO_FEATURES
    return FinalizedFeatures(
        getattr(response, "finalized_features_epoch", -1),
        MappingProxyType({entry.name: entry.max_version_level for entry in finalized}))
