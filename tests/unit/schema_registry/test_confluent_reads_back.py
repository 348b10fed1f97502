"""A cross-check of the API shapes: confluent-kafka's own SchemaRegistryClient reads from the fake
registry what ours registered (ids, latest version, the schema by id). It needs
confluent-kafka's ``schemaregistry`` extra (httpx, authlib, ...), which the test extras install."""

from __future__ import annotations

import json

from spark_kafka_sink.schema_registry import RegistryClient

from .fake_registry import FakeRegistry

from confluent_kafka.schema_registry import SchemaRegistryClient

USER = json.dumps({"type": "record", "name": "User", "namespace": "com.acme",
                   "fields": [{"name": "id", "type": "long"}]})


def test_confluents_client_reads_back_what_ours_registered():
    with FakeRegistry(basic=("alice", "pw-7")) as registry:
        ours = RegistryClient({"schema.registry.url": registry.url, "basic.auth.user.info": "alice:pw-7"})
        subject = "team/orders-value"
        schema_id = ours.register(subject, USER)
        with SchemaRegistryClient({"url": registry.url, "basic.auth.user.info": "alice:pw-7"}) as theirs:
            assert theirs.get_schema(schema_id).schema_str == USER
            latest = theirs.get_latest_version(subject)
            assert (latest.schema_id, latest.version, latest.subject) == (schema_id, 1, subject)
            assert latest.schema.schema_str == USER and latest.schema.schema_type == "AVRO"
            their_id = theirs.register_schema("other-value", latest.schema)
        assert their_id == schema_id and ours.lookup("other-value", USER) == schema_id
