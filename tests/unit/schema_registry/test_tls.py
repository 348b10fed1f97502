"""The registry over HTTPS: a private CA, a client certificate with an encrypted key, and each TLS
failure named (untrusted certificate, refused or missing client certificate, TLS against plain
HTTP), with the certificates the embedded broker's tooling makes."""

from __future__ import annotations

import datetime

import pytest

from spark_kafka_sink.embedded.certs import generate_tls
from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.schema_registry import (RegistryClient, RegistryConfig, RegistryTlsError,
                                              RegistryUnreachableError)

from .fake_registry import FakeRegistry

SCHEMA = '{"type": "string"}'


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return generate_tls(tmp_path_factory.mktemp("tls"), datetime.datetime.now(datetime.timezone.utc))


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory):
    return generate_tls(tmp_path_factory.mktemp("other"), datetime.datetime.now(datetime.timezone.utc))


def settings(url, tls, *, client_certificate=True, password=True, **more):
    out = {"schema.registry.url": url, "schema.registry.ssl.ca.location": str(tls.ca_path),
           "schema.registry.request.timeout.ms": 2000}
    if client_certificate:
        out["schema.registry.ssl.certificate.location"] = str(tls.client_cert_path)
        out["schema.registry.ssl.key.location"] = str(tls.client_key_path)
    if password:
        out["schema.registry.ssl.key.password"] = tls.client_key_password
    return {**out, **more}


def test_https_with_a_private_ca_and_a_client_certificate(tls):
    with FakeRegistry(tls=tls, client_certificates=True, basic=("alice", "pw-1")) as registry:
        assert registry.url.startswith("https://127.0.0.1:")
        client = RegistryClient(settings(registry.url, tls, **{"basic.auth.user.info": "alice:pw-1"}))
        schema_id = client.register("orders-value", SCHEMA)
        assert client.schema_by_id(schema_id) == SCHEMA


def test_https_without_a_client_certificate_where_none_is_asked(tls):
    with FakeRegistry(tls=tls) as registry:
        client = RegistryClient(settings(registry.url, tls, client_certificate=False, password=False))
        assert client.register("orders-value", SCHEMA) == 1


def test_a_missing_client_certificate_is_named(tls):
    with FakeRegistry(tls=tls, client_certificates=True) as registry:
        client = RegistryClient(settings(registry.url, tls, client_certificate=False, password=False))
        with pytest.raises(RegistryUnreachableError) as info:
            client.register("orders-value", SCHEMA)
    # TLS 1.3: the refusal arrives as an alert on the first read, or the server just closes
    assert "client certificate" in str(info.value) or "ConnectionResetError" in str(info.value), str(info.value)
    assert registry.seen == []


def test_an_untrusted_registry_certificate_is_a_tls_error(tls, other_ca):
    with FakeRegistry(tls=tls) as registry:
        client = RegistryClient(settings(registry.url, other_ca, client_certificate=False, password=False))
        with pytest.raises(RegistryTlsError) as info:
            client.register("orders-value", SCHEMA)
    assert "TLS handshake failed: certificate verify failed" in str(info.value)
    assert "schema.registry.ssl.ca.location names the CAs to trust" in str(info.value)
    assert not info.value.retriable


def test_a_host_name_check_can_be_turned_off(tls):
    with FakeRegistry(tls=tls) as registry:
        by_name = registry.url.replace("127.0.0.1", "localhost")     # in the certificate too
        assert RegistryClient(settings(by_name, tls, client_certificate=False, password=False)
                              ).register("a-value", SCHEMA) == 1
        unchecked = RegistryClient(settings(registry.url, tls, client_certificate=False, password=False,
                                            **{"schema.registry.ssl.endpoint.identification.algorithm": ""}))
        assert unchecked.register("b-value", SCHEMA) == 1


def test_https_to_a_plain_http_registry_says_so(tls):
    with FakeRegistry() as registry:
        url = registry.url.replace("http://", "https://")
        client = RegistryClient(settings(url, tls, client_certificate=False, password=False))
        with pytest.raises(RegistryTlsError, match=r"TLS handshake failed: .*\(is this an https:// registry\?\)"):
            client.register("orders-value", SCHEMA)


def test_one_url_failing_tls_moves_to_the_next(tls, other_ca):
    with FakeRegistry(tls=tls) as good, FakeRegistry(tls=other_ca) as untrusted:
        client = RegistryClient(settings(f"{untrusted.url},{good.url}", tls, client_certificate=False,
                                         password=False))
        assert client.register("orders-value", SCHEMA) == 1
        assert (len(untrusted.seen), len(good.seen)) == (0, 1)


@pytest.mark.parametrize("change, fragment", [
    ({"schema.registry.ssl.ca.location": "/no/such/ca.pem"},
     "schema.registry.ssl.ca.location: file not found: /no/such/ca.pem"),
    ({"schema.registry.ssl.key.password": None},
     "schema.registry.ssl.certificate.location and schema.registry.ssl.key.location"),
    ({"schema.registry.ssl.key.password": "not-the-password"}, "loading failed"),
])
def test_tls_files_that_cannot_be_loaded_are_config_errors_naming_the_setting(tls, change, fragment):
    with pytest.raises(ConfigError) as info:
        RegistryClient({**settings("https://127.0.0.1:1", tls), **change})
    assert fragment in str(info.value)
    assert tls.client_key_password not in str(info.value) and "not-the-password" not in str(info.value)


def test_the_key_password_is_in_no_repr(tls):
    config = RegistryConfig(settings("https://127.0.0.1:1", tls))
    client = RegistryClient(config)
    for text in (repr(config), repr(client), repr(config.redacted())):
        assert tls.client_key_password not in text
