"""SASL mechanisms, sans I/O: PLAIN (RFC 4616), SCRAM-SHA-256/512 (RFC 5802, RFC 7677) and
OAUTHBEARER (RFC 7628).

A mechanism turns server challenges into client responses::

    mechanism = mechanism_for(credentials)
    token = mechanism.initial_response()          # the first SaslAuthenticate auth_bytes
    while not mechanism.complete:
        token = mechanism.evaluate(server_bytes)  # None once the exchange is done

PLAIN sends ``\\0user\\0password`` once; the broker's (empty) answer completes it.

SCRAM, client side (RFC 5802 §3, as Kafka's ``ScramSaslClient``; Kafka applies no SASLprep, the
password is its UTF-8 bytes)::

    client-first  n,,n=<user>,r=<client nonce>         (user: "=" -> "=3D", "," -> "=2C")
    server-first  r=<client nonce><server nonce>,s=<salt b64>,i=<iterations>
    client-final  c=biws,r=<nonce>,p=<proof b64>
    server-final  v=<server signature b64>   or   e=<error>

    SaltedPassword  = PBKDF2-HMAC-H(password, salt, iterations)
    ClientKey       = HMAC(SaltedPassword, "Client Key");  StoredKey = H(ClientKey)
    AuthMessage     = client-first-bare + "," + server-first + "," + client-final-without-proof
    ClientProof     = ClientKey XOR HMAC(StoredKey, AuthMessage)
    ServerSignature = HMAC(HMAC(SaltedPassword, "Server Key"), AuthMessage)

The client checks that the server nonce extends its own, that the iteration count is at least
4096 (Kafka's minimum) and that the server signature matches: a broker that does not know the
password cannot complete the exchange. Failures raise :class:`SaslError` (an
AuthenticationError) with a message that never contains the password.

OAUTHBEARER sends one message, the token from the producer's :class:`~.oauth.TokenCache` (its
caller gets it first: a mechanism never fetches one) with its SASL extensions (RFC 7628 §3.1, as
Kafka's ``OAuthBearerClientInitialResponse``)::

    n,,\x01auth=Bearer <token>\x01<key>=<value>\x01...\x01\x01

An empty answer completes it. A refusal comes as a JSON error (RFC 7628 §3.2.2: ``status``,
``scope``, ``openid-configuration``); the client answers ``\x01`` as the RFC requires, and the
broker then fails the exchange: the error names the JSON status, never the token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from typing import Any, Callable, Protocol

from ...errors import AuthenticationError
from .jaas import SaslCredentials

SCRAM_MIN_ITERATIONS = 4096
_SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class SaslError(AuthenticationError):
    """The SASL exchange failed on the client side (a bad or forged server message)."""


class SaslMechanism(Protocol):
    name: str

    @property
    def complete(self) -> bool: ...

    def initial_response(self) -> bytes: ...

    def evaluate(self, challenge: bytes) -> bytes | None: ...


def mechanism_for(credentials: SaslCredentials, token: Any = None) -> SaslMechanism:
    """A fresh mechanism (one per connection) for ``credentials``; OAUTHBEARER takes the
    ``token`` (an :class:`~.oauth_token.OAuthToken`) its caller got from the token cache."""
    if credentials.mechanism == "OAUTHBEARER":
        if token is None:
            raise SaslError("OAUTHBEARER: a login needs a token; none was given")
        return OAuthBearerMechanism(token)
    if credentials.mechanism == "PLAIN":
        return PlainMechanism(credentials.username, credentials.password)
    hash_name = _SCRAM_HASHES.get(credentials.mechanism)
    if hash_name is None:
        raise SaslError(f"SASL mechanism {credentials.mechanism} is not supported")
    return ScramMechanism(credentials.username, credentials.password, hash_name,
                          name=credentials.mechanism)


class PlainMechanism:
    """RFC 4616: one message, no authorization identity."""

    name = "PLAIN"

    def __init__(self, username: str, password: str):
        self._message = b"\0" + username.encode() + b"\0" + password.encode()
        self._sent = False
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    def initial_response(self) -> bytes:
        self._sent = True
        return self._message

    def evaluate(self, challenge: bytes) -> bytes | None:
        if not self._sent:
            raise SaslError("PLAIN: a server message came before the client's")
        self._complete = True
        return None

    def __repr__(self) -> str:
        return "PlainMechanism()"


class OAuthBearerMechanism:
    """RFC 7628 client: the token (from the producer's token cache, ready before the exchange
    starts: never fetched here, on the network thread) and its extensions in one message; see
    the module docstring."""

    name = "OAUTHBEARER"
    SEPARATOR = "\x01"

    def __init__(self, token: Any):
        self._token = token
        self._step = 0
        self._complete = False
        self._status: str | None = None

    @property
    def complete(self) -> bool:
        return self._complete

    def initial_response(self) -> bytes:
        token = self._token
        extensions = "".join(f"{self.SEPARATOR}{key}={value}" for key, value in token.extensions.items())
        self._step = 1
        return f"n,,{self.SEPARATOR}auth=Bearer {token.value}{extensions}{self.SEPARATOR}{self.SEPARATOR}".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        if self._step == 1 and not challenge:
            self._step = 2
            self._complete = True
            return None
        if self._step == 1:  # the broker's error: acknowledge it; the broker then fails the exchange
            self._step = 2
            self._status = _oauth_error(challenge)
            return self.SEPARATOR.encode()
        raise SaslError(f"OAUTHBEARER: the broker refused the token ({self._status or 'no status given'})"
                        if self._status else "OAUTHBEARER: unexpected server message")

    @property
    def refusal(self) -> str | None:
        """The JSON status of the broker's refusal (``invalid_token``, ...), once refused."""
        return self._status

    def __repr__(self) -> str:
        return f"OAuthBearerMechanism({self._token!r})"


def _oauth_error(challenge: bytes) -> str:
    """The ``status`` of an RFC 7628 error message (and its scope, when given)."""
    try:
        error = json.loads(challenge.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return "an unreadable error message"
    if not isinstance(error, dict):
        return "an unreadable error message"
    status = str(error.get("status", "no status"))
    scope = error.get("scope")
    return f"status {status}" + (f", scope {scope}" if scope else "")


class ScramMechanism:
    """RFC 5802 client for ``hash_name`` (sha256, sha512; sha1 for the RFC's own test vector)."""

    def __init__(self, username: str, password: str, hash_name: str, *, name: str | None = None,
                 nonce_source: Callable[[], str] | None = None):
        self.name = name or f"SCRAM-{hash_name.upper()}"
        self._username = username
        self._password = password.encode()
        self._hash = hash_name
        self._client_nonce = (nonce_source or _new_nonce)()
        self._client_first_bare = f"n={_escape_username(username)},r={self._client_nonce}"
        self._expected_signature: bytes | None = None
        self._step = 0
        self._complete = False

    def __repr__(self) -> str:
        return f"ScramMechanism({self.name}, user={self._username!r})"

    @property
    def complete(self) -> bool:
        return self._complete

    def initial_response(self) -> bytes:
        self._step = 1
        return f"n,,{self._client_first_bare}".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        if self._step == 1:
            self._step = 2
            return self._client_final(challenge)
        if self._step == 2:
            self._step = 3
            self._verify_server_final(challenge)
            self._complete = True
            return None
        raise SaslError(f"{self.name}: unexpected server message at this point of the exchange")

    # --- the steps ----------------------------------------------------------------------------

    def _client_final(self, challenge: bytes) -> bytes:
        server_first = _text(challenge, self.name)
        attributes = _attributes(server_first, self.name)
        if "e" in attributes:
            raise SaslError(f"{self.name}: the broker refused the first message: {attributes['e']}")
        nonce, salt_b64, iterations_text = (attributes.get(k) for k in ("r", "s", "i"))
        if nonce is None or salt_b64 is None or iterations_text is None:
            raise SaslError(f"{self.name}: the broker's first message lacks r, s or i")
        if not nonce.startswith(self._client_nonce) or nonce == self._client_nonce:
            raise SaslError(f"{self.name}: the broker's nonce does not extend the client's")
        try:
            salt = base64.b64decode(salt_b64, validate=True)
            iterations = int(iterations_text)
        except ValueError:
            raise SaslError(
                f"{self.name}: the broker's salt or iteration count is malformed") from None
        if iterations < SCRAM_MIN_ITERATIONS:
            raise SaslError(f"{self.name}: the broker asks for {iterations} iterations, fewer than "
                            f"the minimum {SCRAM_MIN_ITERATIONS}")
        keys = scram_keys(self._password, salt, iterations, self._hash)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        client_signature = _hmac(keys.stored_key, auth_message, self._hash)
        proof = bytes(a ^ b for a, b in zip(keys.client_key, client_signature))
        self._expected_signature = _hmac(keys.server_key, auth_message, self._hash)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, challenge: bytes) -> None:
        attributes = _attributes(_text(challenge, self.name), self.name)
        if "e" in attributes:
            raise SaslError(f"{self.name}: the broker refused the proof: {attributes['e']}")
        try:
            signature = base64.b64decode(attributes.get("v", ""), validate=True)
        except ValueError:
            raise SaslError(f"{self.name}: the broker's final message is malformed") from None
        assert self._expected_signature is not None
        if not signature or not hmac.compare_digest(signature, self._expected_signature):
            raise SaslError(f"{self.name}: the broker's signature does not match: it does not know "
                            f"the credentials (or the exchange was tampered with)")


class ScramKeys:
    """The keys derived from a password (RFC 5802 §3); the server side stores stored/server key."""

    __slots__ = ("client_key", "stored_key", "server_key")

    def __init__(self, client_key: bytes, stored_key: bytes, server_key: bytes):
        self.client_key = client_key
        self.stored_key = stored_key
        self.server_key = server_key

    def __repr__(self) -> str:
        return "ScramKeys(...)"


def scram_keys(password: bytes, salt: bytes, iterations: int, hash_name: str) -> ScramKeys:
    salted = hashlib.pbkdf2_hmac(hash_name, password, salt, iterations)
    client_key = _hmac(salted, b"Client Key", hash_name)
    return ScramKeys(client_key, hashlib.new(hash_name, client_key).digest(),
                     _hmac(salted, b"Server Key", hash_name))


def _hmac(key: bytes, message: bytes, hash_name: str) -> bytes:
    return hmac.new(key, message, hash_name).digest()


def _new_nonce() -> str:
    return base64.b64encode(secrets.token_bytes(24)).decode()   # printable, no ","


def _escape_username(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def _text(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError(f"{name}: the broker's message is not UTF-8") from None


def _attributes(message: str, name: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise SaslError(f"{name}: the broker's message is malformed")
        out.setdefault(key, value)
    return out
