"""URLs as messages, reprs and redacted configs show them: :func:`redact_url`.

A token endpoint URL may carry a secret (``https://user:password@idp/token``,
``?client_secret=...``); wherever such a URL is shown, it goes through :func:`redact_url` first.
"""

from __future__ import annotations

import ipaddress
import urllib.parse

__all__ = ["redact_url"]


def redact_url(url: str) -> str:
    """``url`` without its user info, query and fragment (they may hold secrets): scheme, host,
    port and path only. Text that is not a URL comes back as ``[hidden]`` when it could hold a
    secret (an ``@``, ``?`` or ``#``), else unchanged."""
    try:
        parsed = urllib.parse.urlsplit(url)
        host = parsed.hostname or ""
        port = parsed.port
    except ValueError:             # e.g. a port that is not a number
        return "[hidden]" if any(c in url for c in "@?#") else url
    if not parsed.scheme or not parsed.netloc:
        return "[hidden]" if any(c in url for c in "@?#") else url
    netloc = f"[{host}]" if ":" in host else host
    if port:
        netloc += f":{port}"
    return urllib.parse.urlunsplit((parsed.scheme, netloc, parsed.path, "", ""))


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback IP address (where plain http may carry credentials)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
