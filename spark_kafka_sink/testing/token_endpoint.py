"""TokenEndpoint: an OAuth 2 token endpoint on loopback, for testing OAUTHBEARER (OIDC) clients.

    with TokenEndpoint({"sink-client": "s3cret"}, lifetime_s=60) as idp:
        producer = KafkaProducer({..., "sasl.mechanism": "OAUTHBEARER",
                                  "sasl.oauthbearer.method": "oidc",
                                  "sasl.oauthbearer.token.endpoint.url": idp.url,
                                  "sasl.oauthbearer.client.id": "sink-client",
                                  "sasl.oauthbearer.client.secret": "s3cret"})
        idp.issued                                   # tokens handed out so far

``POST /token`` takes the client-credentials grant (RFC 6749 §4.4) with HTTP Basic client
authentication, or ``client_id``/``client_secret`` in the form, and answers
``{"access_token", "token_type": "bearer", "expires_in"}``; a wrong client is 401
``invalid_client``. The tokens are JWTs whose ``sub`` is the client id, with ``iat``, ``exp``
(``lifetime_s`` on), ``iss``, the ``scope`` asked for and, when set, ``aud``:

- unsigned (``alg: none``) by default, which Kafka's unsecured validator (the embedded broker's
  OAUTHBEARER listener) accepts;
- signed RS256 with ``signed=True``, and the public key served as a JWKS at ``GET /jwks`` (and
  written to a file, :meth:`write_jwks`), for a broker running Kafka's
  ``OAuthBearerValidatorCallbackHandler``.

``tls`` (a :class:`~spark_kafka_sink.embedded.TlsMaterial`, e.g. an embedded cluster's) serves
HTTPS with its server certificate, which clients trust through its CA; without it, plain HTTP
on 127.0.0.1 (our producer accepts plain HTTP only to loopback). :meth:`fail_next` makes the
next answers an error, to test refresh failures; :meth:`redirect_next` a redirect; :meth:`stall`
makes every answer trickle a byte at a time and never end (a stuck identity provider), until
:meth:`unstall`. Client secrets never appear in a repr or a log.
"""

from __future__ import annotations

import base64
import json
import secrets
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .faultproxy import HOST

__all__ = ["TokenEndpoint"]


class TokenEndpoint:
    """See the module docstring."""

    def __init__(self, clients: Mapping[str, str], *, lifetime_s: int = 3600, signed: bool = False,
                 tls: Any = None, issuer: str = "spark-kafka-sink-testing", audience: str | None = None,
                 clock: Callable[[], float] = time.time):
        if not clients:
            raise ValueError("TokenEndpoint needs at least one client (id -> secret)")
        if lifetime_s < 1:
            raise ValueError(f"lifetime_s must be at least 1, got {lifetime_s}")
        self._clients = dict(clients)
        self.lifetime_s = lifetime_s
        self.issuer = issuer
        self.audience = audience
        self._clock = clock
        self._tls = tls
        self._key = _rsa_key() if signed else None
        self.key_id = secrets.token_hex(8) if signed else None
        self._lock = threading.Lock()
        self._issued: list[str] = []        # client ids, one per token handed out
        self._failures: list[int] = []      # HTTP statuses to answer next, in order
        self._redirects: list[tuple[int, str]] = []   # (status, Location) to answer next
        self._stall_s: float | None = None  # answers trickle a byte every this many seconds
        self._closing = threading.Event()
        self.stalled = 0                    # requests answered by trickling
        self.credentials_received = 0       # requests that carried an HTTP Basic Authorization
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> TokenEndpoint:
        if self._server is not None:
            return self
        server = ThreadingHTTPServer((HOST, 0), _handler(self))
        server.daemon_threads = True
        if self._tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self._tls.server_cert_path, self._tls.server_key_path)
            server.socket = context.wrap_socket(server.socket, server_side=True)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="token-endpoint", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()                 # ends the trickling answers
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> TokenEndpoint:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # --- what tests read and steer ------------------------------------------------------------

    @property
    def url(self) -> str:
        """The token endpoint: ``http(s)://127.0.0.1:<port>/token``."""
        return f"{self._base()}/token"

    @property
    def jwks_url(self) -> str:
        return f"{self._base()}/jwks"

    @property
    def issued(self) -> int:
        """Tokens handed out so far."""
        with self._lock:
            return len(self._issued)

    def issued_to(self, client_id: str) -> int:
        with self._lock:
            return self._issued.count(client_id)

    def fail_next(self, count: int = 1, status: int = 503) -> None:
        """Answer the next ``count`` token requests with HTTP ``status``."""
        with self._lock:
            self._failures.extend([status] * count)

    def redirect_next(self, location: str, status: int = 302) -> None:
        """Answer the next token request with HTTP ``status`` (a redirect) to ``location``."""
        with self._lock:
            self._redirects.append((status, location))

    def stall(self, byte_every_s: float = 1.0) -> None:
        """From now on answer every token request by trickling an endless header, one byte every
        ``byte_every_s``: a client's per-read timeout never fires, only a whole deadline ends it."""
        with self._lock:
            self._stall_s = byte_every_s

    def unstall(self) -> None:
        """Answer token requests normally again (those trickling go on until their client leaves)."""
        with self._lock:
            self._stall_s = None

    def jwks(self) -> dict[str, Any]:
        """The JSON Web Key Set of the signing key (``signed=True`` only)."""
        if self._key is None:
            raise ValueError("this endpoint signs nothing (signed=False): it has no JWKS")
        numbers = self._key.public_key().public_numbers()
        return {"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.key_id,
                          "n": _b64url(_unsigned(numbers.n)), "e": _b64url(_unsigned(numbers.e))}]}

    def write_jwks(self, path: Path) -> Path:
        """The JWKS in a file (a broker can read ``file://`` JWKS URLs); ``path``."""
        path.write_text(json.dumps(self.jwks()))
        return path

    def token_for(self, client_id: str, scope: str | None = None) -> str:
        """A token as the endpoint would issue it (not counted in :attr:`issued`)."""
        now = int(self._clock())
        claims: dict[str, Any] = {"sub": client_id, "iat": now, "exp": now + self.lifetime_s,
                                  "iss": self.issuer, "jti": secrets.token_hex(8)}
        if scope:
            claims["scope"] = scope
        if self.audience:
            claims["aud"] = self.audience
        if self._key is None:
            return f"{_b64url_json({'alg': 'none'})}.{_b64url_json(claims)}."
        header = {"alg": "RS256", "typ": "JWT", "kid": self.key_id}
        signing_input = f"{_b64url_json(header)}.{_b64url_json(claims)}"
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64url(signature)}"

    def __repr__(self) -> str:
        state = "stopped" if self._server is None else self.url
        return (f"TokenEndpoint({state}, clients={sorted(self._clients)} (secrets hidden), "
                f"lifetime_s={self.lifetime_s}, signed={self._key is not None})")

    # --- serving ------------------------------------------------------------------------------

    def _base(self) -> str:
        if self._server is None:
            raise RuntimeError("the token endpoint is not started")
        scheme = "https" if self._tls is not None else "http"
        return f"{scheme}://{HOST}:{self._server.server_address[1]}"

    def _answer_token(self, authorization: str | None, form: Mapping[str, str]) -> tuple[int, dict]:
        with self._lock:
            failure = self._failures.pop(0) if self._failures else None
        if failure is not None:
            return failure, {"error": "temporarily_unavailable"}
        if form.get("grant_type") != "client_credentials":
            return HTTPStatus.BAD_REQUEST, {"error": "unsupported_grant_type"}
        client_id, secret = _client_of(authorization, form)
        if client_id is None or not secrets.compare_digest(self._clients.get(client_id, "\0"), secret or ""):
            return HTTPStatus.UNAUTHORIZED, {"error": "invalid_client",
                                             "error_description": "unknown client or wrong secret"}
        token = self.token_for(client_id, form.get("scope"))
        with self._lock:
            self._issued.append(client_id)
        return HTTPStatus.OK, {"access_token": token, "token_type": "bearer", "expires_in": self.lifetime_s}


def _handler(endpoint: TokenEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server name
            self._count_credentials()
            if self.path.split("?")[0] != "/token":
                self._send(HTTPStatus.NOT_FOUND, {"error": "not_found"})
                return
            with endpoint._lock:
                stall_s = endpoint._stall_s
                redirect = endpoint._redirects.pop(0) if endpoint._redirects else None
            if stall_s is not None:
                self._trickle(stall_s)
                return
            if redirect is not None:
                self.send_response(redirect[0])
                self.send_header("Location", redirect[1])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            length = int(self.headers.get("Content-Length") or 0)
            form = dict(urllib.parse.parse_qsl(self.rfile.read(min(length, 1 << 16)).decode("utf-8", "replace")))
            self._send(*endpoint._answer_token(self.headers.get("Authorization"), form))

        def do_GET(self) -> None:  # noqa: N802
            self._count_credentials()
            if self.path.split("?")[0] == "/jwks" and endpoint._key is not None:
                self._send(HTTPStatus.OK, endpoint.jwks())
            else:
                self._send(HTTPStatus.NOT_FOUND, {"error": "not_found"})

        def _send(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(int(status))
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def _count_credentials(self) -> None:
            if (self.headers.get("Authorization") or "").lower().startswith("basic "):
                with endpoint._lock:
                    endpoint.credentials_received += 1

        def _trickle(self, byte_every_s: float) -> None:
            with endpoint._lock:
                endpoint.stalled += 1
            self.close_connection = True
            data = b"HTTP/1.1 200 OK\r\nX-Stalled: "
            try:
                for byte in data:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                while not endpoint._closing.wait(byte_every_s):
                    self.wfile.write(b"z")
                    self.wfile.flush()
            except OSError:
                return                      # the client gave up

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet, and no secrets
            return

    return Handler


def _client_of(authorization: str | None, form: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The client id and secret from HTTP Basic (RFC 6749 §2.3.1: each form-urlencoded) or the form."""
    if authorization and authorization.lower().startswith("basic "):
        try:
            raw = base64.b64decode(authorization[6:].strip(), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return None, None
        client_id, sep, secret = raw.partition(":")
        if not sep:
            return None, None
        return urllib.parse.unquote_plus(client_id), urllib.parse.unquote_plus(secret)
    return form.get("client_id"), form.get("client_secret")


def _rsa_key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _unsigned(number: int) -> bytes:
    return number.to_bytes((number.bit_length() + 7) // 8, "big")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _b64url_json(value: Any) -> str:
    return _b64url(json.dumps(value, separators=(",", ":")).encode())
