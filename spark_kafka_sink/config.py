"""Producer configuration: Java property names outside, typed snake_case attributes inside.

:class:`ProducerConfig` is a frozen value (hashable, equal by value, picklable) read from Java
producer property names, as a Spark option map or a properties file gives them::

    config = ProducerConfig({"bootstrap.servers": "localhost:9092", "linger.ms": "10"})
    config.linger_ms                      # 10
    config.with_overrides(acks="1")       # a new config; this one is unchanged

The class body is the table: one line per property with its Java name, its Kafka 4 default
(``ProducerConfig``, ``CommonClientConfigs``, ``SslConfigs``, ``SaslConfigs``), the values it takes
and a doc. Values may be strings or Python values; integers never take booleans, nor the reverse.

Then the Java producer's cross-property rules, in its order:

1. Security (:func:`_check_security`): with a TLS protocol (SSL, SASL_SSL) trust and client
   certificates must be PEM files (JKS and PKCS12 stores are refused by name); with a SASL protocol
   ``sasl.mechanism`` must be PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (GSSAPI, Java's
   default, is refused); PLAIN and SCRAM credentials come from ``sasl.username``/``sasl.password``
   or a ``sasl.jaas.config`` login line for that mechanism, OAUTHBEARER tokens from exactly one
   source (``client.auth.jaas``, ``client.auth.oauth``).
2. ``reconnect.backoff.ms`` set without ``reconnect.backoff.max.ms``: the maximum becomes the base
   (``CommonClientConfigs.postProcessReconnectBackoffConfigs``).
3. Idempotence on (``ProducerConfig.postProcessAndValidateIdempotenceConfigs``): ``retries`` = 0 or
   ``acks`` other than all raise if ``enable.idempotence`` was set, else turn idempotence off
   quietly; ``max.in.flight.requests.per.connection`` > 5 raises even when it was not set (Kafka 4).
4. ``transactional.id`` needs idempotence as step 3 left it (Java's rule): with
   ``enable.idempotence=false``, or settings that turned it off (``acks`` other than all,
   ``retries=0``), it raises naming them.
5. ``delivery.timeout.ms`` < ``linger.ms`` + ``request.timeout.ms`` raises if it was set, else is
   raised to that sum (``KafkaProducer.configureDeliveryTimeout``).
6. ``batch.size`` > ``buffer.memory`` raises, naming both: no batch could ever be allocated, so
   every send would fail. (Java accepts it.) ``batch.size=0`` is valid: no batching, as Java.

Errors are :class:`ConfigError` naming the property and what it takes. Secret values (marked, or
named "password"/"secret") never appear in reprs or errors, nor the user info and query of a URL
(``*.url``: :func:`~.client.urls.redact_url`); :meth:`ProducerConfig.redacted` is the view to log.
``client.id`` stays ``""`` when unset (the producer names itself, as Java's ``producer-N``), so
equal settings give equal configs.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from dataclasses import dataclass, field, fields
from types import MappingProxyType, SimpleNamespace
from typing import Any, Callable, Mapping

from .bytecodec import INT32_MAX, INT64_MAX
from .client.auth.jaas import SASL_PROTOCOLS, credentials_from_config
from .client.tls import TLS_PROTOCOLS
from .client.urls import redact_url
from .errors import ConfigError
from .record.codecs import CompressionType, codec_for

INT_MAX = INT32_MAX  # Java Integer.MAX_VALUE: the bound of Type.INT properties
LONG_MAX = INT64_MAX  # Java Long.MAX_VALUE: the bound of Type.LONG properties
HIDDEN = "[hidden]"
MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5  # the broker keeps the last 5 batches per producer


@dataclass(frozen=True, order=True)
class HostPort:
    """One ``bootstrap.servers`` entry. An IPv6 host is kept without its brackets."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


class _Invalid(str):
    """What a parser returns for a value it rejects; the text, if any, details why."""


_BAD = _Invalid()
_REQUIRED: Any = object()


@dataclass(frozen=True)
class ConfigKey:
    """One property: Java name, default, parser, what it takes (as text), secrecy and doc."""

    name: str
    default: Any
    parse: Callable[[Any], Any]
    expected: str
    doc: str
    secret: bool = False
    minimum: int | None = None
    maximum: int | None = None
    render: Callable[[Any], Any] = lambda value: value  # value -> property form
    redact: Callable[[Any], Any] | None = None  # value -> as shown, for values that may hold a secret

    @property
    def attr(self) -> str:
        """The :class:`ProducerConfig` attribute: ``linger.ms`` -> ``linger_ms``."""
        return self.name.replace(".", "_")

    def show(self, value: Any) -> str:
        """``value`` as errors and reprs may show it."""
        return HIDDEN if self.secret and value is not None else repr(self.shown(value))

    def shown(self, value: Any) -> Any:
        """``value`` as a redacted view holds it: secrets hidden, URLs without their user info
        and query (:func:`~.client.urls.redact_url`)."""
        if value is None:
            return None
        if self.secret:
            return HIDDEN
        if self.redact is not None and isinstance(value, str):
            return self.redact(value)
        return value


_INT_TEXT = re.compile(r"[+-]?[0-9]+")


def _int(lo: int, hi: int) -> dict[str, Any]:
    def parse(value: Any) -> Any:
        if isinstance(value, str) and _INT_TEXT.fullmatch(value.strip()):
            value = int(value.strip())
        if isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi:
            return value
        return _BAD
    return {"parse": parse, "expected": f"an integer in [{lo}, {hi}]", "minimum": lo, "maximum": hi}


def _text(optional: bool = True, nonempty: bool = False) -> dict[str, Any]:
    def parse(value: Any) -> Any:
        if value is None and optional:
            return None
        return value if isinstance(value, str) and (value or not nonempty) else _BAD
    what = "a non-empty string" if nonempty else "a string"
    return {"parse": parse, "expected": what + (" or None" if optional else "")}


def _choice(options: Mapping[str, Any], render: Callable[[Any], Any] | None = None) -> dict[str, Any]:
    """Strings matched without case (the keys, as errors list them), or the option values."""
    by_text = {text.lower(): option for text, option in options.items()}

    def parse(value: Any) -> Any:
        if isinstance(value, str):
            return by_text.get(value.strip().lower(), _BAD)
        same = [option for option in options.values() if type(option) is type(value) and option == value]
        return same[0] if same else _BAD
    shown = ", ".join(text or "''" for text in options)
    return {"parse": parse, "expected": f"one of {shown}", "render": render or (lambda value: value)}


def _level(compression: CompressionType) -> dict[str, Any]:
    """A compression level, checked by the codec itself so that its range lives in one place."""
    codec = codec_for(compression)
    lo, hi, default = codec.min_level, codec.max_level, codec.default_level
    as_int = _int(-LONG_MAX, LONG_MAX)["parse"]

    def parse(value: Any) -> Any:
        level = as_int(value)
        try:
            return _BAD if level is _BAD else codec.validate_level(level)
        except (TypeError, ValueError):
            return _BAD
    extra = "" if lo <= default <= hi else f" or {default} (the library default)"
    return {"parse": parse, "expected": f"an integer in [{lo}, {hi}]{extra}", "minimum": lo, "maximum": hi}


def _host_port(entry: Any) -> Any:
    if isinstance(entry, HostPort):
        return entry
    text = entry.strip() if isinstance(entry, str) else ""
    match = re.fullmatch(r"\[([^\]]*)\]:([0-9]{1,5})|([A-Za-z0-9._-]+):([0-9]{1,5})", text)
    if match is None:
        hint = "; write IPv6 addresses in brackets, as [::1]:9092" if text.count(":") > 1 else ""
        return _Invalid(f"entry {entry!r} is not host:port{hint}")
    host, port = match.group(1) or match.group(3), int(match.group(2) or match.group(4))
    if match.group(1) is not None:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return _Invalid(f"entry {entry!r} has {host!r} in brackets, which is not an IPv6 address")
    if not 1 <= port <= 65535:
        return _Invalid(f"entry {entry!r} has port {port}, outside [1, 65535]")
    return HostPort(host, port)


def _parse_bootstrap(value: Any) -> Any:
    """A list, tuple or comma string of host:port; empty and repeated entries are refused (Java)."""
    entries = value.split(",") if isinstance(value, str) else value
    if not isinstance(entries, (list, tuple)) or not entries:
        return _BAD
    servers: list[HostPort] = []
    for entry in entries:
        server = _host_port(entry)
        if isinstance(server, _Invalid) or server in servers:
            return server if isinstance(server, _Invalid) else _Invalid(f"entry '{server}' is listed twice")
        servers.append(server)
    return tuple(servers)


_BOOTSTRAP = {"parse": _parse_bootstrap, "expected": "a non-empty list of host:port",
              "render": lambda servers: ",".join(map(str, servers))}
_INT, _LONG = _int(0, INT_MAX), _int(0, LONG_MAX)  # Java Type.INT / Type.LONG with atLeast(0)
_TEXT, _OPT = _text(optional=False), _text()
_BOOL = _choice({"true": True, "false": False})
_ACKS = _choice({"all": -1, "-1": -1, "0": 0, "1": 1}, lambda acks: "all" if acks == -1 else str(acks))
_CODECS = _choice({t.java_name: t for t in CompressionType}, lambda t: t.java_name)
_PROTOCOLS = _choice({p: p for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")})
_STORES = _choice({t: t for t in ("JKS", "PKCS12", "PEM")})
_MECHANISMS = _choice({m: m for m in ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")})
_OAUTH_METHODS = _choice({"default": "default", "oidc": "oidc"})


def _callable() -> dict[str, Any]:
    def parse(value: Any) -> Any:
        return value if value is None or callable(value) else _BAD
    return {"parse": parse, "expected": "a function (or None)"}


def _key(name: str, default: Any, kind: Mapping[str, Any], doc: str, *, secret: bool = False) -> Any:
    secret = secret or "password" in name or "secret" in name
    redact = redact_url if name.endswith(".url") else None
    key = ConfigKey(name, default, doc=doc, secret=secret, redact=redact, **kind)
    if default is _REQUIRED:
        return field(metadata={"key": key})
    return field(default=default, metadata={"key": key})


@dataclass(frozen=True, init=False, repr=False)
class ProducerConfig:
    """The producer's settings (see the module docstring); typed attributes, Java names outside."""

    # attribute: type = _key(Java name, Kafka 4 default, accepted values, doc[, secret=True])
    bootstrap_servers: tuple[HostPort, ...] = _key(
        "bootstrap.servers", _REQUIRED, _BOOTSTRAP, "Brokers to start from: a list or a comma string.")
    client_id: str = _key("client.id", "", _TEXT, "Named in requests; empty: the producer picks one.")
    acks: int = _key("acks", -1, _ACKS, "Acknowledgements per request: -1 (all), 0 or 1.")
    linger_ms: int = _key("linger.ms", 5, _LONG, "How long a batch waits for more records.")
    batch_size: int = _key("batch.size", 16384, _INT, "Bytes per partition batch.")
    buffer_memory: int = _key("buffer.memory", 33554432, _LONG, "Bytes buffered in total.")
    max_block_ms: int = _key("max.block.ms", 60000, _LONG, "Longest send() waits for metadata or memory.")
    max_request_size: int = _key("max.request.size", 1048576, _INT, "Largest request (and record).")
    compression_type: CompressionType = _key("compression.type", CompressionType.NONE, _CODECS, "Codec.")
    compression_gzip_level: int = _key("compression.gzip.level", -1, _level(CompressionType.GZIP), "KIP-390.")
    compression_lz4_level: int = _key("compression.lz4.level", 9, _level(CompressionType.LZ4), "KIP-390.")
    compression_zstd_level: int = _key("compression.zstd.level", 3, _level(CompressionType.ZSTD), "KIP-390.")
    retries: int = _key("retries", INT_MAX, _INT, "Resends of a batch after retriable errors.")
    retry_backoff_ms: int = _key("retry.backoff.ms", 100, _LONG, "First wait before a retry.")
    retry_backoff_max_ms: int = _key("retry.backoff.max.ms", 1000, _LONG, "Cap of the retry wait.")
    delivery_timeout_ms: int = _key("delivery.timeout.ms", 120000, _INT, "Bound on send() to outcome.")
    request_timeout_ms: int = _key("request.timeout.ms", 30000, _INT, "Wait for a response.")
    max_in_flight_requests_per_connection: int = _key(
        "max.in.flight.requests.per.connection", 5, _int(1, INT_MAX), "Unanswered requests per broker.")
    enable_idempotence: bool = _key("enable.idempotence", True, _BOOL, "One copy per record, in order.")
    partitioner_ignore_keys: bool = _key("partitioner.ignore.keys", False, _BOOL, "Ignore keys.")
    partitioner_adaptive_partitioning_enable: bool = _key(
        "partitioner.adaptive.partitioning.enable", True, _BOOL, "Send more to faster brokers.")
    partitioner_availability_timeout_ms: int = _key(
        "partitioner.availability.timeout.ms", 0, _LONG, "Skip partitions a broker stalls on; 0: off.")
    metadata_max_age_ms: int = _key("metadata.max.age.ms", 300000, _LONG, "Refresh metadata this often.")
    metadata_max_idle_ms: int = _key("metadata.max.idle.ms", 300000, _int(5000, LONG_MAX), "Forget topics.")
    metadata_recovery_strategy: str = _key(
        "metadata.recovery.strategy", "rebootstrap", _choice({"none": "none", "rebootstrap": "rebootstrap"}),
        "rebootstrap: back to bootstrap.servers when no known broker answers (KIP-899).")
    metadata_recovery_rebootstrap_trigger_ms: int = _key(
        "metadata.recovery.rebootstrap.trigger.ms", 300000, _LONG, "Rebootstrap after this long without metadata.")
    connections_max_idle_ms: int = _key("connections.max.idle.ms", 540000, _int(-1, LONG_MAX), "-1: never.")
    reconnect_backoff_ms: int = _key("reconnect.backoff.ms", 50, _LONG, "First reconnect wait.")
    reconnect_backoff_max_ms: int = _key("reconnect.backoff.max.ms", 1000, _LONG, "Reconnect wait cap.")
    socket_connection_setup_timeout_ms: int = _key(
        "socket.connection.setup.timeout.ms", 10000, _LONG, "First connect timeout.")
    socket_connection_setup_timeout_max_ms: int = _key(
        "socket.connection.setup.timeout.max.ms", 30000, _LONG, "Cap of the connect timeout.")
    send_buffer_bytes: int = _key("send.buffer.bytes", 131072, _int(-1, INT_MAX), "-1: OS default.")
    receive_buffer_bytes: int = _key("receive.buffer.bytes", 32768, _int(-1, INT_MAX), "-1: OS default.")
    transactional_id: str | None = _key("transactional.id", None, _text(nonempty=True), "Transactions; implies idempotence.")
    transaction_timeout_ms: int = _key("transaction.timeout.ms", 60000, _int(1, INT_MAX), "Then aborted.")
    security_protocol: str = _key("security.protocol", "PLAINTEXT", _PROTOCOLS, "TLS and/or SASL.")
    sasl_mechanism: str = _key("sasl.mechanism", "GSSAPI", _MECHANISMS, "Java's default.")
    sasl_jaas_config: str | None = _key("sasl.jaas.config", None, _OPT, "JAAS login line.", secret=True)
    sasl_username: str | None = _key("sasl.username", None, _OPT, "PLAIN/SCRAM user, instead of JAAS.")
    sasl_password: str | None = _key("sasl.password", None, _OPT, "PLAIN/SCRAM password.")
    sasl_oauthbearer_method: str = _key(
        "sasl.oauthbearer.method", "default", _OAUTH_METHODS, "OAUTHBEARER tokens: default or oidc (librdkafka).")
    sasl_oauthbearer_config: str | None = _key(
        "sasl.oauthbearer.config", None, _OPT, "Passed to the token function (librdkafka).", secret=True)
    oauth_cb: Callable[..., Any] | None = _key(
        "oauth_cb", None, _callable(), "Token function: config string -> (token, expiry s) (confluent-kafka).")
    sasl_oauthbearer_token_provider: str | None = _key(
        "sasl.oauthbearer.token.provider", None, _OPT, "The token function as module:function.")
    enable_sasl_oauthbearer_unsecure_jwt: bool = _key(
        "enable.sasl.oauthbearer.unsecure.jwt", False, _BOOL, "Unsigned test tokens (librdkafka).")
    sasl_oauthbearer_token_endpoint_url: str | None = _key(
        "sasl.oauthbearer.token.endpoint.url", None, _OPT, "OIDC token endpoint (KIP-768).")
    sasl_oauthbearer_client_id: str | None = _key(
        "sasl.oauthbearer.client.id", None, _OPT, "OIDC client id (librdkafka).")
    sasl_oauthbearer_client_secret: str | None = _key(
        "sasl.oauthbearer.client.secret", None, _OPT, "OIDC client secret (librdkafka).")
    sasl_oauthbearer_scope: str | None = _key(
        "sasl.oauthbearer.scope", None, _OPT, "OIDC scope (librdkafka).")
    sasl_oauthbearer_extensions: str | None = _key(
        "sasl.oauthbearer.extensions", None, _OPT, "SASL extensions, key=value,... (librdkafka).")
    https_ca_location: str | None = _key(
        "https.ca.location", None, _OPT, "The token endpoint's PEM CA file or directory; unset: the "
        "system CAs (librdkafka; Java: ssl.truststore.* in the JAAS options).")
    https_ca_pem: str | None = _key(
        "https.ca.pem", None, _OPT, "The token endpoint's CA certificates, PEM text (librdkafka).",
        secret=True)
    ssl_ca_location: str | None = _key("ssl.ca.location", None, _OPT, "PEM CA file (librdkafka).")
    ssl_certificate_location: str | None = _key(
        "ssl.certificate.location", None, _OPT, "PEM client certificate chain (librdkafka).")
    ssl_key_location: str | None = _key("ssl.key.location", None, _OPT, "PEM client key (librdkafka).")
    ssl_truststore_type: str = _key("ssl.truststore.type", "JKS", _STORES, "Trust store format.")
    ssl_truststore_location: str | None = _key("ssl.truststore.location", None, _OPT, "Trust store file.")
    ssl_truststore_password: str | None = _key("ssl.truststore.password", None, _OPT, "Its password.")
    ssl_truststore_certificates: str | None = _key(
        "ssl.truststore.certificates", None, _OPT, "Trusted PEM certificates.", secret=True)
    ssl_keystore_type: str = _key("ssl.keystore.type", "JKS", _STORES, "Key store format.")
    ssl_keystore_location: str | None = _key("ssl.keystore.location", None, _OPT, "Key store file.")
    ssl_keystore_password: str | None = _key("ssl.keystore.password", None, _OPT, "Its password.")
    ssl_keystore_key: str | None = _key("ssl.keystore.key", None, _OPT, "PEM private key.", secret=True)
    ssl_keystore_certificate_chain: str | None = _key(
        "ssl.keystore.certificate.chain", None, _OPT, "PEM certificates.", secret=True)
    ssl_key_password: str | None = _key("ssl.key.password", None, _OPT, "Private key password.")
    ssl_endpoint_identification_algorithm: str = _key(
        "ssl.endpoint.identification.algorithm", "https", _choice({"https": "https", "": "", "none": ""}),
        "Host name check; '' or none: off.")

    _explicit: frozenset[str] = field(default=frozenset(), compare=False)  # the names the caller set

    def __init__(self, properties: Mapping[str, Any] | None = None, /, **overrides: Any):
        """``properties`` by Java name; keywords by attribute (``linger_ms=10``) or Java name."""
        given = _java_names(properties, overrides)
        values = {key.attr: key.default for key in PROPERTIES.values()}
        for name, raw in given.items():
            values[PROPERTIES[name].attr] = _parse(PROPERTIES[name], raw)
        if values["bootstrap_servers"] is _REQUIRED:
            raise ConfigError("bootstrap.servers is required: a non-empty list of host:port")
        _apply_java_rules(values, frozenset(given))
        for attr, value in values.items():
            object.__setattr__(self, attr, value)
        object.__setattr__(self, "_explicit", frozenset(given))

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> ProducerConfig:
        """A config from Java property names; values as strings or Python values."""
        return cls(properties)

    @classmethod
    def coerce(cls, config: ProducerConfig | Mapping[str, Any]) -> ProducerConfig:
        """``config`` itself if it is a :class:`ProducerConfig`, else one read from the mapping."""
        if isinstance(config, ProducerConfig):
            return config
        if isinstance(config, Mapping):
            return cls(config)
        raise TypeError(f"expected a ProducerConfig or a mapping of properties, got {type(config).__name__}")

    def with_overrides(self, properties: Mapping[str, Any] | None = None, /, **overrides: Any,
                       ) -> ProducerConfig:
        """A new config: the properties set on this one, updated. The rules see only what was set,
        so a derived value (idempotence turned off, a raised delivery timeout) is derived again."""
        mine = self.to_properties()
        base = {name: mine[name] for name in PROPERTIES if name in self._explicit}
        return type(self)({**base, **_java_names(properties, overrides)})

    def is_set(self, name: str) -> bool:
        """Whether the caller set the property ``name`` (Java name), rather than left its default."""
        return _check_name(name) in self._explicit

    def to_properties(self, redact: bool = False) -> dict[str, Any]:
        """Every property by Java name, as :meth:`from_properties` reads back to an equal config.
        With ``redact``, secrets that are set read ``"[hidden]"`` and URLs lose their user info
        and query."""
        out = {}
        for name, key in PROPERTIES.items():
            value = key.render(getattr(self, key.attr))
            out[name] = key.shown(value) if redact else value
        return out

    def redacted(self) -> dict[str, Any]:
        """The properties with secrets hidden and URLs without user info or query: the view to
        log."""
        return self.to_properties(redact=True)

    def __repr__(self) -> str:
        shown = [f"{key.name}={key.show(key.render(getattr(self, key.attr)))}" for key in PROPERTIES.values()
                 if key.name == "bootstrap.servers" or getattr(self, key.attr) != key.default]
        return f"ProducerConfig({', '.join(shown)})"


PROPERTIES: Mapping[str, ConfigKey] = MappingProxyType(
    {f.metadata["key"].name: f.metadata["key"] for f in fields(ProducerConfig) if "key" in f.metadata})
_BY_ATTR = {key.attr: name for name, key in PROPERTIES.items()}
assert all(f.name == f.metadata["key"].attr for f in fields(ProducerConfig) if "key" in f.metadata)

# Java producer properties with no equivalent here: refused by name rather than as unknown.
JAVA_ONLY = frozenset({
    "key.serializer", "value.serializer", "partitioner.class", "interceptor.classes", "metric.reporters",
    "client.dns.lookup", "security.providers", "enable.metrics.push", "metrics.sample.window.ms",
    "metrics.num.samples", "metrics.recording.level", "config.providers",
    "transaction.two.phase.commit.enable"})


def _java_names(properties: Mapping[str, Any] | None, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Values keyed by Java name; keywords may use attribute names. Unknown names raise."""
    if properties is not None and not isinstance(properties, Mapping):
        raise TypeError(f"properties must be a mapping, got {type(properties).__name__}")
    given = {_check_name(name): value for name, value in (properties or {}).items()}
    given.update({_BY_ATTR.get(name) or _check_name(name, True): value for name, value in overrides.items()})
    return given


def _check_name(name: Any, attrs: bool = False) -> str:
    """``name`` if it is a property; else a ConfigError suggesting the nearest names (never a value)."""
    if not isinstance(name, str):
        raise ConfigError(f"property names must be strings, got {type(name).__name__}")
    if name in PROPERTIES:
        return name
    if name in JAVA_ONLY:
        raise ConfigError(f"{name} is a Java producer property this client does not support")
    close = difflib.get_close_matches(name, [*PROPERTIES, *(_BY_ATTR if attrs else ())], n=3, cutoff=0.6)
    if name.startswith("kafka.") and name[6:] in PROPERTIES:
        close = [name[6:]]
    hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
    raise ConfigError(f"unknown producer property {name!r}{hint}")


def _parse(key: ConfigKey, raw: Any) -> Any:
    value = key.parse(raw)
    if isinstance(value, _Invalid):
        detail = f" ({value})" if value else ""
        raise ConfigError(f"{key.name} must be {key.expected}, got {key.show(raw)}{detail}")
    return value


def _apply_java_rules(values: dict[str, Any], explicit: frozenset[str]) -> None:
    """The Java producer's cross-property rules, in its order (see the module docstring)."""
    _check_security(values)
    if "reconnect.backoff.ms" in explicit and "reconnect.backoff.max.ms" not in explicit:
        values["reconnect_backoff_max_ms"] = values["reconnect_backoff_ms"]
    idempotence_requested = values["enable_idempotence"]
    if idempotence_requested:
        asked = "enable.idempotence" in explicit
        conflicts = ["retries must be greater than 0, got 0"] if values["retries"] == 0 else []
        if values["acks"] != -1:
            conflicts.append(f"acks must be all, got {values['acks']}")
        if asked and conflicts:
            raise ConfigError(f"with enable.idempotence=true, {'; '.join(conflicts)}")
        in_flight = values["max_in_flight_requests_per_connection"]
        if in_flight > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
            raise ConfigError(
                f"with enable.idempotence=true{'' if asked else ' (the default)'}, "
                f"max.in.flight.requests.per.connection must be at most {MAX_IN_FLIGHT_FOR_IDEMPOTENCE}, "
                f"got {in_flight}; set enable.idempotence=false to allow more")
        values["enable_idempotence"] = not conflicts
    if values["transactional_id"] is not None and not values["enable_idempotence"]:
        why = ("enable.idempotence=false" if not idempotence_requested
               else f"acks={values['acks']}, retries={values['retries']} turned it off")
        raise ConfigError(f"transactional.id={values['transactional_id']!r} needs idempotence "
                          f"({why}): a transactional producer writes with acks=all and retries")
    floor = min(min(values["linger_ms"], INT_MAX) + values["request_timeout_ms"], INT_MAX)
    if values["delivery_timeout_ms"] < floor:
        if "delivery.timeout.ms" in explicit:
            raise ConfigError(f"delivery.timeout.ms must be at least linger.ms + request.timeout.ms = "
                              f"{floor}, got {values['delivery_timeout_ms']}")
        values["delivery_timeout_ms"] = floor
    if values["batch_size"] > values["buffer_memory"]:
        raise ConfigError(f"batch.size ({values['batch_size']}) must not be larger than buffer.memory "
                          f"({values['buffer_memory']}): no batch could be allocated")


def _check_security(values: dict[str, Any]) -> None:
    """Rule 1 (module docstring): the settings the chosen ``security.protocol`` uses."""
    protocol = values["security_protocol"]
    if protocol in TLS_PROTOCOLS:
        _check_tls(values)
    if protocol in SASL_PROTOCOLS:
        credentials_from_config(SimpleNamespace(**values), resolve=False)


def _check_tls(values: dict[str, Any]) -> None:
    def given(*names: str) -> list[str]:
        return [name for name in names if values[name.replace(".", "_")] is not None]

    trust = given("ssl.ca.location", "ssl.truststore.location", "ssl.truststore.certificates")
    if len(trust) > 1:
        raise ConfigError(f"set only one of {', '.join(trust)}: each names the trusted CAs")
    store_type = values["ssl_truststore_type"]
    if given("ssl.truststore.location", "ssl.truststore.certificates") and store_type != "PEM":
        raise ConfigError(f"ssl.truststore.type={store_type} is not supported: only PEM trust stores are "
                          f"(set ssl.truststore.type=PEM for a PEM file, or use ssl.ca.location)")
    if given("ssl.truststore.location", "ssl.truststore.certificates") and given("ssl.truststore.password"):
        raise ConfigError("ssl.truststore.password cannot be used with a PEM trust store")
    inline = given("ssl.keystore.key", "ssl.keystore.certificate.chain")
    if inline:
        raise ConfigError(f"{' and '.join(inline)} (inline PEM) is not supported; put the certificate and "
                          f"key in files and set ssl.certificate.location and ssl.key.location")
    if given("ssl.keystore.location"):
        if values["ssl_keystore_type"] != "PEM":
            raise ConfigError(f"ssl.keystore.type={values['ssl_keystore_type']} is not supported: only PEM "
                              f"key stores are (or use ssl.certificate.location and ssl.key.location)")
        if given("ssl.certificate.location", "ssl.key.location"):
            raise ConfigError("set either ssl.keystore.location or ssl.certificate.location/"
                              "ssl.key.location, not both")
    if given("ssl.key.location") and not given("ssl.certificate.location"):
        raise ConfigError("ssl.key.location needs ssl.certificate.location (the client certificate)")
