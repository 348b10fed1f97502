"""An OAuth bearer token as SASL/OAUTHBEARER sends it (:mod:`.oauth` makes them).

Checked as Kafka checks them: the value is an RFC 6750 ``b64token``; SASL extension names are
letters only (and not ``auth``), their values printable ASCII (RFC 7628). The value never shows in
a repr.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

__all__ = ["OAuthToken", "check_extensions"]

_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")  # RFC 6750 b64token
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")


@dataclass(frozen=True)
class OAuthToken:
    """A bearer token and what goes with it; the value is never shown."""

    value: str = field(repr=False)
    expires_at_ms: int
    principal: str | None = None
    extensions: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not isinstance(self.value, str) or not _TOKEN.fullmatch(self.value):
            raise ValueError("the token is not a bearer token (RFC 6750: letters, digits and "
                             "-._~+/, then '=' padding)")
        object.__setattr__(self, "extensions", MappingProxyType(check_extensions(self.extensions)))


def check_extensions(extensions: Mapping[str, Any] | None) -> dict[str, str]:
    """SASL extensions checked as Kafka checks them (RFC 7628): keys of letters, not ``auth``;
    values of printable ASCII, space and tabs or line breaks."""
    out: dict[str, str] = {}
    for key, value in (extensions or {}).items():
        if not isinstance(key, str) or not _EXTENSION_KEY.fullmatch(key) or key == "auth":
            raise ValueError(f"SASL extension name {key!r} must be letters only, and not 'auth'")
        if not isinstance(value, str) or not _EXTENSION_VALUE.fullmatch(value):
            raise ValueError(f"SASL extension {key!r}: the value must be printable ASCII")
        out[key] = value
    return out
