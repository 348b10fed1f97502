"""What a Schema Registry call can fail with: one class per cause, all :class:`RegistryError`.

``RegistryError`` is a :class:`~spark_kafka_sink.errors.ConfigError`: the driver resolves the
schemas before any task runs, and each of these asks the user to change a setting, a schema or
the registry. Every error carries what the registry said (``status``, the HTTP status;
``error_code``, Confluent's code such as 40401) and where (``url``, without user info or query;
``subject``). Their messages quote the registry's own ``message`` and never hold a credential.

- ``IncompatibleSchemaError``: 409, the schema breaks the subject's compatibility rule;
- ``SubjectNotFoundError``: 404 with 40401, no such subject;
- ``SubjectVersionNotFoundError``: 404 with 40402, the subject has no such version;
- ``RegistrySchemaNotFoundError``: 404 with 40403, no such schema id, or the schema is not under
  the subject (a lookup with ``auto.register.schemas=false``);
- ``RegistryInvalidSchemaError``: 422 (42201 and others), the registry cannot take the schema;
- ``RegistryAuthError``: 401 or 403, credentials missing or refused (also an
  :class:`~spark_kafka_sink.errors.AuthenticationError`);
- ``RegistryUnreachableError``: no URL answered; each one's reason is in ``reasons``;
- ``RegistryTlsError``: the same, every URL failing its TLS handshake.

Any other answer that is not a success is a plain ``RegistryError``. They pickle with their
attributes.
"""

from __future__ import annotations

from ..errors import AuthenticationError, ConfigError

__all__ = ["RegistryError", "IncompatibleSchemaError", "SubjectNotFoundError",
           "SubjectVersionNotFoundError", "RegistrySchemaNotFoundError", "RegistryInvalidSchemaError",
           "RegistryAuthError", "RegistryUnreachableError", "RegistryTlsError"]


class RegistryError(ConfigError):
    """A Schema Registry call failed; see the module docstring."""

    def __init__(self, message: str, *, status: int | None = None, error_code: int | None = None,
                 url: str | None = None, subject: str | None = None,
                 reasons: tuple[str, ...] = ()):
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.url = url
        self.subject = subject
        self.reasons = tuple(reasons)


class IncompatibleSchemaError(RegistryError):
    """409: the schema is incompatible with the subject's earlier versions."""


class SubjectNotFoundError(RegistryError):
    """40401: the registry has no such subject."""


class SubjectVersionNotFoundError(RegistryError):
    """40402: the subject has no such version."""


class RegistrySchemaNotFoundError(RegistryError):
    """40403: no schema with that id, or the schema is not registered under the subject."""


class RegistryInvalidSchemaError(RegistryError):
    """422: the registry refused the schema as invalid (42201), or another argument (422xx)."""


class RegistryAuthError(RegistryError, AuthenticationError):
    """401 or 403: the registry refused the credentials, or asked for some."""


class RegistryUnreachableError(RegistryError):
    """No registry URL gave an answer (connection refused, timeout, HTTP 5xx, ...); ``reasons``
    holds one line per URL tried."""

    retriable = True


class RegistryTlsError(RegistryUnreachableError):
    """No registry URL could be reached, every one failing its TLS handshake (an untrusted or
    mismatched certificate, a refused client certificate)."""

    retriable = False
