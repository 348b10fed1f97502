"""TLS for broker connections: the client's ``ssl.SSLContext`` and a non-blocking TLS transport.

:func:`build_ssl_context` reads the producer's properties (``ProducerConfig`` attribute names):

- trust: ``ssl.ca.location`` (a PEM file), or ``ssl.truststore.location`` /
  ``ssl.truststore.certificates`` with ``ssl.truststore.type=PEM``; none of them: the system's
  default CAs (Java uses the JVM's);
- an optional client certificate: ``ssl.certificate.location`` (PEM chain) with ``ssl.key.location``
  (PEM key, encrypted or not: ``ssl.key.password``), or ``ssl.keystore.location`` of type PEM
  (chain and key in one file);
- ``ssl.endpoint.identification.algorithm``: ``https`` checks the broker's host name against its
  certificate, ``""`` does not (the certificate chain is always verified);
- TLS 1.2 or later.

A file that is missing or not PEM raises :class:`ConfigError` naming the property (never the key
password); an encrypted key without ``ssl.key.password`` fails the same way instead of prompting.
The schema registry client builds its context here too, from its ``schema.registry.ssl.*``. :class:`TlsTransport` runs TLS over a non-blocking socket through memory BIOs, so the
selector keeps its own socket: the handshake advances on socket events, and every read decrypts
everything the bytes received so far allow (no decrypted data is left waiting where the selector
cannot see it). A failed handshake raises :class:`TlsHandshakeError` with the reason, e.g.
"certificate verify failed"; so does a TLS error before the first plaintext arrived (with TLS 1.3
the broker checks the client's certificate after the client's side of the handshake is done, and
its refusal arrives as an alert on the first read).
"""

from __future__ import annotations

import selectors
import socket
import ssl
from typing import Any, Callable

from ..errors import ConfigError

TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})   # the security.protocol values that use TLS
SEND_CHUNK_BYTES = 64 * 1024
_RAW_CHUNK_BYTES = 256 * 1024


class TlsHandshakeError(OSError):
    """The TLS handshake with the broker failed; ``str()`` and ``strerror`` say why."""

    def __init__(self, message: str):
        super().__init__(message)
        self.strerror = message


def build_ssl_context(config: Any, *, prefix: str = "") -> ssl.SSLContext:
    """A client ``SSLContext`` from ``config`` (see the module docstring). ``prefix``: where the
    settings are another client's under a prefix of their own (``schema.registry.``), the
    prefix errors name them by; a setting ``config`` lacks counts as not set."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = config.ssl_endpoint_identification_algorithm == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    _load_trust(context, config, prefix)
    _load_client_certificate(context, config, prefix)
    return context


def _load_trust(context: ssl.SSLContext, config: Any, prefix: str) -> None:
    certificates = getattr(config, "ssl_truststore_certificates", None)
    if certificates is not None:
        _load(lambda: context.load_verify_locations(cadata=certificates),
              f"{prefix}ssl.truststore.certificates", "PEM certificates")
        return
    for name in ("ssl_ca_location", "ssl_truststore_location"):
        path = getattr(config, name, None)
        if path is not None:
            _load(lambda: context.load_verify_locations(cafile=path), prefix + name.replace("_", "."),
                  "a PEM file of CA certificates", path)
            return
    context.load_default_certs(ssl.Purpose.SERVER_AUTH)


def _load_client_certificate(context: ssl.SSLContext, config: Any, prefix: str) -> None:
    secret = config.ssl_key_password

    def password() -> str:  # a callable: an encrypted key without one fails, never prompts
        return secret or ""

    keystore = getattr(config, "ssl_keystore_location", None)
    if keystore is not None:
        _load(lambda: context.load_cert_chain(keystore, password=password), f"{prefix}ssl.keystore.location",
              "a PEM file with the client certificate chain and its key", keystore)
    elif config.ssl_certificate_location is not None:
        cert, key = config.ssl_certificate_location, config.ssl_key_location
        names = f"{prefix}ssl.certificate.location" + (f" and {prefix}ssl.key.location" if key else "")
        where = cert if key is None else f"{cert}, {key}"
        _load(lambda: context.load_cert_chain(cert, key, password=password), names,
              "PEM files of the client certificate chain and its private key "
              f"({prefix}ssl.key.password if the key is encrypted)", where)


def _load(action: Callable[[], None], name: str, expected: str, where: str | None = None) -> None:
    """Run ``action``; turn its failure into a ConfigError naming ``name`` (never a password)."""
    try:
        action()
    except FileNotFoundError as exc:
        raise ConfigError(f"{name}: file not found: {exc.filename or where}") from None
    except (ssl.SSLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or type(exc).__name__
        at = f" ({where})" if where else ""
        raise ConfigError(f"{name}{at} must be {expected}; loading failed: {reason}") from None


class TlsTransport:
    """TLS over a connected non-blocking socket through memory BIOs; see the module docstring.

    The selector calls ``handshake()`` on socket events until it returns True, then ``send`` and
    ``recv`` (``BlockingIOError`` when nothing can move now). ``wanted_events()`` says what the
    transport waits for; ``flush()`` writes encrypted bytes left over from an earlier call."""

    __slots__ = ("sock", "_host", "_incoming", "_outgoing", "_tls", "_backlog", "_eof", "_done",
                 "_received")

    def __init__(self, sock: socket.socket, host: str, context: ssl.SSLContext):
        self.sock = sock
        self._host = host
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        sni = host if context.check_hostname or _is_name(host) else None
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_hostname=sni)
        self._backlog = memoryview(b"")     # encrypted bytes the socket did not take yet
        self._eof = False
        self._done = False
        self._received = False              # any plaintext yet (see recv)

    @classmethod
    def factory(cls, context: ssl.SSLContext) -> Callable[[socket.socket, str], "TlsTransport"]:
        """A ``transport_factory`` for the selector."""
        return lambda sock, host: cls(sock, host, context)

    # --- handshake --------------------------------------------------------------------------------

    def handshake(self) -> bool:
        """Advance the handshake with what the socket has; True once it is complete."""
        if self._done:
            return True
        self._pull()
        try:
            self._tls.do_handshake()
            self._done = True
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            if self._eof:
                raise TlsHandshakeError(
                    f"TLS handshake with {self._host} failed: the broker closed the connection "
                    f"(is this a TLS listener?)") from None
        except ssl.SSLError as exc:
            raise self._failed(exc) from None
        self.flush()
        return self._done

    def wanted_events(self) -> int:
        """WRITE while encrypted bytes wait for the socket, READ otherwise."""
        return selectors.EVENT_WRITE if self.wants_write() else selectors.EVENT_READ

    # --- data -------------------------------------------------------------------------------------

    def send(self, data: memoryview) -> int:
        """Encrypt ``data`` in SEND_CHUNK_BYTES pieces while the socket takes them; the count
        taken. BlockingIOError while earlier encrypted bytes still wait for the socket."""
        if not self.flush():
            raise BlockingIOError("TLS output is waiting for the socket")
        taken = 0
        while taken < len(data):
            taken += self._tls.write(data[taken:taken + SEND_CHUNK_BYTES])
            if not self.flush():
                break
        return taken

    def recv(self, size: int) -> bytes:
        """The plaintext the received bytes give (b"" at the end of the stream);
        BlockingIOError when there is none yet."""
        self._pull(size)
        chunks = []
        try:
            while True:
                chunk = self._tls.read(_RAW_CHUNK_BYTES)
                if not chunk:
                    self._eof = True
                    break
                chunks.append(chunk)
        except ssl.SSLWantReadError:
            pass
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            self._eof = True
        except ssl.SSLError as exc:
            if not self._received:   # TLS 1.3: a refused client certificate shows up here
                raise self._failed(exc) from None
            raise OSError(f"TLS error: {describe_ssl_error(exc)}") from None
        self.flush()          # e.g. a TLS 1.3 key update answer
        if chunks:
            self._received = True
            return b"".join(chunks)
        if self._eof:
            return b""
        raise BlockingIOError("no TLS data yet")

    def flush(self) -> bool:
        """Write pending encrypted bytes; True when none are left."""
        if self._outgoing.pending:
            self._backlog = memoryview(bytes(self._backlog) + self._outgoing.read())
        while self._backlog:
            try:
                written = self.sock.send(self._backlog)
            except (BlockingIOError, InterruptedError):
                return False
            self._backlog = self._backlog[written:]
        return True

    def wants_write(self) -> bool:
        return bool(self._backlog) or bool(self._outgoing.pending)

    def _failed(self, exc: ssl.SSLError) -> TlsHandshakeError:
        reason = describe_ssl_error(exc)
        return TlsHandshakeError(f"TLS handshake with {self._host} failed: {reason}")

    def _pull(self, size: int = _RAW_CHUNK_BYTES) -> None:
        """Move what the socket has into the TLS object (marking the end of the stream)."""
        if self._eof:
            return
        try:
            raw = self.sock.recv(size)
        except (BlockingIOError, InterruptedError):
            return
        if raw:
            self._incoming.write(raw)
        else:
            self._eof = True
            self._incoming.write_eof()


def _is_name(host: str) -> bool:
    """SNI takes host names only, not IP addresses."""
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
        return False
    except OSError:
        return True


def describe_ssl_error(exc: ssl.SSLError) -> str:
    """Why a TLS handshake failed, in words: the verification message for an untrusted or
    mismatched broker certificate, a hint when the broker refused the client's certificate."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {exc.verify_message}"
    reason = getattr(exc, "reason", None) or str(exc)
    if "ALERT" in reason and "CERTIFICATE" in reason:
        return (f"{reason}: the broker refused the client certificate, or its absence "
                f"(ssl.certificate.location, ssl.key.location)")
    return reason
