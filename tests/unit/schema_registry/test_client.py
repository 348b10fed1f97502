"""RegistryClient against the fake registry over HTTP on loopback: the calls and their request
shapes, the cache, escaping, failover across URLs, each refusal as its error, credentials, and
secrets kept out of errors and logs."""

from __future__ import annotations

import json
import logging
import pickle
import socket
import time

import pytest

from spark_kafka_sink.errors import AuthenticationError, ConfigError
from spark_kafka_sink.schema_registry import (IncompatibleSchemaError, RegistryAuthError, RegistryClient,
                                              RegistryConfig, RegistryError, RegistryInvalidSchemaError,
                                              RegistrySchemaNotFoundError, RegistryTlsError,
                                              RegistryUnreachableError, SubjectNotFoundError,
                                              SubjectVersionNotFoundError)
from spark_kafka_sink.schema_registry.transport import CONTENT_TYPE

from .fake_registry import FakeRegistry

USER = json.dumps({"type": "record", "name": "User", "namespace": "com.acme",
                   "fields": [{"name": "id", "type": "long"}]})
USER_V2 = json.dumps({"type": "record", "name": "User", "namespace": "com.acme",
                      "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]})
PASSWORD = "pa55-Zq81-hidden"
TOKEN = "tok-9f3e-hidden-token"
PROVIDER_CONFIG = "client_secret=cs-hidden-4411"
SECRETS = (PASSWORD, TOKEN, PROVIDER_CONFIG, "cs-hidden-4411")


@pytest.fixture
def registry():
    with FakeRegistry() as fake:
        yield fake


def client_for(*urls: str, **settings) -> RegistryClient:
    return RegistryClient(RegistryConfig({"schema.registry.url": ",".join(urls),
                                          "schema.registry.request.timeout.ms": 2000, **settings}))


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


# --- the calls ----------------------------------------------------------------------------------

def test_register_posts_the_schema_as_confluents_clients_do(registry):
    client = client_for(registry.url)
    schema_id = client.register("orders-value", USER)
    assert registry.schemas[schema_id] == (USER, "AVRO") and registry.subjects["orders-value"] == [schema_id]
    (seen,) = registry.seen
    assert (seen.method, seen.path, seen.query) == ("POST", "/subjects/orders-value/versions",
                                                    {"normalize": "false"})
    assert seen.body == {"schema": USER, "schemaType": "AVRO"}
    assert seen.headers["content-type"] == CONTENT_TYPE
    assert seen.headers["accept"].startswith(CONTENT_TYPE)
    assert "authorization" not in seen.headers


def test_the_same_schema_has_one_id_and_a_new_one_a_new_version(registry):
    client = client_for(registry.url)
    first = client.register("a-value", USER)
    assert client.register("b-value", USER) == first
    second = client.register("a-value", USER_V2)
    assert second != first and registry.subjects["a-value"] == [first, second]
    assert client.latest("a-value").version == 2


def test_normalize_is_sent_from_the_setting_or_the_call(registry):
    spaced = '{"type":  "string"}'
    client = client_for(registry.url, **{"normalize.schemas": "true"})
    schema_id = client.register("n-value", spaced)
    assert registry.seen[-1].query["normalize"] == "true"
    assert registry.schemas[schema_id][0] == '{"type":"string"}'
    client.register("m-value", spaced, normalize=False)
    assert registry.seen[-1].query["normalize"] == "false"


def test_lookup_finds_a_registered_schema_and_registers_nothing(registry):
    schema_id = registry.register("orders-value", USER)
    client = client_for(registry.url)
    assert client.lookup("orders-value", USER) == schema_id
    seen = registry.seen[-1]
    assert (seen.method, seen.path) == ("POST", "/subjects/orders-value")
    assert seen.query == {"normalize": "false", "deleted": "false"}
    with pytest.raises(RegistrySchemaNotFoundError, match="40403") as info:
        client.lookup("orders-value", USER_V2)
    assert "register it under subject 'orders-value' first, or set auto.register.schemas=true" in str(info.value)
    with pytest.raises(SubjectNotFoundError, match="Subject 'other-value' not found") as info:
        client.lookup("other-value", USER)
    assert info.value.error_code == 40401 and info.value.subject == "other-value"
    assert registry.subjects == {"orders-value": [schema_id]}


def test_latest_gives_the_id_version_and_schema(registry):
    registry.register("orders-value", USER)
    v2 = registry.register("orders-value", USER_V2)
    latest = client_for(registry.url).latest("orders-value")
    assert (latest.subject, latest.schema_id, latest.version, latest.schema, latest.schema_type) == (
        "orders-value", v2, 2, USER_V2, "AVRO")
    assert registry.seen[-1].path == "/subjects/orders-value/versions/latest"
    with pytest.raises(SubjectNotFoundError, match="reading the latest version for subject 'nope'"):
        client_for(registry.url).latest("nope")


def test_schema_by_id_gives_the_text(registry):
    schema_id = registry.register("orders-value", USER)
    client = client_for(registry.url)
    assert client.schema_by_id(schema_id) == USER
    assert registry.seen[-1].path == f"/schemas/ids/{schema_id}"
    with pytest.raises(RegistrySchemaNotFoundError, match="Schema 99 not found"):
        client.schema_by_id(99)
    for bad in (-1, 2**31, "1", True):
        with pytest.raises(RegistryError, match=r"a schema id is an integer in \[0, 2147483647\]"):
            client.schema_by_id(bad)


def test_each_question_is_asked_once_per_client(registry):
    client = client_for(registry.url)
    for _ in range(3):
        schema_id = client.register("orders-value", USER)
        client.register("orders-key", USER)
        assert client.lookup("orders-value", USER) == schema_id
        client.latest("orders-value")
        client.schema_by_id(schema_id)
    assert registry.requests_to("POST", "subjects", "orders-value", "versions") == 1
    assert registry.requests_to("POST", "subjects", "orders-key", "versions") == 1
    assert registry.requests_to("POST", "subjects", "orders-value") == 1
    assert registry.requests_to("GET", "subjects", "orders-value", "versions", "latest") == 1
    assert registry.requests_to("GET", "schemas", "ids", str(schema_id)) == 1
    assert client.requests == len(registry.seen) == 5
    client_for(registry.url).register("orders-value", USER)      # a new client asks again
    assert registry.requests_to("POST", "subjects", "orders-value", "versions") == 2


def test_a_subject_is_escaped_whole_in_the_path(registry):
    client = client_for(registry.url)
    subject = "team/a.b c?-value"
    schema_id = client.register(subject, USER)
    assert registry.seen[-1].path == "/subjects/team%2Fa.b%20c%3F-value/versions"
    assert registry.subjects == {subject: [schema_id]}
    assert client.latest(subject).schema_id == schema_id
    with pytest.raises(RegistryError, match="a subject is a non-empty string"):
        client.register("", USER)


def test_a_base_path_prefixes_every_call():
    with FakeRegistry(base_path="/apis/ccompat/v7") as registry:
        assert registry.url.endswith("/apis/ccompat/v7")
        client = client_for(registry.url + "/")
        assert client.schema_by_id(client.register("orders-value", USER)) == USER


def test_subject_name_follows_the_configured_strategy(registry):
    client = client_for(registry.url, **{"key.subject.name.strategy": "RecordNameStrategy",
                                         "value.subject.name.strategy": "TopicRecordNameStrategy"})
    assert client.subject_name("orders", True, "com.acme.User") == "com.acme.User"
    assert client.subject_name("orders", False, "com.acme.User") == "orders-com.acme.User"
    assert client_for(registry.url).subject_name("orders", True) == "orders-key"


# --- refusals -----------------------------------------------------------------------------------

def test_an_incompatible_schema_is_named_with_the_registrys_message_and_the_subject(registry):
    registry.register("orders-value", USER)
    registry.lock_subject("orders-value")
    with pytest.raises(IncompatibleSchemaError) as info:
        client_for(registry.url).register("orders-value", USER_V2)
    message = str(info.value)
    assert "registering the schema for subject 'orders-value': the schema is incompatible" in message
    assert ("Schema being registered is incompatible with an earlier schema for subject "
            "\"orders-value\", details: [READER_FIELD_MISSING_DEFAULT_VALUE]") in message
    assert registry.url in message and "HTTP 409" in message
    assert (info.value.status, info.value.error_code, info.value.subject) == (409, 409, "orders-value")
    assert isinstance(info.value, ConfigError)


def test_an_invalid_schema_is_422(registry):
    with pytest.raises(RegistryInvalidSchemaError, match="refused it as invalid .*error 42201: Invalid schema"):
        client_for(registry.url).register("orders-value", "{not json")
    with pytest.raises(RegistryError, match="a schema is a non-empty string"):
        client_for(registry.url).register("orders-value", " ")


def test_a_missing_version_is_40402(registry):
    registry.register("orders-value", USER)
    client = client_for(registry.url)
    answer = client._transport.request("GET", "/subjects/orders-value/versions/7")
    with pytest.raises(SubjectVersionNotFoundError, match="Version 7 not found"):
        client._checked(answer, "orders-value", "reading version 7")


def test_a_404_without_a_registry_code_asks_about_the_base_url(registry):
    client = client_for(registry.url + "/wrong/prefix")
    with pytest.raises(RegistryError, match="answered HTTP 404.*is schema.registry.url the registry's base URL"):
        client.register("orders-value", USER)


def test_another_error_quotes_the_registry(registry):
    registry.fail_next(400, 40001)
    with pytest.raises(RegistryError, match="answered HTTP 400, error 40001: injected failure 400") as info:
        client_for(registry.url).register("orders-value", USER)
    assert type(info.value) is RegistryError


def test_errors_pickle_with_their_attributes(registry):
    registry.register("orders-value", USER)
    registry.lock_subject("orders-value")
    with pytest.raises(IncompatibleSchemaError) as info:
        client_for(registry.url).register("orders-value", USER_V2)
    copy = pickle.loads(pickle.dumps(info.value))
    assert type(copy) is IncompatibleSchemaError and str(copy) == str(info.value)
    assert (copy.status, copy.error_code, copy.url, copy.subject) == (409, 409, registry.url, "orders-value")


# --- several URLs ---------------------------------------------------------------------------------

def test_an_unreachable_url_moves_to_the_next(registry):
    dead = closed_port_url()
    client = client_for(dead, registry.url)
    assert client.register("orders-value", USER) == 1
    assert client.requests == 2 and len(registry.seen) == 1


def test_a_5xx_answer_moves_to_the_next_url_and_a_4xx_does_not(registry):
    with FakeRegistry() as second:
        registry.fail_next(503, 50003)
        client = client_for(registry.url, second.url)
        client.register("a-value", USER)
        assert (len(registry.seen), len(second.seen)) == (1, 1) and "a-value" in second.subjects
        registry.fail_next(400, 40001)
        with pytest.raises(RegistryError, match="HTTP 400"):
            client.register("b-value", USER)
        assert len(second.seen) == 1


def test_when_no_url_answers_each_one_is_named_with_its_reason(registry):
    dead = closed_port_url()
    registry.fail_next(503, 50003)
    with socket.socket() as silent:                  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        mute = f"http://127.0.0.1:{silent.getsockname()[1]}"
        client = client_for(dead, registry.url, mute, **{"schema.registry.request.timeout.ms": 200})
        started = time.monotonic()
        with pytest.raises(RegistryUnreachableError) as info:
            client.register("orders-value", USER)
        assert time.monotonic() - started < 2
    error = info.value
    assert error.reasons == (f"{dead}: connection refused",
                             f"{registry.url}: HTTP 503: injected failure 503",
                             f"{mute}: no answer within 0.2 s (schema.registry.request.timeout.ms)")
    assert str(error).startswith("the schema registry did not answer POST /subjects/orders-value/versions"
                                 "?normalize=false on any URL of schema.registry.url: ")
    assert all(reason in str(error) for reason in error.reasons)
    assert error.retriable and not isinstance(error, RegistryTlsError)


# --- credentials ----------------------------------------------------------------------------------

def test_basic_auth_is_confluents_header():
    with FakeRegistry(basic=("alice", PASSWORD)) as registry:
        client = client_for(registry.url, **{"basic.auth.user.info": f"alice:{PASSWORD}"})
        assert client.register("orders-value", USER) == 1
        with pytest.raises(RegistryAuthError) as info:
            client_for(registry.url, **{"basic.auth.user.info": "alice:wrong"}).register("orders-value", USER)
        message = str(info.value)
        assert f"the schema registry at {registry.url} refused the request (HTTP 401" in message
        assert "check them (basic auth)" in message and PASSWORD not in message and "wrong" not in message
        assert isinstance(info.value, AuthenticationError) and info.value.status == 401
        with pytest.raises(RegistryAuthError, match="the registry wants credentials: set "
                                                    "schema.registry.basic.auth.user.info or a bearer token"):
            client_for(registry.url).register("orders-value", USER)


def test_a_static_bearer_token_with_confluent_clouds_headers():
    with FakeRegistry(bearer=TOKEN) as registry:
        client = client_for(registry.url, **{"bearer.auth.token": TOKEN, "bearer.auth.logical.cluster": "lsrc-1",
                                             "bearer.auth.identity.pool.id": "pool-2"})
        client.register("orders-value", USER)
        headers = registry.seen[-1].headers
        assert headers["authorization"] == f"Bearer {TOKEN}"
        assert (headers["target-sr-cluster"], headers["confluent-identity-pool-id"]) == ("lsrc-1", "pool-2")
        with pytest.raises(RegistryAuthError, match=r"check them \(a static bearer token\)") as info:
            client_for(registry.url, **{"bearer.auth.token": "other"}).register("orders-value", USER)
        assert TOKEN not in str(info.value)


CALLS: list[str | None] = []


def token_provider(config_string):
    """Importable as tests.unit.schema_registry.test_client:token_provider (the OAUTHBEARER
    provider's shape: the config string in, (token, expiry in epoch seconds) out)."""
    CALLS.append(config_string)
    return TOKEN, time.time() + 3600


def failing_provider(config_string):
    raise RuntimeError(f"identity provider down for {config_string}")


@pytest.mark.parametrize("provider", ["tests.unit.schema_registry.test_client:token_provider", token_provider])
def test_a_bearer_token_from_a_provider_is_fetched_once_and_reused(provider):
    CALLS.clear()
    with FakeRegistry(bearer=TOKEN) as registry:
        client = client_for(registry.url, **{"schema.registry.bearer.auth.token.provider": provider,
                                             "schema.registry.bearer.auth.config": PROVIDER_CONFIG})
        client.register("a-value", USER)
        client.register("b-value", USER)
        assert [seen.headers["authorization"] for seen in registry.seen] == [f"Bearer {TOKEN}"] * 2
    assert CALLS == [PROVIDER_CONFIG]
    assert "token_provider" in repr(client) and TOKEN not in repr(client)


def test_a_provider_that_fails_or_cannot_be_imported_is_named_without_its_config(registry):
    client = client_for(registry.url, **{
        "schema.registry.bearer.auth.token.provider": "tests.unit.schema_registry.test_client:failing_provider",
        "schema.registry.bearer.auth.config": PROVIDER_CONFIG})
    with pytest.raises(RegistryAuthError, match="no bearer token for the schema registry: .*failing_provider "
                                                "failed: RuntimeError") as info:
        client.register("orders-value", USER)
    assert not any(secret in str(info.value) for secret in SECRETS)
    assert registry.seen == []
    with pytest.raises(ConfigError, match="schema.registry.bearer.auth.token.provider=no.such.module:f: "
                                          "cannot be imported"):
        client_for(registry.url, **{"schema.registry.bearer.auth.token.provider": "no.such.module:f"})


def test_no_secret_reaches_a_log_line_an_error_or_a_repr(caplog):
    caplog.set_level(logging.DEBUG, logger="spark_kafka_sink")
    shown: list[str] = []
    with FakeRegistry(basic=("alice", PASSWORD)) as registry:
        settings = {"basic.auth.user.info": f"alice:{PASSWORD}"}
        client = client_for(closed_port_url(), registry.url, **settings)
        schema_id = client.register("orders-value", USER)
        client.lookup("orders-value", USER)
        client.latest("orders-value")
        client.schema_by_id(schema_id)
        shown += [repr(client), repr(client.config), repr(client._transport.credentials)]
        registry.lock_subject("orders-value")
        for call in (lambda: client.register("orders-value", USER_V2),
                     lambda: client.lookup("nope", USER),
                     lambda: client_for(registry.url, **{"basic.auth.user.info": f"alice:{PASSWORD}x"}
                                        ).register("x-value", USER)):
            with pytest.raises(RegistryError) as info:
                call()
            shown += [str(info.value), repr(info.value)]
    with FakeRegistry(bearer=TOKEN) as registry:
        client = client_for(registry.url, "http://sr.example:8081", **{"bearer.auth.token": TOKEN})
        client.register("y-value", USER)          # the first URL answers: the second is not asked
        shown.append(repr(client))
    assert "go unencrypted to http://sr.example:8081" in caplog.text
    assert "schema registry POST" in caplog.text
    for text in [caplog.text, *shown]:
        assert not any(secret in text for secret in SECRETS), text
