"""The Java-properties reader the jobs load conf/producer.properties with."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_kafka_sink.properties import PropertiesError, load_properties, parse_properties

CONF = Path(__file__).resolve().parents[2] / "conf"


def test_the_three_separators_and_surrounding_blanks():
    text = "acks=all\n  linger.ms : 10  \nbatch.size   65536\n\tcompression.type=\tlz4\t\n"
    assert parse_properties(text) == {"acks": "all", "linger.ms": "10", "batch.size": "65536",
                                      "compression.type": "lz4"}


def test_comments_and_blank_lines_are_skipped():
    text = "# a comment\n! another\n\n   \n  # indented comment\nacks=1\n"
    assert parse_properties(text) == {"acks": "1"}


def test_a_comment_line_never_continues():
    assert parse_properties("# ends in a backslash \\\nacks=1\n") == {"acks": "1"}


def test_continuation_lines_join_and_drop_leading_blanks():
    text = "bootstrap.servers=a:1,\\\n    b:2,\\\n\tc:3\nnext=x\n"
    assert parse_properties(text) == {"bootstrap.servers": "a:1,b:2,c:3", "next": "x"}


def test_an_even_number_of_backslashes_does_not_continue():
    assert parse_properties("path=C:\\\\\nnext=x") == {"path": "C:\\", "next": "x"}


def test_a_backslash_on_the_last_line_continues_into_nothing():
    assert parse_properties("acks=all\\") == {"acks": "all"}


def test_line_breaks_of_every_kind():
    assert parse_properties("a=1\r\nb=2\rc=3\n") == {"a": "1", "b": "2", "c": "3"}


def test_escapes():
    text = "tab=a\\tb\nkey\\=with\\:seps\\ x = v\nunicode=\\u00e9t\\u00C9\nother=\\q\\\\\n"
    assert parse_properties(text) == {"tab": "a\tb", "key=with:seps x": "v", "unicode": "étÉ",
                                      "other": "q\\"}


def test_separators_inside_a_value_are_kept():
    assert parse_properties("url = a=b:c d\n") == {"url": "a=b:c d"}


def test_an_empty_value_needs_a_separator():
    assert parse_properties("empty=\nalso:\nspaced =   \n") == {"empty": "", "also": "", "spaced": ""}


def test_trailing_blanks_are_dropped_unless_escaped():
    assert parse_properties("a=x  \nb=x\\ \nc=x\\  \n") == {"a": "x", "b": "x ", "c": "x "}


def test_the_last_of_a_repeated_key_wins():
    assert parse_properties("acks=1\nacks=all\n") == {"acks": "all"}


@pytest.mark.parametrize("text, line, words", [
    ("acks=all\n\nlinger.ms\n", 3, ["linger.ms", "has no value", "'linger.ms='"]),
    ("acks=all\nlinger.ms   \n", 2, ["linger.ms", "has no value"]),
    ("=value\n", 1, ["no key"]),
    (" : value\n", 1, ["no key"]),
    ("a=1\nb=\\u12\n", 2, ["\\u12", "four hex digits"]),
    ("a=1\nb=\\u12zz\n", 2, ["\\u12zz"]),
    ("a=\\\n  1\nb\\\n\n", 3, ["'b'", "has no value"]),
])
def test_malformed_lines_name_the_source_and_line(text, line, words):
    with pytest.raises(PropertiesError) as caught:
        parse_properties(text, source="producer.properties")
    message = str(caught.value)
    assert message.startswith(f"producer.properties, line {line}: ")
    assert caught.value.line == line and caught.value.source == "producer.properties"
    for word in words:
        assert word in message


def test_load_properties_names_the_file_in_errors(tmp_path):
    good = tmp_path / "ok.properties"
    good.write_text("# producer\nacks = all\nclient.id=caf\u00e9\n", encoding="utf-8")
    assert load_properties(good) == {"acks": "all", "client.id": "café"}
    bad = tmp_path / "bad.properties"
    bad.write_text("acks=all\nlinger.ms\n", encoding="utf-8")
    with pytest.raises(PropertiesError, match=r"bad\.properties, line 2: key 'linger\.ms' has no value"):
        load_properties(bad)


def test_the_shipped_producer_defaults_parse_and_are_producer_properties():
    from spark_kafka_sink.config import PROPERTIES

    loaded = load_properties(CONF / "producer.properties")
    assert loaded["acks"] == "all" and loaded["enable.idempotence"] == "true"
    assert "bootstrap.servers" not in loaded  # the address comes from --bootstrap / KAFKA_BOOTSTRAP
    unknown = [key for key in loaded if key not in PROPERTIES]
    assert not unknown, f"not producer properties: {unknown}"
