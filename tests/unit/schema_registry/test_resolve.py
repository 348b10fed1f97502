"""resolve_registry_schemas: the driver's one step per query, for each schema source and strategy,
against the fake registry."""

from __future__ import annotations

import json

import pytest

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.schema_registry import (RegistryClient, RegistrySchemaNotFoundError,
                                              SubjectNotFoundError, TopicSchema, resolve_registry_schemas)

from .fake_registry import FakeRegistry

USER = json.dumps({"type": "record", "name": "User", "namespace": "com.acme",
                   "fields": [{"name": "id", "type": "long"}]})
USER_V2 = json.dumps({"type": "record", "name": "User", "namespace": "com.acme",
                      "fields": [{"name": "id", "type": "long"},
                                 {"name": "name", "type": ["null", "string"], "default": None}]})


@pytest.fixture
def registry():
    with FakeRegistry() as fake:
        yield fake


def settings(registry, **more):
    return {"schema.registry.url": registry.url, **more}


def test_topic_name_strategy_registers_one_subject_per_topic(registry):
    found = resolve_registry_schemas(settings(registry), ["orders", "returns", "orders"], is_key=False,
                                     schema=USER)
    assert list(found) == ["orders", "returns"]
    schema_id = registry.subjects["orders-value"][0]
    assert found["orders"] == TopicSchema("orders", schema_id, USER, "orders-value")
    assert found["returns"] == TopicSchema("returns", schema_id, USER, "returns-value")
    keys = resolve_registry_schemas(settings(registry), "orders", is_key=True, schema='"string"')
    assert keys["orders"].subject == "orders-key" and "orders-key" in registry.subjects


def test_record_name_strategy_shares_one_subject_asked_once(registry):
    found = resolve_registry_schemas(
        settings(registry, **{"value.subject.name.strategy": "RecordNameStrategy"}),
        ["orders", "returns"], is_key=False, schema=USER)
    assert {t.subject for t in found.values()} == {"com.acme.User"}
    assert registry.requests_to("POST", "subjects", "com.acme.User", "versions") == 1


def test_topic_record_name_strategy(registry):
    found = resolve_registry_schemas(
        settings(registry, **{"key.subject.name.strategy":
                              "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"}),
        ["orders"], is_key=True, schema=USER)
    assert found["orders"].subject == "orders-com.acme.User"


def test_without_auto_register_the_schema_is_looked_up(registry):
    schema_id = registry.register("orders-value", USER)
    lookup = settings(registry, **{"auto.register.schemas": "false"})
    found = resolve_registry_schemas(lookup, ["orders"], is_key=False, schema=USER)
    assert found["orders"].schema_id == schema_id
    assert registry.requests_to("POST", "subjects", "orders-value") == 1
    with pytest.raises(RegistrySchemaNotFoundError, match="set auto.register.schemas=true"):
        resolve_registry_schemas(lookup, ["orders"], is_key=False, schema=USER_V2)
    with pytest.raises(SubjectNotFoundError, match="subject 'returns-value'"):
        resolve_registry_schemas(lookup, ["returns"], is_key=False, schema=USER)
    assert registry.subjects == {"orders-value": [schema_id]}


def test_use_latest_version_takes_the_latest_schema_and_registers_nothing(registry):
    registry.register("orders-value", USER)
    v2 = registry.register("orders-value", USER_V2)
    latest = settings(registry, **{"use.latest.version": "true"})
    found = resolve_registry_schemas(latest, ["orders"], is_key=False)
    assert found["orders"] == TopicSchema("orders", v2, USER_V2, "orders-value", 2)
    by_record = settings(registry, **{"use.latest.version": "true",
                                      "value.subject.name.strategy": "RecordNameStrategy"})
    registry.register("com.acme.User", USER)
    found = resolve_registry_schemas(by_record, ["orders"], is_key=False, schema=USER_V2)
    assert found["orders"].schema == USER and found["orders"].subject == "com.acme.User"
    assert all(seen.method == "GET" for seen in registry.seen)
    with pytest.raises(ConfigError, match="RecordNameStrategy names the subject after the schema's record name"):
        resolve_registry_schemas(by_record, ["orders"], is_key=False)


def test_an_explicit_id_reads_its_schema_once_for_every_topic(registry):
    schema_id = registry.register("anything", USER)
    found = resolve_registry_schemas(settings(registry), ["a", "b"], is_key=True, schema_id=str(schema_id))
    assert found == {"a": TopicSchema("a", schema_id, USER), "b": TopicSchema("b", schema_id, USER)}
    assert [seen.path for seen in registry.seen] == [f"/schemas/ids/{schema_id}"]
    with pytest.raises(RegistrySchemaNotFoundError, match="Schema 42 not found"):
        resolve_registry_schemas(settings(registry), ["a"], is_key=False, schema_id=42)


@pytest.mark.parametrize("more, kwargs, fragment", [
    ({}, {"schema": USER, "schema_id": 1}, "set value.avro.schema or value.schema.id, not both"),
    ({"use.latest.version": "true"}, {"schema_id": 1}, "set value.schema.id or use.latest.version=true"),
    ({}, {"schema_id": -1}, r"value.schema.id must be an integer in [0, 2147483647], got -1"),
    ({}, {"schema_id": True}, "value.schema.id must be an integer"),
    ({}, {}, "the value schema of topic 'orders' is not known: give value.avro.schema, value.schema.id "
             "or use.latest.version=true"),
    ({}, {"schema": "{oops"}, "value.avro.schema: the schema is not JSON"),
    ({"value.subject.name.strategy": "RecordNameStrategy"}, {"schema": '{"type": "record"}'},
     "value.avro.schema: an Avro record schema needs a \"name\""),
    ({}, {"schema": 5}, "value.avro.schema must be a JSON string"),
])
def test_what_cannot_be_resolved_is_named_by_its_option(registry, more, kwargs, fragment):
    with pytest.raises(ConfigError) as info:
        resolve_registry_schemas(settings(registry, **more), ["orders"], is_key=False, **kwargs)
    assert fragment in str(info.value)
    assert registry.seen == []


def test_no_topics_is_refused(registry):
    for topics in ([], [""], [None]):
        with pytest.raises(ConfigError, match="topic"):
            resolve_registry_schemas(settings(registry), topics, is_key=False, schema=USER)


def test_a_client_passed_in_keeps_its_cache_across_queries(registry):
    client = RegistryClient(settings(registry))
    for _ in range(3):
        resolve_registry_schemas(client.config, ["orders"], is_key=False, schema=USER, client=client)
    assert len(registry.seen) == 1 and client.requests == 1


def test_a_client_made_with_other_settings_is_refused(registry):
    client = RegistryClient(settings(registry))
    with pytest.raises(ValueError, match="made with other settings"):
        resolve_registry_schemas(settings(registry, **{"auto.register.schemas": "false"}), ["orders"],
                                 is_key=False, schema=USER, client=client)
    assert resolve_registry_schemas(settings(registry), ["orders"], is_key=False, schema=USER,
                                    client=client)["orders"].schema_id == 1
