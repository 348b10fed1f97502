"""Secured client listeners for the embedded broker: SSL, SASL_PLAINTEXT and SASL_SSL.

``BrokerSecurity`` says which listeners a node gets and which users exist. From it (and the PEM
files of :mod:`.certs`) this module renders:

* the broker properties shared by every node (:func:`broker_properties`)::

      ssl.keystore.type=PEM                     ssl.keystore.key=<server key PEM, inline>
      ssl.keystore.certificate.chain=<server certificate + CA PEM, inline>
      ssl.truststore.type=PEM                   ssl.truststore.location=<tls>/ca.pem
      listener.name.<l>.ssl.client.auth=none|requested|required      (l = ssl, sasl_ssl)
      sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER
      listener.name.<l>.plain.sasl.jaas.config=...PlainLoginModule required user_<name>="<pw>" ...;
      listener.name.<l>.scram-sha-256.sasl.jaas.config=...ScramLoginModule required;   (and -512)
      listener.name.<l>.oauthbearer.sasl.jaas.config=...OAuthBearerLoginModule required;
                                                (l = sasl_plaintext, sasl_ssl)

  OAUTHBEARER runs Kafka's unsecured validator (unsigned JWTs, ``alg: none``, with a ``sub`` and
  an unexpired ``exp``): a client gets a token from any source, e.g. librdkafka's
  ``enable.sasl.oauthbearer.unsecure.jwt`` with ``sasl.oauthbearer.config=principal=<user>``,
  which :func:`client_properties` gives and both our producer and confluent-kafka take;

* StorageTool's ``--add-scram 'SCRAM-SHA-256=[name=<n>,password=<pw>,iterations=4096]'`` arguments
  (SCRAM credentials live in the cluster metadata, written at format time) (:func:`scram_format_args`);
* the properties a client needs for one listener (:func:`client_properties`), named as both the Java
  client and librdkafka name them.

Inter-broker and controller traffic stay PLAINTEXT. Passwords appear in no repr and no error message.
"""

from __future__ import annotations

import os
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["BrokerSecurity", "TlsMaterial", "MECHANISMS", "broker_properties", "client_properties",
           "scram_format_args", "write_private"]

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
CLIENT_AUTH = ("none", "requested", "required")
SCRAM_ITERATIONS = 4096  # Kafka's minimum
DEFAULT_USERS: Mapping[str, str] = types.MappingProxyType({
    "alice": "alice-secret-5d1c",
    "bob": "bob-secret-93ae",
})

_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
# Passwords go inside a JAAS string ("...") and a StorageTool SCRAM argument ([...,password=...]):
# printable ASCII without quotes, backslashes, separators, brackets or spaces.
_PASSWORD = re.compile(r"[A-Za-z0-9!#$%&'()*+./:<>?@^_`{|}~-]{1,128}")


@dataclass(frozen=True, eq=True)
class BrokerSecurity:
    """Which secured client listeners every embedded node gets, and the SASL users.

    ``ssl``: an SSL listener (and, with ``sasl``, a SASL_SSL one). ``sasl``: a SASL_PLAINTEXT
    listener, every SASL listener accepting PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 for ``users``
    (``{name: password}``), and OAUTHBEARER with unsigned tokens (Kafka's unsecured validator). ``client_auth``: whether the TLS listeners ask clients for a
    certificate (``ssl.client.auth``: none, requested or required).
    """

    ssl: bool = True
    sasl: bool = True
    users: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_USERS))
    client_auth: str = "none"

    def __post_init__(self) -> None:
        for name in ("ssl", "sasl"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"BrokerSecurity.{name} must be a bool, got {getattr(self, name)!r}")
        if not (self.ssl or self.sasl):
            raise ValueError("BrokerSecurity needs ssl=True or sasl=True (or pass security=None)")
        if self.client_auth not in CLIENT_AUTH:
            raise ValueError(f"BrokerSecurity.client_auth (ssl.client.auth) must be one of "
                             f"{', '.join(CLIENT_AUTH)}, got {self.client_auth!r}")
        if self.client_auth != "none" and not self.ssl:
            raise ValueError(f"BrokerSecurity.client_auth={self.client_auth!r} needs ssl=True")
        if not isinstance(self.users, Mapping):
            raise TypeError(f"BrokerSecurity.users must be a mapping of name to password, "
                            f"got {type(self.users).__name__}")
        if self.sasl and not self.users:
            raise ValueError("BrokerSecurity.users is empty; SASL listeners need at least one user")
        for user, password in self.users.items():
            if not isinstance(user, str) or not _NAME.fullmatch(user):
                raise ValueError(f"BrokerSecurity.users: user name {user!r} must be 1-64 characters "
                                 f"of A-Z a-z 0-9 . _ -")
            if not isinstance(password, str) or not _PASSWORD.fullmatch(password):
                raise ValueError(f"BrokerSecurity.users: the password of user {user!r} must be 1-128 "
                                 f"printable ASCII characters without spaces, quotes, backslashes, "
                                 f"commas, semicolons, '=' or brackets")
        object.__setattr__(self, "users", types.MappingProxyType(dict(self.users)))

    def __repr__(self) -> str:
        return (f"BrokerSecurity(ssl={self.ssl}, sasl={self.sasl}, users={sorted(self.users)} "
                f"(passwords hidden), client_auth={self.client_auth!r})")

    __hash__ = None  # type: ignore[assignment]  # users is a mapping

    @property
    def protocols(self) -> tuple[str, ...]:
        """The secured client protocols, in listener order: SSL, SASL_PLAINTEXT, SASL_SSL."""
        return tuple(p for p, on in (("SSL", self.ssl), ("SASL_PLAINTEXT", self.sasl),
                                     ("SASL_SSL", self.ssl and self.sasl)) if on)


@dataclass(frozen=True)
class TlsMaterial:
    """Where the generated PEM files are, and the client key's password (hidden in the repr).

    ``server_key_path`` is the broker's unencrypted key: only the broker's configuration uses it.
    """

    ca_path: Path
    server_cert_path: Path
    client_cert_path: Path
    client_key_path: Path
    client_key_password: str = field(repr=False)
    server_key_path: Path | None = field(repr=False, default=None)


def broker_properties(security: BrokerSecurity, tls: TlsMaterial | None) -> dict[str, str]:
    """The SSL and SASL broker properties shared by every node (see the module docstring)."""
    props: dict[str, str] = {}
    if security.ssl:
        if tls is None:
            raise ValueError("BrokerSecurity(ssl=True) needs the generated TLS material")
        if tls.server_key_path is None:
            raise ValueError("the TLS material has no server key")
        props.update({
            # Inline PEM: Kafka reads an unencrypted key only this way (see certs.py).
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": tls.server_key_path.read_text(),
            "ssl.keystore.certificate.chain": tls.server_cert_path.read_text() + tls.ca_path.read_text(),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(tls.ca_path),
        })
        for listener in _listeners(security, tls=True):
            props[f"listener.name.{listener}.ssl.client.auth"] = security.client_auth
    if security.sasl:
        props["sasl.enabled.mechanisms"] = ",".join(MECHANISMS)
        plain_users = " ".join(f'user_{name}="{password}"' for name, password in security.users.items())
        for listener in _listeners(security, tls=False):
            prefix = f"listener.name.{listener}"
            props[f"{prefix}.plain.sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};")
            for mechanism in _SCRAM:
                props[f"{prefix}.{mechanism.lower()}.sasl.jaas.config"] = (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;")
            props[f"{prefix}.oauthbearer.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;")
    return props


def _listeners(security: BrokerSecurity, *, tls: bool) -> list[str]:
    """Lower-case names of the TLS listeners (``tls``) or of the SASL listeners."""
    wanted = ("SSL", "SASL_SSL") if tls else ("SASL_PLAINTEXT", "SASL_SSL")
    return [p.lower() for p in security.protocols if p in wanted]


def scram_format_args(security: BrokerSecurity) -> list[str]:
    """StorageTool ``--add-scram`` arguments: every user, for both SCRAM mechanisms."""
    if not security.sasl:
        return []
    args = []
    for name, password in security.users.items():
        for mechanism in _SCRAM:
            args += ["--add-scram",
                     f"{mechanism}=[name={name},password={password},iterations={SCRAM_ITERATIONS}]"]
    return args


def client_properties(security: BrokerSecurity | None, tls: TlsMaterial | None, protocol: str,
                      mechanism: str | None = None, user: str | None = None) -> dict[str, str]:
    """What a client sets to use ``protocol``'s listener (Java and librdkafka property names).

    SASL: ``mechanism`` defaults to PLAIN, ``user`` to the first of ``security.users``
    (OAUTHBEARER: the principal of an unsecured JWT the client makes itself). TLS: the CA, plus
    the client certificate and its encrypted key when ``client_auth`` is not none.
    """
    if protocol == "PLAINTEXT":
        if mechanism is not None or user is not None:
            raise ValueError("PLAINTEXT has no SASL: mechanism and user must be None")
        return {"security.protocol": "PLAINTEXT"}
    if security is None or protocol not in security.protocols:
        raise ValueError(f"no {protocol} listener (security={security!r})")
    props = {"security.protocol": protocol}
    if "SSL" in protocol:
        if tls is None:
            raise ValueError(f"{protocol} needs the generated TLS material")
        props["ssl.ca.location"] = str(tls.ca_path)
        if security.client_auth != "none":
            props["ssl.certificate.location"] = str(tls.client_cert_path)
            props["ssl.key.location"] = str(tls.client_key_path)
            props["ssl.key.password"] = tls.client_key_password
    if protocol.startswith("SASL_"):
        mechanism = mechanism or "PLAIN"
        if mechanism not in MECHANISMS:
            raise ValueError(f"sasl.mechanism must be one of {', '.join(MECHANISMS)}, got {mechanism!r}")
        user = user if user is not None else next(iter(security.users))
        if user not in security.users:
            raise ValueError(f"no SASL user {user!r}; users are {sorted(security.users)}")
        if mechanism == "OAUTHBEARER":
            props.update({"sasl.mechanism": mechanism, "enable.sasl.oauthbearer.unsecure.jwt": "true",
                          "sasl.oauthbearer.config": f"principal={user}"})
        else:
            props.update({"sasl.mechanism": mechanism, "sasl.username": user,
                          "sasl.password": security.users[user]})
    elif mechanism is not None or user is not None:
        raise ValueError(f"{protocol} has no SASL: mechanism and user must be None")
    return props


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to a file created owner-only (0600) before any byte lands in it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
