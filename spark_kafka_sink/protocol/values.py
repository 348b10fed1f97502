"""Struct: the immutable value a message schema decodes to.

Invariants: a Struct holds every field of its schema (fields absent at the decoded version carry
their defaults); arrays are tuples and nested structs are Structs, so a decoded Struct is deeply
immutable and hashable. ``records``/bytes fields may be read-only memoryviews over the frame.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping


class Struct:
    """An immutable record with attribute access: ``resp.brokers[0].node_id``."""

    __slots__ = ("_type_name", "_values")

    def __init__(self, type_name: str, values: Mapping[str, Any]):
        object.__setattr__(self, "_type_name", type_name)
        object.__setattr__(self, "_values", dict(values))

    @property
    def type_name(self) -> str:
        """The schema's struct name, e.g. ``"MetadataResponseBroker"``."""
        return self._type_name

    @property
    def fields(self) -> tuple[str, ...]:
        """Field names in declaration order."""
        return tuple(self._values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(
                f"{self._type_name} has no field {name!r}; fields: {', '.join(self._values)}"
            ) from None

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{self._type_name} is immutable; use replace()")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{self._type_name} is immutable")

    def replace(self, **changes: Any) -> "Struct":
        """A copy with some fields changed."""
        unknown = set(changes) - set(self._values)
        if unknown:
            raise AttributeError(f"{self._type_name} has no field(s) {sorted(unknown)}")
        return Struct(self._type_name, {**self._values, **changes})

    def to_dict(self) -> dict[str, Any]:
        """Plain data: nested dicts and lists, bytes instead of memoryviews."""
        return {name: _plain(value) for name, value in self._values.items()}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Struct):
            return NotImplemented
        return self._type_name == other._type_name and self._values == other._values

    def __hash__(self) -> int:
        return hash((self._type_name, tuple(self._values.items())))

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={_short(value)}" for name, value in self._values.items())
        return f"{self._type_name}({inner})"

    def __reduce__(self):
        return (Struct, (self._type_name, self._values))


def _plain(value: Any) -> Any:
    if isinstance(value, Struct):
        return value.to_dict()
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    if isinstance(value, (memoryview, bytearray)):
        return bytes(value)
    return value


def _short(value: Any) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value[:16])
        more = "..." if len(value) > 16 else ""
        return f"<{len(value)} bytes {data.hex()}{more}>"
    if isinstance(value, tuple):
        return "[" + ", ".join(_short(item) for item in value) + "]"
    return repr(value)
