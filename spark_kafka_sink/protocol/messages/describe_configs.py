"""DescribeConfigs (key 32): a resource's configuration (the sink's driver-side preflight reads a
topic's ``max.message.bytes``).

From DescribeConfigsRequest.json / DescribeConfigsResponse.json. Kafka 4 dropped v0; v1 adds
synonyms and the config source; v2 is the same with quota throttling after the response; v3 adds
the config type and documentation; v4 is the first flexible version.
"""

from ..api_message import ApiMessage
from ..schema import Field, Schema
from ..types import BOOL, INT8, INT16, INT32, STRING, Array

RESOURCE_TOPIC = 2
"""``ResourceType`` of a topic (``ConfigResource.Type.TOPIC``)."""
CONFIG_SOURCE_TOPIC = 1
"""A config's ``config_source`` when it is set on the topic itself
(``DescribeConfigsResponse.ConfigSource.DYNAMIC_TOPIC_CONFIG``)."""

RESOURCE = Schema("DescribeConfigsResource", [
    Field("resource_type", INT8, "0+"),
    Field("resource_name", STRING, "0+"),
    Field("configuration_keys", Array(STRING), "0+", nullable_versions="0+"),
])

SYNONYM = Schema("DescribeConfigsSynonym", [
    Field("name", STRING, "1+"),
    Field("value", STRING, "1+", nullable_versions="0+"),
    Field("source", INT8, "1+"),
])

CONFIG = Schema("DescribeConfigsResourceResult", [
    Field("name", STRING, "0+"),
    Field("value", STRING, "0+", nullable_versions="0+"),
    Field("read_only", BOOL, "0+"),
    Field("config_source", INT8, "1+", default=-1),
    Field("is_sensitive", BOOL, "0+"),
    Field("synonyms", Array(SYNONYM), "1+"),
    Field("config_type", INT8, "3+", default=0),
    Field("documentation", STRING, "3+", nullable_versions="0+"),
])

RESULT = Schema("DescribeConfigsResult", [
    Field("error_code", INT16, "0+"),
    Field("error_message", STRING, "0+", nullable_versions="0+"),
    Field("resource_type", INT8, "0+"),
    Field("resource_name", STRING, "0+"),
    Field("configs", Array(CONFIG), "0+"),
])

DESCRIBE_CONFIGS = ApiMessage.declare(
    "DescribeConfigs", 32, versions="1-4", flexible="4+",
    request=[
        Field("resources", Array(RESOURCE), "0+"),
        Field("include_synonyms", BOOL, "1+", default=False),
        Field("include_documentation", BOOL, "3+", default=False),
    ],
    response=[
        Field("throttle_time_ms", INT32, "0+"),
        Field("results", Array(RESULT), "0+"),
    ],
)
