"""KafkaSink on Spark Connect (``remote("local[2]")``, in its own process): both modes write every
row; arrow mode brings its metrics back as stats rows, where rows mode, without accumulators,
has none. Exactly-once arrow mode writes every row once for a read_committed reader, its
transactions committed by the driver; exactly-once rows mode (it needs ``df.rdd``) is refused
naming arrow mode. Avro values through the schema registry, their schema derived on the client,
read back by confluent-kafka's deserializer. Before PySpark 4.0 (no ``foreachPartition`` on Spark Connect) rows mode is refused with
a clear error and arrow mode works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from importlib import metadata
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from spark_kafka_sink.embedded.jars import default_cache_root
from spark_kafka_sink.spark.compat import CONNECT_FOREACH_PARTITION_PYSPARK, pyspark_version

from ..helpers import create_topic
from ..verify import assert_no_open_transaction, consume_all
from .session import CONF, SPARK_ENV, same_minor_versions, short_job_java_options

pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.heavy]

ROOT = Path(__file__).resolve().parents[2]
ROWS = 3_000
TIMEOUT_S = 240


def connect_conf(directory: Path, server_version: str | None) -> Path:
    """spark-defaults.conf for the local Spark Connect server: the project's (loopback, no UI),
    plus the gRPC server on loopback, and before PySpark 4, which ships it, the server's jar of
    ``server_version`` from Maven Central (``spark.jars.packages``, Scala 2.12 builds) into the Ivy
    cache beside the broker jars."""
    directory.mkdir(exist_ok=True)
    defaults = (CONF / "spark-defaults.conf").read_text()
    jar = "" if server_version is None else (
        f"spark.jars.packages org.apache.spark:spark-connect_2.12:{server_version}\n"
        f"spark.jars.ivy {default_cache_root() / 'ivy'}\n")
    (directory / "spark-defaults.conf").write_text(
        defaults + "\nspark.connect.grpc.binding.address 127.0.0.1\n" + jar +
        f"spark.driver.extraJavaOptions -Xss16m -Dlog4j2.configurationFile={(CONF / 'log4j2.properties').as_uri()} "
        f"{short_job_java_options()}\n")
    return directory


def server_versions() -> list[str | None]:
    """``[None]`` on PySpark 4 (the server is in pyspark); before, the server jar versions to try:
    pyspark's own, then its minor's other releases (a repository may not serve every one; the
    Spark Connect protocol is the same within a minor)."""
    version = metadata.version("pyspark")
    return [None] if int(version.split(".")[0]) >= 4 else same_minor_versions(version)


def test_both_modes_write_and_arrow_mode_has_metrics(kafka, registry, tmp_path):
    bootstrap = kafka.bootstrap_servers
    topics = [f"connect-{mode}-{uuid.uuid4().hex[:8]}" for mode in ("arrow", "rows", "eos", "avro")]
    for topic in topics:
        create_topic(bootstrap, topic, 2)
    out = tmp_path / "metrics.json"
    unresolved = []
    for server in server_versions():
        env = {**os.environ, **SPARK_ENV, "SPARK_CONF_DIR": str(connect_conf(tmp_path / "conf", server)),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        command = [sys.executable, "-m", "tests.spark.connect_job", bootstrap, *topics, registry.url,
                   str(ROWS), str(out)]
        with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) as job:
            try:
                output, _ = job.communicate(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                job.kill()
                output, _ = job.communicate()
                pytest.fail(f"the Spark Connect job did not finish in {TIMEOUT_S} s:\n{output[-4000:]}")
        if job.returncode != 0 and server is not None and "unresolved dependency" in output:
            unresolved.append(server)
            continue
        break
    assert job.returncode == 0, f"the Spark Connect job failed (server jars not found: {unresolved}):\n{output[-4000:]}"
    if server is not None:
        print(f"Spark Connect server jar {server}" + (f" ({unresolved} not served)" if unresolved else ""))

    result = json.loads(out.read_text())
    assert result["session"] == "pyspark.sql.connect.session"
    assert result["arrow"]["record-send-total"] == ROWS and result["arrow"]["task-total"] == 2
    assert result["rows"] is None  # no accumulators on Spark Connect
    assert result["eos"]["record-send-total"] == ROWS and result["eos"]["transaction-commit-total"] == 2
    assert "in mode='rows' needs classic Spark" in result["eos_rows_error"]
    assert "use mode='arrow'" in result["eos_rows_error"]
    assert_no_open_transaction(bootstrap, topics[2], 2)
    assert result["avro"]["record-send-total"] == ROWS
    records = consume_all(bootstrap, topics[3], 2, expected_count=ROWS)
    with SchemaRegistryClient(registry.client_conf()) as client:
        deserialize = AvroDeserializer(client)
        got = sorted(deserialize(r.value, SerializationContext(topics[3], MessageField.VALUE))["id"]
                     for part in records.values() for r in part)
    assert got == list(range(ROWS))
    topics = topics[:3]
    if pyspark_version() < CONNECT_FOREACH_PARTITION_PYSPARK:  # rows mode is refused, clearly
        assert "mode='rows' on Spark Connect needs PySpark 4.0 or newer" in result["rows_error"], result
        topics = [topics[0], topics[2]]
    else:
        assert result["rows_error"] is None, result
    for topic in topics:
        records = consume_all(bootstrap, topic, 2, expected_count=ROWS)
        got = sorted((r.key, r.value) for part in records.values() for r in part)
        assert got == sorted((str(i).encode(), f"v{i}".encode()) for i in range(ROWS))
