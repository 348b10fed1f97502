"""The Avro benchmarks' checks without Spark or a broker: the read-back comparison that keeps the
Spark comparison honest (bench/avro_spark.py), the package versions it tries, and the frame
comparison of the encoder benchmark (bench/avro_encode.py)."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest

from bench.avro_encode import first_difference
from bench.avro_spark import comparable, compare, default_versions

UTC = datetime.timezone.utc
AT = datetime.datetime(2021, 3, 4, 5, 6, 7, 891_011, tzinfo=UTC)
AT_MICROS = 1_614_834_367_891_011
ROW = {"id": 7, "count": -3, "amount": 1.5, "name": "beta", "note": None, "at": AT_MICROS,
       "price": Decimal("-12.34")}


def test_a_decoded_timestamp_compares_as_the_microseconds_spark_gives():
    assert comparable({"at": AT, "id": 1}) == {"at": AT_MICROS, "id": 1}
    before_epoch = datetime.datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)
    assert comparable({"at": before_epoch})["at"] == -1


def test_records_equal_to_their_generated_rows_all_match():
    check = compare({7: ROW}, [{**ROW, "at": AT}, dict(ROW)])
    assert (check.sampled, check.matched, check.problem, check.ok) == (2, 2, "", True)
    assert check.summary().startswith("read back: 2/2")


def test_a_differing_field_is_named_with_both_values():
    check = compare({7: ROW}, [{**ROW, "price": Decimal("-12.35")}, {**ROW, "note": "x"}])
    assert not check.ok and check.matched == 0
    assert "id 7: field 'price' decoded as Decimal('-12.35'), generated Decimal('-12.34')" in check.problem


def test_a_missing_field_or_an_unknown_id_does_not_match():
    shorter = {name: value for name, value in ROW.items() if name != "note"}
    assert "field 'note' decoded as 'missing'" in compare({7: ROW}, [shorter]).problem
    check = compare({7: ROW}, [{**ROW, "id": 8}])
    assert (check.matched, check.problem) == (0, "id 8 is not a generated row")


def test_an_empty_sample_is_not_a_pass():
    check = compare({7: ROW}, [])
    assert not check.ok and "nothing read" in check.summary()


def test_package_versions_fall_back_to_the_earlier_lines_of_the_same_major():
    assert default_versions("4.3.0") == ["4.3.0", "4.2.+", "4.1.+", "4.0.+"]
    assert default_versions("3.5.1") == ["3.5.1", "3.4.+", "3.3.+", "3.2.+", "3.1.+", "3.0.+"]
    assert default_versions("4.0.0") == ["4.0.0"]
    assert default_versions("dev") == ["dev"]


def test_the_first_differing_frame_and_a_missing_one_are_found():
    assert first_difference([b"a", b"b"], [b"a", b"b"]) is None
    assert first_difference([b"a", b"b"], [b"a", b"c"]) == 1
    assert first_difference([b"a", b"b"], [b"a"]) == 1


def test_spark_settings_are_parsed_as_key_value_pairs_and_a_bare_word_is_refused(capsys):
    from bench.avro_spark import parse_args

    args = parse_args(["--spark-conf", "spark.sql.execution.arrow.maxBytesPerBatch=2147483647",
                       "--spark-conf", " a.b = c=d "])
    assert args.spark_conf == {"spark.sql.execution.arrow.maxBytesPerBatch": "2147483647", "a.b": "c=d"}
    assert parse_args([]).spark_conf == {}
    with pytest.raises(SystemExit):
        parse_args(["--spark-conf", "spark.sql.shuffle.partitions"])
    assert "--spark-conf takes KEY=VALUE" in capsys.readouterr().err
