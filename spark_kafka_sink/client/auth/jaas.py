"""SASL credentials from the producer's properties, including Java's ``sasl.jaas.config``.

The login line is the one Java clients take (``org.apache.kafka.common.security.JaasConfig``)::

    line    := module flag option* ";"
    module  := a Java class name, e.g. org.apache.kafka.common.security.plain.PlainLoginModule
    flag    := required | requisite | sufficient | optional
    option  := name "=" value
    value   := a "double-quoted" string (\\" and \\\\ escape) | a bare word

Exactly one login module, as Kafka requires for a client. PLAIN takes ``PlainLoginModule``,
SCRAM-SHA-256/512 take ``ScramLoginModule``; both need ``username`` and ``password`` options.
Credentials may instead come from ``sasl.username`` / ``sasl.password`` (librdkafka's names); giving
both forms is refused, so there is never a question of which one wins.

OAUTHBEARER takes a token source instead (:mod:`.oauth`), exactly one of: ``oauth_cb``,
``sasl.oauthbearer.token.provider``, ``sasl.oauthbearer.method=oidc`` (with the token endpoint,
client id and secret), ``enable.sasl.oauthbearer.unsecure.jwt``, or Java's
``OAuthBearerLoginModule`` line: with ``clientId``/``clientSecret`` (and ``scope``,
``extension_<name>`` options) it is OIDC against ``sasl.oauthbearer.token.endpoint.url``; with
``unsecuredLoginStringClaim_sub`` an unsecured JWT. :func:`credentials_from_config` reads them all
from a config.

Every error is a :class:`ConfigError` naming the property at fault; no error, repr or log line
carries the password or the text of the login line (it holds the password).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from ...errors import ConfigError

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}
_FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})
_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<word>[^\s=;"]+)|(?P<punct>[=;]))',
                    re.DOTALL)
_JAAS = "sasl.jaas.config"


@dataclass(frozen=True)
class JaasLogin:
    """One parsed login line: the module, its flag and its options (values hidden in the repr)."""

    module: str
    flag: str
    options: Mapping[str, str] = field(repr=False)

    def __repr__(self) -> str:
        return (f"JaasLogin(module={self.module!r}, flag={self.flag!r}, "
                f"options={sorted(self.options)})")


@dataclass(frozen=True)
class SaslCredentials:
    """What a SASL mechanism needs to log in; the password never shows in the repr. OAUTHBEARER:
    no user or password but ``token_cache`` (:class:`~.oauth.TokenCache`), one per producer."""

    mechanism: str
    username: str
    password: str = field(repr=False)
    token_cache: Any = field(default=None, repr=False, compare=False)

    def describe(self) -> str:
        """Who logs in, for messages: the user, or where the token comes from."""
        if self.token_cache is not None:
            return f"with the token of {self.token_cache.describe()}"
        return f"of user {self.username!r}"


def parse_jaas_config(text: str) -> JaasLogin:
    """The login line in ``text``; ConfigError (never quoting the text) when it is malformed."""
    tokens = _tokens(text)
    if len(tokens) < 3 or tokens[-1] != (";", "punct"):
        raise ConfigError(f"{_JAAS} must be one login module line ending in ';': "
                          "<LoginModule> required username=\"...\" password=\"...\";")
    (module, module_kind), (flag, _), body = tokens[0], tokens[1], tokens[2:-1]
    if module_kind != "word":
        raise ConfigError(f"{_JAAS} must start with a login module class name")
    if flag.lower() not in _FLAGS:
        raise ConfigError(f"{_JAAS}: the login module must be followed by a control flag "
                          f"(required, requisite, sufficient or optional)")
    if any(token == (";", "punct") for token in body):
        raise ConfigError(f"{_JAAS} must contain exactly one login module")
    options: dict[str, str] = {}
    for index in range(0, len(body), 3):
        triple = body[index:index + 3]
        if (len(triple) < 3 or triple[0][1] != "word" or triple[1] != ("=", "punct")
                or triple[2][1] == "punct"):
            raise ConfigError(f"{_JAAS}: login module options must be name=value pairs "
                              "(quote values with spaces or special characters)")
        options[triple[0][0]] = triple[2][0]
    return JaasLogin(module, flag.lower(), options)


def credentials_from_config(config: Any, *, resolve: bool = True) -> SaslCredentials:
    """The SASL credentials a config (a ``ProducerConfig``, or anything with its attribute
    names) sets for its ``sasl.mechanism``. ``resolve`` False only checks the settings (a
    ``sasl.oauthbearer.token.provider`` is then not imported, so a driver may name a module only
    executors have)."""
    mechanism = config.sasl_mechanism
    if mechanism != "OAUTHBEARER":
        return sasl_credentials(mechanism, config.sasl_username, config.sasl_password,
                                config.sasl_jaas_config)
    from .oauth import TokenCache, token_source_from  # noqa: PLC0415 - only OAUTHBEARER needs it

    given = [name for name, value in (("sasl.username", config.sasl_username),
                                      ("sasl.password", config.sasl_password)) if value is not None]
    if given:
        raise ConfigError(f"{' and '.join(given)} are for PLAIN and SCRAM; sasl.mechanism=OAUTHBEARER "
                          f"takes a token source (oauth_cb, sasl.oauthbearer.token.provider, "
                          f"sasl.oauthbearer.method=oidc or {_JAAS})")
    login = None
    if config.sasl_jaas_config is not None:
        login = parse_jaas_config(config.sasl_jaas_config)
        if login.module != _MODULES[mechanism]:
            raise ConfigError(f"{_JAAS} names {login.module}, but sasl.mechanism={mechanism} "
                              f"needs {_MODULES[mechanism]}")
    source = token_source_from(config, login, resolve=resolve)
    return SaslCredentials(mechanism, "", "", TokenCache(source) if source is not None else None)


def sasl_credentials(mechanism: str, username: str | None, password: str | None,
                     jaas_config: str | None) -> SaslCredentials:
    """The credentials for ``mechanism`` from either property form; ConfigError naming the
    properties when the mechanism is not supported or the credentials are missing or mixed."""
    if mechanism == "OAUTHBEARER":
        raise ConfigError("sasl.mechanism=OAUTHBEARER takes a token source, not a user and password: "
                          "use credentials_from_config")
    if mechanism not in SUPPORTED_MECHANISMS:
        default = " (Java's default)" if mechanism == "GSSAPI" else ""
        raise ConfigError(f"sasl.mechanism={mechanism}{default} is not supported; set "
                          f"sasl.mechanism to one of {', '.join(SUPPORTED_MECHANISMS)}")
    if jaas_config is not None and (username is not None or password is not None):
        raise ConfigError(f"set either {_JAAS} or sasl.username/sasl.password, not both")
    if jaas_config is None:
        given = (("sasl.username", username), ("sasl.password", password))
        missing = [name for name, value in given if not value]
        if missing:
            raise ConfigError(f"sasl.mechanism={mechanism} needs credentials: set "
                              f"{' and '.join(missing)} (or {_JAAS})")
        return SaslCredentials(mechanism, username, password)
    login = parse_jaas_config(jaas_config)
    expected = _MODULES[mechanism]
    if login.module != expected:
        raise ConfigError(f"{_JAAS} names {login.module}, but sasl.mechanism={mechanism} "
                          f"needs {expected}")
    missing = [name for name in ("username", "password") if not login.options.get(name)]
    if missing:
        raise ConfigError(f"{_JAAS} lacks the option(s) {', '.join(missing)} "
                          f"(e.g. username=\"alice\" password=\"...\")")
    return SaslCredentials(mechanism, login.options["username"], login.options["password"])


def _tokens(text: str) -> list[tuple[str, str]]:
    """(value, kind) pairs; kind is quoted, word or punct. Quoted values are unescaped."""
    out: list[tuple[str, str]] = []
    position = 0
    stripped = text.rstrip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if match is None or match.end() == position:
            raise ConfigError(f"{_JAAS} cannot be parsed at character {position + 1} "
                              "(an unterminated quote?)")
        position = match.end()
        kind = match.lastgroup
        value = match.group(kind)
        if kind == "quoted":
            value = re.sub(r"\\(.)", r"\1", value[1:-1], flags=re.DOTALL)
        out.append((value, kind))
    return out
