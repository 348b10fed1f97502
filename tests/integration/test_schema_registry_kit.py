"""spark_kafka_sink.testing.SchemaRegistry against Confluent's own client: the registry the Avro
tests read back through is a real one. Then RegistryFront in front of it: the sink's registry
client through basic auth, a bearer token, a private CA and a client certificate, read back by
Confluent's client. One registry start for the module (it costs seconds), stopped last."""

from __future__ import annotations

import contextlib
import json
import os

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from spark_kafka_sink.embedded.certs import CLIENT_COMMON_NAME
from spark_kafka_sink.embedded.ports import check_free
from spark_kafka_sink.schema_registry import (RegistryAuthError, RegistryClient, RegistryConfig,
                                              RegistryTlsError)
from spark_kafka_sink.testing import RegistryFront, SchemaRegistry

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

V1 = {"type": "record", "name": "Event", "namespace": "kit.test",
      "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}
# BACKWARD-compatible: a new optional field (a reader of v2 reads v1 data: the default fills it).
V2 = {**V1, "fields": [*V1["fields"], {"name": "email", "type": ["null", "string"], "default": None}]}
# Not: a new field without a default cannot be read from v2 data.
V3_REFUSED = {**V2, "fields": [*V2["fields"], {"name": "age", "type": "int"}]}


def _avro(schema: dict) -> Schema:
    return Schema(json.dumps(schema), "AVRO")


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    with SchemaRegistry(work_dir=tmp_path_factory.mktemp("registry")) as registry:
        yield registry


def test_confluent_client_registers_reads_evolves_and_is_refused(registry):
    subject = "events-value"
    with contextlib.ExitStack() as clients:
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


USER, PASSWORD, TOKEN = "sink", "front-pw-s3cret", "front-token-s3cret"


def test_the_sink_s_client_through_basic_auth_a_bearer_token_and_mutual_tls(registry):
    """Our RegistryClient registers through the front (HTTPS, the front's CA, a client
    certificate; basic auth, then a bearer token), Confluent's client reads back by id through it;
    a wrong password and an untrusted certificate are our errors, without a secret in them."""
    with RegistryFront(registry.url, basic=(USER, PASSWORD), bearer=TOKEN, tls=True,
                       client_auth=True) as front, contextlib.ExitStack() as clients:
        assert front.url.startswith("https://127.0.0.1:") and front.url.endswith("/apis/ccompat/v7")
        ids = {}
        for credentials, schema in (("basic", V1), ("bearer", V2)):
            ours = RegistryClient(RegistryConfig(front.sink_options(credentials)))
            ids[credentials] = ours.register(f"front-{credentials}-value", json.dumps(schema))
            confluent = clients.enter_context(SchemaRegistryClient(front.client_conf(credentials)))
            assert json.loads(confluent.get_schema(ids[credentials]).schema_str) == schema
        assert ids["basic"] != ids["bearer"]
        assert [(r.method, r.credential, r.user, r.client_certificate, r.forwarded, r.status)
                for r in front.requests] == [
            ("POST", "basic", USER, CLIENT_COMMON_NAME, True, 200),
            ("GET", "basic", USER, CLIENT_COMMON_NAME, True, 200),
            ("POST", "bearer", None, CLIENT_COMMON_NAME, True, 200),
            ("GET", "bearer", None, CLIENT_COMMON_NAME, True, 200)]

        wrong = {**front.sink_options("basic"), "schema.registry.basic.auth.user.info": f"{USER}:not-{PASSWORD}"}
        with pytest.raises(RegistryAuthError, match="HTTP 401, error 40101") as refused:
            RegistryClient(RegistryConfig(wrong)).register("front-refused-value", json.dumps(V1))
        last = front.requests[-1]
        assert (last.credential, last.accepted, last.forwarded, last.status) == ("basic", False, False, 401)
        with pytest.raises(SchemaRegistryError):             # never forwarded: never registered
            clients.enter_context(SchemaRegistryClient(front.client_conf())).get_versions("front-refused-value")

        untrusting = {name: value for name, value in front.sink_options().items()
                      if name != "schema.registry.ssl.ca.location"}          # the system's CAs only
        with pytest.raises(RegistryTlsError, match="certificate verify failed") as untrusted:
            RegistryClient(RegistryConfig(untrusting)).register("front-refused-value", json.dumps(V1))
        for text in (str(refused.value), str(untrusted.value), repr(front), repr(front.requests)):
            for secret in (PASSWORD, TOKEN, front.client_key_password):
                assert secret not in text


def test_the_registry_stops_by_process_id_and_frees_its_ports(registry):
    """Last in the module: the shared registry is closed here (the fixture's close then does
    nothing)."""
    pid, ports = registry.pid, (registry.port, registry.management_port)
    registry.close()

    # Stopped by process id and reaped: the JVM is gone and both its ports are free again.
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    for port in ports:
        check_free(port)
