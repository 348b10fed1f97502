"""Version ranges and version negotiation.

Kafka writes version ranges as ``"3+"`` (3 and later), ``"0-3"`` (inclusive) or ``"none"``.
A client and a broker talk at the highest version of an API that both support; the broker's
ranges come from its ApiVersions response.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol

from ..errors import UnsupportedVersionError

#: The open end of a ``"N+"`` range (Kafka uses ``Short.MAX_VALUE``).
OPEN_END = 0x7FFF


@dataclass(frozen=True)
class VersionRange:
    """An inclusive range of versions. ``min > max`` is the empty range (``"none"``)."""

    min: int
    max: int

    @classmethod
    def parse(cls, text: str) -> "VersionRange":
        """Parse Kafka's ``"3+"``, ``"0-3"``, ``"5"`` or ``"none"``."""
        text = text.strip()
        try:
            if text == "none":
                return NONE
            if text.endswith("+"):
                return cls(int(text[:-1]), OPEN_END)
            low, sep, high = text.partition("-")
            return cls(int(low), int(high) if sep else int(low))
        except ValueError:
            raise ValueError(f"not a version range: {text!r}") from None

    @property
    def is_empty(self) -> bool:
        return self.min > self.max

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min <= version <= self.max

    def intersect(self, other: "VersionRange") -> "VersionRange":
        """The versions in both ranges (possibly empty)."""
        return VersionRange(max(self.min, other.min), min(self.max, other.max))

    def __str__(self) -> str:
        if self.is_empty:
            return "none"
        if self.max == OPEN_END:
            return f"v{self.min}+"
        return f"v{self.min}-v{self.max}"


NONE = VersionRange(0, -1)


class _Api(Protocol):
    name: str
    api_key: int
    min_version: int
    max_version: int


def ranges_from_api_versions(response: Any) -> dict[int, VersionRange]:
    """Map api_key -> VersionRange from a decoded ApiVersions response body."""
    return {
        entry.api_key: VersionRange(entry.min_version, entry.max_version)
        for entry in response.api_keys
    }


def negotiate(api: _Api, broker_ranges: Mapping[int, VersionRange]) -> int:
    """The highest version of ``api`` that both we and the broker support.

    Raises UnsupportedVersionError naming the API, our range and the broker's range.
    """
    ours = VersionRange(api.min_version, api.max_version)
    theirs = broker_ranges.get(api.api_key)
    if theirs is None:
        raise UnsupportedVersionError(
            f"the broker does not support {api.name} (api key {api.api_key}) at all; "
            f"this client supports {ours}")
    common = ours.intersect(theirs)
    if common.is_empty:
        raise UnsupportedVersionError(
            f"no common version of {api.name} (api key {api.api_key}): "
            f"this client supports {ours}, the broker supports {theirs}")
    return common.max
