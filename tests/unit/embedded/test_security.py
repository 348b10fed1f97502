"""Secured listeners of the embedded broker: BrokerSecurity, the generated CA, broker and client properties."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
import time

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from spark_kafka_sink.embedded import BrokerSecurity, TlsMaterial
from spark_kafka_sink.embedded.certs import generate_tls
from spark_kafka_sink.embedded.config import render
from spark_kafka_sink.embedded.security import (DEFAULT_USERS, MECHANISMS, SCRAM_ITERATIONS,
                                                broker_properties, client_properties,
                                                scram_format_args)

NOW = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
USERS = {"alice": "pw-alice-1", "bob": "pw-bob-2"}


@pytest.fixture(scope="module")
def tls(tmp_path_factory) -> TlsMaterial:
    return generate_tls(tmp_path_factory.mktemp("tls"), NOW)


def _cert(path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


# --- BrokerSecurity ------------------------------------------------------------------------------

def test_defaults_give_every_listener_and_two_users():
    security = BrokerSecurity()
    assert security.ssl and security.sasl and security.client_auth == "none"
    assert dict(security.users) == dict(DEFAULT_USERS) and len(security.users) == 2
    assert security.protocols == ("SSL", "SASL_PLAINTEXT", "SASL_SSL")
    assert BrokerSecurity(sasl=False).protocols == ("SSL",)
    assert BrokerSecurity(ssl=False).protocols == ("SASL_PLAINTEXT",)
    assert BrokerSecurity(users=USERS) == BrokerSecurity(users=dict(USERS))


def test_repr_names_users_but_hides_passwords():
    security = BrokerSecurity(users=USERS, client_auth="required")
    text = repr(security) + str(security)
    assert "alice" in text and "bob" in text and "required" in text
    for password in USERS.values():
        assert password not in text


def test_users_cannot_be_changed_afterwards():
    given = dict(USERS)
    security = BrokerSecurity(users=given)
    given["mallory"] = "pw-mallory"
    assert "mallory" not in security.users
    with pytest.raises(TypeError):
        security.users["eve"] = "pw-eve"  # type: ignore[index]
    with pytest.raises(AttributeError):
        security.ssl = False  # type: ignore[misc]


@pytest.mark.parametrize("kwargs, message", [
    ({"ssl": False, "sasl": False}, "needs ssl=True or sasl=True"),
    ({"client_auth": "always"}, r"client_auth \(ssl.client.auth\) must be one of none, requested, required"),
    ({"ssl": False, "client_auth": "required"}, "client_auth='required' needs ssl=True"),
    ({"users": {}}, "users is empty"),
    ({"users": {"al ice": "pw"}}, "user name 'al ice'"),
    ({"users": [("alice", "pw")]}, "must be a mapping"),
    ({"ssl": 1}, "ssl must be a bool"),
])
def test_invalid_settings_are_refused_naming_the_option(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        BrokerSecurity(**kwargs)


@pytest.mark.parametrize("password", ['has"quote', "has space", "a,b", "a]b", "semi;colon", "", "x" * 129])
def test_a_bad_password_names_the_user_but_never_the_password(password):
    with pytest.raises(ValueError, match="the password of user 'alice'") as info:
        BrokerSecurity(users={"alice": password})
    if password:
        assert password not in str(info.value)


def test_sasl_off_needs_no_users():
    assert BrokerSecurity(sasl=False, users={}).protocols == ("SSL",)


# --- certificates --------------------------------------------------------------------------------

def test_generation_is_fast_and_writes_pem_files(tmp_path):
    started = time.monotonic()
    material = generate_tls(tmp_path, datetime.datetime.now(datetime.timezone.utc))
    assert time.monotonic() - started < 1.0
    for path in (material.ca_path, material.server_cert_path, material.client_cert_path,
                 material.client_key_path, material.server_key_path):
        assert path.parent == tmp_path and path.read_bytes().startswith(b"-----BEGIN ")
    assert material.client_key_path.stat().st_mode & 0o777 == 0o600
    assert material.server_key_path.stat().st_mode & 0o777 == 0o600


def test_server_certificate_names_loopback_and_chains_to_the_ca(tls):
    ca, server = _cert(tls.ca_path), _cert(tls.server_cert_path)
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    server.verify_directly_issued_by(ca)
    ca.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not server.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ExtendedKeyUsageOID.SERVER_AUTH in server.extensions.get_extension_for_class(
        x509.ExtendedKeyUsage).value
    assert server.not_valid_before_utc <= NOW < server.not_valid_after_utc


def test_client_certificate_chains_to_the_ca_and_its_key_needs_the_password(tls):
    ca, client = _cert(tls.ca_path), _cert(tls.client_cert_path)
    client.verify_directly_issued_by(ca)
    assert ExtendedKeyUsageOID.CLIENT_AUTH in client.extensions.get_extension_for_class(
        x509.ExtendedKeyUsage).value
    pem = tls.client_key_path.read_bytes()
    assert pem.startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
    with pytest.raises(TypeError):
        serialization.load_pem_private_key(pem, password=None)
    with pytest.raises(ValueError):
        serialization.load_pem_private_key(pem, password=b"wrong")
    key = serialization.load_pem_private_key(pem, password=tls.client_key_password.encode())
    assert key.public_key().public_numbers() == client.public_key().public_numbers()


def test_tls_material_repr_hides_the_key_password(tls):
    assert tls.client_key_password and tls.client_key_password not in repr(tls)
    assert "ca.pem" in repr(tls)


def test_naive_time_is_refused(tmp_path):
    with pytest.raises(ValueError, match="aware datetime"):
        generate_tls(tmp_path, datetime.datetime(2030, 1, 1))


def test_openssl_completes_a_mutual_handshake_with_the_generated_files(tmp_path):
    """Python's ssl (OpenSSL) as both ends: hostname 127.0.0.1 verified, client certificate required."""
    tls = generate_tls(tmp_path, datetime.datetime.now(datetime.timezone.utc))
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tls.server_cert_path, tls.server_key_path)
    server_ctx.load_verify_locations(tls.ca_path)
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    client_ctx = ssl.create_default_context(cafile=str(tls.ca_path))
    client_ctx.load_cert_chain(tls.client_cert_path, tls.client_key_path, password=tls.client_key_password)
    seen = {}
    left, right = socket.socketpair()
    left.settimeout(10)
    right.settimeout(10)

    def serve() -> None:
        with server_ctx.wrap_socket(left, server_side=True) as conn:
            seen["peer"] = conn.getpeercert()
            conn.sendall(b"ok")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    with client_ctx.wrap_socket(right, server_hostname="127.0.0.1") as conn:
        assert conn.recv(2) == b"ok"
    thread.join(10)
    assert dict(x[0] for x in seen["peer"]["subject"])["commonName"] == "spark-kafka-sink-client"


# --- broker properties ---------------------------------------------------------------------------

def test_broker_properties_for_every_listener(tls):
    props = broker_properties(BrokerSecurity(users=USERS, client_auth="required"), tls)
    assert props["ssl.keystore.type"] == props["ssl.truststore.type"] == "PEM"
    assert props["ssl.keystore.key"] == tls.server_key_path.read_text()
    assert props["ssl.keystore.certificate.chain"] == (tls.server_cert_path.read_text()
                                                       + tls.ca_path.read_text())
    assert props["ssl.truststore.location"] == str(tls.ca_path)
    assert props["listener.name.ssl.ssl.client.auth"] == "required"
    assert props["listener.name.sasl_ssl.ssl.client.auth"] == "required"
    assert props["sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
    for listener in ("sasl_plaintext", "sasl_ssl"):
        assert props[f"listener.name.{listener}.plain.sasl.jaas.config"] == (
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_alice="pw-alice-1" user_bob="pw-bob-2";')
        for mechanism in ("scram-sha-256", "scram-sha-512"):
            assert props[f"listener.name.{listener}.{mechanism}.sasl.jaas.config"] == (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;")
        assert props[f"listener.name.{listener}.oauthbearer.sasl.jaas.config"] == (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;")
    assert not any("inter.broker" in key or "controller" in key for key in props)


def test_ssl_only_and_sasl_only_render_only_their_part(tls):
    ssl_only = broker_properties(BrokerSecurity(sasl=False), tls)
    assert not any("sasl" in key for key in ssl_only)
    assert [k for k in ssl_only if k.startswith("listener.name.")] == ["listener.name.ssl.ssl.client.auth"]
    sasl_only = broker_properties(BrokerSecurity(ssl=False), None)
    assert not any(key.startswith("ssl.") or ".ssl." in key for key in sasl_only)
    assert "listener.name.sasl_plaintext.plain.sasl.jaas.config" in sasl_only
    assert not any("sasl_ssl" in key for key in sasl_only)
    with pytest.raises(ValueError, match="TLS material"):
        broker_properties(BrokerSecurity(), None)


def test_inline_pem_renders_on_one_java_properties_line(tls):
    text = render({"ssl.keystore.key": broker_properties(BrokerSecurity(), tls)["ssl.keystore.key"]})
    assert text.count("\n") == 1 and text.startswith("ssl.keystore.key=-----BEGIN PRIVATE KEY-----\\n")


def test_scram_users_are_added_for_both_mechanisms_at_format_time():
    args = scram_format_args(BrokerSecurity(users=USERS))
    assert args[0::2] == ["--add-scram"] * 4
    assert args[1::2] == [
        f"SCRAM-SHA-256=[name=alice,password=pw-alice-1,iterations={SCRAM_ITERATIONS}]",
        f"SCRAM-SHA-512=[name=alice,password=pw-alice-1,iterations={SCRAM_ITERATIONS}]",
        f"SCRAM-SHA-256=[name=bob,password=pw-bob-2,iterations={SCRAM_ITERATIONS}]",
        f"SCRAM-SHA-512=[name=bob,password=pw-bob-2,iterations={SCRAM_ITERATIONS}]",
    ]
    assert SCRAM_ITERATIONS >= 4096
    assert scram_format_args(BrokerSecurity(sasl=False)) == []


# --- client properties ---------------------------------------------------------------------------

def test_client_properties_per_protocol(tls):
    security = BrokerSecurity(users=USERS)
    assert client_properties(security, tls, "PLAINTEXT") == {"security.protocol": "PLAINTEXT"}
    assert client_properties(None, None, "PLAINTEXT") == {"security.protocol": "PLAINTEXT"}
    assert client_properties(security, tls, "SSL") == {
        "security.protocol": "SSL", "ssl.ca.location": str(tls.ca_path)}
    assert client_properties(security, tls, "SASL_PLAINTEXT") == {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "alice", "sasl.password": "pw-alice-1"}
    assert client_properties(security, tls, "SASL_SSL", "SCRAM-SHA-512", "bob") == {
        "security.protocol": "SASL_SSL", "ssl.ca.location": str(tls.ca_path),
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob", "sasl.password": "pw-bob-2"}
    assert client_properties(security, tls, "SASL_PLAINTEXT", "OAUTHBEARER", "bob") == {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": "true", "sasl.oauthbearer.config": "principal=bob"}
    assert set(MECHANISMS) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}


def test_client_certificate_is_offered_when_the_broker_asks(tls):
    for auth in ("requested", "required"):
        props = client_properties(BrokerSecurity(client_auth=auth), tls, "SSL")
        assert props["ssl.certificate.location"] == str(tls.client_cert_path)
        assert props["ssl.key.location"] == str(tls.client_key_path)
        assert props["ssl.key.password"] == tls.client_key_password
        assert "ssl.key.password" in client_properties(BrokerSecurity(client_auth=auth), tls, "SASL_SSL")


@pytest.mark.parametrize("args, message", [
    (("SSL", "PLAIN", None), "SSL has no SASL"),
    (("PLAINTEXT", None, "alice"), "PLAINTEXT has no SASL"),
    (("SASL_PLAINTEXT", "GSSAPI", None), "sasl.mechanism must be one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
    (("SASL_PLAINTEXT", "PLAIN", "mallory"), r"no SASL user 'mallory'; users are \['alice', 'bob'\]"),
    (("SASL_SSL", None, None), "no SASL_SSL listener"),
])
def test_client_properties_refuse_what_the_listener_lacks(tls, args, message):
    security = BrokerSecurity(users=USERS) if args[0] != "SASL_SSL" else BrokerSecurity(ssl=False)
    with pytest.raises(ValueError, match=message) as info:
        client_properties(security, tls, *args)
    assert "pw-" not in str(info.value)
