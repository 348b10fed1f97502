"""The Schema Registry client's settings: :class:`RegistryConfig`, a frozen, validated value read
from Confluent's serializer property names.

    config = RegistryConfig({"schema.registry.url": "https://sr1:8081,https://sr2:8081",
                             "schema.registry.basic.auth.user.info": "user:password"})

- ``schema.registry.url``: one URL or several, comma-separated (or a list), ``http`` or
  ``https``, with an optional path (Apicurio's ``/apis/ccompat/v7``); tried in turn. Credentials
  do not go in a URL.
- Credentials, at most one kind: ``schema.registry.basic.auth.user.info`` (``user:password``;
  ``basic.auth.credentials.source`` may say ``USER_INFO``, the only source taken); or a bearer
  token, static (``schema.registry.bearer.auth.token``; ``bearer.auth.credentials.source=
  STATIC_TOKEN``) or from a function (``schema.registry.bearer.auth.token.provider``: a
  ``module:function`` import path or the function itself, called as the OAUTHBEARER token
  provider is, with ``schema.registry.bearer.auth.config``, and returning ``(token, expiry in
  epoch seconds)``); ``...bearer.auth.logical.cluster`` and ``...identity.pool.id`` become
  Confluent Cloud's headers. The unprefixed Confluent names (``basic.auth.user.info``,
  ``bearer.auth.token``, ...) are taken as well.
- TLS: ``schema.registry.ssl.ca.location`` (else the system CAs), ``...ssl.certificate.location``
  and ``...ssl.key.location`` (PEM; ``...ssl.key.password`` for an encrypted key),
  ``...ssl.endpoint.identification.algorithm`` (``https``, the default, or empty: no host check).
- ``schema.registry.request.timeout.ms`` (30 s): each URL's connect and each read.
- ``auto.register.schemas`` (true), ``use.latest.version`` (false: with true the subject's latest
  schema is used and nothing is registered, so ``auto.register.schemas=true`` set with it is
  refused), ``normalize.schemas`` (false), ``key.subject.name.strategy`` and
  ``value.subject.name.strategy`` (:mod:`.subjects`).

Names match without case (as Spark options do). Errors are ConfigErrors naming the property.
Secrets (the user info, tokens, the provider's config string, the key password) never appear in a
repr, an error or :meth:`RegistryConfig.redacted`. :meth:`RegistryConfig.from_options` picks the
registry's settings out of a larger option map (the sink's).
"""

from __future__ import annotations

import difflib
import re
import urllib.parse
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Callable, Mapping

from ..client.urls import redact_url
from ..errors import ConfigError
from .subjects import STRATEGY_CHOICES, SubjectNameStrategy

__all__ = ["RegistryConfig", "REGISTRY_PROPERTIES", "REGISTRY_OPTION_NAMES", "DEFAULT_REQUEST_TIMEOUT_MS",
           "is_registry_option"]

HIDDEN = "[hidden]"
DEFAULT_REQUEST_TIMEOUT_MS = 30_000
_INT_MAX = 2**31 - 1
_PREFIX = "schema.registry."
_PROVIDER = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


@dataclass(frozen=True)
class RegistryProperty:
    """One setting: its name, the names also taken for it, default, parser and secrecy."""

    name: str
    attr: str
    default: Any
    parse: Callable[[Any], Any]     # the value, or ValueError saying what it must be
    secret: bool = False
    aliases: tuple[str, ...] = ()

    def show(self, value: Any) -> str:
        if value is None:
            return "None"
        if self.secret:
            return HIDDEN
        if self.name.endswith(".url"):
            parts = value.split(",") if isinstance(value, str) else value
            if isinstance(parts, (list, tuple)):
                return repr(",".join(redact_url(str(part).strip()) for part in parts))
        return repr(value)


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a non-empty string")
    return value.strip()


def _secret(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("a non-empty string")
    return value


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError("true or false")


def _timeout(value: Any) -> int:
    if isinstance(value, str) and re.fullmatch(r"\s*[0-9]+\s*", value):
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= _INT_MAX:
        return value
    raise ValueError(f"an integer of milliseconds in [1, {_INT_MAX}]")


def _host_check(value: Any) -> str:
    if isinstance(value, str) and value.strip().lower() in ("https", "", "none"):
        return "https" if value.strip().lower() == "https" else ""
    raise ValueError("https or '' (no host name check)")


def _provider(value: Any) -> Any:
    if callable(value):
        return value
    if isinstance(value, str) and _PROVIDER.fullmatch(value.strip()):
        return value.strip()
    raise ValueError("an import path 'module:function', or a function")


def _source(value: Any) -> str:
    """A credentials source, upper case: which ones are taken is checked with the credentials."""
    if isinstance(value, str) and value.strip():
        return value.strip().upper()
    raise ValueError("a non-empty string")


def _urls(value: Any) -> tuple[str, ...]:
    """The URLs, checked (the ValueError says what they must be; the caller shows the value,
    without user info)."""
    entries = value.split(",") if isinstance(value, str) else value
    if not isinstance(entries, (list, tuple)) or not entries:
        raise ValueError("one URL or several, comma-separated")
    urls: list[str] = []
    for entry in entries:
        url = _url(entry)
        if url in urls:
            raise ValueError(f"URLs listed once each ({url} is listed twice)")
        urls.append(url)
    return tuple(urls)


def _url(entry: Any) -> str:
    text = entry.strip() if isinstance(entry, str) else ""
    if not text:
        raise ValueError("URLs separated by commas, none of them empty")
    try:
        parsed = urllib.parse.urlsplit(text)
        port = parsed.port
    except ValueError:
        raise ValueError("URLs with a port in [1, 65535]") from None
    if parsed.scheme.lower() not in ("http", "https") or not parsed.hostname:
        raise ValueError("http:// or https:// URLs with a host")
    if "@" in parsed.netloc:
        raise ValueError("URLs without credentials (put them in schema.registry.basic.auth.user.info)")
    if parsed.query or parsed.fragment or text.endswith(("?", "#")):
        raise ValueError("URLs without a query or fragment")
    if port == 0:
        raise ValueError("URLs with a port in [1, 65535]")
    return urllib.parse.urlunsplit((parsed.scheme.lower(), parsed.netloc, parsed.path.rstrip("/"), "", ""))


def _strategy(value: Any) -> SubjectNameStrategy:
    strategy = SubjectNameStrategy.find(value)
    if strategy is None:
        raise ValueError(STRATEGY_CHOICES)
    return strategy


def _property(name: str, default: Any, parse: Callable[[Any], Any], *, secret: bool = False,
              aliases: tuple[str, ...] = (), attr: str | None = None) -> Any:
    attr = attr or name.removeprefix(_PREFIX).replace(".", "_")
    return field(default=default, metadata={"property": RegistryProperty(
        name, attr, default, parse, secret, aliases)})


@dataclass(frozen=True, init=False, repr=False)
class RegistryConfig:
    """The registry client's settings; see the module docstring."""

    urls: tuple[str, ...] = _property("schema.registry.url", (), _urls, attr="urls")
    basic_auth_credentials_source: str | None = _property(
        "schema.registry.basic.auth.credentials.source", None, _source,
        aliases=("basic.auth.credentials.source",))
    basic_auth_user_info: str | None = _property(
        "schema.registry.basic.auth.user.info", None, _secret, secret=True,
        aliases=("basic.auth.user.info",))
    bearer_auth_credentials_source: str | None = _property(
        "schema.registry.bearer.auth.credentials.source", None, _source,
        aliases=("bearer.auth.credentials.source",))
    bearer_auth_token: str | None = _property(
        "schema.registry.bearer.auth.token", None, _secret, secret=True, aliases=("bearer.auth.token",))
    bearer_auth_token_provider: Any = _property("schema.registry.bearer.auth.token.provider", None,
                                                _provider)
    bearer_auth_config: str | None = _property("schema.registry.bearer.auth.config", None, _secret,
                                               secret=True)
    bearer_auth_logical_cluster: str | None = _property(
        "schema.registry.bearer.auth.logical.cluster", None, _text,
        aliases=("bearer.auth.logical.cluster",))
    bearer_auth_identity_pool_id: str | None = _property(
        "schema.registry.bearer.auth.identity.pool.id", None, _text,
        aliases=("bearer.auth.identity.pool.id",))
    ssl_ca_location: str | None = _property("schema.registry.ssl.ca.location", None, _text)
    ssl_certificate_location: str | None = _property("schema.registry.ssl.certificate.location", None,
                                                     _text)
    ssl_key_location: str | None = _property("schema.registry.ssl.key.location", None, _text)
    ssl_key_password: str | None = _property("schema.registry.ssl.key.password", None, _secret,
                                             secret=True)
    ssl_endpoint_identification_algorithm: str = _property(
        "schema.registry.ssl.endpoint.identification.algorithm", "https", _host_check)
    request_timeout_ms: int = _property("schema.registry.request.timeout.ms",
                                        DEFAULT_REQUEST_TIMEOUT_MS, _timeout)
    auto_register_schemas: bool = _property("auto.register.schemas", True, _bool)
    use_latest_version: bool = _property("use.latest.version", False, _bool)
    normalize_schemas: bool = _property("normalize.schemas", False, _bool)
    key_subject_name_strategy: SubjectNameStrategy = _property(
        "key.subject.name.strategy", SubjectNameStrategy.TOPIC, _strategy)
    value_subject_name_strategy: SubjectNameStrategy = _property(
        "value.subject.name.strategy", SubjectNameStrategy.TOPIC,
        _strategy)

    _explicit: frozenset[str] = field(default=frozenset(), compare=False)

    def __init__(self, properties: Mapping[str, Any]):
        """``properties`` by name (see the module docstring); any other name is refused."""
        given = _by_name(properties, strict=True)
        values = {prop.attr: prop.default for prop in REGISTRY_PROPERTIES.values()}
        for name, raw in given.items():
            prop = REGISTRY_PROPERTIES[name]
            try:
                values[prop.attr] = prop.parse(raw)
            except ValueError as exc:
                raise ConfigError(f"{name} must be {exc}, got {prop.show(raw)}") from None
        _check(values, frozenset(given))
        for attr, value in values.items():
            object.__setattr__(self, attr, value)
        object.__setattr__(self, "_explicit", frozenset(given))

    @classmethod
    def coerce(cls, config: RegistryConfig | Mapping[str, Any]) -> RegistryConfig:
        """``config`` itself if it is a :class:`RegistryConfig`, else one read from the mapping."""
        return config if isinstance(config, RegistryConfig) else cls(config)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> RegistryConfig:
        """The registry's settings out of a larger option map: other names are left alone, but an
        unknown ``schema.registry.*`` name is refused (a typo would otherwise be lost)."""
        return cls(_by_name(options, strict=False))

    def is_set(self, name: str) -> bool:
        """Whether ``name`` (a main name or another taken for it) was given, rather than left at
        its default."""
        return _ALIASES.get(name.lower()) in self._explicit

    def strategy(self, is_key: bool) -> SubjectNameStrategy:
        return self.key_subject_name_strategy if is_key else self.value_subject_name_strategy

    def to_properties(self, redact: bool = False) -> dict[str, Any]:
        """The settings given, by main name, as :class:`RegistryConfig` reads them back; with
        ``redact``, secrets read ``[hidden]``."""
        out: dict[str, Any] = {}
        for name in sorted(self._explicit):
            prop = REGISTRY_PROPERTIES[name]
            value = getattr(self, prop.attr)
            if isinstance(value, SubjectNameStrategy):
                value = value.value
            elif name == "schema.registry.url":
                value = ",".join(value)
            out[name] = HIDDEN if redact and prop.secret else value
        return out

    def redacted(self) -> dict[str, Any]:
        """The settings given, secrets hidden: the view to log."""
        return self.to_properties(redact=True)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in self.redacted().items())
        return f"RegistryConfig({shown})"

    __str__ = __repr__


REGISTRY_PROPERTIES: Mapping[str, RegistryProperty] = MappingProxyType(
    {f.metadata["property"].name: f.metadata["property"] for f in fields(RegistryConfig)
     if "property" in f.metadata})
"""Every setting by its main name."""
assert all(f.name == f.metadata["property"].attr for f in fields(RegistryConfig) if "property" in f.metadata)
_ALIASES = {alias: prop.name for prop in REGISTRY_PROPERTIES.values() for alias in (prop.name, *prop.aliases)}
REGISTRY_OPTION_NAMES = frozenset(_ALIASES)
"""Every name a setting is taken under (main names and the others), lowercase."""


def is_registry_option(name: str) -> bool:
    """Whether the option ``name`` (any case) is the registry's: one of its names, or any other
    ``schema.registry.*`` name (which :class:`RegistryConfig` refuses, naming it)."""
    lower = name.strip().lower()
    return lower in REGISTRY_OPTION_NAMES or lower.startswith(_PREFIX)


def _by_name(properties: Mapping[str, Any], *, strict: bool) -> dict[str, Any]:
    """The values by main name (names without case; ``None`` values left out). ``strict``: any
    other name is an error, else only an unknown ``schema.registry.*`` one."""
    if not isinstance(properties, Mapping):
        raise TypeError(f"properties must be a mapping, got {type(properties).__name__}")
    given: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for raw_name, value in properties.items():
        if not isinstance(raw_name, str):
            raise ConfigError(f"property names must be strings, got {type(raw_name).__name__}")
        main = _ALIASES.get(raw_name.strip().lower())
        if main is None:
            if strict or raw_name.strip().lower().startswith(_PREFIX):
                close = difflib.get_close_matches(raw_name.strip().lower(), list(_ALIASES), n=2, cutoff=0.75)
                hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
                raise ConfigError(f"unknown schema registry property {raw_name!r}{hint}")
            continue
        if value is None:
            continue
        if main in given:
            raise ConfigError(f"{origin[main]} and {raw_name} name the same setting ({main}): give it once")
        given[main] = value
        origin[main] = raw_name
    return given


def _check(values: dict[str, Any], explicit: frozenset[str]) -> None:
    """The rules between settings (module docstring)."""
    if not values["urls"]:
        raise ConfigError("schema.registry.url is required: the registry's URL, or several, "
                          "comma-separated")
    _check_credentials(values)
    tls = [name for name in ("schema.registry.ssl.ca.location", "schema.registry.ssl.certificate.location",
                             "schema.registry.ssl.key.location", "schema.registry.ssl.key.password")
           if name in explicit]
    if tls and not any(url.startswith("https:") for url in values["urls"]):
        raise ConfigError(f"{', '.join(tls)} set, but no schema.registry.url is https://")
    if values["ssl_certificate_location"] is None:
        for name in ("ssl_key_location", "ssl_key_password"):
            if values[name] is not None:
                raise ConfigError(f"schema.registry.{name.replace('_', '.')} needs "
                                  f"schema.registry.ssl.certificate.location (the client certificate)")
    if values["use_latest_version"]:
        if "auto.register.schemas" in explicit and values["auto_register_schemas"]:
            raise ConfigError("use.latest.version=true takes the subject's latest registered schema "
                              "and registers nothing: set auto.register.schemas=false, or leave it unset")
        values["auto_register_schemas"] = False


def _check_credentials(values: dict[str, Any]) -> None:
    source = values["basic_auth_credentials_source"]
    if source is not None and source != "USER_INFO":
        raise ConfigError(f"basic.auth.credentials.source={source} is not supported: only USER_INFO "
                          f"is (set schema.registry.basic.auth.user.info to user:password)")
    if source == "USER_INFO" and values["basic_auth_user_info"] is None:
        raise ConfigError("basic.auth.credentials.source=USER_INFO needs "
                          "schema.registry.basic.auth.user.info (user:password)")
    if values["basic_auth_user_info"] is not None and ":" not in values["basic_auth_user_info"]:
        raise ConfigError("schema.registry.basic.auth.user.info must be user:password (no ':' found)")
    bearer_source = values["bearer_auth_credentials_source"]
    token, provider = values["bearer_auth_token"], values["bearer_auth_token_provider"]
    if bearer_source is not None and bearer_source != "STATIC_TOKEN":
        raise ConfigError(f"bearer.auth.credentials.source={bearer_source} is not supported: set "
                          f"schema.registry.bearer.auth.token (STATIC_TOKEN), or "
                          f"schema.registry.bearer.auth.token.provider (module:function) for tokens "
                          f"from your own code")
    if bearer_source == "STATIC_TOKEN" and token is None:
        raise ConfigError("bearer.auth.credentials.source=STATIC_TOKEN needs "
                          "schema.registry.bearer.auth.token")
    if token is not None and provider is not None:
        raise ConfigError("set schema.registry.bearer.auth.token or "
                          "schema.registry.bearer.auth.token.provider, not both")
    if values["basic_auth_user_info"] is not None and (token is not None or provider is not None):
        raise ConfigError("set either basic auth (schema.registry.basic.auth.user.info) or a bearer "
                          "token (schema.registry.bearer.auth.*), not both")
    if values["bearer_auth_config"] is not None and provider is None:
        raise ConfigError("schema.registry.bearer.auth.config is passed to "
                          "schema.registry.bearer.auth.token.provider, which is not set")
    for name in ("bearer_auth_logical_cluster", "bearer_auth_identity_pool_id"):
        if values[name] is not None and token is None and provider is None:
            raise ConfigError(f"schema.registry.{name.replace('_', '.')} goes with a bearer token "
                              f"(schema.registry.bearer.auth.token or ...token.provider), which is not set")
