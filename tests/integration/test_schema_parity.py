"""Our message declarations against Apache Kafka's own generated schemas, version by version.

``java/SchemaDump.java`` prints, from kafka-clients' generated ``Schema`` objects and data classes,
the layout of every version of every API we declare (JSON; the format is in its javadoc). One JVM
run serves the whole session. For every API of ``ALL_APIS``, every version in our range, request
and response, our declaration (through ``Schema.layout``, the layout the encoder follows) must
give the same:

- regular fields: names and order; tagged fields: names and tags; recursively in nested structs;
- wire types at that version (compact ones in flexible versions), nullability;
- tagged-field sections exactly in flexible versions, at every struct level;
- defaults, except one deliberate difference: a nullable string/bytes field with no declared
  default is null for us and empty for Kafka (see ``schema.py``; it never applies to tagged fields);

and also: our version range inside Kafka's stable one, the same flexible versions, the same
request/response header versions.

Needs ``javac`` (a JDK) and the Kafka jars; fails, never skips, without them.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from spark_kafka_sink.protocol import ALL_APIS, ApiMessage, Schema
from spark_kafka_sink.protocol import types as t
from spark_kafka_sink.protocol.schema import Field
from ..javatools import compile_java

SOURCE = Path(__file__).with_name("java") / "SchemaDump.java"

_FIXED = {t.INT8: "INT8", t.INT16: "INT16", t.INT32: "INT32", t.INT64: "INT64",
          t.UINT16: "UINT16", t.UINT32: "UINT32", t.FLOAT64: "FLOAT64", t.BOOL: "BOOLEAN",
          t.UUID: "UUID"}
# (not nullable, nullable); "COMPACT_" is prefixed in flexible versions. RECORDS is one type
# that is always nullable in Kafka.
_VARIABLE = {t.StringType: ("STRING", "NULLABLE_STRING"), t.BytesType: ("BYTES", "NULLABLE_BYTES"),
             t.RecordsType: ("RECORDS", "RECORDS")}
_EMPTY = ("", "bytes:")


@pytest.fixture(scope="session")
def kafka_schemas(tmp_path_factory) -> dict[int, dict]:
    """api_key -> SchemaDump's description of that API, for every API of ALL_APIS."""
    program = compile_java(SOURCE, tmp_path_factory.mktemp("schema-dump"))
    out = program.run([str(api.api_key) for api in ALL_APIS])
    return {api["api_key"]: api for api in json.loads(out)["apis"]}


def _ids(api: ApiMessage) -> str:
    return api.name


# --- our side: the same description as SchemaDump's -------------------------------------------

def describe(schema: Schema, version: int, flexible: bool) -> dict:
    """Our struct at ``version`` in SchemaDump's format (plus a flag for the defaults rule)."""
    layout = schema.layout(version)
    return {
        "kind": "STRUCT", "nullable": False,
        "fields": [_field(f, None, nullable, version, flexible) for f, nullable in layout.regular],
        "tagged": [_field(f, tag, nullable, version, flexible)
                   for tag, (f, nullable) in layout.tagged.items()] if flexible else None,
    }


def _field(f: Field, tag: int | None, nullable: bool, version: int, flexible: bool) -> dict:
    out = {"name": f.name, "tag": tag, "type": _type(f.type, nullable, version, flexible)}
    if not isinstance(f.type, Schema):
        out["default"] = _canonical(f.default)
        out["null_for_empty"] = not f.nullable_versions.is_empty and tag is None
    return out


def _type(ftype: Any, nullable: bool, version: int, flexible: bool) -> dict:
    if isinstance(ftype, Schema):
        return {**describe(ftype, version, flexible), "nullable": nullable}
    if isinstance(ftype, t.Array):
        return {"kind": "COMPACT_ARRAY" if flexible else "ARRAY", "nullable": nullable,
                "element": _type(ftype.element, False, version, flexible)}
    if ftype in _FIXED:
        return {"kind": _FIXED[ftype], "nullable": nullable}
    kind = _VARIABLE[type(ftype)][nullable]
    return {"kind": f"COMPACT_{kind}" if flexible else kind, "nullable": nullable}


def _canonical(value: Any) -> Any:
    """A default in SchemaDump's notation."""
    if isinstance(value, uuid.UUID):
        return f"uuid:{value.hex}"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"bytes:{bytes(value).hex()}"
    if isinstance(value, (tuple, list)):
        return [_canonical(item) for item in value]
    return value


# --- the comparison -------------------------------------------------------------------------

def diff(ours: dict, theirs: dict, path: str) -> Iterator[str]:
    """Every difference between two type descriptions, as 'path: what differs'."""
    if ours["kind"] != theirs["kind"]:
        yield f"{path}: type {ours['kind']}, Kafka has {theirs['kind']}"
        return
    if ours["nullable"] != theirs["nullable"]:
        yield f"{path}: nullable is {ours['nullable']}, Kafka says {theirs['nullable']}"
    if "element" in theirs:
        yield from diff(ours["element"], theirs["element"], f"{path}[]")
    if ours["kind"] != "STRUCT":
        return
    yield from _diff_fields(ours["fields"], theirs["fields"], path, "fields")
    if (ours["tagged"] is None) != (theirs["tagged"] is None):
        ours_has, kafka_has = ("a", "no") if ours["tagged"] is not None else ("no", "a")
        yield (f"{path or '(body)'}: ours has {ours_has} tagged-field section, "
               f"Kafka's has {kafka_has}")
    elif ours["tagged"] is not None:
        yield from _diff_fields(ours["tagged"], theirs["tagged"], path, "tagged fields")


def _diff_fields(ours: list[dict], theirs: list[dict], path: str, what: str) -> Iterator[str]:
    def listing(fields: list[dict]) -> list[str]:
        return [f["name"] if f["tag"] is None else f"{f['name']}@{f['tag']}" for f in fields]

    if listing(ours) != listing(theirs):
        yield f"{path or '(body)'}: {what} {listing(ours)}, Kafka has {listing(theirs)}"
    by_name = {f["name"]: f for f in theirs}
    for mine in ours:
        other = by_name.get(mine["name"])
        if other is None:
            continue
        where = f"{path}.{mine['name']}" if path else mine["name"]
        if "default" in other and not _same_default(mine, other):
            yield f"{where}: default {mine['default']!r}, Kafka's is {other['default']!r}"
        yield from diff(mine["type"], other["type"], where)


def _same_default(mine: dict, other: dict) -> bool:
    if json.dumps(mine["default"]) == json.dumps(other["default"]):  # 0 != False here
        return True
    return mine["null_for_empty"] and mine["default"] is None and other["default"] in _EMPTY


# --- the tests ------------------------------------------------------------------------------

@pytest.mark.parametrize("api", ALL_APIS, ids=_ids)
def test_version_range_is_within_kafkas(api: ApiMessage, kafka_schemas) -> None:
    kafka = kafka_schemas[api.api_key]
    assert kafka["name"] == api.name
    assert kafka["lowest"] <= api.min_version <= api.max_version <= kafka["highest"], (
        f"{api.name}: we declare v{api.min_version}-v{api.max_version}, Kafka supports "
        f"v{kafka['lowest']}-v{kafka['highest']} (stable)")


@pytest.mark.parametrize("api", ALL_APIS, ids=_ids)
def test_flexible_versions_and_headers_match(api: ApiMessage, kafka_schemas) -> None:
    problems = []
    for kafka in kafka_schemas[api.api_key]["versions"]:
        v = kafka["version"]
        if api.is_flexible(v) != (kafka["request_header"] == 2):
            problems.append(f"v{v}: we say flexible={api.is_flexible(v)}, Kafka's request "
                            f"header v{kafka['request_header']} says the opposite")
        if v in api.versions and (api.request_header_version(v), api.response_header_version(v)) \
                != (kafka["request_header"], kafka["response_header"]):
            problems.append(
                f"v{v}: header versions request {api.request_header_version(v)} / response "
                f"{api.response_header_version(v)}, Kafka's {kafka['request_header']} / "
                f"{kafka['response_header']}")
    assert not problems, f"{api.name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("kind", ["request", "response"])
@pytest.mark.parametrize("api", ALL_APIS, ids=_ids)
def test_schemas_match(api: ApiMessage, kind: str, kafka_schemas) -> None:
    kafka = {entry["version"]: entry for entry in kafka_schemas[api.api_key]["versions"]}
    schema = getattr(api, kind)
    problems = []
    for v in range(api.min_version, api.max_version + 1):
        if v not in kafka:
            problems.append(f"{api.name} v{v} {kind}: Kafka has no such version")
            continue
        ours = describe(schema, v, api.is_flexible(v))
        problems += [f"{api.name} v{v} {kind}: {line}" for line in diff(ours, kafka[v][kind], "")]
    assert not problems, "our declaration differs from Kafka's:\n" + "\n".join(problems)
