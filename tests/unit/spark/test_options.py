"""SinkConfig: kafka.* passthrough, required bootstrap, refused serializers, topic, durations,
unknown options, case folding, secrets, value semantics."""

from __future__ import annotations

import pickle

import pytest

from spark_kafka_sink.config import ProducerConfig
from spark_kafka_sink.errors import ConfigError, KafkaError
from spark_kafka_sink.spark.options import (
    DEFAULT_PRODUCER_CACHE_TIMEOUT_MS,
    FormatOptions,
    SinkConfig,
    parse_duration_ms,
    topic_name_problem,
)

BOOT = {"kafka.bootstrap.servers": "localhost:9092"}
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="s3cr3t-jaas";'


def make(**options) -> SinkConfig:
    return SinkConfig.from_options({**BOOT, **options})


def error_of(options: dict) -> str:
    with pytest.raises(ConfigError) as info:
        SinkConfig.from_options(options)
    assert isinstance(info.value, KafkaError) and isinstance(info.value, ValueError)
    assert info.value.__cause__ is None
    return str(info.value)


# --- kafka.* ----------------------------------------------------------------------------------

def test_kafka_options_pass_through_with_the_prefix_stripped():
    config = SinkConfig.from_options({**BOOT, "kafka.linger.ms": "20", "kafka.acks": 1,
                                      "kafka.enable.idempotence": False, "kafka.client.id": "etl"})
    assert config.producer_config == ProducerConfig.from_properties(
        {"bootstrap.servers": "localhost:9092", "linger.ms": 20, "acks": "1",
         "enable.idempotence": "false", "client.id": "etl", "batch.size": 1 << 20})
    assert config.producer_config.linger_ms == 20 and config.producer_config.acks == 1


def test_bootstrap_servers_is_required():
    message = error_of({"topic": "events", "kafka.linger.ms": 5})
    assert "kafka.bootstrap.servers" in message and "required" in message


def test_bad_producer_value_names_the_property():
    message = error_of({**BOOT, "kafka.linger.ms": "soon"})
    assert "kafka.*" in message and "linger.ms" in message and "'soon'" in message


def test_transactional_id_is_refused_on_the_driver_tasks_would_fence_each_other():
    message = error_of({**BOOT, "kafka.transactional.id": "etl"})
    assert "'kafka.transactional.id' is not supported" in message and "fence each other" in message


# --- exactly-once -------------------------------------------------------------------------------

EOS = {"delivery.guarantee": "exactly-once", "transactional.id.prefix": "orders-etl"}


def test_exactly_once_derives_the_task_ids_the_commit_topic_and_a_10_minute_timeout():
    config = make(**EOS)
    assert config.exactly_once and config.commit_topic == "spark-kafka-sink-commits.orders-etl"
    assert config.transactional_id(7) == "orders-etl-7"
    task = config.transactional_config(7)
    assert task.transactional_id == "orders-etl-7" and task.transaction_timeout_ms == 600_000
    assert config.producer_config.transactional_id is None
    assert make(**EOS, **{"kafka.transaction.timeout.ms": 120_000}).producer_config \
        .transaction_timeout_ms == 120_000
    assert make(**EOS, **{"commit.topic": "my-commits"}).commit_topic == "my-commits"
    assert make(**{"DELIVERY.GUARANTEE": " Exactly-Once ", "transactional.id.prefix": "p"}).exactly_once
    assert pickle.loads(pickle.dumps(config)) == config
    assert "transactional.id.prefix" in repr(config) and "exactly-once" in repr(config)


def test_at_least_once_is_the_default_and_takes_no_transaction_options():
    assert make().delivery_guarantee == "at-least-once" and not make().exactly_once
    assert make().producer_config.transaction_timeout_ms == 60_000
    for option in ("transactional.id.prefix", "commit.topic"):
        message = error_of({**BOOT, option: "x"})
        assert f"option {option!r} is set but 'delivery.guarantee' is 'at-least-once'" in message


@pytest.mark.parametrize("options, expected", [
    ({"delivery.guarantee": "exactly-once"}, "needs option 'transactional.id.prefix'"),
    ({"delivery.guarantee": "exactly_once"}, "must be 'at-least-once' or 'exactly-once'"),
    ({**EOS, "transactional.id.prefix": ""}, "must not be empty"),
    ({**EOS, "transactional.id.prefix": "a b"}, "must not contain blanks"),
    ({**EOS, "transactional.id.prefix": "x" * 201}, "at most 200 characters"),
    ({**EOS, "transactional.id.prefix": "ä/ü"}, "set option 'commit.topic'"),
    ({**EOS, "commit.topic": "bad topic"}, "option 'commit.topic'"),
    ({**EOS, "kafka.enable.idempotence": "false"}, "needs idempotence"),
    ({**EOS, "kafka.acks": "1"}, "needs idempotence"),
])
def test_exactly_once_options_are_checked_on_the_driver(options, expected):
    assert expected in error_of({**BOOT, **options})


def test_batch_size_above_buffer_memory_is_refused_on_the_driver_and_zero_is_valid():
    message = error_of({**BOOT, "kafka.batch.size": 2048, "kafka.buffer.memory": 1024})
    assert "batch.size (2048)" in message and "buffer.memory (1024)" in message
    assert make(**{"kafka.batch.size": "0"}).producer_config.batch_size == 0


@pytest.mark.parametrize("option, what", [("kafka.key.serializer", "key"), ("kafka.value.serializer", "value")])
def test_serializers_are_refused_with_the_reason(option, what):
    message = error_of({**BOOT, option: "org.apache.kafka.common.serialization.StringSerializer"})
    assert option in message and "not supported" in message
    assert f"{what} column must be string" in message and "binary" in message
    assert "Serialize in the DataFrame" in message
    assert "StringSerializer" not in message  # the value is not echoed


def test_other_java_only_properties_are_refused_by_name():
    message = error_of({**BOOT, "kafka.partitioner.class": "com.example.P"})
    assert "'kafka.partitioner.class'" in message and "Java producer property" in message


def test_unknown_producer_property_suggests_the_prefixed_name():
    message = error_of({**BOOT, "kafka.lingr.ms": 5})
    assert "'kafka.lingr.ms'" in message and "did you mean 'kafka.linger.ms'?" in message


# --- names and case -----------------------------------------------------------------------------

def test_option_names_match_without_case_as_spark():
    config = SinkConfig.from_options({"KAFKA.Bootstrap.Servers": "localhost:9092", "Kafka.LINGER.ms": 7,
                                      "TOPIC": "events", "Producer.Cache.Timeout": "30s"})
    assert config == make(**{"kafka.linger.ms": 7, "topic": "events", "producer.cache.timeout": 30000})


def test_the_same_option_in_two_cases_is_an_error():
    message = error_of({**BOOT, "topic": "a", "Topic": "b"})
    assert "'topic'" in message and "'Topic'" in message and "twice" in message


def test_a_typo_is_not_ignored_and_gets_a_suggestion():
    message = error_of({**BOOT, "topik": "events"})
    assert "unknown option 'topik'" in message and "did you mean 'topic'?" in message


def test_an_unknown_option_lists_what_the_sink_takes():
    message = error_of({**BOOT, "zzzz": 1})
    assert "'zzzz'" in message and "'producer.cache.timeout'" in message and "kafka.<producer property>" in message


def test_a_producer_property_without_the_prefix_points_at_it():
    message = error_of({**BOOT, "linger.ms": 5})
    assert "did you mean 'kafka.linger.ms'?" in message


@pytest.mark.parametrize("option", ["subscribe", "startingOffsets", "failOnDataLoss", "includeHeaders"])
def test_kafka_source_options_are_named_as_such(option):
    message = error_of({**BOOT, option: "x"})
    assert f"'{option}'" in message and "source option" in message


def test_checkpoint_location_is_ignored_and_none_means_unset():
    assert make(checkpointLocation="/tmp/cp", topic=None) == make()


def test_option_names_must_be_strings():
    assert "strings" in error_of({**BOOT, 1: "x"})


# --- topic ----------------------------------------------------------------------------------------

def test_topic_is_optional_and_trimmed():
    assert make().topic is None
    assert make(topic="  events ").topic == "events"


@pytest.mark.parametrize("topic, fragment", [
    ("", "empty"), ("   ", "empty"), ("..", "'..'"), ("a" * 250, "249"), ("has space", "characters"),
    ("événements", "characters"),
])
def test_bad_topic_names_are_refused(topic, fragment):
    message = error_of({**BOOT, "topic": topic})
    assert "'topic'" in message and fragment in message


def test_topic_name_problem():
    assert topic_name_problem("events.v1_x-2") is None
    assert topic_name_problem("a" * 249) is None
    assert "string" in topic_name_problem(3)


# --- producer.cache.timeout --------------------------------------------------------------------------

def test_cache_timeout_defaults_to_ten_minutes():
    assert make().producer_cache_timeout_ms == DEFAULT_PRODUCER_CACHE_TIMEOUT_MS == 600_000


@pytest.mark.parametrize("text, ms", [
    ("10m", 600_000), ("30s", 30_000), ("1h", 3_600_000), ("500ms", 500), ("2min", 120_000),
    ("1d", 86_400_000), ("1500", 1500), (" 5S ", 5000), ("2500us", 2), ("0", 0), (1234, 1234),
])
def test_durations_parse_as_spark(text, ms):
    assert parse_duration_ms(text) == ms
    assert make(**{"producer.cache.timeout": text}).producer_cache_timeout_ms == ms


@pytest.mark.parametrize("bad, fragment", [
    ("10x", "unknown unit 'x'"), ("1.5s", "not a duration"), ("-1s", "not a duration"), ("", "not a duration"),
    ("m", "not a duration"), (-5, "negative"), (True, "bool"), (1.5, "float"),
])
def test_bad_durations_are_refused(bad, fragment):
    message = error_of({**BOOT, "producer.cache.timeout": bad})
    assert "'producer.cache.timeout'" in message and fragment in message


# --- secrets --------------------------------------------------------------------------------------

def test_secrets_never_appear_in_repr_redacted_or_errors():
    config = make(**{"kafka.sasl.jaas.config": JAAS, "kafka.ssl.truststore.password": "tr-pass"})
    for text in (repr(config), str(config), str(config.redacted())):
        assert "s3cr3t-jaas" not in text and "tr-pass" not in text
    assert config.redacted()["kafka.sasl.jaas.config"] == "[hidden]"
    assert config.producer_config.sasl_jaas_config == JAAS  # kept for the producer
    for bad in ({"kafka.linger.ms": "x"}, {"topik": "t"}, {"kafka.key.serializer": "x"}):
        message = error_of({**BOOT, "kafka.sasl.jaas.config": JAAS, **bad})
        assert "s3cr3t-jaas" not in message
    assert "s3cr3t" not in error_of({**BOOT, "kafka.sasl.jaas.config": 12345, "x": "s3cr3t"})


def test_redacted_shows_only_what_differs_from_the_defaults():
    config = make(topic="events", **{"kafka.linger.ms": 10, "producer.cache.timeout": "1m"})
    # kafka.batch.size: the sink's own choice for bulk writes (producer/batch_size.py), shown as it is used
    assert config.redacted() == {"kafka.bootstrap.servers": "localhost:9092", "kafka.linger.ms": 10,
                                 "kafka.batch.size": 1 << 20, "topic": "events",
                                 "producer.cache.timeout": "60000ms"}
    assert repr(make()) == "SinkConfig(kafka.bootstrap.servers='localhost:9092', kafka.batch.size=1048576)"



def test_a_token_endpoint_url_shows_without_its_user_info_or_query_everywhere():
    from spark_kafka_sink.spark.sink import KafkaSink

    url = "https://svc:Url-Pw-31@idp.example:8443/oauth2/token?client_secret=Q-Secret-77#frag"
    options = {**BOOT, "topic": "t", "kafka.security.protocol": "SASL_SSL",
               "kafka.sasl.mechanism": "OAUTHBEARER", "kafka.sasl.oauthbearer.method": "oidc",
               "kafka.sasl.oauthbearer.token.endpoint.url": url,
               "kafka.sasl.oauthbearer.client.id": "c", "kafka.sasl.oauthbearer.client.secret": "s"}
    config = make(**{k: v for k, v in options.items()})
    producer = config.producer_config
    shown = [repr(producer), str(producer.redacted()), repr(config), str(config.redacted()),
             repr(KafkaSink(**options))]
    for text in shown:
        assert "https://idp.example:8443/oauth2/token" in text, text
        assert "Url-Pw-31" not in text and "Q-Secret-77" not in text and "svc" not in text, text
    assert producer.sasl_oauthbearer_token_endpoint_url == url          # the value itself is whole
    bad = {**options, "kafka.sasl.oauthbearer.token.endpoint.url": "http://u:Url-Pw-31@idp.example/t?k=Q-Secret-77"}
    message = error_of(bad)
    assert "http://idp.example/t" in message and "Url-Pw-31" not in message and "Q-Secret-77" not in message

# --- batch.size ------------------------------------------------------------------------------------

@pytest.mark.parametrize("given, chosen", [
    ({}, 1 << 20),                                                   # the bulk default, 1 MiB
    ({"kafka.batch.size": "16384"}, 16384),                          # set: honoured exactly
    ({"kafka.batch.size": "0"}, 0),                                  # no batching, as asked
    ({"kafka.batch.size": "4194304", "kafka.max.request.size": "8388608"}, 4 << 20),
    ({"kafka.max.request.size": "262144"}, 256 << 10),               # capped by max.request.size
    ({"kafka.buffer.memory": "1048576"}, 256 << 10),                 # a quarter of buffer.memory
    ({"kafka.buffer.memory": "32768"}, 16384),                       # never below the plain default
])
def test_the_sink_builds_bulk_batches_unless_batch_size_is_set(given, chosen):
    assert make(**given).producer_config.batch_size == chosen


# --- mode ------------------------------------------------------------------------------------------

def test_mode_defaults_to_arrow_and_takes_rows_without_case_or_blanks():
    assert make().mode == "arrow"
    assert make(mode=" ROWS ").mode == "rows" and make(MODE="arrow").mode == "arrow"
    assert make(mode="rows").redacted()["mode"] == "rows" and "mode" not in make(mode="arrow").redacted()
    assert make(mode="rows") != make()


@pytest.mark.parametrize("bad", ["row", "pandas", "", 1])
def test_a_bad_mode_is_refused_with_the_choices(bad):
    message = error_of({**BOOT, "mode": bad})
    assert message.startswith(f"option 'mode' must be 'arrow' or 'rows' (default 'arrow'), got {bad!r}")


def test_a_mode_typo_gets_a_suggestion():
    assert "did you mean 'mode'" in error_of({**BOOT, "mdoe": "rows"})


# --- value semantics --------------------------------------------------------------------------------

def test_equal_by_value_hashable_and_picklable():
    a = make(topic="events", **{"kafka.linger.ms": "10", "producer.cache.timeout": "10m"})
    b = make(topic="events", **{"kafka.linger.ms": 10})
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != make(topic="other", **{"kafka.linger.ms": 10})
    clone = pickle.loads(pickle.dumps(a))
    assert clone == a and hash(clone) == hash(a) and clone.producer_config == a.producer_config


def test_frozen():
    config = make()
    with pytest.raises(AttributeError):
        config.topic = "x"


def test_the_constructor_validates_too():
    producer = ProducerConfig.from_properties({"bootstrap.servers": "localhost:9092"})
    assert SinkConfig(producer, "events", 5).topic == "events"
    with pytest.raises(ConfigError):
        SinkConfig(producer, "bad topic")
    with pytest.raises(ConfigError):
        SinkConfig(producer, None, -1)
    with pytest.raises(TypeError):
        SinkConfig({"bootstrap.servers": "localhost:9092"})
    with pytest.raises(ConfigError, match="option 'mode'"):
        SinkConfig(producer, None, 5, "Arrow")


def test_from_options_needs_a_mapping():
    with pytest.raises(TypeError):
        SinkConfig.from_options([("kafka.bootstrap.servers", "localhost:9092")])


OAUTH = {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "OAUTHBEARER"}


def test_a_token_function_that_cannot_reach_the_executors_is_refused_naming_the_option():
    import threading

    lock = threading.Lock()

    def locked_token(config):
        with lock:
            return "t", 0
    with pytest.raises(ConfigError) as info:
        make(**OAUTH, **{"kafka.oauth_cb": locked_token})
    assert str(info.value).startswith("option 'kafka.oauth_cb': the token function cannot be sent to "
                                      "the executors (TypeError")
    assert "'kafka.sasl.oauthbearer.token.provider' = 'module:function'" in str(info.value)


def test_a_closure_token_function_is_shipped_by_value():
    prefix = "tok"
    config = make(**OAUTH, **{"kafka.oauth_cb": lambda config: (prefix, 0)})
    assert config.producer_config.oauth_cb(None) == ("tok", 0)


# --- key.format / value.format and the schema registry ------------------------------------------

REGISTRY = {"schema.registry.url": "http://127.0.0.1:8081"}
AVRO = {"value.format": "avro", **REGISTRY}
PLAIN = {"value.format": "avro", "value.avro.framing": "none"}
RECORD = '{"type":"record","name":"User","namespace":"com.acme","fields":[{"name":"id","type":"long"}]}'


def test_formats_default_to_bytes_and_avro_is_taken_in_any_case():
    config = make()
    assert (config.key_format, config.value_format) == (FormatOptions("key"), FormatOptions("value"))
    assert config.formats == (config.key_format, config.value_format) and config.registry is None
    assert not config.value_format.avro and not config.value_format.framed
    avro = make(**{"VALUE.Format": " AVRO ", "Value.Avro.Framing": "Confluent", **REGISTRY})
    assert avro.value_format == FormatOptions("value", "avro") and avro.value_format.framed
    assert avro.key_format == FormatOptions("key")
    plain = make(**{"key.format": "Avro", "key.avro.framing": " NONE "})
    assert plain.key_format.avro and not plain.key_format.framed and plain.registry is None


@pytest.mark.parametrize("options, message", [
    ({"value.format": "json"}, "option 'value.format' must be 'bytes' or 'avro' (default 'bytes'), got 'json'"),
    ({"key.format": "protobuf"}, "option 'key.format' must be 'bytes' or 'avro' (default 'bytes'), got 'protobuf'"),
    ({"value.format": 3}, "option 'value.format' must be a string, got 3"),
    ({**AVRO, "value.avro.framing": "magic"},
     "option 'value.avro.framing' must be 'confluent' or 'none' (default 'confluent'), got 'magic'"),
    ({"key.format": "avro", "key.avro.framing": "", **REGISTRY}, "option 'key.avro.framing' must be"),
])
def test_a_bad_format_or_framing_is_refused_with_the_choices(options, message):
    assert error_of({**BOOT, **options}).startswith(message)


@pytest.mark.parametrize("option, value", [
    ("value.avro.schema", RECORD), ("value.schema.id", "5"), ("value.avro.framing", "none"),
    ("value.avro.record.name", "User"), ("value.avro.record.namespace", "com.acme"),
    ("key.avro.schema", '"string"'), ("key.schema.id", 7),
])
def test_avro_options_with_format_bytes_are_refused_naming_both(option, value):
    side = option.split(".")[0]
    message = error_of({**BOOT, option: value})
    assert message == (f"option {option!r} is set but '{side}.format' is 'bytes': set {side}.format=avro "
                       f"to write the {side} as Avro")


@pytest.mark.parametrize("given, expected", [("12", 12), (" 12 ", 12), (12, 12), ("0", 0),
                                             (2**31 - 1, 2**31 - 1), ("2147483647", 2**31 - 1)])
def test_a_schema_id_is_an_integer_given_as_text_or_int(given, expected):
    assert make(**AVRO, **{"value.schema.id": given}).value_format.schema_id == expected
    assert make(**{"key.format": "avro", "key.schema.id": given, **REGISTRY}).key_format.schema_id == expected


@pytest.mark.parametrize("given", ["x", "", "1.5", "0x10", "1e3", "1 2"])
def test_a_schema_id_that_is_no_integer_text_is_refused_naming_the_option(given):
    assert error_of({**BOOT, **AVRO, "value.schema.id": given}) == (
        f"option 'value.schema.id' must be an integer, got {given!r}")


@pytest.mark.parametrize("given", [2**31, "2147483648", -1, True, 1.0, 2.5])
def test_a_schema_id_out_of_range_or_of_another_type_is_refused_naming_the_range(given):
    shown = int(given) if isinstance(given, str) else given
    assert error_of({**BOOT, **AVRO, "value.schema.id": given}) == (
        f"option 'value.schema.id' must be an integer in [0, 2147483647], got {shown!r}")


def test_a_schema_id_of_superscript_digits_is_a_config_error_naming_the_option():
    assert error_of({**BOOT, **AVRO, "value.schema.id": "²"}) == (
        "option 'value.schema.id' must be an integer, got '²'")


def test_a_schema_id_with_a_schema_or_without_framing_is_refused():
    assert error_of({**BOOT, **AVRO, "value.schema.id": "3", "value.avro.schema": RECORD}) == (
        "set option 'value.avro.schema' or 'value.schema.id', not both: the id names a registered schema")
    assert error_of({**BOOT, "key.format": "avro", "key.schema.id": "3", "key.avro.framing": "none"}) == (
        "option 'key.schema.id' names a registered schema, but 'key.avro.framing' is 'none' (no "
        "registry): give the schema as 'key.avro.schema'")


@pytest.mark.parametrize("schema, detail", [
    ('{"type":', "the schema is not valid JSON"),
    ('{"type":"recod"}', 'unknown type "recod"'),
    ('{"type":"enum","name":"E","symbols":["A","A"]}', "enum E repeats a symbol"),
    ('["null","null"]', "a union may hold 'null' only once"),
])
def test_a_bad_avro_schema_is_refused_naming_the_option(schema, detail):
    message = error_of({**BOOT, **PLAIN, "value.avro.schema": schema})
    assert message.startswith("option 'value.avro.schema': ") and detail in message
    assert error_of({**BOOT, "key.format": "avro", "key.avro.framing": "none",
                     "key.avro.schema": schema}).startswith("option 'key.avro.schema': ")


def test_an_avro_schema_must_be_text():
    assert error_of({**BOOT, **PLAIN, "value.avro.schema": b'"string"'}) == (
        "option 'value.avro.schema' must be a JSON string, got bytes")
    assert make(**PLAIN, **{"value.avro.schema": RECORD}).value_format.avro_schema == RECORD


@pytest.mark.parametrize("name", ["", "1x", "a.b", "a-b", 5])
def test_a_record_name_must_be_one_avro_name(name):
    assert error_of({**BOOT, **PLAIN, "value.avro.record.name": name}) == (
        f"option 'value.avro.record.name' must be an Avro name (a letter or _, then letters, digits or "
        f"_), got {name!r}")


@pytest.mark.parametrize("namespace", ["a..b", ".a", "a.", "com.1acme", 7])
def test_a_record_namespace_must_be_dotted_avro_names(namespace):
    assert error_of({**BOOT, **PLAIN, "key.format": "avro", "key.avro.framing": "none",
                     "key.avro.record.namespace": namespace}) == (
        f"option 'key.avro.record.namespace' must be Avro names separated by dots (each a letter or _, "
        f"then letters, digits or _), got {namespace!r}")


def test_record_name_and_namespace_are_trimmed_and_default_to_sparks():
    config = make(**PLAIN, **{"value.avro.record.name": " _User1 ", "value.avro.record.namespace": " com.acme "})
    assert (config.value_format.record_name, config.value_format.record_namespace) == ("_User1", "com.acme")
    assert (make(**PLAIN).value_format.record_name, make(**PLAIN).value_format.record_namespace) == (
        "topLevelRecord", "")


@pytest.mark.parametrize("side", ["key", "value"])
def test_the_wire_format_needs_a_registry_url(side):
    message = error_of({**BOOT, f"{side}.format": "avro"})
    assert message.startswith(f"option '{side}.format' is 'avro' in the Confluent wire format")
    assert "needs option 'schema.registry.url'" in message
    assert f"set {side}.avro.framing=none to write plain Avro bodies" in message


@pytest.mark.parametrize("formats", [{}, PLAIN, {"key.format": "avro", "key.avro.framing": "none"}])
def test_registry_options_without_a_framed_side_are_refused(formats):
    message = error_of({**BOOT, **formats, **REGISTRY})
    assert message.startswith("option 'schema.registry.url' is set but no side is written through the "
                              "registry")


@pytest.mark.parametrize("side", ["key", "value"])
def test_a_schema_id_and_use_latest_version_are_refused_together(side):
    options = {**BOOT, **REGISTRY, f"{side}.format": "avro", f"{side}.schema.id": "3",
               "use.latest.version": "true"}
    assert error_of(options) == f"set option '{side}.schema.id' or 'use.latest.version=true', not both"
    assert make(**{**options, "use.latest.version": "false"}).registry.use_latest_version is False


def test_an_unknown_schema_registry_option_is_refused_with_the_nearest_name():
    assert error_of({**BOOT, **AVRO, "schema.registry.urll": "x"}) == (
        "unknown schema registry property 'schema.registry.urll'; did you mean 'schema.registry.url'?")
    assert "unknown schema registry property 'Schema.Registry.Timeout'" in error_of(
        {**BOOT, **AVRO, "Schema.Registry.Timeout": "1"})


def test_a_typo_of_an_unprefixed_registry_option_names_the_nearest_one():
    message = error_of({**BOOT, **AVRO, "auto.register.schema": "false"})
    assert "did you mean 'auto.register.schemas'" in message


def test_registry_options_match_without_case_and_take_confluents_unprefixed_names():
    config = make(**{"Value.Format": "avro", "SCHEMA.REGISTRY.URL": "http://127.0.0.1:8081",
                     "Basic.Auth.User.Info": "user:pw-1", "Basic.Auth.Credentials.Source": "USER_INFO",
                     "AUTO.register.schemas": "false", "Value.Subject.Name.Strategy": "RecordNameStrategy"})
    registry = config.registry
    assert registry.urls == ("http://127.0.0.1:8081",) and registry.basic_auth_user_info == "user:pw-1"
    assert registry.auto_register_schemas is False and registry.strategy(False).name == "RECORD"
    assert config == make(**AVRO, **{"schema.registry.basic.auth.user.info": "user:pw-1",
                                     "schema.registry.basic.auth.credentials.source": "USER_INFO",
                                     "auto.register.schemas": False,
                                     "value.subject.name.strategy": "RecordNameStrategy"})
    bearer = make(**AVRO, **{"bearer.auth.token": "tok-1", "bearer.auth.credentials.source": "STATIC_TOKEN"})
    assert bearer.registry.bearer_auth_token == "tok-1"
    assert "given twice" in error_of({**BOOT, **AVRO, "Schema.Registry.Url": "http://127.0.0.1:8082"})
    assert "name the same setting" in error_of({**BOOT, **AVRO, "basic.auth.user.info": "a:b",
                                                "schema.registry.basic.auth.user.info": "a:b"})


def test_a_config_with_formats_and_a_registry_pickles_hashes_and_equals_by_value():
    options = {**AVRO, "key.format": "avro", "key.avro.framing": "none", "key.avro.schema": '"string"',
               "value.schema.id": "9", "basic.auth.user.info": "u:pw-2"}
    a, b = make(**options), make(**{**options, "value.schema.id": 9})
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    clone = pickle.loads(pickle.dumps(a))
    assert clone == a and hash(clone) == hash(a)
    assert clone.registry.basic_auth_user_info == "u:pw-2" and clone.value_format.schema_id == 9
    assert a != make(**{**options, "value.schema.id": "10"})
    assert a != make(**{**options, "schema.registry.url": "http://127.0.0.1:8082"})


def test_repr_and_redacted_show_the_formats_and_registry_but_no_secret():
    config = make(**AVRO, **{"value.avro.schema": RECORD, "value.avro.record.namespace": "com.acme",
                             "key.format": "avro", "key.schema.id": "4", "basic.auth.user.info": "u:pw-3"})
    shown = config.redacted()
    assert shown["value.format"] == "avro" and shown["value.avro.schema"] == RECORD
    assert shown["value.avro.record.namespace"] == "com.acme"
    assert shown["key.format"] == "avro" and shown["key.schema.id"] == 4
    assert "value.avro.framing" not in shown and "key.avro.record.name" not in shown  # defaults
    assert shown["schema.registry.url"] == "http://127.0.0.1:8081"
    assert shown["schema.registry.basic.auth.user.info"] == "[hidden]"
    for text in (repr(config), str(config), str(shown)):
        assert "pw-3" not in text and "value.schema.id" not in text
        assert "key.schema.id=4" in text or "'key.schema.id': 4" in text
    bearer = make(**AVRO, **{"schema.registry.bearer.auth.token": "tok-secret-4",
                             "bearer.auth.credentials.source": "STATIC_TOKEN"})
    assert bearer.redacted()["schema.registry.bearer.auth.token"] == "[hidden]"
    assert "tok-secret-4" not in repr(bearer) and "schema.registry.bearer.auth.token='[hidden]'" in repr(bearer)
    assert "value.format" not in make().redacted() and "schema.registry.url" not in make().redacted()


def test_format_options_are_validated_when_built_directly():
    assert FormatOptions("value", "avro", schema_id=3).options() == {"value.format": "avro",
                                                                      "value.schema.id": 3}
    assert FormatOptions("key").options() == {}
    with pytest.raises(ValueError, match="side must be 'key' or 'value', got 'topic'"):
        FormatOptions("topic")
    with pytest.raises(ConfigError, match=r"option 'value.schema.id' must be an integer in \[0, 2147483647\], "
                                          r"got '3'"):
        FormatOptions("value", "avro", schema_id="3")
    producer = ProducerConfig.from_properties({"bootstrap.servers": "localhost:9092"})
    with pytest.raises(TypeError, match="key_format must be the FormatOptions of side 'key'"):
        SinkConfig(producer, key_format=FormatOptions("value"))
    with pytest.raises(ConfigError, match="needs option 'schema.registry.url'"):
        SinkConfig(producer, value_format=FormatOptions("value", "avro"))


def test_the_tasks_copy_carries_no_registry_settings_and_the_rest_unchanged():
    import pickle

    config = SinkConfig.from_options({"kafka.bootstrap.servers": "b:9092", "topic": "t", "value.format": "avro",
                                      "schema.registry.url": "https://r:8081",
                                      "schema.registry.basic.auth.user.info": "user:s3cret"})
    tasks = config.for_tasks()
    assert tasks.registry is None and config.registry is not None
    assert (tasks.producer_config, tasks.topic, tasks.value_format) == \
        (config.producer_config, config.topic, config.value_format)
    shipped = pickle.dumps(tasks)
    assert b"s3cret" not in shipped and b"r:8081" not in shipped
    assert pickle.loads(shipped).value_format.framed
    plain = SinkConfig.from_options({"kafka.bootstrap.servers": "b:9092", "topic": "t"})
    assert plain.for_tasks() is plain
