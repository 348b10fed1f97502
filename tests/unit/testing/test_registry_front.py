"""spark_kafka_sink.testing.RegistryFront in front of the unit tests' fake registry: forwarding
and relaying, 401 without forwarding, HTTPS with its private CA, client certificates, what it
records (never a secret), the settings it hands to clients, its upstream failing, and close."""

from __future__ import annotations

import base64
import datetime
import http.client
import json
import socket
import ssl
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient, SchemaRegistryError

from spark_kafka_sink.embedded.certs import CLIENT_COMMON_NAME, generate_tls
from spark_kafka_sink.embedded.ports import check_free
from spark_kafka_sink.schema_registry import (RegistryAuthError, RegistryClient, RegistryConfig,
                                              RegistryTlsError, RegistryUnreachableError,
                                              SubjectNotFoundError)
from spark_kafka_sink.testing import RegistryFront
from spark_kafka_sink.testing.registry_front import LOGICAL_CLUSTER

from ..schema_registry.fake_registry import FakeRegistry

pytestmark = pytest.mark.timeout(60)

API = "/apis/ccompat/v7"
SCHEMA = '{"type": "string"}'
USER, PASSWORD, TOKEN = "sink", "pw-basic-s3cret", "tok-bearer-s3cret"
SECRETS = (PASSWORD, TOKEN)


@pytest.fixture(scope="module")
def upstream():
    with FakeRegistry(base_path=API) as registry:
        yield registry


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory):
    return generate_tls(tmp_path_factory.mktemp("other"), datetime.datetime.now(datetime.timezone.utc))


def eventually(condition, timeout_s: float = 5.0) -> None:
    """The server thread records a failed handshake a moment after the client gave up."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "not within the deadline"
        time.sleep(0.01)


def raw(front: RegistryFront, method: str, path: str, headers: dict[str, str] | None = None,
        body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request with exactly these headers (plain HTTP fronts)."""
    connection = http.client.HTTPConnection("127.0.0.1", front.port, timeout=5)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        answer = connection.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        connection.close()


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_it_forwards_method_path_query_body_and_relays_the_answer(upstream):
    with RegistryFront(upstream.url) as front:
        assert front.url == f"http://127.0.0.1:{front.port}{API}"
        before = len(upstream.seen)
        client = RegistryClient(RegistryConfig(front.sink_options()))
        schema_id = client.register("forward-value", SCHEMA)
        assert client.lookup("forward-value", SCHEMA) == schema_id
        assert client.schema_by_id(schema_id) == SCHEMA
        with pytest.raises(SubjectNotFoundError, match="Subject 'missing-value' not found"):
            client.latest("missing-value")                      # the upstream's 404 and body relayed
        status, headers, body = raw(front, "DELETE", f"{API}/subjects/forward-value",
                                    {"Accept": "application/json"})
    seen = upstream.seen[before:]
    assert [(s.method, s.segments, s.query) for s in seen] == [
        ("POST", ("subjects", "forward-value", "versions"), {"normalize": "false"}),
        ("POST", ("subjects", "forward-value"), {"normalize": "false", "deleted": "false"}),
        ("GET", ("schemas", "ids", str(schema_id)), {}),
        ("GET", ("subjects", "missing-value", "versions", "latest"), {})]
    assert seen[0].body == {"schema": SCHEMA, "schemaType": "AVRO"}
    assert seen[0].headers["content-type"] == "application/vnd.schemaregistry.v1+json"
    assert seen[0].headers["accept"].startswith("application/vnd.schemaregistry.v1+json")
    # The fake has no DELETE: http.server's own 501 page, relayed with its content type.
    assert (status, headers["content-type"]) == (501, "text/html;charset=utf-8")
    assert b"Unsupported method ('DELETE')" in body
    assert [(r.method, r.forwarded, r.credential, r.accepted, r.status) for r in front.requests] == [
        ("POST", True, None, True, 200), ("POST", True, None, True, 200), ("GET", True, None, True, 200),
        ("GET", True, None, True, 404), ("DELETE", True, None, True, 501)]
    assert front.requests[0].path == f"{API}/subjects/forward-value/versions"
    assert front.requests[0].query == "normalize=false"


@pytest.mark.parametrize("authorization, kind, message", [
    (None, None, "Unauthorized: this registry wants HTTP Basic or a bearer token, and none was sent"),
    (basic(USER, "wrong-password"), "basic", "Unauthorized: the credentials were refused"),
    (basic("someone-else", PASSWORD), "basic", "Unauthorized: the credentials were refused"),
    ("Bearer wrong-token", "bearer", "Unauthorized: the credentials were refused"),
    ("Basic not-base64!", "other", "Unauthorized: the credentials were refused"),
    (f"Digest {PASSWORD}", "other", "Unauthorized: the credentials were refused"),
    (PASSWORD, "other", "Unauthorized: the credentials were refused"),
])
def test_a_missing_or_wrong_credential_is_401_and_not_forwarded(upstream, authorization, kind, message):
    with RegistryFront(upstream.url, basic=(USER, PASSWORD), bearer=TOKEN) as front:
        before = len(upstream.seen)
        headers = {"Content-Type": "application/json"}
        if authorization is not None:
            headers["Authorization"] = authorization
        status, answer, body = raw(front, "POST", f"{API}/subjects/refused-value/versions", headers,
                                   json.dumps({"schema": SCHEMA}).encode())
    assert status == 401
    assert json.loads(body) == {"error_code": 40101, "message": message}
    assert answer["www-authenticate"]                       # the schemes asked for
    assert len(upstream.seen) == before
    (record,) = front.requests
    assert (record.credential, record.accepted, record.forwarded, record.status) == (kind, False, False, 401)
    assert front.refused == front.requests
    assert all(secret not in repr(record) + body.decode() for secret in SECRETS)


def test_basic_auth_and_a_bearer_token_each_pass(upstream):
    with RegistryFront(upstream.url, basic=(USER, PASSWORD), bearer=TOKEN) as front:
        for credentials in ("basic", "bearer"):
            client = RegistryClient(RegistryConfig(front.sink_options(credentials)))
            assert client.register(f"{credentials}-value", SCHEMA) >= 1
        with pytest.raises(RegistryAuthError, match="wants HTTP Basic or a bearer token"):
            RegistryClient(RegistryConfig(front.sink_options("none"))).register("none-value", SCHEMA)
        with SchemaRegistryClient(front.client_conf("bearer")) as confluent:
            assert confluent.get_subjects()
    assert [(r.credential, r.user, r.accepted, r.forwarded) for r in front.requests] == [
        ("basic", USER, True, True), ("bearer", None, True, True), (None, None, False, False),
        ("bearer", None, True, True)]


def test_a_bearer_validator_decides_and_a_failing_one_refuses(upstream):
    def validator(token: str) -> bool:
        if token == "explodes":
            raise RuntimeError("validator bug")
        return token.startswith("good-")

    with RegistryFront(upstream.url, bearer=validator) as front:
        assert RegistryClient(front.sink_options(token="good-1")).register("validated-value", SCHEMA) >= 1
        for token in ("bad-1", "explodes"):
            with pytest.raises(RegistryAuthError):
                RegistryClient(front.sink_options(token=token)).register("validated-value", SCHEMA)
        with pytest.raises(ValueError, match="give token="):
            front.client_conf("bearer")
        assert "checked by" in repr(front) and "validator" in repr(front)
    assert [r.accepted for r in front.requests] == [True, False, False]


def test_https_with_the_front_s_own_ca(upstream, other_ca):
    with RegistryFront(upstream.url, basic=(USER, PASSWORD), tls=True) as front:
        assert front.url == f"https://127.0.0.1:{front.port}{API}"
        assert Path(front.ca_location).read_text().startswith("-----BEGIN CERTIFICATE-----")
        schema_id = RegistryClient(front.sink_options()).register("tls-value", SCHEMA)
        by_name = {**front.sink_options(), "schema.registry.url": front.url.replace("127.0.0.1", "localhost")}
        assert RegistryClient(by_name).schema_by_id(schema_id) == SCHEMA     # SAN localhost
        with SchemaRegistryClient(front.client_conf()) as confluent:
            assert confluent.get_schema(schema_id).schema_str == SCHEMA

        untrusting = {**front.sink_options(), "schema.registry.ssl.ca.location": str(other_ca.ca_path)}
        with pytest.raises(RegistryTlsError, match="certificate verify failed") as info:
            RegistryClient(untrusting).register("tls-value", SCHEMA)
        eventually(lambda: front.handshake_failures)
        assert front.handshake_failures == ("TLSV1_ALERT_UNKNOWN_CA",)
        assert all(secret not in str(info.value) for secret in SECRETS)
        assert "ssl.certificate.location" not in front.client_conf()          # none asked for
    assert [r.client_certificate for r in front.requests] == [None, None, None]


def test_a_client_certificate_of_the_front_s_ca_is_required(upstream, other_ca):
    with RegistryFront(upstream.url, tls=True, client_auth=True) as front:
        before = len(upstream.seen)
        options = front.sink_options()
        assert RegistryClient(options).register("mtls-value", SCHEMA) >= 1
        assert front.requests[0].client_certificate == CLIENT_COMMON_NAME

        without = {k: v for k, v in options.items() if "certificate" not in k and ".key." not in k}
        with pytest.raises(RegistryUnreachableError):
            RegistryClient({**without, "schema.registry.request.timeout.ms": 2000}).register("mtls-value", SCHEMA)
        eventually(lambda: len(front.handshake_failures) == 1)
        stranger = {**options, "schema.registry.ssl.certificate.location": str(other_ca.client_cert_path),
                    "schema.registry.ssl.key.location": str(other_ca.client_key_path),
                    "schema.registry.ssl.key.password": other_ca.client_key_password}
        with pytest.raises(RegistryUnreachableError):
            RegistryClient({**stranger, "schema.registry.request.timeout.ms": 2000}).register("mtls-value", SCHEMA)
        eventually(lambda: len(front.handshake_failures) == 2)
    assert front.handshake_failures[0] == "PEER_DID_NOT_RETURN_A_CERTIFICATE"
    assert front.handshake_failures[1] == "CERTIFICATE_VERIFY_FAILED"
    assert len(front.requests) == 1 and len(upstream.seen) == before + 1


def test_client_settings_name_every_file_and_credential(upstream):
    with RegistryFront(upstream.url, basic=(USER, PASSWORD), bearer=TOKEN, tls=True,
                       client_auth=True) as front:
        files = {"ssl.ca.location": front.ca_location,
                 "ssl.certificate.location": front.client_certificate_location,
                 "ssl.key.location": front.client_key_location,
                 "ssl.key.password": front.client_key_password}
        assert front.client_conf() == {"url": front.url, "timeout": 10, **files,
                                       "basic.auth.user.info": f"{USER}:{PASSWORD}"}
        assert front.client_conf("bearer") == {
            "url": front.url, "timeout": 10, **files, "bearer.auth.credentials.source": "STATIC_TOKEN",
            "bearer.auth.token": TOKEN, "bearer.auth.logical.cluster": LOGICAL_CLUSTER}
        assert front.client_conf("none") == {"url": front.url, "timeout": 10, **files}
        assert front.sink_options() == {
            "schema.registry.url": front.url, **{f"schema.registry.{k}": v for k, v in files.items()},
            "schema.registry.basic.auth.user.info": f"{USER}:{PASSWORD}"}
        assert front.sink_options("bearer")["schema.registry.bearer.auth.token"] == TOKEN
        for credentials in ("basic", "bearer"):
            RegistryConfig(front.sink_options(credentials))        # the sink's client takes them
            SchemaRegistryClient(front.client_conf(credentials)).__exit__()
        with pytest.raises(ValueError, match="credentials must be one of auto, basic, bearer, none"):
            front.sink_options("oauth")
        for text in (repr(front), repr(front.requests)):
            assert all(secret not in text for secret in SECRETS) and front.client_key_password not in text
        directory = Path(front.ca_location).parent
    assert not directory.exists()


def test_a_plain_front_has_no_certificates_and_one_kind_of_credential(upstream):
    with RegistryFront(upstream.url, bearer=TOKEN) as front:
        assert front.client_conf() == {"url": front.url, "timeout": 10,
                                       "bearer.auth.credentials.source": "STATIC_TOKEN",
                                       "bearer.auth.token": TOKEN, "bearer.auth.logical.cluster": LOGICAL_CLUSTER}
        with pytest.raises(ValueError, match="tls=False"):
            front.ca_location
        with pytest.raises(ValueError, match="takes no basic auth"):
            front.sink_options("basic")
    with RegistryFront(upstream.url) as front:
        assert front.sink_options() == {"schema.registry.url": front.url}
        with pytest.raises(ValueError, match="takes no bearer token"):
            front.client_conf("bearer")
    with pytest.raises(RuntimeError, match="not started"):
        front.url


def test_an_unreachable_or_silent_upstream_is_a_confluent_style_502_or_504():
    silent = socket.create_server(("127.0.0.1", 0))             # accepts (backlog), never answers
    closed = socket.create_server(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    try:
        with RegistryFront(f"http://127.0.0.1:{closed_port}{API}") as front:
            status, _, body = raw(front, "GET", f"{API}/subjects")
            assert (status, json.loads(body)["error_code"]) == (502, 50003)
            assert "could not reach its upstream" in json.loads(body)["message"]
        with RegistryFront(f"http://127.0.0.1:{silent.getsockname()[1]}{API}", upstream_timeout_s=0.2) as front:
            status, _, body = raw(front, "GET", f"{API}/subjects")
            assert (status, json.loads(body)) == (504, {"error_code": 50002, "message": (
                f"the registry front's upstream {front.upstream} did not answer within 0.2 s")})
            with SchemaRegistryClient({**front.client_conf(), "max.retries": 0}) as confluent, \
                    pytest.raises(SchemaRegistryError) as info:
                confluent.get_subjects()
            assert info.value.http_status_code == 504
    finally:
        silent.close()


def test_bodies_it_cannot_read_are_refused_and_end_the_connection(upstream):
    with RegistryFront(upstream.url) as front:
        before = len(upstream.seen)
        connection = http.client.HTTPConnection("127.0.0.1", front.port, timeout=5)
        connection.putrequest("POST", f"{API}/subjects/x/versions")
        connection.putheader("Transfer-Encoding", "chunked")
        connection.endheaders(b"5\r\nhello\r\n0\r\n\r\n")
        answer = connection.getresponse()
        assert (answer.status, json.loads(answer.read())["error_code"]) == (411, 411)
        assert answer.getheader("Connection") == "close"
        connection.close()
        status, _, body = raw(front, "POST", f"{API}/subjects/x/versions", {"Content-Length": "ten"})
        assert (status, json.loads(body)["message"]) == (400, "Content-Length 'ten' is not a number")
    assert len(upstream.seen) == before
    assert [(r.status, r.forwarded) for r in front.requests] == [(411, False), (400, False)]


def test_close_ends_open_connections_frees_the_port_and_removes_the_certificates(upstream):
    front = RegistryFront(upstream.url, tls=True).start()
    port, directory = front.port, Path(front.ca_location).parent
    context = ssl.create_default_context(cafile=front.ca_location)
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=context)
    connection.request("GET", f"{API}/subjects")                 # keep-alive: the connection stays
    assert connection.getresponse().read() is not None
    threads = {t.name for t in threading.enumerate()}
    assert "registry-front" in threads
    front.close()
    front.close()                                                # idempotent
    assert connection.sock.recv(1) == b""                        # ended by the front, not idle
    connection.close()
    check_free(port)
    assert not directory.exists()
    assert "registry-front" not in {t.name for t in threading.enumerate()}
    assert repr(front).startswith("RegistryFront(stopped -> http://127.0.0.1:")


@pytest.mark.parametrize("arguments, message", [
    ({"upstream": "https://127.0.0.1:1/x"}, "must be an http:// URL"),
    ({"upstream": "http://u:p@127.0.0.1:1/x"}, "no credentials, query or fragment"),
    ({"upstream": "http://127.0.0.1:1/x?y=1"}, "no credentials, query or fragment"),
    ({"client_auth": True}, "client_auth=True needs tls=True"),
    ({"basic": ("user", "")}, "two non-empty strings"),
    ({"basic": ("us:er", "pw")}, "cannot hold ':'"),
    ({"bearer": ""}, "a non-empty token, or a function"),
    ({"upstream_timeout_s": 0}, "upstream_timeout_s must be positive"),
])
def test_refused_arguments(arguments, message):
    arguments = {"upstream": "http://127.0.0.1:1/apis", **arguments}
    with pytest.raises(ValueError, match=message):
        RegistryFront(arguments.pop("upstream"), **arguments)

