"""RegistryClient: the Confluent Schema Registry calls the sink's driver makes.

    client = RegistryClient(RegistryConfig({"schema.registry.url": "http://127.0.0.1:8081"}))
    subject = client.subject_name("orders", is_key=False)          # "orders-value"
    schema_id = client.register(subject, schema_json)             # POST /subjects/{s}/versions
    schema_id = client.lookup(subject, schema_json)               # POST /subjects/{s}
    latest = client.latest(subject)                               # GET /subjects/{s}/versions/latest
    text = client.schema_by_id(schema_id)                         # GET /schemas/ids/{id}

``normalize`` (default ``normalize.schemas``) is sent as the ``normalize`` query parameter of
``register`` and ``lookup``. A subject is escaped whole in the path (``/`` as ``%2F``; ``.`` as
is). Answers are cached for the client's life: each (subject, schema) is registered or looked up
once, each subject's latest version and each id's schema fetched once, so a client made per query
asks the registry once per subject, whatever the number of micro-batches. Thread safe (the
cache behind a lock; two threads asking the same thing at once may both ask).

A schema id must fit the wire format's 4 bytes (0 to 2^31 - 1). A refusal is a
:class:`~.errors.RegistryError` subclass (:mod:`.errors`) naming the subject and the URL and
quoting the registry's message; a ``lookup`` that finds nothing says to register the schema or to
set ``auto.register.schemas=true``.
"""

from __future__ import annotations

import threading
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..clock import SYSTEM_CLOCK, Clock
from .config import RegistryConfig
from .errors import (IncompatibleSchemaError, RegistryAuthError, RegistryError,
                     RegistryInvalidSchemaError, RegistrySchemaNotFoundError, SubjectNotFoundError,
                     SubjectVersionNotFoundError)
from .transport import RegistryAnswer, RegistryTransport

__all__ = ["RegistryClient", "RegisteredSchema", "MAX_SCHEMA_ID", "AVRO"]

AVRO = "AVRO"
MAX_SCHEMA_ID = 2**31 - 1
"""The largest id the Confluent wire format's 4-byte signed field holds."""

_NOT_FOUND = {40401: SubjectNotFoundError, 40402: SubjectVersionNotFoundError,
              40403: RegistrySchemaNotFoundError}


@dataclass(frozen=True)
class RegisteredSchema:
    """A subject's version: its ``schema_id``, ``version`` and ``schema`` text."""

    subject: str
    schema_id: int
    version: int
    schema: str
    schema_type: str = AVRO


class RegistryClient:
    """The registry calls, cached; see the module docstring. ``transport`` replaces the HTTP
    transport (tests)."""

    def __init__(self, config: RegistryConfig | Mapping[str, Any], *, clock: Clock = SYSTEM_CLOCK,
                 transport: RegistryTransport | None = None,
                 spawn: Callable[[Callable[[], None]], None] | None = None):
        self._config = RegistryConfig.coerce(config)
        self._transport = transport or RegistryTransport(self._config, clock=clock, spawn=spawn)
        self._lock = threading.Lock()
        self._cache: dict[tuple[Any, ...], Any] = {}

    @property
    def config(self) -> RegistryConfig:
        return self._config

    @property
    def requests(self) -> int:
        """HTTP requests sent so far (each URL tried counts)."""
        return self._transport.requests

    def subject_name(self, topic: str, is_key: bool, record_name: str | None = None) -> str:
        """The subject of ``topic``'s key or value schema under the configured strategy
        (``record_name``: the schema's, for the record strategies; see :mod:`.subjects`)."""
        return self._config.strategy(is_key).subject(topic, is_key, record_name)

    def register(self, subject: str, schema: str, normalize: bool | None = None,
                 schema_type: str = AVRO) -> int:
        """The id of ``schema`` under ``subject``, registered as a new version when it is not
        there yet; IncompatibleSchemaError when the subject's rule refuses it."""
        normalize = self._config.normalize_schemas if normalize is None else normalize
        key = ("register", subject, schema, normalize, schema_type)
        return self._cached(key, lambda: _schema_id(self._post(
            f"/subjects/{_segment(subject)}/versions?normalize={_flag(normalize)}",
            _body(schema, schema_type), subject, "registering the schema"), subject))

    def lookup(self, subject: str, schema: str, normalize: bool | None = None,
               schema_type: str = AVRO) -> int:
        """The id of ``schema`` as already registered under ``subject`` (nothing is registered):
        SubjectNotFoundError or RegistrySchemaNotFoundError when it is not there."""
        normalize = self._config.normalize_schemas if normalize is None else normalize
        key = ("lookup", subject, schema, normalize, schema_type)
        hint = (f"; register it under subject {subject!r} first, or set auto.register.schemas=true")
        return self._cached(key, lambda: _schema_id(self._post(
            f"/subjects/{_segment(subject)}?normalize={_flag(normalize)}&deleted=false",
            _body(schema, schema_type), subject, "looking the schema up", hint), subject))

    def latest(self, subject: str) -> RegisteredSchema:
        """``subject``'s latest version (``use.latest.version``)."""
        def fetch() -> RegisteredSchema:
            body = self._get(f"/subjects/{_segment(subject)}/versions/latest", subject,
                             "reading the latest version")
            version = body.get("version")
            text = body.get("schema")
            if not isinstance(version, int) or isinstance(version, bool) or not isinstance(text, str):
                raise RegistryError(f"the schema registry's latest version of subject {subject!r} has "
                                    f"no version number or no schema: {_shorten(body)}", subject=subject)
            return RegisteredSchema(subject, _schema_id(body, subject), version, text,
                                    body.get("schemaType") or AVRO)
        return self._cached(("latest", subject), fetch)

    def schema_by_id(self, schema_id: int) -> str:
        """The schema text registered as ``schema_id``; RegistrySchemaNotFoundError when none is."""
        if (isinstance(schema_id, bool) or not isinstance(schema_id, int)
                or not 0 <= schema_id <= MAX_SCHEMA_ID):
            raise RegistryError(f"a schema id is an integer in [0, {MAX_SCHEMA_ID}], got {schema_id!r}")

        def fetch() -> str:
            body = self._get(f"/schemas/ids/{schema_id}", None, f"reading schema id {schema_id}")
            if not isinstance(body.get("schema"), str):
                raise RegistryError(f"the schema registry's answer for schema id {schema_id} has no "
                                    f"schema: {_shorten(body)}")
            return body["schema"]
        return self._cached(("id", schema_id), fetch)

    def _cached(self, key: tuple[Any, ...], fetch: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        value = fetch()
        with self._lock:
            return self._cache.setdefault(key, value)

    def _post(self, path: str, body: dict[str, Any], subject: str, doing: str,
              hint: str = "") -> dict[str, Any]:
        return self._checked(self._transport.request("POST", path, body), subject, doing, hint)

    def _get(self, path: str, subject: str | None, doing: str) -> dict[str, Any]:
        return self._checked(self._transport.request("GET", path), subject, doing)

    def _checked(self, answer: RegistryAnswer, subject: str | None, doing: str,
                 hint: str = "") -> dict[str, Any]:
        if not answer.ok:
            raise self._error(answer, subject, doing, hint)
        if not isinstance(answer.body, dict):
            raise RegistryError(f"{doing}: the schema registry at {answer.url} answered HTTP "
                                f"{answer.status} with no JSON object: {_shorten(answer.body)}",
                                status=answer.status, url=answer.url, subject=subject)
        return answer.body

    def _error(self, answer: RegistryAnswer, subject: str | None, doing: str, hint: str) -> RegistryError:
        status, code, url = answer.status, answer.error_code, answer.url
        said = f"HTTP {status}" + (f", error {code}" if code is not None else "") + f": {answer.message}"
        about = f" for subject {subject!r}" if subject is not None else ""
        where = dict(status=status, error_code=code, url=url, subject=subject)
        if status in (401, 403):
            kind = self._transport.credentials.kind
            fix = ("the registry wants credentials: set schema.registry.basic.auth.user.info or a "
                   "bearer token" if kind == "no credentials" else f"check them ({kind})")
            return RegistryAuthError(f"{doing}{about}: the schema registry at {url} refused the "
                                     f"request ({said}); {fix}", **where)
        if status == 409:
            return IncompatibleSchemaError(f"{doing}{about}: the schema is incompatible with the "
                                           f"subject's registered versions ({url}, {said})", **where)
        if status == 404 and code in _NOT_FOUND:
            return _NOT_FOUND[code](f"{doing}{about}: not found at {url} ({said}){hint}", **where)
        if status == 404:
            return RegistryError(f"{doing}{about}: {url} answered {said}: is schema.registry.url the "
                                 f"registry's base URL?", **where)
        if status == 422:
            return RegistryInvalidSchemaError(f"{doing}{about}: the schema registry at {url} refused "
                                              f"it as invalid ({said})", **where)
        return RegistryError(f"{doing}{about}: the schema registry at {url} answered {said}", **where)

    def __repr__(self) -> str:
        return f"RegistryClient({self._transport!r})"


def _segment(subject: str) -> str:
    """``subject`` as one path segment: everything but unreserved characters escaped (``/`` too)."""
    if not isinstance(subject, str) or not subject:
        raise RegistryError(f"a subject is a non-empty string, got {subject!r}")
    return urllib.parse.quote(subject, safe="")


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _body(schema: str, schema_type: str) -> dict[str, Any]:
    if not isinstance(schema, str) or not schema.strip():
        raise RegistryError(f"a schema is a non-empty string (JSON), got {type(schema).__name__}")
    return {"schema": schema, "schemaType": schema_type}


def _schema_id(body: dict[str, Any], subject: str) -> int:
    value = body.get("id")
    if isinstance(value, bool) or not isinstance(value, int):
        raise RegistryError(f"the schema registry's answer for subject {subject!r} has no schema id: "
                            f"{_shorten(body)}", subject=subject)
    if not 0 <= value <= MAX_SCHEMA_ID:
        raise RegistryError(f"the schema registry gave subject {subject!r} schema id {value}, which "
                            f"the wire format's 4-byte id cannot hold", subject=subject)
    return value


def _shorten(body: Any) -> str:
    text = repr(body)
    return text if len(text) <= 200 else text[:200] + "..."
