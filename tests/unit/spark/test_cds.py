"""Spark's class-data archive planning (``spark_kafka_sink.spark.cds``), without a JVM: where
the archive lives, which flags a Spark JVM gets with and without one, and the off switch. The dump
itself runs once per machine before the first Spark test (``tests/spark/conftest.py``), and every
Spark test's JVM maps it."""

from __future__ import annotations

import os

import pytest

from spark_kafka_sink.embedded import cds
from spark_kafka_sink.spark import cds as spark_cds


@pytest.fixture(autouse=True)
def archives_on(monkeypatch):
    monkeypatch.delenv("SPARK_KAFKA_SINK_CDS", raising=False)


def test_no_archive_means_no_flags_and_a_plan_to_dump_into_a_private_file(tmp_path):
    assert spark_cds.java_options(tmp_path) == ""
    plan = spark_cds.archive_plan(may_create=True, cache_root=tmp_path)
    assert plan.final.parent == spark_cds.archive_directory(tmp_path)
    assert plan.final.parent.parent == tmp_path / "spark-cds"
    assert plan.final.name == f"driver-{cds.java_key(spark_cds.spark_java())}.jsa"
    assert plan.flags == (f"-XX:ArchiveClassesAtExit={plan.pending}",)
    assert plan.pending.parent == plan.final.parent and plan.pending.suffix == ".tmp"
    assert spark_cds.archive_plan(may_create=False, cache_root=tmp_path).flags == ()


def test_a_promoted_archive_is_mapped_quietly_by_every_spark_jvm(tmp_path):
    plan = spark_cds.archive_plan(may_create=True, cache_root=tmp_path)
    plan.pending.write_bytes(b"archive")
    cds.promote(plan, clean_exit=True)
    assert spark_cds.java_options(tmp_path).split() == [
        f"-XX:SharedArchiveFile={plan.final}", "-Xshare:auto", "-Xlog:cds*=off"]
    assert spark_cds.ensure_archive(tmp_path) == plan.final  # there is one: no dump


def test_a_failed_dump_is_dropped_and_leaves_no_archive(tmp_path):
    plan = spark_cds.archive_plan(may_create=True, cache_root=tmp_path)
    plan.pending.write_bytes(b"half an archive")
    cds.promote(plan, clean_exit=False)
    assert not plan.pending.exists() and not plan.final.exists()
    assert spark_cds.java_options(tmp_path) == ""


def test_the_archive_follows_the_java_that_spark_class_runs(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert spark_cds.spark_java() == str(tmp_path / "jdk" / "bin" / "java")
    monkeypatch.delenv("JAVA_HOME")
    assert os.path.basename(spark_cds.spark_java()) == "java"


def test_the_off_switch_turns_off_flags_dumps_and_background_dumps(monkeypatch, tmp_path):
    plan = spark_cds.archive_plan(may_create=True, cache_root=tmp_path)
    plan.pending.write_bytes(b"archive")
    cds.promote(plan, clean_exit=True)
    monkeypatch.setenv("SPARK_KAFKA_SINK_CDS", "0")
    assert spark_cds.java_options(tmp_path) == ""
    assert spark_cds.ensure_archive(tmp_path) is None
    assert spark_cds.start_ensuring(tmp_path) is None


def test_the_dump_runs_this_module_by_its_importable_name():
    """``python -m`` runs the module as ``__main__``: the processes it starts must name it."""
    assert spark_cds.MODULE == spark_cds.__name__ == "spark_kafka_sink.spark.cds"
