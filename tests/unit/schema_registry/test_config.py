"""RegistryConfig: Confluent's names (and their unprefixed forms), defaults, the rules between
settings, and secrets kept out of every repr, view and error."""

from __future__ import annotations

import pickle

import pytest

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.schema_registry import RegistryConfig, SubjectNameStrategy

URL = "http://127.0.0.1:8081"
USER_INFO = "alice:pa55-Zq81-hidden"
TOKEN = "tok-9f3e-hidden-token"
KEY_PASSWORD = "key-pa55-hidden-77"
PROVIDER_CONFIG = "client_secret=cs-hidden-4411"
SECRETS = (USER_INFO, "pa55-Zq81-hidden", TOKEN, KEY_PASSWORD, PROVIDER_CONFIG, "cs-hidden-4411")


def config(**more):
    return RegistryConfig({"schema.registry.url": URL, **{k.replace("_", "."): v for k, v in more.items()}})


def test_defaults_are_confluents():
    c = RegistryConfig({"schema.registry.url": URL})
    assert c.urls == (URL,)
    assert (c.auto_register_schemas, c.use_latest_version, c.normalize_schemas) == (True, False, False)
    assert c.strategy(is_key=True) is c.strategy(is_key=False) is SubjectNameStrategy.TOPIC
    assert c.request_timeout_ms == 30_000 and c.ssl_endpoint_identification_algorithm == "https"
    assert c.basic_auth_user_info is None and c.bearer_auth_token is None
    assert c.redacted() == {"schema.registry.url": URL}


def test_urls_are_a_comma_list_or_a_list_kept_in_order_with_their_paths():
    c = RegistryConfig({"schema.registry.url": " https://sr1:8081/ , HTTP://sr2/apis/ccompat/v7/"})
    assert c.urls == ("https://sr1:8081", "http://sr2/apis/ccompat/v7")
    assert RegistryConfig({"schema.registry.url": ["http://a", "http://b:1"]}).urls == ("http://a", "http://b:1")


@pytest.mark.parametrize("url, fragment", [
    ([], "schema.registry.url must be one URL or several"),
    ("", "none of them empty"),
    ("ftp://sr", "http:// or https:// URLs with a host"),
    ("sr:8081", "http:// or https:// URLs with a host"),
    ("http://a,,http://b", "none of them empty"),
    ("http://a:99999", "port in [1, 65535]"),
    ("http://a?x=1", "without a query"),
    ("http://a,http://a/", "listed twice"),
])
def test_bad_urls_are_refused_naming_the_setting(url, fragment):
    with pytest.raises(ConfigError, match="schema.registry.url") as info:
        RegistryConfig({"schema.registry.url": url})
    assert fragment in str(info.value)


def test_the_url_is_required():
    with pytest.raises(ConfigError, match="schema.registry.url is required"):
        RegistryConfig({"auto.register.schemas": "false"})


@pytest.mark.parametrize("url", ["http://alice:pa55-Zq81-hidden@sr:8081", ["https://alice:pa55-Zq81-hidden@sr"]])
def test_credentials_in_a_url_are_refused_without_showing_them(url):
    with pytest.raises(ConfigError, match="basic.auth.user.info") as info:
        RegistryConfig({"schema.registry.url": url})
    assert "pa55" not in str(info.value) and "alice" not in str(info.value)


def test_names_match_without_case_and_confluents_unprefixed_names_are_taken():
    c = RegistryConfig({"Schema.Registry.URL": URL, "BASIC.AUTH.USER.INFO": USER_INFO,
                        "basic.auth.credentials.source": "user_info", "AUTO.REGISTER.SCHEMAS": "FALSE",
                        "normalize.schemas": True, "key.subject.name.strategy": "recordnamestrategy",
                        "value.subject.name.strategy":
                            "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
                        "schema.registry.request.timeout.ms": "1500"})
    assert c.basic_auth_user_info == USER_INFO and c.basic_auth_credentials_source == "USER_INFO"
    assert not c.auto_register_schemas and c.normalize_schemas and c.request_timeout_ms == 1500
    assert c.strategy(is_key=True) is SubjectNameStrategy.RECORD
    assert c.strategy(is_key=False) is SubjectNameStrategy.TOPIC_RECORD
    assert c.is_set("basic.auth.user.info") and c.is_set("schema.registry.basic.auth.user.info")
    assert not c.is_set("use.latest.version")


def test_a_setting_given_under_two_names_is_refused():
    with pytest.raises(ConfigError, match="bearer.auth.token and schema.registry.bearer.auth.token"):
        config(**{"bearer.auth.token": TOKEN, "schema.registry.bearer.auth.token": TOKEN})


def test_unknown_names_are_refused_with_the_nearest_one():
    with pytest.raises(ConfigError, match="'schema.registry.basic.auth.userinfo'.*did you mean "
                                          "'schema.registry.basic.auth.user.info'"):
        config(**{"schema.registry.basic.auth.userinfo": USER_INFO})
    with pytest.raises(ConfigError, match="unknown schema registry property 'linger.ms'"):
        config(**{"linger.ms": 5})


def test_from_options_picks_the_registry_settings_out_of_the_sinks_options():
    c = RegistryConfig.from_options({"kafka.bootstrap.servers": "b:9092", "topic": "t",
                                     "schema.registry.url": URL, "use.latest.version": "true",
                                     "value.format": "avro", "key.subject.name.strategy": None})
    assert c.urls == (URL,) and c.use_latest_version
    with pytest.raises(ConfigError, match="unknown schema registry property 'schema.registry.urls'"):
        RegistryConfig.from_options({"schema.registry.url": URL, "schema.registry.urls": URL})


@pytest.mark.parametrize("name, value, fragment", [
    ("auto.register.schemas", "yes", "true or false"),
    ("schema.registry.request.timeout.ms", "0", "[1, 2147483647]"),
    ("schema.registry.request.timeout.ms", True, "[1, 2147483647]"),
    ("value.subject.name.strategy", "TopicStrategy", "TopicNameStrategy, RecordNameStrategy"),
    ("schema.registry.ssl.endpoint.identification.algorithm", "dns", "https or ''"),
    ("schema.registry.bearer.auth.token.provider", "not a path", "module:function"),
])
def test_bad_values_are_refused_naming_the_setting_and_what_it_takes(name, value, fragment):
    with pytest.raises(ConfigError, match=f"^{name} must be") as info:
        config(**{name: value})
    assert fragment in str(info.value)


@pytest.mark.parametrize("settings, fragment", [
    ({"basic.auth.credentials.source": "URL"}, "basic.auth.credentials.source=URL is not supported: only USER_INFO"),
    ({"basic.auth.credentials.source": "SASL_INHERIT", "basic.auth.user.info": USER_INFO},
     "SASL_INHERIT is not supported"),
    ({"basic.auth.credentials.source": "USER_INFO"}, "needs schema.registry.basic.auth.user.info"),
    ({"basic.auth.user.info": "alice"}, "must be user:password"),
    ({"bearer.auth.credentials.source": "OAUTHBEARER"}, "bearer.auth.credentials.source=OAUTHBEARER is not supported"),
    ({"bearer.auth.credentials.source": "STATIC_TOKEN"}, "needs schema.registry.bearer.auth.token"),
    ({"bearer.auth.token": TOKEN, "schema.registry.bearer.auth.token.provider": "m:f"}, "not both"),
    ({"basic.auth.user.info": USER_INFO, "bearer.auth.token": TOKEN}, "either basic auth"),
    ({"schema.registry.bearer.auth.config": PROVIDER_CONFIG}, "token.provider, which is not set"),
    ({"bearer.auth.logical.cluster": "lsrc-1"}, "goes with a bearer token"),
    ({"schema.registry.ssl.ca.location": "/ca.pem"}, "no schema.registry.url is https://"),
])
def test_the_rules_between_settings(settings, fragment):
    with pytest.raises(ConfigError) as info:
        config(**settings)
    assert fragment in str(info.value)
    assert not any(secret in str(info.value) for secret in SECRETS)


def test_a_client_key_needs_its_certificate():
    https = {"schema.registry.url": "https://sr"}
    for name in ("schema.registry.ssl.key.location", "schema.registry.ssl.key.password"):
        with pytest.raises(ConfigError, match=f"{name} needs schema.registry.ssl.certificate.location"):
            RegistryConfig({**https, name: "x"})
    both = RegistryConfig({**https, "schema.registry.ssl.certificate.location": "c.pem",
                           "schema.registry.ssl.key.location": "k.pem",
                           "schema.registry.ssl.key.password": KEY_PASSWORD})
    assert both.ssl_key_password == KEY_PASSWORD


def test_use_latest_version_registers_nothing():
    assert not config(**{"use.latest.version": "true"}).auto_register_schemas
    with pytest.raises(ConfigError, match="set auto.register.schemas=false, or leave it unset"):
        config(**{"use.latest.version": "true", "auto.register.schemas": "true"})
    assert not config(**{"use.latest.version": "true", "auto.register.schemas": "false"}).auto_register_schemas


def provider(config_string):
    return "t", 0


def test_a_token_provider_is_an_import_path_or_the_function():
    assert config(**{"schema.registry.bearer.auth.token.provider": " pkg.mod:make_token "}
                  ).bearer_auth_token_provider == "pkg.mod:make_token"
    c = config(**{"schema.registry.bearer.auth.token.provider": provider,
                  "schema.registry.bearer.auth.config": PROVIDER_CONFIG,
                  "bearer.auth.logical.cluster": "lsrc-1", "bearer.auth.identity.pool.id": "pool-2"})
    assert c.bearer_auth_token_provider is provider and c.bearer_auth_logical_cluster == "lsrc-1"
    assert pickle.loads(pickle.dumps(c)) == c


def every_secret() -> RegistryConfig:
    return RegistryConfig({"schema.registry.url": "https://sr1:8081,https://sr2",
                           "schema.registry.basic.auth.user.info": USER_INFO,
                           "schema.registry.ssl.certificate.location": "c.pem",
                           "schema.registry.ssl.key.location": "k.pem",
                           "schema.registry.ssl.key.password": KEY_PASSWORD})


def test_secrets_never_show_in_repr_str_or_the_redacted_view():
    shown = [repr(every_secret()), str(every_secret()), repr(every_secret().redacted()),
             repr(config(**{"bearer.auth.token": TOKEN})),
             repr(config(**{"schema.registry.bearer.auth.token.provider": "m:f",
                            "schema.registry.bearer.auth.config": PROVIDER_CONFIG}))]
    for text in shown:
        assert not any(secret in text for secret in SECRETS), text
    assert every_secret().redacted()["schema.registry.basic.auth.user.info"] == "[hidden]"
    assert "schema.registry.ssl.key.password='[hidden]'" in repr(every_secret())


def test_a_bad_secret_value_is_refused_without_showing_it():
    for name in ("schema.registry.basic.auth.user.info", "bearer.auth.token", "schema.registry.ssl.key.password"):
        with pytest.raises(ConfigError, match=f"{name} must be a non-empty string, got") as info:
            RegistryConfig({"schema.registry.url": "https://sr", "schema.registry.ssl.certificate.location": "c",
                            name: ""})
        assert "got ''" not in str(info.value)


def test_the_config_is_a_value_that_reads_back():
    c = every_secret()
    assert c == RegistryConfig(c.to_properties()) and hash(c) == hash(RegistryConfig(c.to_properties()))
    assert pickle.loads(pickle.dumps(c)) == c
    with pytest.raises(AttributeError):
        c.urls = ()
