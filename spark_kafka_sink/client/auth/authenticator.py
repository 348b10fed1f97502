"""The SASL exchange on one connection, sans I/O (Java's ``SaslClientAuthenticator``).

After ApiVersions, a SASL connection sends (KIP-152)::

    SaslHandshake v1 {mechanism}           -> error_code, the broker's enabled mechanisms
    SaslAuthenticate {auth_bytes} ...      -> error_code, error_message, auth_bytes
        (one round per mechanism message: 1 for PLAIN, 2 for SCRAM)

and is READY once the mechanism completes. When the last SaslAuthenticate answer (v1+) gives a
``session_lifetime_ms`` (KIP-368: the broker's ``connections.max.reauth.ms``, or the token's
remaining lifetime for OAUTHBEARER), the network client runs the same exchange again on the same
connection before that time is up (``reauthentication=True``). :class:`SaslAuthenticator` gives the next request
(:class:`SaslStep`) for each response and raises :class:`AuthenticationError` (the broker's code
class when it sent one: UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED)
with a message naming the broker, the mechanism and the user, never the password. Used by the
network client and by the blocking connection alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...errors import AuthenticationError, error_for
from ...protocol.api_message import ApiMessage
from ...protocol.apis import SASL_AUTHENTICATE, SASL_HANDSHAKE
from .jaas import SaslCredentials
from .sasl import SaslMechanism, mechanism_for

HANDSHAKE_VERSION = 1      # v1: the mechanism's tokens go in SaslAuthenticate requests


@dataclass(frozen=True)
class SaslStep:
    """The next request to send: ``version`` None lets the connection negotiate it."""

    api: ApiMessage
    body: dict[str, Any]
    version: int | None = None

    def __repr__(self) -> str:          # auth_bytes may carry the password (PLAIN)
        return f"SaslStep({self.api.name}, v{self.version})"


class SaslAuthenticator:
    """One connection's SASL exchange; see the module docstring."""

    def __init__(self, credentials: SaslCredentials, address: str, *, reauthentication: bool = False,
                 token: Any = None):
        """``token``: OAUTHBEARER's, got by the caller from ``credentials.token_cache`` (the
        network client without waiting, a blocking connection within its timeout)."""
        self._credentials = credentials
        self._address = address
        self._mechanism: SaslMechanism = mechanism_for(credentials, token)
        self._handshake_done = False
        self.complete = False
        self.reauthentication = reauthentication
        self.session_lifetime_ms = 0  # KIP-368: > 0 when the broker wants a new login within it

    def __repr__(self) -> str:
        return f"SaslAuthenticator({self._describe()})"

    def first_request(self) -> SaslStep:
        body = {"mechanism": self._credentials.mechanism}
        return SaslStep(SASL_HANDSHAKE, body, HANDSHAKE_VERSION)

    def on_response(self, api: ApiMessage, body: Any) -> SaslStep | None:
        """The next request, or None once authenticated; AuthenticationError when refused."""
        if api is SASL_HANDSHAKE and not self._handshake_done:
            self._check_handshake(body)
            self._handshake_done = True
            return self._authenticate(self._mechanism.initial_response())
        if api is not SASL_AUTHENTICATE or not self._handshake_done or self.complete:
            raise AuthenticationError(f"{self._describe()}: unexpected {api.name} response")
        if body.error_code:
            message = body.error_message or "no detail given"
            refusal = getattr(self._mechanism, "refusal", None)
            if refusal and '"status"' not in message:
                message += f" ({refusal})"
            raise _error(body.error_code, f"{self._describe()} was refused: {message}")
        token = self._mechanism.evaluate(bytes(body.auth_bytes or b""))
        if token is not None:
            return self._authenticate(token)
        self.session_lifetime_ms = max(int(getattr(body, "session_lifetime_ms", 0) or 0), 0)
        self.complete = self._mechanism.complete
        if not self.complete:
            raise AuthenticationError(f"{self._describe()}: the exchange ended early")
        return None

    def _check_handshake(self, body: Any) -> None:
        if body.error_code == 0:
            return
        enabled = ", ".join(body.mechanisms or []) or "none"
        raise _error(body.error_code,
                     f"{self._describe()}: the broker enables the SASL mechanisms: {enabled}")

    def _authenticate(self, token: bytes) -> SaslStep:
        return SaslStep(SASL_AUTHENTICATE, {"auth_bytes": token})

    def _describe(self) -> str:
        what = "re-authentication" if self.reauthentication else "authentication"
        return (f"SASL {self._credentials.mechanism} {what} {self._credentials.describe()} "
                f"with {self._address}")


def _error(code: int, message: str) -> AuthenticationError:
    error = error_for(code, message)
    if isinstance(error, AuthenticationError):
        return error
    return AuthenticationError(f"{message} ({error})")
