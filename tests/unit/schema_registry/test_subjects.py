"""Subject name strategies and the record name they read from a schema, as Confluent's."""

from __future__ import annotations

import json

import pytest

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.schema_registry import SubjectNameStrategy, record_name
from spark_kafka_sink.schema_registry.subjects import JAVA_PACKAGE

USER = json.dumps({"type": "record", "name": "User", "namespace": "com.acme",
                   "fields": [{"name": "id", "type": "long"}]})


@pytest.mark.parametrize("strategy, is_key, expected", [
    (SubjectNameStrategy.TOPIC, False, "orders-value"),
    (SubjectNameStrategy.TOPIC, True, "orders-key"),
    (SubjectNameStrategy.RECORD, False, "com.acme.User"),
    (SubjectNameStrategy.RECORD, True, "com.acme.User"),
    (SubjectNameStrategy.TOPIC_RECORD, False, "orders-com.acme.User"),
    (SubjectNameStrategy.TOPIC_RECORD, True, "orders-com.acme.User"),
])
def test_each_strategy_names_the_subject_as_confluent_does(strategy, is_key, expected):
    assert strategy.subject("orders", is_key, record_name(USER)) == expected


def test_the_record_strategies_need_a_record_name():
    assert SubjectNameStrategy.TOPIC.subject("t", False) == "t-value"
    for strategy in (SubjectNameStrategy.RECORD, SubjectNameStrategy.TOPIC_RECORD):
        with pytest.raises(ConfigError, match=f"{strategy.value} names the subject after the schema's "
                                              f"record name, but no schema was given for the key of topic 't'"):
            strategy.subject("t", True)
    with pytest.raises(ConfigError, match="needs a topic name"):
        SubjectNameStrategy.TOPIC.subject("", False)


def test_strategies_are_found_by_short_or_java_class_name_without_case():
    for strategy in SubjectNameStrategy:
        assert SubjectNameStrategy.find(strategy.value.upper()) is strategy
        assert SubjectNameStrategy.find(f" {JAVA_PACKAGE}.{strategy.value} ") is strategy
        assert strategy.java_class == f"io.confluent.kafka.serializers.subject.{strategy.value}"
    assert SubjectNameStrategy.find("io.confluent.kafka.serializers.subject.Other") is None
    assert SubjectNameStrategy.find(None) is None


@pytest.mark.parametrize("schema, name", [
    (USER, "com.acme.User"),
    ({"type": "record", "name": "User", "fields": []}, "User"),
    ({"type": "record", "name": "a.b.User", "namespace": "ignored", "fields": []}, "a.b.User"),
    ({"type": "enum", "name": "Suit", "namespace": "cards", "symbols": ["S"]}, "cards.Suit"),
    ({"type": "fixed", "name": "Md5", "size": 16}, "Md5"),
    ('"string"', "string"),
    ({"type": "long", "logicalType": "timestamp-micros"}, "long"),
    ({"type": "array", "items": "int"}, "array"),
    ({"type": "map", "values": "int"}, "map"),
    (["null", "string"], "union"),
    ({"type": {"type": "record", "name": "Inner", "fields": []}}, "Inner"),
])
def test_the_record_name_is_confluents_schema_name(schema, name):
    assert record_name(schema) == name


@pytest.mark.parametrize("schema, fragment", [
    ("{not json", "not JSON"),
    ({"name": "x"}, "object with a \"type\""),
    ({"type": "record", "fields": []}, "needs a \"name\""),
    ({"type": "record", "name": "R", "namespace": 3, "fields": []}, "namespace"),
    (7, "an Avro schema is"),
    ("not json", "the schema is not JSON"),
])
def test_a_schema_without_a_name_to_read_is_refused(schema, fragment):
    with pytest.raises(ConfigError) as info:
        record_name(schema)
    assert fragment in str(info.value)
