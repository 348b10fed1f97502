"""ApiMessage: one Kafka API (key, our version range, flexible versions, request and response).

Header versions follow Kafka's rule: flexible versions use request header v2 and response
header v1, others request header v1 and response header v0. ApiVersions is the exception: its
response always uses header v0, so a client can read the error of a version the broker does not
understand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..errors import ProtocolError, UnsupportedVersionError
from .primitives import Writer
from .schema import Field, Schema
from .values import Struct
from .versions import VersionRange

API_VERSIONS_KEY = 18


@dataclass(frozen=True)
class ApiMessage:
    """A Kafka API as declared from its JSON specs, limited to the versions this client speaks."""

    name: str
    api_key: int
    min_version: int
    max_version: int
    flexible_versions: VersionRange
    request: Schema = field(repr=False)
    response: Schema = field(repr=False)

    @classmethod
    def declare(cls, name: str, api_key: int, versions: str, flexible: str,
                request: list[Field], response: list[Field]) -> "ApiMessage":
        """Build an API from field lists; ``versions`` is our supported range, e.g. ``"4-12"``."""
        ours = VersionRange.parse(versions)
        flexible_range = VersionRange.parse(flexible)
        api = cls(name, api_key, ours.min, ours.max, flexible_range,
                  Schema(f"{name}Request", request, flexible_versions=flexible_range),
                  Schema(f"{name}Response", response, flexible_versions=flexible_range))
        _check_tagged(api.request.fields, flexible_range)
        _check_tagged(api.response.fields, flexible_range)
        return api

    @property
    def versions(self) -> VersionRange:
        return VersionRange(self.min_version, self.max_version)

    @property
    def flexible_from(self) -> int | None:
        """The first flexible version, or None if no version is flexible."""
        return None if self.flexible_versions.is_empty else self.flexible_versions.min

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible_versions

    def request_header_version(self, version: int) -> int:
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        if self.api_key == API_VERSIONS_KEY:
            return 0
        return 1 if self.is_flexible(version) else 0

    def check_version(self, version: int) -> None:
        """Raise UnsupportedVersionError unless we speak ``version`` of this API."""
        if not isinstance(version, int) or version not in self.versions:
            raise UnsupportedVersionError(
                f"{self.name} v{version} is not supported by this client ({self.versions})")

    def encode_request(self, version: int, body: Mapping[str, Any] | Struct) -> bytes:
        self.check_version(version)
        return self.request.encode(version, body)

    def encode_request_into(self, w: Writer, version: int,
                            body: Mapping[str, Any] | Struct) -> None:
        """Append the request body to ``w`` (framing writes the header first)."""
        self.check_version(version)
        self.request.encode_into(w, version, body)

    def decode_request(self, version: int, data: bytes | bytearray | memoryview) -> Struct:
        self.check_version(version)
        return self._decode(self.request, version, data, "request")

    def encode_response(self, version: int, body: Mapping[str, Any] | Struct) -> bytes:
        self.check_version(version)
        return self.response.encode(version, body)

    def decode_response(self, version: int, data: bytes | bytearray | memoryview) -> Struct:
        self.check_version(version)
        return self._decode(self.response, version, data, "response")

    def _decode(self, schema: Schema, version: int, data: Any, kind: str) -> Struct:
        try:
            return schema.decode(version, data)
        except ProtocolError as exc:
            raise type(exc)(f"{self.name} v{version} {kind}: {exc}") from None

    def __repr__(self) -> str:
        return f"ApiMessage({self.name}, key {self.api_key}, {self.versions})"


def _check_tagged(fields: tuple[Field, ...], flexible: VersionRange) -> None:
    """Tagged fields can only exist in flexible versions (checked through nested structs)."""
    for f in fields:
        if f.tag is not None and (flexible.is_empty or f.tagged_versions.min < flexible.min):
            raise ValueError(f"field {f.name}: tagged in {f.tagged_versions}, "
                             f"but only {flexible} are flexible")
        inner = getattr(f.type, "element", f.type)
        if isinstance(inner, Schema):
            _check_tagged(inner.fields, flexible)
