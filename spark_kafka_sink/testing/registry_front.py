"""RegistryFront: an HTTP(S) front for a schema registry that checks what clients send, for tests.

    with SchemaRegistry() as registry, RegistryFront(registry.url, basic=("sink", "s3cret"),
                                                     tls=True, client_auth=True) as front:
        RegistryClient(RegistryConfig(front.sink_options()))     # the sink's registry client
        SchemaRegistryClient(front.client_conf())                # confluent-kafka's
        front.requests                                           # what each request carried

A registry's own authentication wants an identity server (Apicurio's is OIDC): the front stands
in for it. It listens on 127.0.0.1 (a free port) and forwards each request (GET, POST, PUT or
DELETE; path, query, body, ``Content-Type`` and ``Accept``; never the credentials) to the upstream
registry, an ``http://`` URL, then relays the upstream's status, headers and body. ``url`` is the
front's address with the upstream's path (Apicurio's ``/apis/ccompat/v7``): a drop-in for it.

- ``basic=(user, password)``: requests need that ``Authorization: Basic``. ``bearer``: a token, or
  a function of the token saying whether it is valid; requests need ``Authorization: Bearer``.
  With both, either passes. A missing or wrong credential is answered 401 with a Confluent error
  body (``{"error_code": 40101, "message": ...}``) and is not forwarded.
- ``tls=True`` serves HTTPS with a server certificate (SAN 127.0.0.1 and localhost) of a CA made
  for this front (``embedded/certs.py``), trusted through ``ca_location``. ``client_auth=True``
  also requires a client certificate that CA signed: ``client_certificate_location``,
  ``client_key_location`` (encrypted with ``client_key_password``). Each refused handshake adds
  its TLS reason to ``handshake_failures``.
- ``requests``: one :class:`FrontRequest` per request (method, path, query, the kind of credential
  sent and whether it passed, the basic-auth user name, the client certificate's common name,
  whether it was forwarded, the status answered); never a password or a token.
- ``client_conf()`` gives confluent-kafka's ``SchemaRegistryClient`` settings, ``sink_options()``
  the sink's ``schema.registry.*`` options: the URL, the CA, the client certificate and the
  credentials (``credentials="basic"``, ``"bearer"`` or ``"none"``; by default basic when set).

An upstream that cannot be reached is answered 502, one silent for ``upstream_timeout_s`` 504,
with a Confluent error body. :meth:`close` stops the server, ends the open connections and removes
the certificates' temporary directory. No repr, record or log line holds a secret.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import http.client
import json
import secrets
import shutil
import socket
import ssl
import sys
import tempfile
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ..embedded.certs import generate_tls
from ..embedded.security import TlsMaterial
from .faultproxy import HOST

__all__ = ["RegistryFront", "FrontRequest", "UNAUTHORIZED_ERROR_CODE", "LOGICAL_CLUSTER"]

UNAUTHORIZED_ERROR_CODE = 40101
LOGICAL_CLUSTER = "lsrc-registry-front"
"""The logical cluster ``client_conf`` names: confluent-kafka's static bearer token needs one."""
CLIENT_TIMEOUT_S = 10
CREDENTIALS = ("auto", "basic", "bearer", "none")
MAX_BODY_BYTES = 16 << 20
_HANDSHAKE_TIMEOUT_S = 10.0
_IDLE_TIMEOUT_S = 60.0             # a keep-alive connection idle this long is closed
_FORWARDED = ("Content-Type", "Accept")
# Not relayed: the connection's own headers, and those the front writes itself.
_NOT_RELAYED = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "date",
                          "server", "te", "trailer", "upgrade", "proxy-authenticate"})


@dataclass(frozen=True)
class FrontRequest:
    """What one request carried and what the front did with it. ``credential``: ``"basic"``,
    ``"bearer"``, ``"other"`` (another scheme or an unreadable header) or ``None`` (none sent);
    ``accepted``: it passed (``True`` when the front asks for none); ``user``: the basic-auth user
    name; ``client_certificate``: the verified client certificate's common name, ``None`` when
    none was presented; ``forwarded``: passed on to the upstream; ``status``: the status answered."""

    method: str
    path: str
    query: str
    credential: str | None
    accepted: bool
    user: str | None
    client_certificate: str | None
    forwarded: bool
    status: int


class RegistryFront:
    """See the module docstring; a context manager. ``upstream``: the registry's URL (``http://``,
    with its API path). ``upstream_timeout_s``: how long an upstream answer may take."""

    def __init__(self, upstream: str, *, basic: tuple[str, str] | None = None,
                 bearer: str | Callable[[str], bool] | None = None, tls: bool = False,
                 client_auth: bool = False, upstream_timeout_s: float = CLIENT_TIMEOUT_S):
        self._upstream = _upstream(upstream)
        if basic is not None:
            if (not isinstance(basic, tuple) or len(basic) != 2
                    or not all(isinstance(part, str) and part for part in basic)):
                raise ValueError("basic must be (user, password), two non-empty strings")
            if ":" in basic[0]:
                raise ValueError("a basic-auth user name cannot hold ':' (RFC 7617)")
        if bearer is not None and not callable(bearer) and not (isinstance(bearer, str) and bearer):
            raise ValueError("bearer must be a non-empty token, or a function of the token "
                             "returning whether it is valid")
        if client_auth and not tls:
            raise ValueError("client_auth=True needs tls=True: client certificates are a TLS matter")
        if upstream_timeout_s <= 0:
            raise ValueError(f"upstream_timeout_s must be positive, got {upstream_timeout_s}")
        self._basic = basic
        self._bearer = bearer
        self.tls = tls
        self.client_auth = client_auth
        self.upstream_timeout_s = upstream_timeout_s
        self._lock = threading.Lock()
        self._requests: list[FrontRequest] = []
        self._handshake_failures: list[str] = []
        self._material: TlsMaterial | None = None
        self._directory: Path | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> RegistryFront:
        if self._server is not None:
            return self
        try:
            context = None
            if self.tls:
                self._directory = Path(tempfile.mkdtemp(prefix="spark-kafka-sink-registry-front-"))
                self._material = generate_tls(self._directory, datetime.datetime.now(datetime.timezone.utc))
                context = _server_context(self._material, self.client_auth)
            self._server = _Server(self, context)
            self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                            name="registry-front", daemon=True)
            self._thread.start()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop serving, end the open connections, remove the certificates; idempotent."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.end_connections()
            server.server_close()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        directory, self._directory = self._directory, None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
        self._material = None

    def __enter__(self) -> RegistryFront:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # --- addresses and files ------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the registry front is not started")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """``http(s)://127.0.0.1:<port>`` and the upstream's path: what clients take as the
        registry's URL."""
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{HOST}:{self.port}{self._upstream.path}"

    @property
    def upstream(self) -> str:
        return urllib.parse.urlunsplit(self._upstream)

    @property
    def ca_location(self) -> str:
        """The PEM file of the front's CA, which clients trust (``tls=True``)."""
        return str(self._tls_material().ca_path)

    @property
    def client_certificate_location(self) -> str:
        """A client certificate the front's CA signed (``tls=True``), PEM."""
        return str(self._tls_material().client_cert_path)

    @property
    def client_key_location(self) -> str:
        """Its private key, PEM, encrypted with :attr:`client_key_password`."""
        return str(self._tls_material().client_key_path)

    @property
    def client_key_password(self) -> str:
        return self._tls_material().client_key_password

    # --- what tests read ----------------------------------------------------------------------

    @property
    def requests(self) -> tuple[FrontRequest, ...]:
        """Every request so far, in the order answered."""
        with self._lock:
            return tuple(self._requests)

    @property
    def refused(self) -> tuple[FrontRequest, ...]:
        """The requests answered without being forwarded (credentials missing or refused)."""
        return tuple(request for request in self.requests if not request.forwarded)

    @property
    def handshake_failures(self) -> tuple[str, ...]:
        """The TLS reason of each handshake that failed (e.g. ``TLSV1_ALERT_UNKNOWN_CA``: the
        client did not trust the front; ``PEER_DID_NOT_RETURN_A_CERTIFICATE``)."""
        with self._lock:
            return tuple(self._handshake_failures)

    # --- client settings ----------------------------------------------------------------------

    def client_conf(self, credentials: str = "auto", *, token: str | None = None) -> dict[str, Any]:
        """confluent-kafka's ``SchemaRegistryClient`` settings for this front: ``url``, a request
        ``timeout``, the ``ssl.*`` files and the credentials (module docstring; ``token``: the
        bearer token to send, needed when ``bearer`` is a function)."""
        conf: dict[str, Any] = {"url": self.url, "timeout": CLIENT_TIMEOUT_S}
        conf.update(self._tls_settings(""))
        kind, secret = self._credentials(credentials, token)
        if kind == "basic":
            conf["basic.auth.user.info"] = secret
        elif kind == "bearer":
            conf.update({"bearer.auth.credentials.source": "STATIC_TOKEN", "bearer.auth.token": secret,
                         "bearer.auth.logical.cluster": LOGICAL_CLUSTER})
        return conf

    def sink_options(self, credentials: str = "auto", *, token: str | None = None) -> dict[str, str]:
        """The sink's options for this front (``RegistryConfig`` reads them): ``schema.registry.url``,
        ``schema.registry.ssl.*`` and ``schema.registry.basic.auth.user.info`` or
        ``schema.registry.bearer.auth.token``, as :meth:`client_conf` chooses them."""
        options = {"schema.registry.url": self.url, **self._tls_settings("schema.registry.")}
        kind, secret = self._credentials(credentials, token)
        if kind == "basic":
            options["schema.registry.basic.auth.user.info"] = secret
        elif kind == "bearer":
            options["schema.registry.bearer.auth.token"] = secret
        return options

    def __repr__(self) -> str:
        state = "stopped" if self._server is None else self.url
        auth = []
        if self._basic is not None:
            auth.append(f"basic user {self._basic[0]!r} (password hidden)")
        if isinstance(self._bearer, str):
            auth.append("a bearer token (hidden)")
        elif self._bearer is not None:
            auth.append(f"bearer tokens checked by {getattr(self._bearer, '__qualname__', 'a function')}")
        return (f"RegistryFront({state} -> {self.upstream}, {', '.join(auth) or 'no credentials'}, "
                f"tls={self.tls}, client_auth={self.client_auth})")

    # --- serving ------------------------------------------------------------------------------

    def _tls_material(self) -> TlsMaterial:
        if not self.tls:
            raise ValueError("this front serves plain HTTP (tls=False): it has no certificates")
        if self._material is None:
            raise RuntimeError("the registry front is not started")
        return self._material

    def _tls_settings(self, prefix: str) -> dict[str, str]:
        if not self.tls:
            return {}
        settings = {f"{prefix}ssl.ca.location": self.ca_location}
        if self.client_auth:
            settings.update({f"{prefix}ssl.certificate.location": self.client_certificate_location,
                             f"{prefix}ssl.key.location": self.client_key_location,
                             f"{prefix}ssl.key.password": self.client_key_password})
        return settings

    def _credentials(self, credentials: str, token: str | None) -> tuple[str, str | None]:
        """(kind, the secret to send): ``basic`` with ``user:password``, ``bearer`` with the token,
        or ``none``."""
        if credentials not in CREDENTIALS:
            raise ValueError(f"credentials must be one of {', '.join(CREDENTIALS)}, got {credentials!r}")
        if credentials == "auto":
            credentials = ("basic" if self._basic is not None
                           else "bearer" if token is not None or isinstance(self._bearer, str) else "none")
        if credentials == "basic":
            if self._basic is None:
                raise ValueError("this front takes no basic auth (basic=None)")
            return "basic", ":".join(self._basic)
        if credentials == "bearer":
            if token is not None:
                return "bearer", token
            if isinstance(self._bearer, str):
                return "bearer", self._bearer
            raise ValueError("give token=...: this front has no bearer token of its own to hand out"
                             if self._bearer is not None else "this front takes no bearer token (bearer=None)")
        return "none", None

    def _authenticate(self, authorization: str | None) -> tuple[str | None, str | None, bool]:
        """(the credential kind, the basic-auth user, whether it passes)."""
        if not authorization or not authorization.strip():
            return None, None, self._basic is None and self._bearer is None
        scheme, _, value = authorization.strip().partition(" ")
        scheme, value = scheme.lower(), value.strip()
        open_door = self._basic is None and self._bearer is None
        if scheme == "basic":
            try:
                user, sep, password = base64.b64decode(value, validate=True).decode("utf-8").partition(":")
            except (binascii.Error, ValueError):
                return "other", None, open_door
            if not sep:
                return "basic", None, open_door
            passes = self._basic is not None and (
                secrets.compare_digest(user.encode(), self._basic[0].encode())
                & secrets.compare_digest(password.encode(), self._basic[1].encode()))
            return "basic", user, open_door or passes
        if scheme == "bearer" and value:
            return "bearer", None, open_door or self._token_passes(value)
        return "other", None, open_door

    def _token_passes(self, token: str) -> bool:
        if self._bearer is None:
            return False
        if isinstance(self._bearer, str):
            return secrets.compare_digest(token.encode(), self._bearer.encode())
        try:
            return bool(self._bearer(token))
        except Exception:               # a validator that fails refuses the token
            return False

    def _unauthorized(self, credential: str | None) -> tuple[int, list[tuple[str, str]], bytes]:
        wanted = [name for name, configured in (("HTTP Basic", self._basic), ("a bearer token", self._bearer))
                  if configured is not None]
        message = (f"Unauthorized: this registry wants {' or '.join(wanted)}, and none was sent"
                   if credential is None else "Unauthorized: the credentials were refused")
        status, headers, body = _error(HTTPStatus.UNAUTHORIZED, UNAUTHORIZED_ERROR_CODE, message)
        if self._basic is not None:
            headers.append(("WWW-Authenticate", 'Basic realm="schema-registry"'))
        if self._bearer is not None:
            headers.append(("WWW-Authenticate", 'Bearer realm="schema-registry"'))
        return status, headers, body

    def _forward(self, method: str, target: str, headers: dict[str, str],
                 body: bytes | None) -> tuple[int, list[tuple[str, str]], bytes]:
        parts = self._upstream
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=self.upstream_timeout_s)
        try:
            connection.request(method, target, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read(MAX_BODY_BYTES + 1)
            if len(data) > MAX_BODY_BYTES:
                return _error(HTTPStatus.BAD_GATEWAY, 50003, f"the registry front's upstream "
                              f"{self.upstream} answered more than {MAX_BODY_BYTES >> 20} MiB")
            relayed = [(name, value) for name, value in response.getheaders()
                       if name.lower() not in _NOT_RELAYED]
            return response.status, relayed, data
        except (socket.timeout, TimeoutError):
            return _error(HTTPStatus.GATEWAY_TIMEOUT, 50002, f"the registry front's upstream "
                          f"{self.upstream} did not answer within {self.upstream_timeout_s:g} s")
        except (OSError, http.client.HTTPException) as exc:
            return _error(HTTPStatus.BAD_GATEWAY, 50003, f"the registry front could not reach its "
                          f"upstream {self.upstream}: {type(exc).__name__}: {exc}")
        finally:
            connection.close()

    def _record(self, request: FrontRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _handshake_failed(self, reason: str) -> None:
        with self._lock:
            self._handshake_failures.append(reason)


def _upstream(url: str) -> urllib.parse.SplitResult:
    parts = urllib.parse.urlsplit(url.strip() if isinstance(url, str) else "")
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"the upstream must be an http:// URL with a host (the front is the TLS end), "
                         f"got {url!r}")
    if parts.username is not None or parts.query or parts.fragment:
        raise ValueError("the upstream URL takes no credentials, query or fragment")
    return parts._replace(path=parts.path.rstrip("/"))


def _server_context(material: TlsMaterial, client_auth: bool) -> ssl.SSLContext:
    assert material.server_key_path is not None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(material.server_cert_path, material.server_key_path)
    if client_auth:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=material.ca_path)
    return context


def _error(status: int, code: int, message: str) -> tuple[int, list[tuple[str, str]], bytes]:
    """A Confluent-style error answer: ``{"error_code", "message"}``."""
    body = json.dumps({"error_code": code, "message": message}).encode()
    return int(status), [("Content-Type", "application/vnd.schemaregistry.v1+json")], body


def _common_name(connection: socket.socket) -> str | None:
    """The verified client certificate's common name; ``None`` without one (or without TLS)."""
    if not isinstance(connection, ssl.SSLSocket):
        return None
    certificate = connection.getpeercert()
    if not certificate:
        return None
    for rdn in certificate.get("subject", ()):
        for name, value in rdn:
            if name == "commonName":
                return value
    return ""


class _Server(ThreadingHTTPServer):
    """One thread per connection; with TLS, each connection's handshake runs in its own thread
    (a slow client never holds up the others) and a failed one is recorded."""

    daemon_threads = True

    def __init__(self, front: RegistryFront, context: ssl.SSLContext | None):
        self.front = front
        self.context = context
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__((HOST, 0), _handler(front))

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = super().get_request()
        if self.context is not None:
            connection = self.context.wrap_socket(connection, server_side=True,
                                                  do_handshake_on_connect=False)
        return connection, address

    def finish_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        try:
            if isinstance(request, ssl.SSLSocket):
                request.settimeout(_HANDSHAKE_TIMEOUT_S)
                try:
                    request.do_handshake()
                except (ssl.SSLError, OSError) as exc:
                    self.front._handshake_failed(getattr(exc, "reason", None) or type(exc).__name__)
                    return
            super().finish_request(request, client_address)
        finally:
            with self._open_lock:
                self._open.discard(request)

    def end_connections(self) -> None:
        with self._open_lock:
            connections = list(self._open)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return                      # a client gone mid-request, or the front closing
        super().handle_error(request, client_address)


def _handler(front: RegistryFront) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = _IDLE_TIMEOUT_S

        def do_GET(self) -> None:  # noqa: N802 - the http.server names
            self._serve()

        do_POST = do_PUT = do_DELETE = do_GET  # noqa: N815

        def _serve(self) -> None:
            split = urllib.parse.urlsplit(self.path)
            credential, user, accepted = front._authenticate(self.headers.get("Authorization"))
            body, problem = self._body()
            forwarded = False
            if problem is not None:
                status, headers, data = problem
            elif not accepted:
                status, headers, data = front._unauthorized(credential)
            else:
                sent = {name: self.headers[name] for name in _FORWARDED if self.headers.get(name)}
                status, headers, data = front._forward(self.command, self.path, sent, body)
                forwarded = True
            front._record(FrontRequest(self.command, split.path, split.query, credential, accepted, user,
                                       _common_name(self.connection), forwarded, status))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            if self.close_connection:
                self.send_header("Connection", "close")
            if status not in (HTTPStatus.NO_CONTENT, HTTPStatus.NOT_MODIFIED):
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            else:
                self.end_headers()

        def _body(self) -> tuple[bytes | None, tuple[int, list[tuple[str, str]], bytes] | None]:
            """The request body, or the error answer when it cannot be read (the connection then
            closes: what follows on it is not known to be a request)."""
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                self.close_connection = True
                return None, _error(HTTPStatus.LENGTH_REQUIRED, 411,
                                    "the registry front takes request bodies with a Content-Length only")
            length = self.headers.get("Content-Length")
            if length is None:
                return None, None
            if not length.strip().isdigit():
                self.close_connection = True
                return None, _error(HTTPStatus.BAD_REQUEST, 400, f"Content-Length {length!r} is not a number")
            if int(length) > MAX_BODY_BYTES:
                self.close_connection = True
                return None, _error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, 413,
                                    f"a request body is at most {MAX_BODY_BYTES >> 20} MiB")
            return self.rfile.read(int(length)), None

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet, and no secrets
            return

    return Handler
