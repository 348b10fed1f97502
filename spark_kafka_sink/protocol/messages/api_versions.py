"""ApiVersions (key 18): which versions of every API the broker speaks.

From ApiVersionsRequest.json / ApiVersionsResponse.json. v1 adds throttle time to the response;
v3 is the first flexible version and adds the client software name and version and the tagged
feature fields; v4 (KAFKA-17011) lets SupportedFeatures.MinVersion be 0. The response always
uses response header v0; on UNSUPPORTED_VERSION a broker answers in v0 with its own ranges
(KIP-511).
"""

from ..api_message import ApiMessage
from ..schema import Field, Schema
from ..types import BOOL, INT16, INT32, INT64, STRING, Array

API_VERSION = Schema("ApiVersion", [
    Field("api_key", INT16, "0+"),
    Field("min_version", INT16, "0+"),
    Field("max_version", INT16, "0+"),
])

SUPPORTED_FEATURE_KEY = Schema("SupportedFeatureKey", [
    Field("name", STRING, "3+"),
    Field("min_version", INT16, "3+"),
    Field("max_version", INT16, "3+"),
])

FINALIZED_FEATURE_KEY = Schema("FinalizedFeatureKey", [
    Field("name", STRING, "3+"),
    Field("max_version_level", INT16, "3+"),
    Field("min_version_level", INT16, "3+"),
])

API_VERSIONS = ApiMessage.declare(
    "ApiVersions", 18, versions="0-4", flexible="3+",
    request=[
        Field("client_software_name", STRING, "3+"),
        Field("client_software_version", STRING, "3+"),
    ],
    response=[
        Field("error_code", INT16, "0+"),
        Field("api_keys", Array(API_VERSION), "0+"),
        Field("throttle_time_ms", INT32, "1+"),
        Field("supported_features", Array(SUPPORTED_FEATURE_KEY), "3+",
              tag=0, tagged_versions="3+"),
        Field("finalized_features_epoch", INT64, "3+", tag=1, tagged_versions="3+", default=-1),
        Field("finalized_features", Array(FINALIZED_FEATURE_KEY), "3+",
              tag=2, tagged_versions="3+"),
        Field("zk_migration_ready", BOOL, "3+", tag=3, tagged_versions="3+", default=False),
    ],
)
