"""spark_kafka_sink.testing.SchemaRegistry against Confluent's own client: the registry the Avro
tests read back through is a real one. One test, one registry start (it costs seconds)."""

from __future__ import annotations

import contextlib
import json
import os

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from spark_kafka_sink.embedded.ports import check_free
from spark_kafka_sink.testing import SchemaRegistry

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

V1 = {"type": "record", "name": "Event", "namespace": "kit.test",
      "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}
# BACKWARD-compatible: a new optional field (a reader of v2 reads v1 data: the default fills it).
V2 = {**V1, "fields": [*V1["fields"], {"name": "email", "type": ["null", "string"], "default": None}]}
# Not: a new field without a default cannot be read from v2 data.
V3_REFUSED = {**V2, "fields": [*V2["fields"], {"name": "age", "type": "int"}]}


def _avro(schema: dict) -> Schema:
    return Schema(json.dumps(schema), "AVRO")


def test_confluent_client_registers_reads_evolves_and_is_refused(tmp_path):
    subject = "events-value"
    with SchemaRegistry(work_dir=tmp_path / "registry") as registry, contextlib.ExitStack() as clients:
        assert registry.url == f"http://127.0.0.1:{registry.port}/apis/ccompat/v7"
        assert registry.client_conf()["url"] == registry.url

        def reader() -> SchemaRegistryClient:
            """A client with a cold cache (a client keeps ids and latest versions): each read asks
            the registry. Closed with the others at the end."""
            return clients.enter_context(SchemaRegistryClient(registry.client_conf()))

        writer = reader()
        v1_id = writer.register_schema(subject, _avro(V1))
        assert writer.register_schema(subject, _avro(V1)) == v1_id  # the same schema: the same id
        assert json.loads(reader().get_schema(v1_id).schema_str) == V1
        latest = reader().get_latest_version(subject)
        assert (latest.schema_id, latest.subject, latest.version) == (v1_id, subject, 1)

        writer.set_compatibility(subject, "BACKWARD")
        assert reader().get_compatibility(subject) == "BACKWARD"
        assert reader().test_compatibility(subject, _avro(V2))
        v2_id = writer.register_schema(subject, _avro(V2))
        assert v2_id != v1_id
        latest = reader().get_latest_version(subject)
        assert (latest.schema_id, latest.version) == (v2_id, 2)
        assert json.loads(latest.schema.schema_str) == V2

        assert not reader().test_compatibility(subject, _avro(V3_REFUSED))
        with pytest.raises(SchemaRegistryError) as refused:
            writer.register_schema(subject, _avro(V3_REFUSED))
        assert refused.value.http_status_code == 409
        assert reader().get_versions(subject) == [1, 2]

        # Confluent's serializer frames records with the registered id, its deserializer reads
        # them back through the registry: the witness the Avro tests use.
        context = SerializationContext("events", MessageField.VALUE)
        framed = AvroSerializer(writer, json.dumps(V2))({"id": 7, "name": "seven", "email": None}, context)
        assert framed[0] == 0 and int.from_bytes(framed[1:5], "big") == v2_id
        assert AvroDeserializer(reader())(framed, context) == {"id": 7, "name": "seven", "email": None}
        pid, ports = registry.pid, (registry.port, registry.management_port)

    # Stopped by process id and reaped: the JVM is gone and both its ports are free again.
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    for port in ports:
        check_free(port)
