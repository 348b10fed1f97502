"""ProducerConfig: Kafka 4 defaults, parsing, ranges, the Java producer's cross-property rules,
unknown keys, secret redaction, value semantics."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from spark_kafka_sink.config import (
    HIDDEN,
    INT_MAX,
    LONG_MAX,
    PROPERTIES,
    ConfigKey,
    HostPort,
    ProducerConfig,
)
from spark_kafka_sink.errors import ConfigError, KafkaError
from spark_kafka_sink.record.codecs import CompressionType, codec_for

BOOT = {"bootstrap.servers": "localhost:9092"}


def make(**props) -> ProducerConfig:
    """A config from Java names given as keyword pairs: make(**{"linger.ms": 1})."""
    return ProducerConfig({**BOOT, **props})


def error_of(props: dict) -> str:
    with pytest.raises(ConfigError) as info:
        ProducerConfig({**BOOT, **props})
    assert info.value.__cause__ is None and info.value.__context__ is None  # nothing chained
    return str(info.value)


# --- the table and its defaults -----------------------------------------------------------------

# Read from Apache Kafka's ProducerConfig.java, CommonClientConfigs.java, SslConfigs and SaslConfigs.
KAFKA_4_DEFAULTS = {
    "client.id": "", "acks": "all", "linger.ms": 5, "batch.size": 16384, "buffer.memory": 33554432,
    "max.block.ms": 60000, "max.request.size": 1048576, "compression.type": "none",
    "compression.gzip.level": -1, "compression.lz4.level": 9, "compression.zstd.level": 3,
    "retries": 2147483647, "retry.backoff.ms": 100, "retry.backoff.max.ms": 1000,
    "delivery.timeout.ms": 120000, "request.timeout.ms": 30000, "max.in.flight.requests.per.connection": 5,
    "enable.idempotence": True, "partitioner.ignore.keys": False,
    "partitioner.adaptive.partitioning.enable": True, "partitioner.availability.timeout.ms": 0,
    "metadata.max.age.ms": 300000, "metadata.max.idle.ms": 300000, "connections.max.idle.ms": 540000,
    "metadata.recovery.strategy": "rebootstrap", "metadata.recovery.rebootstrap.trigger.ms": 300000,
    "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 1000, "socket.connection.setup.timeout.ms": 10000,
    "socket.connection.setup.timeout.max.ms": 30000, "send.buffer.bytes": 131072,
    "receive.buffer.bytes": 32768, "transactional.id": None, "transaction.timeout.ms": 60000,
    "security.protocol": "PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.jaas.config": None,
    "sasl.username": None, "sasl.password": None, "ssl.truststore.type": "JKS",
    "ssl.truststore.location": None, "ssl.truststore.password": None, "ssl.truststore.certificates": None,
    "ssl.keystore.type": "JKS", "ssl.keystore.location": None, "ssl.keystore.password": None,
    "ssl.keystore.key": None, "ssl.keystore.certificate.chain": None, "ssl.key.password": None,
    "ssl.endpoint.identification.algorithm": "https",
    "ssl.ca.location": None, "ssl.certificate.location": None, "ssl.key.location": None,
    "https.ca.location": None, "https.ca.pem": None,     # the OIDC token endpoint's CAs (librdkafka)
    # OAUTHBEARER: librdkafka's names and defaults (Java configures these through JAAS)
    "sasl.oauthbearer.method": "default", "sasl.oauthbearer.config": None, "oauth_cb": None,
    "sasl.oauthbearer.token.provider": None, "enable.sasl.oauthbearer.unsecure.jwt": False,
    "sasl.oauthbearer.token.endpoint.url": None, "sasl.oauthbearer.client.id": None,
    "sasl.oauthbearer.client.secret": None, "sasl.oauthbearer.scope": None,
    "sasl.oauthbearer.extensions": None,
}


def test_defaults_are_kafka_4s():
    props = make().to_properties()
    assert props == {"bootstrap.servers": "localhost:9092", **KAFKA_4_DEFAULTS}


def test_default_attributes_are_typed():
    config = make()
    assert config.bootstrap_servers == (HostPort("localhost", 9092),)
    assert config.acks == -1 and config.linger_ms == 5 and config.batch_size == 16384
    assert config.compression_type is CompressionType.NONE
    assert config.enable_idempotence is True and config.transactional_id is None


@pytest.mark.parametrize("key", PROPERTIES.values(), ids=lambda key: key.name)
def test_table_entries_are_consistent(key: ConfigKey):
    assert key.doc and key.attr == key.name.replace(".", "_")
    assert hasattr(make(), key.attr)
    if key.name != "bootstrap.servers":
        assert key.parse(key.render(key.default)) == key.default


def test_bootstrap_servers_is_required():
    with pytest.raises(ConfigError, match="bootstrap.servers is required"):
        ProducerConfig({"linger.ms": 1})


def test_config_error_is_a_kafka_error_and_a_value_error():
    assert issubclass(ConfigError, KafkaError) and issubclass(ConfigError, ValueError)


# --- parsing ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "raw", "value"), [
    ("batch.size", "16384", 16384), ("linger.ms", " 10 ", 10), ("linger.ms", "+7", 7),
    ("send.buffer.bytes", "-1", -1), ("buffer.memory", 1 << 40, 1 << 40),
    ("enable.idempotence", "TRUE", True), ("enable.idempotence", " false ", False),
    ("partitioner.ignore.keys", True, True), ("partitioner.ignore.keys", "True", True),
    ("client.id", "etl-job", "etl-job"), ("security.protocol", "plaintext", "PLAINTEXT"),
    ("compression.type", "LZ4", CompressionType.LZ4), ("compression.type", CompressionType.ZSTD, CompressionType.ZSTD),
    ("sasl.mechanism", "scram-sha-512", "SCRAM-SHA-512"), ("ssl.keystore.type", "pem", "PEM"),
    ("ssl.endpoint.identification.algorithm", "", ""),
])
def test_values_parse_from_strings_and_python_values(name, raw, value):
    got = getattr(make(**{name: raw}), PROPERTIES[name].attr)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(("name", "raw"), [
    ("batch.size", True), ("batch.size", False), ("linger.ms", 1.0), ("linger.ms", "1.5"), ("linger.ms", "1e3"),
    ("linger.ms", "ten"), ("linger.ms", ""), ("linger.ms", None), ("retries", "1_000"), ("batch.size", "٣"),
    ("enable.idempotence", 1), ("enable.idempotence", 0), ("enable.idempotence", "yes"),
    ("enable.idempotence", "1"), ("enable.idempotence", None), ("client.id", 5), ("client.id", None),
    ("transactional.id", ""), ("compression.type", 3), ("compression.type", "brotli"),
])
def test_wrong_types_are_refused_and_named(name, raw):
    message = error_of({name: raw})
    assert message.startswith(f"{name} must be ") and repr(raw) in message


# --- ranges, from the table ---------------------------------------------------------------------

RANGED = [key for key in PROPERTIES.values() if key.minimum is not None]
# Neutralise the cross-property rules so that only the range is under test.
NEUTRAL = {"enable.idempotence": False, "linger.ms": 0, "request.timeout.ms": 0}


def _with(key: ConfigKey, value) -> dict:
    return {**BOOT, **NEUTRAL, key.name: value}


def test_ranged_keys_cover_every_integer_property():
    integers = [key for key in PROPERTIES.values()
                if type(key.default) is int and key.name != "acks"]  # acks is a choice of -1, 0, 1
    assert RANGED == integers and len(RANGED) == 26


@pytest.mark.parametrize("key", RANGED, ids=lambda key: key.name)
def test_range_boundaries_are_accepted(key: ConfigKey):
    # batch.size must fit buffer.memory: each boundary is tried with the other key out of the way
    partner = {"batch.size": {"buffer.memory": PROPERTIES["buffer.memory"].maximum},
               "buffer.memory": {"batch.size": 0}}.get(key.name, {})
    for value in (key.minimum, key.maximum, str(key.minimum), str(key.maximum)):
        assert getattr(ProducerConfig({**_with(key, value), **partner}), key.attr) == int(value)


def test_batch_size_above_buffer_memory_is_refused_naming_both():
    with pytest.raises(ConfigError, match=r"batch\.size \(65536\) must not be larger than "
                                          r"buffer\.memory \(65535\)"):
        ProducerConfig({**BOOT, "batch.size": 65536, "buffer.memory": 65535})
    assert ProducerConfig({**BOOT, "batch.size": 65536, "buffer.memory": 65536}).batch_size == 65536


def test_batch_size_zero_is_valid_as_in_java():
    assert ProducerConfig({**BOOT, "batch.size": 0}).batch_size == 0


def test_a_transactional_id_keeps_idempotence_on():
    config = ProducerConfig({**BOOT, "transactional.id": "etl-1", "transaction.timeout.ms": 90_000})
    assert config.transactional_id == "etl-1" and config.enable_idempotence
    assert config.transaction_timeout_ms == 90_000


@pytest.mark.parametrize("extra, why", [
    ({"enable.idempotence": "false"}, r"\(enable\.idempotence=false\)"),
    ({"acks": "1"}, r"\(acks=1, retries=2147483647 turned it off\)"),
    ({"retries": 0}, r"\(acks=-1, retries=0 turned it off\)"),
])
def test_a_transactional_id_without_idempotence_is_refused_as_in_java(extra, why):
    with pytest.raises(ConfigError, match=r"transactional\.id='etl-1' needs idempotence " + why):
        ProducerConfig({**BOOT, "transactional.id": "etl-1", **extra})


@pytest.mark.parametrize("key", RANGED, ids=lambda key: key.name)
def test_one_past_each_boundary_is_refused_with_the_range(key: ConfigKey):
    for value in (key.minimum - 1, key.maximum + 1):
        if value == key.default:  # gzip's -1: the library default, accepted below its range
            continue
        with pytest.raises(ConfigError) as info:
            ProducerConfig(_with(key, value))
        message = str(info.value)
        assert message == (f"{key.name} must be {key.expected}, got {value!r}")
        assert f"[{key.minimum}, {key.maximum}]" in message


def test_range_message_reads_as_documented():
    assert error_of({"batch.size": -1}) == "batch.size must be an integer in [0, 2147483647], got -1"
    assert error_of({"linger.ms": "-1"}) == f"linger.ms must be an integer in [0, {LONG_MAX}], got '-1'"


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD])
def test_compression_levels_use_the_codecs_range(codec):
    name, impl = f"compression.{codec.java_name}.level", codec_for(codec)
    key = PROPERTIES[name]
    assert (key.minimum, key.maximum, key.default) == (impl.min_level, impl.max_level, impl.default_level)
    assert getattr(make(**{name: str(impl.max_level)}), key.attr) == impl.max_level
    assert f"[{impl.min_level}, {impl.max_level}]" in error_of({name: impl.max_level + 1})
    assert getattr(make(**{name: impl.default_level}), key.attr) == impl.default_level
    error_of({name: True})


def test_gzip_level_takes_minus_one_as_java_does():
    assert make(**{"compression.gzip.level": "-1"}).compression_gzip_level == -1
    assert "or -1" in error_of({"compression.gzip.level": 0})


# --- acks ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "acks"), [
    ("all", -1), ("ALL", -1), (" all ", -1), ("-1", -1), (-1, -1), ("0", 0), (0, 0), ("1", 1), (1, 1),
])
def test_acks_is_normalised_to_an_int(raw, acks):
    config = ProducerConfig({**BOOT, "acks": raw, "enable.idempotence": "false"})
    assert config.acks == acks and type(config.acks) is int
    assert config.to_properties()["acks"] == ("all" if acks == -1 else str(acks))


@pytest.mark.parametrize("raw", [2, "2", -2, True, "none", 1.0, None])
def test_bad_acks_lists_the_allowed_values(raw):
    assert error_of({"acks": raw}) == f"acks must be one of all, -1, 0, 1, got {raw!r}"


# --- the Java producer's cross-property rules ---------------------------------------------------

@pytest.mark.parametrize("conflict", [{"acks": "1"}, {"acks": 0}, {"retries": "0"}])
def test_a_conflict_turns_default_idempotence_off_quietly(conflict):
    assert make(**conflict).enable_idempotence is False


@pytest.mark.parametrize(("conflict", "says"), [
    ({"acks": "1"}, "acks must be all, got 1"), ({"acks": "0"}, "acks must be all, got 0"),
    ({"retries": 0}, "retries must be greater than 0, got 0"),
])
def test_a_conflict_with_explicit_idempotence_raises(conflict, says):
    message = error_of({"enable.idempotence": "true", **conflict})
    assert message == f"with enable.idempotence=true, {says}"


def test_explicitly_disabled_idempotence_allows_everything():
    config = make(**{"enable.idempotence": False, "acks": 1, "retries": 0,
                     "max.in.flight.requests.per.connection": 50})
    assert (config.enable_idempotence, config.acks, config.max_in_flight_requests_per_connection) == (False, 1, 50)


@pytest.mark.parametrize("props", [
    {}, {"enable.idempotence": True}, {"acks": "1"},  # acks=1 turns idempotence off, yet Kafka 4 still raises
])
def test_more_than_five_in_flight_with_idempotence_raises_even_by_default(props):
    message = error_of({**props, "max.in.flight.requests.per.connection": 6})
    assert "max.in.flight.requests.per.connection must be at most 5, got 6" in message
    assert "enable.idempotence=false" in message
    assert make(**{**props, "max.in.flight.requests.per.connection": 5}).max_in_flight_requests_per_connection == 5


def test_delivery_timeout_is_raised_to_linger_plus_request_timeout_when_not_set():
    assert make(**{"request.timeout.ms": 200000}).delivery_timeout_ms == 200005
    assert make(**{"linger.ms": 100000}).delivery_timeout_ms == 130000
    assert make(**{"linger.ms": LONG_MAX}).delivery_timeout_ms == INT_MAX  # Java caps at Integer.MAX_VALUE


def test_delivery_timeout_set_too_small_raises():
    assert error_of({"delivery.timeout.ms": 30004}) == (
        "delivery.timeout.ms must be at least linger.ms + request.timeout.ms = 30005, got 30004")
    assert make(**{"delivery.timeout.ms": 30005}).delivery_timeout_ms == 30005


def test_reconnect_backoff_alone_disables_exponential_backoff():
    assert make(**{"reconnect.backoff.ms": 200}).reconnect_backoff_max_ms == 200
    both = make(**{"reconnect.backoff.ms": 200, "reconnect.backoff.max.ms": 5000})
    assert both.reconnect_backoff_max_ms == 5000


@pytest.mark.parametrize(("raw", "shown"), [
    ("SSL", "SSL"), ("sasl_ssl", "SASL_SSL"), ("SASL_PLAINTEXT", "SASL_PLAINTEXT"),
])
def test_every_security_protocol_is_accepted(raw, shown):
    # the security rules themselves: tests/unit/test_config_security.py
    sasl = {"sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p"} if "SASL" in shown else {}
    assert make(**{"security.protocol": raw, **sasl}).security_protocol == shown


def test_a_misspelt_security_protocol_lists_the_valid_ones():
    assert error_of({"security.protocol": "TLS"}) == (
        "security.protocol must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, got 'TLS'")


# --- unknown keys -------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "suggested"), [
    ("linger.msec", "linger.ms"), ("lingerms", "linger.ms"), ("batch_size", "batch.size"),
    ("kafka.linger.ms", "linger.ms"), ("kafka.bootstrap.servers", "bootstrap.servers"),
    ("compression.codec", "compression.type"), ("enable.idempotency", "enable.idempotence"),
])
def test_unknown_keys_suggest_the_nearest(name, suggested):
    message = error_of({name: "1"})
    assert message.startswith(f"unknown producer property {name!r}; did you mean ")
    assert repr(suggested) in message


def test_unknown_key_without_a_near_name():
    assert error_of({"zzz": 1}) == "unknown producer property 'zzz'"


def test_unknown_keyword_suggests_attribute_names():
    with pytest.raises(ConfigError, match="did you mean 'linger_ms'"):
        ProducerConfig(bootstrap_servers="h:1", linger_msec=1)


def test_java_only_properties_are_refused_by_name():
    assert "does not support" in error_of({"key.serializer": "org.apache.kafka.StringSerializer"})


def test_property_names_must_be_strings():
    assert error_of({3: "x"}) == "property names must be strings, got int"


# --- bootstrap.servers --------------------------------------------------------------------------

@pytest.mark.parametrize("raw", [
    "a:1,b.example.com:9092,[::1]:9093", " a:1 , b.example.com:9092 ,[::1]:9093",
    ["a:1", "b.example.com:9092", "[::1]:9093"], ("a:1", HostPort("b.example.com", 9092), "[::1]:9093"),
])
def test_bootstrap_servers_forms(raw):
    config = ProducerConfig({"bootstrap.servers": raw})
    assert config.bootstrap_servers == (HostPort("a", 1), HostPort("b.example.com", 9092), HostPort("::1", 9093))
    assert config.to_properties()["bootstrap.servers"] == "a:1,b.example.com:9092,[::1]:9093"


@pytest.mark.parametrize(("raw", "says"), [
    ("localhost", "entry 'localhost' is not host:port"),
    ("a:1,host:abc", "entry 'host:abc' is not host:port"),
    ("::1:9092", "write IPv6 addresses in brackets"),
    ("[zz::x]:1", "'zz::x' in brackets, which is not an IPv6 address"),
    ("a:1,h:70000", "entry 'h:70000' has port 70000, outside [1, 65535]"),
    ("h:0", "has port 0"),
    ("a:1,a:1", "entry 'a:1' is listed twice"),
    ("a:1,", "entry '' is not host:port"),
    (["a:1", 7], "entry 7 is not host:port"),
])
def test_bootstrap_errors_name_the_bad_entry(raw, says):
    message = error_of({"bootstrap.servers": raw})
    assert message.startswith("bootstrap.servers must be a non-empty list of host:port, got ")
    assert says in message


@pytest.mark.parametrize("raw", ["", [], None, 9092])
def test_empty_or_non_list_bootstrap_is_refused(raw):
    assert "bootstrap.servers must be a non-empty list of host:port" in error_of({"bootstrap.servers": raw})


def test_host_port_str_brackets_ipv6():
    assert (str(HostPort("::1", 9)), str(HostPort("h", 9))) == ("[::1]:9", "h:9")


# --- secrets ------------------------------------------------------------------------------------

SECRET_KEYS = [key.name for key in PROPERTIES.values() if key.secret]


def test_secret_keys():
    assert set(SECRET_KEYS) == {
        "sasl.jaas.config", "sasl.password", "ssl.truststore.password", "ssl.truststore.certificates",
        "ssl.keystore.password", "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.key.password",
        "sasl.oauthbearer.config", "sasl.oauthbearer.client.secret", "https.ca.pem"}


@pytest.mark.parametrize("name", SECRET_KEYS)
def test_secrets_never_show_in_repr_str_or_redacted_views(name):
    secret = f"S3cr3t-{name}"
    config = make(**{name: secret, "sasl.username": "alice"})
    for text in (repr(config), str(config), str(config.redacted()), str(config.to_properties(redact=True))):
        assert secret not in text
    assert f"{name}={HIDDEN}" in repr(config) and "sasl.username='alice'" in repr(config)
    assert config.redacted()[name] == HIDDEN
    assert config.to_properties()[name] == secret == getattr(config, PROPERTIES[name].attr)


@pytest.mark.parametrize("name", SECRET_KEYS)
def test_secrets_never_show_in_errors(name):
    secret = "S3cr3t-value"
    bad_type = error_of({name: secret.encode()})  # bytes: the wrong type for the secret itself
    assert f"{name} must be a string or None, got {HIDDEN}" == bad_type
    others = [
        {name: secret, "linger.ms": -1},  # another key is bad
        {name: secret, "security.protocol": "SASL_SSL"},  # a rule fails
        {name: secret, "enable.idempotence": True, "acks": 1},
        {name.replace("s", "z", 1): secret},  # the secret under a misspelt key
    ]
    for props in others:
        assert secret not in error_of(props)


def test_unknown_key_errors_never_show_the_value():
    message = error_of({"sasl.pasword": "hunter2"})
    assert "hunter2" not in message and "'sasl.password'" in message


# --- value semantics ----------------------------------------------------------------------------

def test_equal_settings_are_equal_and_hash_alike_whatever_their_form():
    a = ProducerConfig({"bootstrap.servers": "h:1,h:2", "linger.ms": "10", "acks": "all", "compression.type": "lz4"})
    b = ProducerConfig({"bootstrap.servers": ["h:1", "h:2"], "linger.ms": 10, "acks": -1,
                        "compression.type": CompressionType.LZ4})
    c = ProducerConfig(bootstrap_servers="h:1,h:2", linger_ms=10, compression_type="LZ4")
    assert a == b == c and hash(a) == hash(b) == hash(c)
    pool = {a: "producer"}
    assert pool[b] == "producer"
    assert a != a.with_overrides(linger_ms=11)


def test_configs_are_frozen():
    config = make()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.linger_ms = 1  # type: ignore[misc]


def test_configs_pickle_to_equal_values():
    config = make(**{"linger.ms": 20, "sasl.password": "pw", "acks": "1"})
    copy = pickle.loads(pickle.dumps(config))
    assert copy == config and hash(copy) == hash(config)
    assert copy.with_overrides(acks="all").enable_idempotence is True  # what was set survives


def test_to_properties_reads_back_to_an_equal_config():
    config = make(**{"acks": "1", "request.timeout.ms": 200000, "compression.type": "zstd",
                     "compression.zstd.level": -5, "reconnect.backoff.ms": 10, "transaction.timeout.ms": 5})
    props = config.to_properties()
    assert list(props) == list(PROPERTIES)
    assert ProducerConfig.from_properties(props) == config


def test_coerce_passes_configs_through_and_reads_mappings():
    config = make()
    assert ProducerConfig.coerce(config) is config
    assert ProducerConfig.coerce(dict(BOOT)) == config
    with pytest.raises(TypeError):
        ProducerConfig.coerce("localhost:9092")  # type: ignore[arg-type]


# --- with_overrides -----------------------------------------------------------------------------

def test_with_overrides_returns_a_new_config():
    config = make(**{"linger.ms": 10})
    changed = config.with_overrides({"batch.size": "1000"}, acks=1)
    assert (config.batch_size, config.acks, config.linger_ms) == (16384, -1, 10)
    assert (changed.batch_size, changed.acks, changed.linger_ms) == (1000, 1, 10)
    assert config.with_overrides(**{"batch.size": 7}).batch_size == 7  # Java names through **
    assert config.with_overrides() == config


def test_with_overrides_derives_values_again():
    off = make(acks="1")
    assert off.enable_idempotence is False
    assert off.with_overrides(acks="all").enable_idempotence is True
    slow = make(**{"request.timeout.ms": 200000})
    assert slow.with_overrides(request_timeout_ms=1000).delivery_timeout_ms == 120000


def test_with_overrides_validates():
    with pytest.raises(ConfigError, match="unknown producer property 'linger.msec'"):
        make().with_overrides({"linger.msec": 1})
    with pytest.raises(ConfigError, match="with enable.idempotence=true, acks must be all"):
        make(**{"enable.idempotence": "true"}).with_overrides(acks=0)
