"""Message schemas declared as data, after Apache Kafka's message JSON specs.

A Schema is a named list of Fields; it is also the struct type, so arrays of structs and struct
fields nest Schemas. Encoding a struct at version V writes, in declaration order, every field
whose ``versions`` contain V and which is not tagged at V. In flexible versions a tagged-field
section follows:

    UNSIGNED_VARINT count
    count x (UNSIGNED_VARINT tag, UNSIGNED_VARINT size, size bytes of the field's value)

in ascending tag order, holding only the tagged fields whose value differs from the default.
Unknown tags are skipped on decode.

Rules at a version V:
- a field outside its versions is not written; encoding refuses a non-default value for it
  (UnsupportedVersionError naming the field and V); decoding fills in its default;
- a missing key on encode takes the field's default: the declared one, else 0 / "" / b"" /
  empty array / False / zero uuid, and null for nullable strings, bytes and records;
- null is only accepted where ``nullable_versions`` contains V;
- unknown keys in a dict body raise EncodeError (they are almost always typos).
"""

from __future__ import annotations

from collections import abc
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import EncodeError, ProtocolError, UnsupportedVersionError
from .primitives import Reader, Writer
from .types import located
from .values import Struct
from .versions import NONE, VersionRange

_MISSING = object()


def _range(value: str | VersionRange | None) -> VersionRange:
    if value is None:
        return NONE
    return value if isinstance(value, VersionRange) else VersionRange.parse(value)


@dataclass(frozen=True, init=False)
class Field:
    """One field of a struct: name, type, the versions it exists in, and how it is encoded."""

    name: str
    type: Any
    versions: VersionRange
    nullable_versions: VersionRange
    tag: int | None
    tagged_versions: VersionRange
    default: Any

    def __init__(self, name: str, type: Any, versions: str | VersionRange = "0+", *,
                 nullable_versions: str | None = None, tag: int | None = None,
                 tagged_versions: str | None = None, default: Any = _MISSING):
        nullable = _range(nullable_versions)
        tagged = _range(tagged_versions)
        if (tag is None) != tagged.is_empty:
            raise ValueError(f"field {name}: tag and tagged_versions go together")
        if default is _MISSING:
            default = type.zero(not nullable.is_empty)
        for attr, value in (("name", name), ("type", type), ("versions", _range(versions)),
                            ("nullable_versions", nullable), ("tag", tag),
                            ("tagged_versions", tagged), ("default", default)):
            object.__setattr__(self, attr, value)

    def is_default(self, value: Any) -> bool:
        return self.type.is_default(value, self.default)


@dataclass(frozen=True)
class Layout:
    """How a struct is laid out at one version (``Schema.layout``); the encoder follows it."""

    regular: tuple[tuple[Field, bool], ...]   # (field, nullable) in wire order
    tagged: dict[int, tuple[Field, bool]]     # tag -> (field, nullable), ascending tags
    absent: tuple[Field, ...]                 # fields not in this version


class Schema:
    """A struct type: a message body or a nested struct."""

    def __init__(self, name: str, fields: list[Field], *,
                 flexible_versions: str | VersionRange | None = None):
        self.name = name
        self.fields = tuple(fields)
        self.flexible_versions = _range(flexible_versions)
        self._by_name = {f.name: f for f in self.fields}
        self._names = frozenset(self._by_name)
        self._plans: dict[int, Layout] = {}
        self._zero: Struct | None = None
        if len(self._by_name) != len(self.fields):
            raise ValueError(f"{name}: duplicate field names")
        tags = [f.tag for f in self.fields if f.tag is not None]
        if len(set(tags)) != len(tags):
            raise ValueError(f"{name}: duplicate tags")

    def __repr__(self) -> str:
        return f"Schema({self.name})"

    # --- messages ---------------------------------------------------------------------------

    def encode(self, version: int, body: Mapping[str, Any] | Struct) -> bytes:
        """Encode a whole message body at ``version``."""
        w = Writer()
        self.encode_into(w, version, body)
        return w.getvalue()

    def encode_into(self, w: Writer, version: int, body: Mapping[str, Any] | Struct) -> None:
        """Append a whole message body to ``w`` (lets framing join header and body once)."""
        self.write(w, body, version, version in self.flexible_versions, False)

    def decode(self, version: int, data: bytes | bytearray | memoryview) -> Struct:
        """Decode a whole message body; every byte must be used."""
        r = Reader(data)
        value = self.read(r, version, version in self.flexible_versions, False)
        if r.remaining:
            raise ProtocolError(f"{r.remaining} trailing bytes after {self.name} v{version}")
        return value

    # --- the struct type --------------------------------------------------------------------

    def zero(self, nullable: bool) -> Struct:
        if self._zero is None:
            self._zero = Struct(self.name, {f.name: f.default for f in self.fields})
        return self._zero

    def is_default(self, value: Any, default: Any) -> bool:
        if value is None:
            return default is None
        values = self._values(value)
        return all(f.is_default(values.get(f.name, f.default)) for f in self.fields)

    def write(self, w: Writer, value: Any, version: int, flexible: bool, nullable: bool) -> None:
        values = self._values(value)
        plan = self.layout(version)
        for f in plan.absent:
            item = values.get(f.name, _MISSING)
            if item is not _MISSING and not f.is_default(item):
                raise UnsupportedVersionError(
                    f"{self.name}.{f.name} does not exist in version {version} (only in "
                    f"{f.versions}); refusing to drop its non-default value {item!r}")
        for f, nullable_here in plan.regular:
            try:
                f.type.write(w, values.get(f.name, f.default), version, flexible, nullable_here)
            except (EncodeError, ProtocolError) as exc:
                raise located(exc, f.name) from None
        if flexible:
            self._write_tagged(w, values, plan, version)

    def read(self, r: Reader, version: int, flexible: bool, nullable: bool) -> Struct:
        plan = self.layout(version)
        values = {f.name: f.default for f in self.fields}
        for f, nullable_here in plan.regular:
            try:
                values[f.name] = f.type.read(r, version, flexible, nullable_here)
            except ProtocolError as exc:
                raise located(exc, f.name) from None
        if flexible:
            self._read_tagged(r, values, plan, version)
        return Struct(self.name, values)

    def layout(self, version: int) -> Layout:
        """The regular fields (in wire order), the tagged fields (by tag) and the absent fields
        at ``version``, each with whether null is allowed there. Cached per version."""
        plan = self._plans.get(version)
        if plan is None:
            regular, tagged, absent = [], {}, []
            for f in self.fields:
                nullable = version in f.nullable_versions
                if version not in f.versions:
                    absent.append(f)
                elif version in f.tagged_versions:
                    tagged[f.tag] = (f, nullable)
                else:
                    regular.append((f, nullable))
            tagged = dict(sorted(tagged.items()))
            plan = self._plans[version] = Layout(tuple(regular), tagged, tuple(absent))
        return plan

    # --- helpers ----------------------------------------------------------------------------

    def _values(self, value: Any) -> Mapping[str, Any]:
        if isinstance(value, Struct):
            return value._values
        if type(value) is not dict and not isinstance(value, abc.Mapping):
            raise EncodeError(f"expected a dict or Struct for {self.name}, "
                              f"got {type(value).__name__}")
        if not value.keys() <= self._names:
            unknown = sorted(value.keys() - self._names)
            raise EncodeError(f"unknown field(s) {unknown} for {self.name}; "
                              f"known: {', '.join(self._by_name)}")
        return value

    def _write_tagged(self, w: Writer, values: Mapping[str, Any], plan: Layout,
                      version: int) -> None:
        chosen = []
        for tag, (f, nullable) in plan.tagged.items():
            item = values.get(f.name, f.default)
            if not f.is_default(item):
                sub = Writer()
                try:
                    f.type.write(sub, item, version, True, nullable)
                except (EncodeError, ProtocolError) as exc:
                    raise located(exc, f.name) from None
                chosen.append((tag, sub.getvalue()))
        w.uvarint(len(chosen))
        for tag, data in chosen:
            w.uvarint(tag)
            w.uvarint(len(data))
            w.raw(data)

    def _read_tagged(self, r: Reader, values: dict[str, Any], plan: Layout,
                     version: int) -> None:
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            data = r.take(r.uvarint())
            known = plan.tagged.get(tag)
            if known is None:
                continue
            f, nullable = known
            sub = Reader(data)
            try:
                values[f.name] = f.type.read(sub, version, True, nullable)
            except ProtocolError as exc:
                raise located(exc, f.name) from None
            if sub.remaining:
                raise ProtocolError(f"{self.name}.{f.name} (tag {tag}): "
                                    f"{sub.remaining} unused bytes in the tagged field")
