"""OIDC client credentials (KIP-768, librdkafka's ``sasl.oauthbearer.method=oidc``): tokens from an
identity provider's token endpoint, for SASL/OAUTHBEARER.

One POST per token (RFC 6749 §4.4)::

    POST <sasl.oauthbearer.token.endpoint.url>
    Authorization: Basic base64(urlencode(client id) ":" urlencode(client secret))
    Content-Type: application/x-www-form-urlencoded

    grant_type=client_credentials[&scope=<sasl.oauthbearer.scope>]

and the JSON answer's ``access_token``. Its lifetime is the JWT's ``exp`` claim when the token is
a JWT (its ``sub`` is then the principal), else ``expires_in``; a token with neither is refused.
The endpoint must be HTTPS (plain HTTP only to a loopback address, for tests), its certificate
checked against its own trust setting (:class:`EndpointTrust`: ``https.ca.location`` or
``https.ca.pem``, or Java's ``ssl.truststore.*`` options in the JAAS line), else the system's CAs,
never the broker's ``ssl.ca.location``; the standard library's ``urllib`` does the request, so
OIDC needs no new dependency. A redirect is never followed (the request carries the client
secret, and a redirect may point to plain HTTP or another host): it fails the fetch, naming where
it pointed. The whole exchange has one deadline (``timeout_s``, 10 s): when it
passes, the sockets are shut down, so an endpoint that trickles its answer a byte at a time
cannot hold a fetch longer. Errors name the endpoint (:func:`~..urls.redact_url`: no user info or
query) and the HTTP status or the OAuth ``error`` code, never the client secret or a token.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ...errors import AuthenticationError, ConfigError
from .oauth_token import OAuthToken
from ..urls import is_loopback_host, redact_url

__all__ = ["OidcTokenSource", "EndpointTrust", "jwt_claims"]

DEFAULT_TIMEOUT_S = 10.0
_MAX_ANSWER_BYTES = 1 << 20


class OidcTokenSource:
    """Client-credentials tokens from one token endpoint; see the module docstring."""

    def __init__(self, endpoint_url: str, client_id: str, client_secret: str, *, scope: str | None = None,
                 extensions: Mapping[str, str] | None = None, trust: EndpointTrust | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S):
        self._url = _check_url(endpoint_url)
        self._client_id = client_id
        self._secret = client_secret
        self._scope = scope
        self._extensions = dict(extensions or {})
        self.trust = trust or EndpointTrust()
        self._timeout_s = timeout_s
        self._context: ssl.SSLContext | None = None

    @classmethod
    def from_settings(cls, config: Any, *, client_id: str | None, client_secret: str | None,
                      scope: str | None, extensions: Mapping[str, str], where: str,
                      login_options: Mapping[str, str] | None = None) -> OidcTokenSource:
        """From a producer config's ``sasl.oauthbearer.*`` settings (``where`` names the
        properties the client id and secret came from, for the error when one is missing;
        ``login_options``: Java's ``OAuthBearerLoginModule`` options, whose ``ssl.truststore.*``
        are the endpoint's trust there)."""
        url = config.sasl_oauthbearer_token_endpoint_url
        missing = [name for name, value in (("sasl.oauthbearer.token.endpoint.url", url),) if not value]
        missing += [f"the client {what} ({where})" for what, value in (("id", client_id),
                                                                       ("secret", client_secret)) if not value]
        if missing:
            raise ConfigError(f"OAUTHBEARER with OIDC needs {', '.join(missing)}")
        return cls(url, client_id, client_secret, scope=scope, extensions=extensions,
                   trust=EndpointTrust.from_settings(config, login_options or {}))

    def describe(self) -> str:
        return f"OIDC client {self._client_id!r} at {redact_url(self._url)}"

    def fetch(self, now_ms: int) -> OAuthToken:
        answer = self._post()
        value = answer.get("access_token")
        if not isinstance(value, str) or not value:
            raise AuthenticationError(f"{self.describe()}: the answer has no access_token")
        claims = jwt_claims(value)
        expires_ms = None
        try:
            if isinstance(claims.get("exp"), (int, float)) and not isinstance(claims.get("exp"), bool):
                expires_ms = int(claims["exp"] * 1000)
            elif isinstance(answer.get("expires_in"), (int, float)) and not isinstance(answer.get("expires_in"), bool):
                expires_ms = now_ms + int(answer["expires_in"] * 1000)
        except (OverflowError, ValueError):
            raise AuthenticationError(f"{self.describe()}: the token's lifetime is not a number") from None
        if expires_ms is None:
            raise AuthenticationError(f"{self.describe()}: the token has no exp claim and the answer no "
                                      "expires_in: its lifetime is unknown")
        principal = claims.get("sub") if isinstance(claims.get("sub"), str) else None
        try:
            return OAuthToken(value, expires_ms, principal, self._extensions)
        except ValueError as exc:
            raise AuthenticationError(f"{self.describe()}: {exc}") from None

    def _post(self) -> dict[str, Any]:
        form = {"grant_type": "client_credentials"}
        if self._scope:
            form["scope"] = self._scope
        basic = base64.b64encode(f"{urllib.parse.quote(self._client_id, safe='')}:"
                                 f"{urllib.parse.quote(self._secret, safe='')}".encode()).decode()
        request = urllib.request.Request(
            self._url, data=urllib.parse.urlencode(form).encode(), method="POST",
            headers={"Authorization": f"Basic {basic}", "Accept": "application/json",
                     "Content-Type": "application/x-www-form-urlencoded"})
        deadline = _Deadline(self._timeout_s)
        opener = urllib.request.build_opener(
            _NoRedirects(), _HttpHandler(deadline), _HttpsHandler(deadline, self._ssl_context()))
        try:
            with deadline, opener.open(request, timeout=self._timeout_s) as response:
                body = response.read(_MAX_ANSWER_BYTES + 1)
        except urllib.error.HTTPError as exc:
            with exc:                       # its answer's socket is closed on the way out
                if deadline.expired:
                    raise self._too_slow() from None
                if 300 <= exc.code < 400:
                    raise self._redirected(exc) from None
                raise AuthenticationError(f"{self.describe()} refused the client credentials: HTTP "
                                          f"{exc.code}{_oauth_error(exc)}") from None
        except (urllib.error.URLError, OSError, ssl.SSLError, http.client.HTTPException) as exc:
            if deadline.expired:
                raise self._too_slow() from None
            reason = getattr(exc, "reason", exc)
            raise AuthenticationError(f"{self.describe()} cannot be reached: {type(reason).__name__}: "
                                      f"{reason}") from None
        if deadline.expired:                # cut short: what was read is not the whole answer
            raise self._too_slow()
        if len(body) > _MAX_ANSWER_BYTES:
            raise AuthenticationError(f"{self.describe()}: the answer is larger than 1 MiB")
        try:
            answer = json.loads(body)
        except ValueError:
            raise AuthenticationError(f"{self.describe()}: the answer is not JSON") from None
        if not isinstance(answer, dict):
            raise AuthenticationError(f"{self.describe()}: the answer is not a JSON object")
        return answer

    def _too_slow(self) -> AuthenticationError:
        return AuthenticationError(f"{self.describe()} did not answer within {self._timeout_s:g} s")

    def _redirected(self, exc: urllib.error.HTTPError) -> AuthenticationError:
        """A 3xx answer: named with where it points (no user info or query), never followed."""
        location = exc.headers.get("Location") if exc.headers is not None else None
        target = redact_url(urllib.parse.urljoin(self._url, location)) if location else "nowhere given"
        return AuthenticationError(
            f"{self.describe()} answered HTTP {exc.code}, a redirect to {target}: redirects are not "
            f"followed (the request carries the client secret); set "
            f"sasl.oauthbearer.token.endpoint.url to the URL that issues the tokens")

    def _ssl_context(self) -> ssl.SSLContext | None:
        if not self._url.startswith("https:"):
            return None
        if self._context is None:
            self._context = self.trust.context()
        return self._context

    def __repr__(self) -> str:
        return f"OidcTokenSource({self._client_id!r} at {redact_url(self._url)})"


@dataclass(frozen=True)
class EndpointTrust:
    """The CAs that vouch for the token endpoint's certificate: its own setting, never the
    broker's (``ssl.ca.location`` is the broker's: a private-CA cluster often uses a public
    identity provider). ``location``: a PEM file or a hashed directory; ``pem``: PEM text;
    neither: the system's CAs. ``setting`` names where it came from, for errors."""

    location: str | None = None
    pem: str | None = field(default=None, repr=False)
    setting: str = "the system CAs"

    @classmethod
    def from_settings(cls, config: Any, login_options: Mapping[str, str]) -> EndpointTrust:
        """``https.ca.location`` or ``https.ca.pem`` (librdkafka), or Java's JAAS options
        ``ssl.truststore.location`` (with ``ssl.truststore.type=PEM``) or
        ``ssl.truststore.certificates``; at most one. ConfigError naming them otherwise."""
        given = {name: value for name, value in (
            ("https.ca.location", getattr(config, "https_ca_location", None)),
            ("https.ca.pem", getattr(config, "https_ca_pem", None)),
            ("ssl.truststore.location (sasl.jaas.config)", login_options.get("ssl.truststore.location")),
            ("ssl.truststore.certificates (sasl.jaas.config)",
             login_options.get("ssl.truststore.certificates")),
        ) if value is not None}
        ssl_options = sorted(key for key in login_options if key.startswith("ssl."))
        unsupported = [key for key in ssl_options if key not in _JAAS_TRUST]
        if unsupported:
            raise ConfigError(f"sasl.jaas.config: the token endpoint's {', '.join(unsupported)} "
                              f"is not supported (only its trust: ssl.truststore.location with "
                              f"ssl.truststore.type=PEM, or ssl.truststore.certificates)")
        jaas_store = [key for key in ("ssl.truststore.location", "ssl.truststore.certificates")
                      if key in login_options]
        if jaas_store and login_options.get("ssl.truststore.type", "JKS").upper() != "PEM":
            raise ConfigError(f"sasl.jaas.config: {jaas_store[0]} needs ssl.truststore.type=PEM (the "
                              f"only trust store format supported; Java's default is JKS)")
        if len(given) > 1:
            raise ConfigError(f"set only one of {', '.join(given)}: each names the CAs of the token "
                              "endpoint")
        if not given:
            return cls()
        (setting, value), = given.items()
        if not value.strip():
            raise ConfigError(f"{setting} is empty: leave it unset for the system CAs")
        if setting.startswith(("https.ca.pem", "ssl.truststore.certificates")):
            if "-----BEGIN CERTIFICATE-----" not in value:
                raise ConfigError(f"{setting} must hold PEM certificates (-----BEGIN CERTIFICATE-----)")
            return cls(pem=value, setting=setting)
        return cls(location=value, setting=f"{setting}={value}")

    def context(self) -> ssl.SSLContext:
        """A client context that checks the endpoint's certificate and host name against these CAs."""
        try:
            if self.pem is not None:
                return ssl.create_default_context(cadata=self.pem)
            if self.location is not None and os.path.isdir(self.location):
                return ssl.create_default_context(capath=self.location)
            return ssl.create_default_context(cafile=self.location)
        except (OSError, ValueError, ssl.SSLError) as exc:
            raise AuthenticationError(f"{self.setting} cannot be read as the token endpoint's CAs: "
                                      f"{type(exc).__name__}: {exc}") from None


_JAAS_TRUST = frozenset({"ssl.truststore.location", "ssl.truststore.certificates", "ssl.truststore.type"})


def jwt_claims(token: str) -> dict[str, Any]:
    """The claims of a JWT's payload, unverified (the broker verifies); ``{}`` when ``token`` is
    not a JWT."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (ValueError, TypeError):
        return {}
    return claims if isinstance(claims, dict) else {}


def _check_url(url: str) -> str:
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme == "https" and parsed.hostname:
        return url
    if parsed.scheme == "http" and parsed.hostname and is_loopback_host(parsed.hostname):
        return url
    raise ConfigError("sasl.oauthbearer.token.endpoint.url must be an https:// URL (plain http only to "
                      f"a loopback address), got {redact_url(url)!r}")



def _oauth_error(exc: urllib.error.HTTPError) -> str:
    """``: <error> (<description>)`` from an RFC 6749 §5.2 error body, or nothing."""
    try:
        error = json.loads(exc.read(_MAX_ANSWER_BYTES))
    except (ValueError, OSError):
        return ""
    if not isinstance(error, dict) or not isinstance(error.get("error"), str):
        return ""
    description = error.get("error_description")
    return f": {error['error']}" + (f" ({description})" if isinstance(description, str) else "")


class _Deadline:
    """One deadline for a whole HTTP exchange: when it passes, a timer shuts down every socket the
    exchange opened, so a read in progress ends at once. (A socket timeout bounds each read only:
    a server trickling a byte every few seconds would hold a fetch for ever.) A context manager:
    the timer starts on entry; on exit it is cancelled and the watched sockets are let go."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.expired = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []     # duplicates: shutting one ends the connection
        self._done = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._timer.cancel()
        with self._lock:
            self._done = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            sock.close()

    def create_connection(self, address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        """``socket.create_connection``, the socket watched by this deadline."""
        sock = socket.create_connection(address, *args, **kwargs)
        with self._lock:
            if self.expired or self._done:
                _shut(sock)
            else:
                self._sockets.append(sock.dup())
        return sock

    def _expire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass                        # already closed by the other side


def _watched(connection_class: type, deadline: _Deadline) -> Callable[..., Any]:
    """A factory of ``connection_class`` connections whose sockets ``deadline`` watches (through
    http.client's ``_create_connection`` seam, which its ``connect`` uses, tunnels included)."""
    def make(host: str, **kwargs: Any) -> Any:
        connection = connection_class(host, **kwargs)
        connection._create_connection = deadline.create_connection
        return connection
    return make


class _HttpHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline):
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_watched(http.client.HTTPConnection, self._deadline), req)


class _HttpsHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline, context: ssl.SSLContext | None):
        super().__init__(context=context)
        self._deadline = deadline

    def https_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_watched(http.client.HTTPSConnection, self._deadline), req,
                            context=self._context)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx answer stays an HTTPError: following it would send the client secret again, perhaps
    in clear or to another host."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None
