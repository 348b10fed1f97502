"""The security rules of ProducerConfig: TLS settings (PEM only), SASL mechanism and credentials
(sasl.username/sasl.password or a Java sasl.jaas.config line); secrets never in errors or reprs."""

from __future__ import annotations

import pytest

from spark_kafka_sink.client.auth.jaas import SaslCredentials, parse_jaas_config, sasl_credentials
from spark_kafka_sink.config import HIDDEN, ProducerConfig
from spark_kafka_sink.errors import ConfigError

SECRET = "Pw-9f8e7d"
PLAIN_JAAS = (f'org.apache.kafka.common.security.plain.PlainLoginModule required '
              f'username="alice" password="{SECRET}";')
SCRAM_JAAS = (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
              f'username="alice" password="{SECRET}";')


def make(**props) -> ProducerConfig:
    return ProducerConfig({"bootstrap.servers": "localhost:9092", **props})


def error_of(**props) -> str:
    with pytest.raises(ConfigError) as info:
        make(**props)
    return str(info.value)


def sasl(mechanism="PLAIN", protocol="SASL_PLAINTEXT", **more):
    return {"security.protocol": protocol, "sasl.mechanism": mechanism, **more}


# --- SASL ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_supported_mechanisms_with_username_and_password(mechanism, protocol):
    config = make(**sasl(mechanism, protocol, **{"sasl.username": "alice", "sasl.password": SECRET}))
    assert (config.security_protocol, config.sasl_mechanism) == (protocol, mechanism)
    assert SECRET not in repr(config) and config.redacted()["sasl.password"] == HIDDEN


def test_the_default_mechanism_gssapi_is_refused_clearly():
    message = error_of(**{"security.protocol": "SASL_SSL", "sasl.username": "u", "sasl.password": SECRET})
    assert message == ("sasl.mechanism=GSSAPI (Java's default) is not supported; set sasl.mechanism "
                       "to one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER")


def test_oauthbearer_refuses_another_mechanisms_login_module():
    assert error_of(**sasl("OAUTHBEARER", **{"sasl.jaas.config": PLAIN_JAAS})) == (
        "sasl.jaas.config names org.apache.kafka.common.security.plain.PlainLoginModule, but "
        "sasl.mechanism=OAUTHBEARER needs org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule")


def test_sasl_settings_are_ignored_without_a_sasl_protocol():
    assert make(**{"sasl.mechanism": "GSSAPI"}).security_protocol == "PLAINTEXT"
    assert make(**{"security.protocol": "SSL", "sasl.jaas.config": "junk"}).security_protocol == "SSL"


@pytest.mark.parametrize(("props", "missing"), [
    ({}, "sasl.username and sasl.password"),
    ({"sasl.username": "alice"}, "sasl.password"),
    ({"sasl.password": SECRET}, "sasl.username"),
    ({"sasl.username": "", "sasl.password": SECRET}, "sasl.username"),
])
def test_missing_credentials_name_the_properties(props, missing):
    message = error_of(**sasl("SCRAM-SHA-256", **props))
    assert message == (f"sasl.mechanism=SCRAM-SHA-256 needs credentials: set {missing} "
                       f"(or sasl.jaas.config)")
    assert SECRET not in message


def test_both_credential_forms_are_refused():
    message = error_of(**sasl(**{"sasl.jaas.config": PLAIN_JAAS, "sasl.password": SECRET}))
    assert message == "set either sasl.jaas.config or sasl.username/sasl.password, not both"


@pytest.mark.parametrize(("mechanism", "jaas"), [
    ("PLAIN", PLAIN_JAAS), ("SCRAM-SHA-256", SCRAM_JAAS), ("SCRAM-SHA-512", SCRAM_JAAS)])
def test_jaas_config_gives_the_credentials(mechanism, jaas):
    config = make(**sasl(mechanism, **{"sasl.jaas.config": jaas}))
    assert sasl_credentials(mechanism, None, None, config.sasl_jaas_config) == SaslCredentials(
        mechanism, "alice", SECRET)
    assert SECRET not in repr(config) and config.redacted()["sasl.jaas.config"] == HIDDEN


def test_jaas_values_may_be_escaped_or_bare_and_flags_any_case():
    login = parse_jaas_config('  a.b.C   REQUIRED\n username=bob password="x\\"y\\\\z;=" extra=1 ;  ')
    assert (login.module, login.flag) == ("a.b.C", "required")
    assert dict(login.options) == {"username": "bob", "password": 'x"y\\z;=', "extra": "1"}
    assert 'x"y' not in repr(login)


def test_a_jaas_module_that_does_not_match_the_mechanism_is_refused():
    message = error_of(**sasl("SCRAM-SHA-512", **{"sasl.jaas.config": PLAIN_JAAS}))
    assert message == ("sasl.jaas.config names org.apache.kafka.common.security.plain.PlainLoginModule, "
                       "but sasl.mechanism=SCRAM-SHA-512 needs "
                       "org.apache.kafka.common.security.scram.ScramLoginModule")


@pytest.mark.parametrize(("jaas", "expected"), [
    (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
     f'password="{SECRET}"', "must be one login module line ending in ';'"),
    (f'org.apache.kafka.common.security.plain.PlainLoginModule required password="{SECRET}',
     "cannot be parsed"),
    (f'org.apache.kafka.common.security.plain.PlainLoginModule always password="{SECRET}";', "control flag"),
    (f'org.apache.kafka.common.security.plain.PlainLoginModule required password "{SECRET}";', "name=value"),
    (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="{SECRET}"; '
     f'org.apache.kafka.common.security.plain.PlainLoginModule required;', "exactly one login module"),
    (f'org.apache.kafka.common.security.plain.PlainLoginModule required password="{SECRET}";',
     "lacks the option(s) username"),
    ('org.apache.kafka.common.security.plain.PlainLoginModule required username="alice";',
     "lacks the option(s) password"),
])
def test_bad_jaas_lines_are_named_and_never_echoed(jaas, expected):
    message = error_of(**sasl(**{"sasl.jaas.config": jaas}))
    assert message.startswith("sasl.jaas.config") and expected in message
    assert SECRET not in message and "PlainLoginModule required" not in message


# --- TLS ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("protocol", ["SSL", "SASL_SSL"])
def test_pem_trust_from_ca_location_or_a_pem_truststore(protocol):
    creds = {"sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p"}
    creds = creds if "SASL" in protocol else {}
    config = make(**{"security.protocol": protocol, "ssl.ca.location": "ca.pem", **creds})
    assert config.ssl_ca_location == "ca.pem"
    config = make(**{"security.protocol": protocol, "ssl.truststore.location": "ca.pem",
                     "ssl.truststore.type": "PEM", **creds})
    assert config.ssl_truststore_location == "ca.pem"


@pytest.mark.parametrize("store", ["JKS", "PKCS12"])
def test_jks_and_pkcs12_stores_are_refused(store):
    assert error_of(**{"security.protocol": "SSL", "ssl.truststore.location": "t.jks",
                       "ssl.truststore.type": store}) == (
        f"ssl.truststore.type={store} is not supported: only PEM trust stores are "
        f"(set ssl.truststore.type=PEM for a PEM file, or use ssl.ca.location)")
    assert error_of(**{"security.protocol": "SSL", "ssl.keystore.location": "k.p12",
                       "ssl.keystore.type": store, "ssl.keystore.password": SECRET}).startswith(
        f"ssl.keystore.type={store} is not supported: only PEM key stores are")


def test_a_truststore_location_needs_the_pem_type_which_is_not_the_default():
    assert "ssl.truststore.type=JKS is not supported" in error_of(
        **{"security.protocol": "SSL", "ssl.truststore.location": "ca.pem"})


def test_conflicting_tls_settings():
    assert error_of(**{"security.protocol": "SSL", "ssl.ca.location": "a", "ssl.truststore.location": "b",
                       "ssl.truststore.type": "PEM"}).startswith(
        "set only one of ssl.ca.location, ssl.truststore.location")
    assert error_of(**{"security.protocol": "SSL", "ssl.key.location": "k.pem"}) == (
        "ssl.key.location needs ssl.certificate.location (the client certificate)")
    assert "not supported; put the certificate and key in files" in error_of(
        **{"security.protocol": "SSL", "ssl.keystore.key": SECRET})
    assert SECRET not in error_of(**{"security.protocol": "SSL", "ssl.keystore.key": SECRET})
    assert error_of(**{"security.protocol": "SSL", "ssl.keystore.location": "k.pem",
                       "ssl.keystore.type": "PEM", "ssl.certificate.location": "c.pem"},
                    ).startswith("set either ssl.keystore.location")


def test_client_certificate_settings_with_an_encrypted_key():
    config = make(**{"security.protocol": "SSL", "ssl.certificate.location": "c.pem",
                     "ssl.key.location": "k.pem", "ssl.key.password": SECRET})
    assert config.ssl_key_location == "k.pem" and SECRET not in repr(config)
    assert config.redacted()["ssl.key.password"] == HIDDEN


@pytest.mark.parametrize(("raw", "value"), [("https", "https"), ("HTTPS", "https"), ("", ""), ("none", "")])
def test_endpoint_identification(raw, value):
    config = make(**{"ssl.endpoint.identification.algorithm": raw})
    assert config.ssl_endpoint_identification_algorithm == value


def test_security_settings_survive_a_properties_round_trip():
    config = make(**sasl("SCRAM-SHA-512", "SASL_SSL", **{"sasl.jaas.config": SCRAM_JAAS,
                                                          "ssl.ca.location": "ca.pem",
                                                          "ssl.endpoint.identification.algorithm": "none"}))
    assert ProducerConfig(config.to_properties()) == config
