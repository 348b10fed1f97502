"""Avro schemas as values: parsed from JSON, checked, and written back as JSON.

:func:`parse_schema` takes a JSON string or its decoded form (a ``dict`` for a complex type, a
``str`` for a primitive or a named type, a ``list`` for a union) and returns a tree of frozen
dataclasses (:data:`AvroSchema` is any of them): :class:`AvroPrimitive`, :class:`AvroRecord` (of
:class:`AvroField`), :class:`AvroEnum`, :class:`AvroArray`, :class:`AvroMap`, :class:`AvroFixed`
and :class:`AvroUnion`. It checks what the Avro specification requires (names, namespaces,
unique field names and symbols, union branches, fixed sizes) and raises
:class:`~spark_kafka_sink.errors.AvroSchemaError` naming the field at fault. A named type used
again by name is the same object where it is used again; a record that contains itself (a
recursive schema) is refused, since no Arrow column can hold one.

Logical types: ``decimal`` (``bytes`` or ``fixed``), ``date``, ``time-millis``, ``time-micros``,
``timestamp-millis``/``-micros``/``-nanos``, ``local-timestamp-millis``/``-micros``/``-nanos``,
``uuid``, ``duration``. As the specification says, an unknown or invalid one (a decimal whose
scale exceeds its precision, or too large for its fixed size) is ignored: the attributes are kept
as plain properties and the type is its underlying Avro type.

:func:`to_json` writes a schema back in the compact form Apache Avro's Java ``Schema.toString()``
gives (attribute order, namespaces written only where they change, a named type written again by
its name), which is what a schema registry stores. Nothing here imports pyarrow.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Union as TypingUnion

from ..errors import AvroSchemaError

__all__ = [
    "AvroArray",
    "AvroEnum",
    "AvroField",
    "AvroFixed",
    "AvroMap",
    "AvroNamedSchema",
    "AvroPrimitive",
    "AvroRecord",
    "AvroSchema",
    "AvroUnion",
    "LOGICAL_TYPES",
    "PRIMITIVES",
    "SCHEMA_TYPES",
    "TOP_LEVEL_RECORD",
    "decimal_bytes_for_precision",
    "max_decimal_precision",
    "parse_schema",
    "to_json",
    "valid_name",
]

TOP_LEVEL_RECORD = "topLevelRecord"
"""Spark's name for the top-level record (``to_avro``'s ``recordName`` default)."""

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
"""The primitive type names."""

LOGICAL_TYPES = {
    "int": ("date", "time-millis"),
    "long": ("time-micros", "timestamp-millis", "timestamp-micros", "timestamp-nanos",
             "local-timestamp-millis", "local-timestamp-micros", "local-timestamp-nanos"),
    "bytes": ("decimal",),
    "string": ("uuid",),
    "fixed": ("decimal", "duration", "uuid"),
}
"""The logical types this module knows, by the underlying type they annotate."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ORDERS = ("ascending", "descending", "ignore")

Props = tuple  # ((attribute, its value as JSON text), ...): attributes kept as they came


@dataclass(frozen=True)
class AvroPrimitive:
    """A primitive type (``type`` in :data:`PRIMITIVES`), with its logical type if any
    (``precision`` and ``scale`` for ``decimal``) and any other attributes (``props``)."""

    type: str
    logical: str | None = None
    precision: int | None = None
    scale: int | None = None
    props: Props = ()


@dataclass(frozen=True)
class AvroFixed:
    """``size`` bytes, named; ``logical`` ``decimal`` (``precision``, ``scale``), ``duration``
    or ``uuid``, or ``None``."""

    name: str
    namespace: str
    size: int
    logical: str | None = None
    precision: int | None = None
    scale: int | None = None
    doc: str | None = None
    aliases: tuple[str, ...] = ()
    props: Props = ()
    type = "fixed"

    @property
    def fullname(self) -> str:
        return _full(self.name, self.namespace)


@dataclass(frozen=True)
class AvroEnum:
    """One of ``symbols``, written as its index; ``default``: the reader's fallback symbol."""

    name: str
    namespace: str
    symbols: tuple[str, ...]
    default: str | None = None
    doc: str | None = None
    aliases: tuple[str, ...] = ()
    props: Props = ()
    type = "enum"

    @property
    def fullname(self) -> str:
        return _full(self.name, self.namespace)


@dataclass(frozen=True)
class AvroField:
    """A record's field: ``default`` is the default's JSON text (``None``: no default; ``"null"``:
    a null default), ``order`` ``None`` for the default (ascending)."""

    name: str
    type: AvroSchema
    default: str | None = None
    doc: str | None = None
    order: str | None = None
    aliases: tuple[str, ...] = ()
    props: Props = ()


@dataclass(frozen=True)
class AvroRecord:
    """Fields written in order, each its own encoding, nothing between them."""

    name: str
    namespace: str
    fields: tuple[AvroField, ...]
    doc: str | None = None
    aliases: tuple[str, ...] = ()
    props: Props = ()
    error: bool = False  # declared as "error" (a record by another name)
    type = "record"

    @property
    def fullname(self) -> str:
        return _full(self.name, self.namespace)


@dataclass(frozen=True)
class AvroArray:
    """Items in blocks: a count, the items, a zero count at the end."""

    items: AvroSchema
    props: Props = ()
    type = "array"


@dataclass(frozen=True)
class AvroMap:
    """String keys to ``values``, in blocks as an array of key and value pairs."""

    values: AvroSchema
    props: Props = ()
    type = "map"


@dataclass(frozen=True)
class AvroUnion:
    """One of ``branches``: the branch's index, then the value in that branch."""

    branches: tuple[AvroSchema, ...]
    type = "union"

    @property
    def null_index(self) -> int | None:
        """The index of the ``null`` branch, or ``None`` when the union has none."""
        for index, branch in enumerate(self.branches):
            if isinstance(branch, AvroPrimitive) and branch.type == "null":
                return index
        return None


AvroSchema = TypingUnion[AvroPrimitive, AvroFixed, AvroEnum, AvroRecord, AvroArray, AvroMap, AvroUnion]
SCHEMA_TYPES = (AvroPrimitive, AvroFixed, AvroEnum, AvroRecord, AvroArray, AvroMap, AvroUnion)
"""The classes a parsed schema's nodes are (``isinstance(x, SCHEMA_TYPES)``)."""
AvroNamedSchema = TypingUnion[AvroFixed, AvroEnum, AvroRecord]


def valid_name(name: str) -> bool:
    """Whether ``name`` is a valid Avro name (a letter or ``_``, then letters, digits or ``_``)."""
    return isinstance(name, str) and bool(_NAME.match(name))


def max_decimal_precision(size: int) -> int:
    """The most decimal digits a ``size``-byte two's complement number always holds."""
    return len(str(2 ** (8 * size - 1))) - 1 if size > 0 else 0


def decimal_bytes_for_precision(precision: int) -> int:
    """The fewest bytes whose two's complement holds every ``precision``-digit number (Spark's
    ``Decimal.minBytesForPrecision``)."""
    size = 1
    while 2 ** (8 * size - 1) < 10 ** precision:
        size += 1
    return size


# --- parsing ------------------------------------------------------------------------------------

def parse_schema(source: str | dict | list) -> AvroSchema:
    """The schema ``source`` describes: JSON text, or its decoded form. ``AvroSchemaError`` for
    anything the Avro specification does not allow, naming the field (a dotted path from the
    top-level record; ``[]`` for an array's items, ``{}`` for a map's values)."""
    if isinstance(source, (bytes, bytearray)):
        source = bytes(source).decode("utf-8")
    if isinstance(source, str):
        text = source.strip()
        if text in PRIMITIVES:
            return AvroPrimitive(text)
        try:
            source = json.loads(text)
        except ValueError as error:
            raise AvroSchemaError("", f"the schema is not valid JSON: {error}") from None
    return _Parser().parse(source, "", "")


class _Parser:
    """One parse: the named types defined so far, and those still open (being defined)."""

    def __init__(self) -> None:
        self.names: dict[str, AvroNamedSchema] = {}
        self.open: set[str] = set()

    def parse(self, node: Any, namespace: str, path: str) -> AvroSchema:
        if isinstance(node, str):
            return self._reference(node, namespace, path)
        if isinstance(node, list):
            return self._union(node, namespace, path)
        if not isinstance(node, dict):
            raise AvroSchemaError(path, f"a schema is a JSON string, object or array, not {json.dumps(node)}")
        kind = node.get("type")
        if isinstance(kind, (dict, list)):  # {"type": {...}}: the nested schema itself
            if set(node) - {"type"}:
                raise AvroSchemaError(path, "a schema object whose type is itself a schema may have no other attribute")
            return self.parse(kind, namespace, path)
        if not isinstance(kind, str):
            raise AvroSchemaError(path, f"a schema object needs a \"type\", got {json.dumps(node)[:200]}")
        if kind in PRIMITIVES:
            return self._primitive(node, kind, path)
        if kind in ("record", "error"):
            return self._record(node, namespace, path)
        if kind == "enum":
            return self._enum(node, namespace, path)
        if kind == "fixed":
            return self._fixed(node, namespace, path)
        if kind == "array":
            if "items" not in node:
                raise AvroSchemaError(path, "an array needs \"items\"")
            return AvroArray(self.parse(node["items"], namespace, _join(path, "[]")), _props(node, {"type", "items"}))
        if kind == "map":
            if "values" not in node:
                raise AvroSchemaError(path, "a map needs \"values\"")
            return AvroMap(self.parse(node["values"], namespace, _join(path, "{}")), _props(node, {"type", "values"}))
        return self._reference(kind, namespace, path)  # {"type": "SomeRecord"}

    # -- kinds --

    def _primitive(self, node: dict, kind: str, path: str) -> AvroPrimitive:
        logical, precision, scale, used = _logical(node, kind, None)
        return AvroPrimitive(kind, logical, precision, scale, _props(node, {"type"} | used))

    def _record(self, node: dict, namespace: str, path: str) -> AvroRecord:
        name, space = self._name(node, namespace, path, "a record")
        fullname = _full(name, space)
        fields_node = node.get("fields")
        if not isinstance(fields_node, list):
            raise AvroSchemaError(path, f"record {fullname} needs a \"fields\" list")
        self.open.add(fullname)
        fields, seen = [], set()
        for position, field_node in enumerate(fields_node):
            if not isinstance(field_node, dict):
                raise AvroSchemaError(path, f"field {position} of record {fullname} is not a JSON object")
            field_name = field_node.get("name")
            if not isinstance(field_name, str) or not _NAME.match(field_name):
                raise AvroSchemaError(path, f"field {position} of record {fullname} has no valid name "
                                            f"(got {json.dumps(field_name)})")
            if field_name in seen:
                raise AvroSchemaError(path, f"record {fullname} has two fields named {field_name!r}")
            seen.add(field_name)
            field_path = _join(path, field_name)
            if "type" not in field_node:
                raise AvroSchemaError(field_path, "a field needs a \"type\"")
            field_type = self.parse(field_node["type"], space, field_path)
            order = field_node.get("order")
            if order is not None and order not in _ORDERS:
                raise AvroSchemaError(field_path, f"order must be one of {', '.join(_ORDERS)}, got {json.dumps(order)}")
            fields.append(AvroField(
                field_name, field_type,
                default=json.dumps(field_node["default"]) if "default" in field_node else None,
                doc=_doc(field_node, field_path), order=None if order in (None, "ascending") else order,
                aliases=_aliases(field_node, field_path),
                props=_props(field_node, {"name", "type", "default", "doc", "order", "aliases"})))
        self.open.discard(fullname)
        record = AvroRecord(name, space, tuple(fields), _doc(node, path), _aliases(node, path),
                        _props(node, {"type", "name", "namespace", "fields", "doc", "aliases"}),
                        error=node["type"] == "error")
        return self._define(record, path)

    def _enum(self, node: dict, namespace: str, path: str) -> AvroEnum:
        name, space = self._name(node, namespace, path, "an enum")
        symbols = node.get("symbols")
        if not isinstance(symbols, list) or not all(isinstance(s, str) and _NAME.match(s) for s in symbols):
            raise AvroSchemaError(path, f"enum {_full(name, space)} needs \"symbols\": a list of names")
        if len(set(symbols)) != len(symbols):
            raise AvroSchemaError(path, f"enum {_full(name, space)} repeats a symbol")
        default = node.get("default")
        if default is not None and default not in symbols:
            raise AvroSchemaError(path, f"enum {_full(name, space)}'s default {json.dumps(default)} "
                                        "is not one of its symbols")
        enum = AvroEnum(name, space, tuple(symbols), default, _doc(node, path), _aliases(node, path),
                    _props(node, {"type", "name", "namespace", "symbols", "default", "doc", "aliases"}))
        return self._define(enum, path)

    def _fixed(self, node: dict, namespace: str, path: str) -> AvroFixed:
        name, space = self._name(node, namespace, path, "a fixed")
        size = node.get("size")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise AvroSchemaError(path, f"fixed {_full(name, space)} needs a \"size\" of 0 or more bytes")
        logical, precision, scale, used = _logical(node, "fixed", size)
        fixed = AvroFixed(name, space, size, logical, precision, scale, _doc(node, path), _aliases(node, path),
                      _props(node, {"type", "name", "namespace", "size", "doc", "aliases"} | used))
        return self._define(fixed, path)

    def _union(self, node: list, namespace: str, path: str) -> AvroUnion:
        branches, seen = [], set()
        for index, item in enumerate(node):
            branch = self.parse(item, namespace, path)
            if isinstance(branch, AvroUnion):
                raise AvroSchemaError(path, "a union may not hold another union directly")
            key = branch.fullname if isinstance(branch, (AvroRecord, AvroEnum, AvroFixed)) else branch.type
            if key in seen:
                raise AvroSchemaError(path, f"a union may hold {key!r} only once (branch {index})")
            seen.add(key)
            branches.append(branch)
        if not branches:
            raise AvroSchemaError(path, "a union needs at least one branch")
        return AvroUnion(tuple(branches))

    # -- names --

    def _name(self, node: dict, namespace: str, path: str, what: str) -> tuple[str, str]:
        name = node.get("name")
        if not isinstance(name, str) or not name:
            raise AvroSchemaError(path, f"{what} needs a \"name\"")
        if "." in name:
            space, _, name = name.rpartition(".")
        else:
            space = node.get("namespace", namespace)
            if space is None:
                space = ""
            if not isinstance(space, str):
                raise AvroSchemaError(path, f"the namespace of {name!r} must be a string")
        _check_name(name, path)
        if space:
            for part in space.split("."):
                _check_name(part, path, what=f"namespace {space!r}")
        return name, space

    def _define(self, schema: AvroNamedSchema, path: str) -> AvroNamedSchema:
        fullname = schema.fullname
        if fullname in PRIMITIVES:
            raise AvroSchemaError(path, f"{fullname!r} is a primitive type's name")
        if fullname in self.names:
            raise AvroSchemaError(path, f"the name {fullname} is defined twice")
        self.names[fullname] = schema
        return schema

    def _reference(self, name: str, namespace: str, path: str) -> AvroSchema:
        if name in PRIMITIVES:
            return AvroPrimitive(name)
        candidates = [name] if "." in name else [_full(name, namespace), name]
        for candidate in candidates:
            if candidate in self.open:
                raise AvroSchemaError(path, f"refers to {candidate}, which contains it: "
                                            "recursive schemas are not supported")
            if candidate in self.names:
                return self.names[candidate]
        raise AvroSchemaError(path, f"unknown type {json.dumps(name)}")


def _check_name(name: str, path: str, what: str = "") -> None:
    if not _NAME.match(name):
        raise AvroSchemaError(path, f"{what or 'the name'} {name!r} is not a valid Avro name "
                                    "(a letter or _, then letters, digits or _)")


def _logical(node: dict, kind: str, size: int | None) -> tuple[str | None, int | None, int | None, set[str]]:
    """The logical type of ``node`` if known and valid (with precision and scale), and the
    attributes that say so; an unknown or invalid one is ``None`` (its attributes stay props)."""
    logical = node.get("logicalType")
    if logical not in LOGICAL_TYPES.get(kind, ()):
        return None, None, None, set()
    if logical == "decimal":
        precision, scale = node.get("precision"), node.get("scale", 0)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (precision, scale)):
            return None, None, None, set()
        if precision < 1 or not 0 <= scale <= precision:
            return None, None, None, set()
        if size is not None and precision > max_decimal_precision(size):
            return None, None, None, set()
        return "decimal", precision, scale, {"logicalType", "precision", "scale"}
    if (logical == "duration" and size != 12) or (logical == "uuid" and kind == "fixed" and size != 16):
        return None, None, None, set()
    return logical, None, None, {"logicalType"}


def _props(node: dict, known: set[str]) -> Props:
    return tuple((key, json.dumps(value)) for key, value in node.items() if key not in known)


def _doc(node: dict, path: str) -> str | None:
    doc = node.get("doc")
    if doc is not None and not isinstance(doc, str):
        raise AvroSchemaError(path, "\"doc\" must be a string")
    return doc


def _aliases(node: dict, path: str) -> tuple[str, ...]:
    aliases = node.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise AvroSchemaError(path, "\"aliases\" must be a list of names")
    return tuple(aliases)


def _full(name: str, namespace: str) -> str:
    return f"{namespace}.{name}" if namespace else name


def _join(path: str, name: str) -> str:
    if name in ("[]", "{}"):
        return f"{path}{name}"
    return f"{path}.{name}" if path else name


# --- writing ------------------------------------------------------------------------------------

def to_json(schema: AvroSchema) -> str:
    """``schema`` as compact JSON, as Apache Avro's Java ``Schema.toString()`` writes it: a named
    type's namespace only where it differs from the enclosing one, a named type seen before by
    its name. ``AvroSchemaError`` when two different types share a full name."""
    return json.dumps(_Writer().write(schema, ""), separators=(",", ":"), ensure_ascii=False)


class _Writer:
    def __init__(self) -> None:
        self.written: dict[str, AvroNamedSchema] = {}

    def write(self, schema: AvroSchema, space: str) -> Any:
        if isinstance(schema, AvroPrimitive):
            out: dict[str, Any] = {"type": schema.type}
            _write_logical(out, schema)
            _write_props(out, schema.props)
            return schema.type if len(out) == 1 else out
        if isinstance(schema, AvroUnion):
            return [self.write(branch, space) for branch in schema.branches]
        if isinstance(schema, AvroArray):
            out = {"type": "array", "items": self.write(schema.items, space)}
            _write_props(out, schema.props)
            return out
        if isinstance(schema, AvroMap):
            out = {"type": "map", "values": self.write(schema.values, space)}
            _write_props(out, schema.props)
            return out
        return self._named(schema, space)

    def _named(self, schema: AvroNamedSchema, space: str) -> Any:
        fullname = schema.fullname
        seen = self.written.get(fullname)
        if seen is not None:
            if seen != schema:
                raise AvroSchemaError("", f"two different types are both named {fullname}")
            return schema.name if schema.namespace == space else fullname
        self.written[fullname] = schema
        out: dict[str, Any] = {"type": "error" if isinstance(schema, AvroRecord) and schema.error else schema.type,
                               "name": schema.name}
        if schema.namespace != space:
            out["namespace"] = schema.namespace
        if schema.doc is not None:
            out["doc"] = schema.doc
        if isinstance(schema, AvroRecord):
            out["fields"] = [self._field(field, schema.namespace) for field in schema.fields]
        elif isinstance(schema, AvroEnum):
            out["symbols"] = list(schema.symbols)
        else:
            out["size"] = schema.size
            _write_logical(out, schema)
        _write_props(out, schema.props)
        if schema.aliases:
            out["aliases"] = list(schema.aliases)
        if isinstance(schema, AvroEnum) and schema.default is not None:
            out["default"] = schema.default
        return out

    def _field(self, field: AvroField, space: str) -> dict:
        out: dict[str, Any] = {"name": field.name, "type": self.write(field.type, space)}
        if field.doc is not None:
            out["doc"] = field.doc
        if field.default is not None:
            out["default"] = json.loads(field.default)
        if field.order is not None:
            out["order"] = field.order
        if field.aliases:
            out["aliases"] = list(field.aliases)
        _write_props(out, field.props)
        return out


def _write_logical(out: dict, schema: AvroPrimitive | AvroFixed) -> None:
    if schema.logical is not None:
        out["logicalType"] = schema.logical
        if schema.logical == "decimal":
            out["precision"] = schema.precision
            out["scale"] = schema.scale


def _write_props(out: dict, props: Props) -> None:
    for key, text in props:
        out[key] = json.loads(text)
