"""Avro through the Schema Registry (``value.format=avro``), with real Spark, the embedded Apache
Kafka and a real registry (the testing kit's Apicurio), read back with confluent-kafka's own
consumer, ``SchemaRegistryClient`` and ``AvroDeserializer``.

Every type of docs/avro.md's mapping, nulls included, in both modes, key and value; the three
subject name strategies (a ``topic`` column, so the driver learns the topics); a schema that
evolves under BACKWARD and a change the registry refuses; bad rows failing the task or going to
the dead-letter topic; plain bodies (``value.avro.framing=none``); exactly-once.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import io
import json
import uuid

import fastavro
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.sql import functions as F

from spark_kafka_sink import KafkaSink
from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.schema_registry import IncompatibleSchemaError
from spark_kafka_sink.spark.dead_letters import HEADER_PREFIX
from spark_kafka_sink.testing import RegistryFront

from ..helpers import create_topic
from ..verify import consume_all

pytestmark = [pytest.mark.spark, pytest.mark.broker]

ROWS = 300

# Every Spark type of the mapping, nullable ones null in every 7th row; a nested record, an array
# of records, a map, decimals (arrow mode sends those of up to 18 digits as their unscaled longs:
# both ends of their range, null, negative), both timestamps.
VALUE_SQL = """named_struct(
  'flag', id % 2 = 0,
  'tiny', CAST(id % 100 AS TINYINT),
  'small', CAST(id AS SMALLINT),
  'num', CAST(id AS INT),
  'big', id * 1000000007,
  'ratio', CAST(id / 4 AS FLOAT),
  'score', id / 3.0D,
  'name', concat('name-', id),
  'note', CASE WHEN id % 7 = 0 THEN NULL ELSE concat('note ', id, ' é✓') END,
  'raw', CAST(concat('raw', id) AS BINARY),
  'price', CAST(id * 1.25 - 100 AS DECIMAL(12, 2)),
  'whole', CASE id % 4 WHEN 0 THEN CAST('999999999999999999' AS DECIMAL(18, 0))
                       WHEN 1 THEN CAST('-999999999999999999' AS DECIMAL(18, 0))
                       WHEN 3 THEN CAST(id - 150 AS DECIMAL(18, 0)) END,
  'fraction', CASE id % 4 WHEN 0 THEN CAST('0.999999999999999999' AS DECIMAL(18, 18))
                          WHEN 1 THEN CAST('-0.999999999999999999' AS DECIMAL(18, 18))
                          WHEN 3 THEN CAST(CAST(id - 150 AS STRING) || 'e-4' AS DECIMAL(18, 18)) END,
  'half', CASE id % 3 WHEN 0 THEN CAST('999999999.999999999' AS DECIMAL(18, 9))
                      WHEN 1 THEN CAST('-999999999.999999999' AS DECIMAL(18, 9))
                      ELSE CAST(CAST(id - 150 AS STRING) || '.000000007' AS DECIMAL(18, 9)) END,
  'digit', CAST(CAST(id % 19 - 9 AS STRING) || 'e-1' AS DECIMAL(1, 1)),
  'wide', CAST(CASE id % 2 WHEN 0 THEN '99999999999999999.99' ELSE '-99999999999999999.99' END AS DECIMAL(19, 2)),
  'day', date_add(DATE'2024-02-28', CAST(id AS INT)),
  'at', timestamp_micros(1700000000000000 + id * 1234567),
  'local', CAST(timestamp_micros(1700000000000000 + id) AS TIMESTAMP_NTZ),
  'address', named_struct('city', concat('city', id % 5), 'zip', CASE WHEN id % 7 = 3 THEN NULL ELSE CAST(id AS INT) END),
  'items', transform(sequence(0, CAST(id % 3 AS INT)), i -> named_struct('sku', concat('s', i), 'qty', i)),
  'tags', map('a', id, 'b', CASE WHEN id % 7 = 5 THEN NULL ELSE id + 1 END)
)"""


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def reader(registry):
    """confluent-kafka's registry client and a deserializer per call (cold caches)."""
    with contextlib.ExitStack() as clients:
        def client() -> SchemaRegistryClient:
            return clients.enter_context(SchemaRegistryClient(registry.client_conf()))
        yield client


def options(kafka, registry, topic: str | None, **extra) -> dict:
    base = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "kafka.linger.ms": "5",
            "schema.registry.url": registry.url}
    if topic is not None:
        base["topic"] = topic
    return {**base, **extra}


def read_avro(kafka, reader, topic: str, count: int, *, key: bool = False, partitions: int = 1) -> list:
    """``(key, value)`` of every record of ``topic``, decoded by confluent-kafka's deserializer."""
    records = [r for part in consume_all(kafka.bootstrap_servers, topic, partitions,
                                         expected_count=count).values() for r in part]
    value_of = AvroDeserializer(reader())
    key_of = AvroDeserializer(reader()) if key else None
    out = []
    for record in records:
        value = None if record.value is None else value_of(
            record.value, SerializationContext(topic, MessageField.VALUE))
        k = record.key if key_of is None or record.key is None else key_of(
            record.key, SerializationContext(topic, MessageField.KEY))
        out.append((k, value))
    return out


def expected_value(row) -> dict:
    """A Spark row's value as Avro gives it back: instants as aware UTC datetimes, binary as
    bytes, maps as dicts."""
    value = row.asDict(recursive=True)
    value["raw"] = bytes(value["raw"])
    value["at"] = value["at"].astimezone(datetime.timezone.utc)
    return value


@pytest.mark.parametrize("mode", ["arrow", "rows"])
def test_every_type_key_and_value_read_back_by_confluents_deserializer(spark, kafka, registry, reader, mode):
    topic = unique(f"avro-types-{mode}")
    create_topic(kafka.bootstrap_servers, topic, partitions=2)
    df = spark.range(ROWS).selectExpr(f"{VALUE_SQL} AS value", "named_struct('id', id) AS key", "id")
    sink = KafkaSink(**options(kafka, registry, topic, mode=mode, **{"value.format": "avro", "key.format": "avro"}))
    sink.write(df.select("key", "value"))

    got = read_avro(kafka, reader, topic, ROWS, key=True, partitions=2)
    assert len(got) == ROWS
    by_id = {k["id"]: v for k, v in got}
    expected = {row["id"]: expected_value(row["value"]) for row in df.collect()}
    assert by_id == expected
    client = reader()
    for side in ("key", "value"):
        registered = client.get_latest_version(f"{topic}-{side}")
        assert json.loads(registered.schema.schema_str)["name"] == "topLevelRecord"
    value_schema = json.loads(client.get_latest_version(f"{topic}-value").schema.schema_str)
    fields = {f["name"]: f["type"] for f in value_schema["fields"]}
    assert fields["note"] == ["string", "null"]    # Spark's order for a nullable field
    assert fields["name"] == "string"               # concat of non-null values: not nullable
    fields = {name: [t for t in kind if t != "null"][0] if isinstance(kind, list) else kind
              for name, kind in fields.items()}
    assert (fields["flag"], fields["tiny"], fields["num"], fields["big"]) == ("boolean", "int", "int", "long")
    assert (fields["ratio"], fields["score"], fields["raw"]) == ("float", "double", "bytes")
    assert fields["at"] == {"type": "long", "logicalType": "timestamp-micros"}
    assert fields["local"] == {"type": "long", "logicalType": "local-timestamp-micros"}
    assert fields["day"] == {"type": "int", "logicalType": "date"}
    assert fields["price"]["logicalType"] == "decimal" and fields["price"]["type"] == "fixed"


def test_subject_strategies_with_a_topic_column(spark, kafka, registry, reader):
    """TopicNameStrategy: the driver reads the micro-batch's topics (a subject each);
    RecordNameStrategy: one subject, the record's name; TopicRecordNameStrategy: topic-record."""
    client = reader()
    topics = [unique("avro-strategy-a"), unique("avro-strategy-b")]
    for topic in topics:
        create_topic(kafka.bootstrap_servers, topic)
    df = spark.range(40).selectExpr(
        f"CASE WHEN id % 2 = 0 THEN '{topics[0]}' ELSE '{topics[1]}' END AS topic",
        "named_struct('id', id, 'label', concat('l', id)) AS value")
    namespace = "strategies.s" + uuid.uuid4().hex[:8]
    for strategy in ("TopicNameStrategy", "io.confluent.kafka.serializers.subject.RecordNameStrategy",
                     "TopicRecordNameStrategy"):
        KafkaSink(**options(kafka, registry, None, **{
            "value.format": "avro", "value.avro.record.name": "Labelled",
            "value.avro.record.namespace": namespace, "value.subject.name.strategy": strategy})).write(df)
    record = f"{namespace}.Labelled"
    subjects = set(client.get_subjects())
    assert {f"{topics[0]}-value", f"{topics[1]}-value", record,
            f"{topics[0]}-{record}", f"{topics[1]}-{record}"} <= subjects
    for i, topic in enumerate(topics):
        values = sorted(v["id"] for _, v in read_avro(kafka, reader, topic, 60))
        assert values == sorted([n for n in range(40) if n % 2 == i] * 3)


def test_schema_evolves_under_backward_and_an_incompatible_change_is_refused(spark, kafka, registry, reader):
    topic = unique("avro-evolve")
    create_topic(kafka.bootstrap_servers, topic)
    client = reader()
    v1 = {"type": "record", "name": "Event", "namespace": "evolve",
          "fields": [{"name": "id", "type": "long"}]}
    v2 = {**v1, "fields": [*v1["fields"], {"name": "email", "type": ["null", "string"], "default": None}]}
    base = options(kafka, registry, topic, **{"value.format": "avro"})
    KafkaSink(**base, **{"value.avro.schema": json.dumps(v1)}).write(
        spark.range(3).selectExpr("named_struct('id', id) AS value"))
    client.set_compatibility(f"{topic}-value", "BACKWARD")
    KafkaSink(**base, **{"value.avro.schema": json.dumps(v2)}).write(
        spark.range(3, 5).selectExpr("named_struct('id', id, 'email', concat(id, '@x')) AS value"))
    assert client.get_versions(f"{topic}-value") == [1, 2]

    # A new field without a default (Spark's derived schema has none): the registry refuses it,
    # on the driver, before any task, with the subject and the registry's message.
    with pytest.raises(IncompatibleSchemaError) as refused:
        KafkaSink(**base).write(spark.range(5, 6).selectExpr("named_struct('id', id, 'age', 1) AS value"))
    assert f"{topic}-value" in str(refused.value)
    got = sorted((v["id"], v.get("email")) for _, v in read_avro(kafka, reader, topic, 5))
    assert got == [(0, None), (1, None), (2, None), (3, "3@x"), (4, "4@x")]
    # use.latest.version: the latest registered schema (v2) fits a column without 'email'? No: the
    # column must carry every field without a default... v2's email has one, so a v1-shaped column
    # is written with v2 and email null.
    KafkaSink(**base, **{"use.latest.version": "true"}).write(
        spark.range(5, 6).selectExpr("named_struct('id', id) AS value"))
    last = read_avro(kafka, reader, topic, 6)
    assert sorted(v["id"] for _, v in last) == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("mode", ["arrow", "rows"])
def test_bad_rows_fail_the_task_or_go_to_the_dead_letter_topic(spark, kafka, registry, reader, mode):
    """A user schema whose enum lacks a symbol and whose field has no null: such rows cannot be
    encoded. By default the task fails naming the row and field; with errors.tolerance=all they
    go to the dead-letter topic, their value as JSON and the error in the headers."""
    topic, dlq = unique(f"avro-bad-{mode}"), unique(f"avro-dlq-{mode}")
    create_topic(kafka.bootstrap_servers, topic)
    create_topic(kafka.bootstrap_servers, dlq)
    schema = {"type": "record", "name": "Colored", "fields": [
        {"name": "id", "type": "long"},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
        {"name": "size", "type": "int"}]}
    df = spark.range(100).selectExpr(
        "named_struct('id', id, 'color', CASE WHEN id = 17 THEN 'BLUE' WHEN id % 2 = 0 THEN 'RED' ELSE 'GREEN' END,"
        " 'size', CASE WHEN id = 42 THEN NULL ELSE CAST(id AS INT) END) AS value").repartition(1)
    base = options(kafka, registry, topic, mode=mode, **{"value.format": "avro",
                                                        "value.avro.schema": json.dumps(schema)})
    with pytest.raises(Exception) as failed:
        KafkaSink(**base).write(df)
    assert "row 17 of this partition" in str(failed.value) or "row 17:" in str(failed.value)
    assert "value.color" in str(failed.value) and "BLUE" in str(failed.value)

    KafkaSink(**base, **{"errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq}).write(df)
    # The failed write: rows mode sent rows 0-16 first; arrow mode refused the whole Arrow batch.
    written = read_avro(kafka, reader, topic, 98 + (17 if mode == "rows" else 0))
    assert sorted({v["id"] for _, v in written}) == [n for n in range(100) if n not in (17, 42)]
    letters = [r for part in consume_all(kafka.bootstrap_servers, dlq, 1, expected_count=2).values() for r in part]
    assert len(letters) == 2
    by_id = {json.loads(r.value)["id"]: dict(r.headers) for r in letters}
    assert set(by_id) == {17, 42}
    assert b"value.color" in by_id[17][HEADER_PREFIX + "exception.message"]
    assert b"value.size" in by_id[42][HEADER_PREFIX + "exception.message"]
    assert by_id[17][HEADER_PREFIX + "exception.class.name"].endswith(b"SerializationError")


def test_plain_bodies_without_a_registry_and_exactly_once(spark, kafka, registry, reader, tmp_path):
    topic, eos_topic = unique("avro-plain"), unique("avro-eos")
    create_topic(kafka.bootstrap_servers, topic)
    create_topic(kafka.bootstrap_servers, eos_topic)
    df = spark.range(50).selectExpr("named_struct('id', id, 'name', concat('n', id)) AS value")
    schema = {"type": "record", "name": "Plain", "fields": [
        {"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}
    KafkaSink(**{"kafka.bootstrap.servers": kafka.bootstrap_servers, "topic": topic, "value.format": "avro",
                 "value.avro.framing": "none", "value.avro.schema": json.dumps(schema)}).write(df)
    records = [r for part in consume_all(kafka.bootstrap_servers, topic, 1, expected_count=50).values()
               for r in part]
    parsed = fastavro.parse_schema(schema)
    assert sorted(fastavro.schemaless_reader(io.BytesIO(r.value), parsed)["id"] for r in records) == list(range(50))

    sink = KafkaSink(**options(kafka, registry, eos_topic, **{
        "value.format": "avro", "delivery.guarantee": "exactly-once",
        "transactional.id.prefix": unique("avro-eos")}))
    try:
        sink(df, 0)
        sink(df.where("id < 10"), 1)
    finally:
        sink.close()
    got = read_avro(kafka, reader, eos_topic, 60)    # read_committed
    assert sorted(v["id"] for _, v in got) == sorted(list(range(50)) + list(range(10)))


def test_through_https_with_a_private_ca_a_client_certificate_and_credentials(spark, kafka, registry, reader):
    """The registry behind the testing kit's HTTPS front, which checks the credentials and the
    client certificate before it forwards a request: the driver's calls carry them; the tasks
    make none. (A bearer token through the front: tests/integration/test_schema_registry_kit.py.)"""
    credentials = "basic"
    topic = unique(f"avro-tls-{credentials}")
    create_topic(kafka.bootstrap_servers, topic)
    front_options = {"basic": ("sink-user", "sink-pass")}
    with RegistryFront(registry.url, tls=True, client_auth=True, **front_options) as front:
        sink = KafkaSink(**{"kafka.bootstrap.servers": kafka.bootstrap_servers, "topic": topic,
                            "value.format": "avro", **front.sink_options()})
        assert "sink-pass" not in repr(sink) and "t0ken" not in repr(sink)
        sink.write(spark.range(20).selectExpr("named_struct('id', id) AS value"))
        seen = list(front.requests)
    assert seen and all(r.accepted and r.client_certificate and r.credential == credentials for r in seen)
    assert len(seen) == 1     # one registration, from the driver
    assert sorted(v["id"] for _, v in read_avro(kafka, reader, topic, 20)) == list(range(20))


def test_a_registry_that_does_not_answer_fails_on_the_driver(spark, kafka):
    from spark_kafka_sink.embedded.ports import free_ports
    port = free_ports(1)[0]
    topic = unique("avro-down")
    create_topic(kafka.bootstrap_servers, topic)
    sink = KafkaSink(**{"kafka.bootstrap.servers": kafka.bootstrap_servers, "topic": topic,
                        "value.format": "avro", "schema.registry.url": f"http://127.0.0.1:{port}",
                        "schema.registry.basic.auth.user.info": "user:s3cret-pass"})
    with pytest.raises(ConfigError) as failed:
        sink.write(spark.range(1).selectExpr("named_struct('id', id) AS value"))
    assert f"127.0.0.1:{port}" in str(failed.value) and "s3cret" not in str(failed.value)
