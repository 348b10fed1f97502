"""HTTP to a Schema Registry: one request, tried on each URL in turn (the standard library's
``http.client``; no new dependency).

:meth:`RegistryTransport.request` sends ``method path`` (the path already escaped) with the JSON
body to the first URL of ``schema.registry.url``, and goes on to the next one when that one
gives no answer: the connection fails (refused, reset, no answer within
``schema.registry.request.timeout.ms``, a TLS handshake that fails) or it answers 408, 429 or
5xx (as Confluent's clients fail over). Any other answer, success or not, is the
:class:`RegistryAnswer` (the caller turns an error status into its error). When no URL answered,
:class:`~.errors.RegistryUnreachableError` names each URL with its reason
(:class:`~.errors.RegistryTlsError` when each one failed its TLS handshake). One pass over the
URLs, no retries: the driver resolves its schemas once per query. Redirects are not followed.

Every request carries ``Accept`` and ``Content-Type`` ``application/vnd.schemaregistry.v1+json``
and the credentials (:class:`RegistryCredentials`): HTTP Basic from
``schema.registry.basic.auth.user.info`` (base64 of ``user:password``, as Confluent's clients
send it), or ``Bearer`` with the static token or the provider's (fetched through the OAUTHBEARER
:class:`~..client.auth.oauth.TokenCache`, so it is refreshed at 80% of its lifetime), with
Confluent Cloud's ``target-sr-cluster`` and ``Confluent-Identity-Pool-Id`` headers when set.
HTTPS checks the registry's certificate against ``schema.registry.ssl.ca.location`` (else the
system CAs) and its host name (unless turned off), and presents the client certificate when one is
set; a file that cannot be loaded is a ConfigError naming the setting, when the transport is
made. Neither a credential nor the key password appears in a log line, an error or a repr.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import socket
import ssl
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable

from ..client.auth.oauth import CallbackTokenSource, TokenCache, import_provider
from ..client.tls import build_ssl_context
from ..client.urls import is_loopback_host
from ..clock import SYSTEM_CLOCK, Clock
from ..errors import AuthenticationError, ConfigError
from ..version import __version__
from .config import RegistryConfig
from .errors import RegistryAuthError, RegistryTlsError, RegistryUnreachableError

log = logging.getLogger(__name__)

__all__ = ["RegistryTransport", "RegistryAnswer", "RegistryCredentials", "registry_ssl_context",
           "CONTENT_TYPE", "FAILOVER_STATUSES"]

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPT = f"{CONTENT_TYPE}, application/vnd.schemaregistry+json, application/json"
FAILOVER_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
"""Answers after which the next URL is tried (Confluent's retriable statuses)."""
MAX_ANSWER_BYTES = 16 << 20
_PROVIDER_OPTION = "schema.registry.bearer.auth.token.provider"


@dataclass(frozen=True)
class RegistryAnswer:
    """A registry's answer: the HTTP ``status``, the ``body`` (parsed JSON, or the text when it is
    not JSON) and the ``url`` that gave it (the base URL, as configured)."""

    status: int
    body: Any
    url: str

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def error_code(self) -> int | None:
        code = self.body.get("error_code") if isinstance(self.body, dict) else None
        return code if isinstance(code, int) and not isinstance(code, bool) else None

    @property
    def message(self) -> str:
        """The registry's own words: its JSON ``message``, else the start of the body."""
        if isinstance(self.body, dict) and isinstance(self.body.get("message"), str):
            return self.body["message"]
        text = self.body if isinstance(self.body, str) else json.dumps(self.body)
        return text[:300] or "(no message)"


class RegistryCredentials:
    """The ``Authorization`` (and Confluent Cloud) headers of every request; ``kind`` names them
    in errors ("basic auth", "a bearer token", "no credentials")."""

    def __init__(self, config: RegistryConfig, *, clock: Clock = SYSTEM_CLOCK,
                 spawn: Callable[[Callable[[], None]], None] | None = None):
        self._basic = None
        self._static = config.bearer_auth_token
        self._tokens: TokenCache | None = None
        self._timeout_s = config.request_timeout_ms / 1000
        self._extra = {name: value for name, value in (
            ("target-sr-cluster", config.bearer_auth_logical_cluster),
            ("Confluent-Identity-Pool-Id", config.bearer_auth_identity_pool_id)) if value is not None}
        if config.basic_auth_user_info is not None:
            self._basic = "Basic " + base64.b64encode(config.basic_auth_user_info.encode()).decode()
            self.kind = "basic auth"
        elif config.bearer_auth_token is not None:
            self.kind = "a static bearer token"
        elif config.bearer_auth_token_provider is not None:
            provider = config.bearer_auth_token_provider
            if isinstance(provider, str):
                function = import_provider(provider, _PROVIDER_OPTION)
                label = f"{_PROVIDER_OPTION} {provider}"
            else:
                function = provider
                label = (f"{_PROVIDER_OPTION} {getattr(provider, '__module__', '?')}."
                         f"{getattr(provider, '__qualname__', type(provider).__name__)}")
            source = CallbackTokenSource(function, config.bearer_auth_config, label)
            self._tokens = TokenCache(source, clock=clock, spawn=spawn)
            self.kind = f"a bearer token from {label}"
        else:
            self.kind = "no credentials"

    @property
    def present(self) -> bool:
        return self.kind != "no credentials"

    def headers(self) -> dict[str, str]:
        """The headers to send now; RegistryAuthError when the token provider gives no token."""
        if self._basic is not None:
            return {"Authorization": self._basic}
        if self._static is not None:
            return {"Authorization": f"Bearer {self._static}", **self._extra}
        if self._tokens is not None:
            try:
                token = self._tokens.token(self._timeout_s)
            except AuthenticationError as exc:
                raise RegistryAuthError(f"no bearer token for the schema registry: {exc}") from None
            return {"Authorization": f"Bearer {token.value}", **self._extra}
        return {}

    def __repr__(self) -> str:
        return f"RegistryCredentials({self.kind})"


def registry_ssl_context(config: RegistryConfig) -> ssl.SSLContext:
    """The client TLS context of ``config``'s ``schema.registry.ssl.*`` settings (module
    docstring), built as the producer's is; ConfigError naming the setting whose file cannot be
    loaded."""
    return build_ssl_context(config, prefix="schema.registry.")


class RegistryTransport:
    """Requests to the registry's URLs in turn; see the module docstring. ``requests`` counts
    the HTTP requests sent (each URL tried counts)."""

    def __init__(self, config: RegistryConfig, *, clock: Clock = SYSTEM_CLOCK,
                 spawn: Callable[[Callable[[], None]], None] | None = None):
        self._urls = config.urls
        self._timeout_s = config.request_timeout_ms / 1000
        self.credentials = RegistryCredentials(config, clock=clock, spawn=spawn)
        self._context = (registry_ssl_context(config)
                         if any(url.startswith("https:") for url in self._urls) else None)
        self.requests = 0
        if self.credentials.present:
            for url in self._urls:
                host = urllib.parse.urlsplit(url).hostname or ""
                if url.startswith("http:") and not is_loopback_host(host):
                    log.warning("the schema registry credentials (%s) go unencrypted to %s",
                                self.credentials.kind, url)

    @property
    def urls(self) -> tuple[str, ...]:
        return self._urls

    def request(self, method: str, path: str, body: Any = None) -> RegistryAnswer:
        """``method path`` with ``body`` (JSON) on each URL until one answers (module docstring)."""
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Accept": ACCEPT, "User-Agent": f"spark-kafka-sink/{__version__}",
                   **self.credentials.headers()}
        if payload is not None:
            headers["Content-Type"] = CONTENT_TYPE
        reasons: list[str] = []
        tls_only = True
        for url in self._urls:
            try:
                answer = self._send(url, method, path, payload, headers)
            except ssl.SSLError as exc:
                reasons.append(f"{url}: {_tls_reason(exc)}")
                continue
            except (OSError, http.client.HTTPException) as exc:
                tls_only = False
                reasons.append(f"{url}: {_network_reason(exc, self._timeout_s)}")
                continue
            if answer.status in FAILOVER_STATUSES:
                tls_only = False
                reasons.append(f"{url}: HTTP {answer.status}: {answer.message}")
                continue
            log.debug("schema registry %s %s%s: HTTP %d", method, url, path, answer.status)
            return answer
        error = RegistryTlsError if tls_only else RegistryUnreachableError
        raise error(f"the schema registry did not answer {method} {path} on any URL of "
                    f"schema.registry.url: {'; '.join(reasons)}", reasons=tuple(reasons))

    def _send(self, url: str, method: str, path: str, payload: bytes | None,
              headers: dict[str, str]) -> RegistryAnswer:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme == "https":
            connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                parts.hostname, parts.port, timeout=self._timeout_s, context=self._context)
        else:
            connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=self._timeout_s)
        self.requests += 1
        try:
            connection.request(method, parts.path + path, body=payload, headers=headers)
            response = connection.getresponse()
            raw = response.read(MAX_ANSWER_BYTES + 1)
        finally:
            connection.close()
        if len(raw) > MAX_ANSWER_BYTES:
            raise http.client.HTTPException(f"an answer larger than {MAX_ANSWER_BYTES >> 20} MiB")
        text = raw.decode("utf-8", "replace")
        try:
            parsed: Any = json.loads(text) if text.strip() else None
        except ValueError:
            parsed = text
        return RegistryAnswer(response.status, parsed, url)

    def __repr__(self) -> str:
        return f"RegistryTransport({', '.join(self._urls)}; {self.credentials.kind})"


def _tls_reason(exc: ssl.SSLError) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (f"TLS handshake failed: certificate verify failed: {exc.verify_message} "
                f"(schema.registry.ssl.ca.location names the CAs to trust)")
    reason = getattr(exc, "reason", None) or str(exc)
    if isinstance(exc, ssl.SSLEOFError):     # with TLS 1.3, a refused client certificate can look so
        return ("TLS connection closed by the registry before it answered: it may want a client "
                "certificate, or have refused this one (schema.registry.ssl.certificate.location, "
                "...ssl.key.location)")
    if "CERTIFICATE" in reason.upper() and "ALERT" in reason.upper():
        return (f"TLS handshake failed: {reason}: the registry refused the client certificate, or "
                f"its absence (schema.registry.ssl.certificate.location, ...ssl.key.location)")
    if "WRONG_VERSION_NUMBER" in reason.upper() or "RECORD_LAYER" in reason.upper():
        return f"TLS handshake failed: {reason} (is this an https:// registry?)"
    return f"TLS handshake failed: {reason}"


def _network_reason(exc: BaseException, timeout_s: float) -> str:
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"no answer within {timeout_s:g} s (schema.registry.request.timeout.ms)"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return f"host name not resolved ({exc.strerror or exc})"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection without an answer (an https:// registry?)"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{type(exc).__name__}: {exc.strerror}"
    return f"{type(exc).__name__}: {exc}"

