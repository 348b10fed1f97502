"""OAuth bearer tokens for SASL/OAUTHBEARER: where they come from, and when to fetch a new one.

A *token source* makes a token (:class:`OAuthToken`: the compact token, when it expires, the
principal it names and the SASL extensions to send with it, such as Confluent Cloud's
``logicalCluster`` and ``identityPoolId``). Three sources, chosen by the producer's properties
(:func:`token_source_from`):

- :class:`CallbackTokenSource`: the caller's function, confluent-kafka's ``oauth_cb`` shape: it
  is called with the ``sasl.oauthbearer.config`` string and returns ``(token, expiry)`` with the
  expiry in epoch seconds, or ``(token, expiry, principal, extensions)``. Given as a callable
  (``oauth_cb``) or by import path (``sasl.oauthbearer.token.provider=module:function``: what a
  Spark executor can always load, where a closure would not pickle);
- :class:`UnsecuredJwtSource`: an unsigned JWT made here (librdkafka's
  ``enable.sasl.oauthbearer.unsecure.jwt``, with ``sasl.oauthbearer.config`` such as
  ``principal=alice lifeSeconds=600``), which only a broker running Kafka's unsecured validator
  accepts: for development and tests, never for production;
- an OIDC client-credentials source (``sasl.oauthbearer.method=oidc``, :mod:`.oidc`).

:class:`TokenCache` holds one producer's current token and fetches a new one when none is held or
when about 80% of the held one's lifetime has passed (jittered by ±5% of it, so a fleet of
executors does not refresh in step). Every fetch runs on a thread of its own, never on a caller's:
the network thread only polls (:meth:`TokenCache.poll`), so a login whose token is not ready holds
back its own connection alone while the other nodes go on, and a blocking caller (the driver's
preflight, admin calls) waits at most its own timeout (:meth:`TokenCache.token`). The held token
serves logins until 90% of its lifetime; past that a login waits for the new one (it would get a
session of moments) unless the last fetch failed. A login may also ask for a token with some life
left (:meth:`TokenCache.poll`'s ``min_life_ms``: the network client wants a session long enough for
the broker to take the next login), which fetches a new one sooner. A failed fetch keeps the held token while it is
still valid and is tried again after a backoff that doubles up to a minute; with no valid token
left the fetch's error is raised as an :class:`~spark_kafka_sink.errors.AuthenticationError`
naming the source (its endpoint or function), never a token or a secret. A token's value and the
``sasl.oauthbearer.config`` string never appear in a repr, a log line or an error.
"""

from __future__ import annotations

import base64
import importlib
import json
import logging
import random
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol

from ...clock import SYSTEM_CLOCK, Clock
from ...errors import AuthenticationError, ConfigError
from .oauth_token import OAuthToken, check_extensions

log = logging.getLogger(__name__)

__all__ = ["OAuthToken", "TokenSource", "CallbackTokenSource", "UnsecuredJwtSource", "TokenCache",
           "TokenPoll",
           "parse_extensions", "check_extensions", "import_provider", "token_source_from",
           "REFRESH_FRACTION"]

REFRESH_FRACTION = 0.8
"""Fetch a new token once this share of the held token's lifetime has passed."""
REFRESH_JITTER = 0.05
"""± this share of the lifetime, at random, on each refresh time."""
LATE_FRACTION = 0.9
"""Past this share of the lifetime with no new token, the next login waits for one."""
RETRY_BACKOFF_MS = 1_000
RETRY_BACKOFF_MAX_MS = 60_000

_PROVIDER = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


class TokenSource(Protocol):
    """Makes a new token; ``describe()`` names the source in errors (never a secret)."""

    def fetch(self, now_ms: int) -> OAuthToken: ...

    def describe(self) -> str: ...


def parse_extensions(text: str | None, name: str = "sasl.oauthbearer.extensions") -> dict[str, str]:
    """``key=value,key=value`` (librdkafka's form) as a dict; ConfigError naming ``name``."""
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep:
            raise ConfigError(f"{name} must be key=value pairs separated by commas, got an entry "
                              f"without '=': {key.strip()!r}")
        out[key.strip()] = value.strip()
    try:
        return check_extensions(out)
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from None


def import_provider(path: str, name: str = "sasl.oauthbearer.token.provider") -> Callable[..., Any]:
    """The function ``module:function`` names; ConfigError naming ``name`` when it is not one."""
    if not isinstance(path, str) or not _PROVIDER.fullmatch(path):
        raise ConfigError(f"{name} must be an import path 'module:function', got {path!r}")
    module_name, _, attribute = path.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{name}={path}: cannot be imported: {type(exc).__name__}: {exc}") from None
    if not callable(target):
        raise ConfigError(f"{name}={path} is not callable")
    return target


class CallbackTokenSource:
    """The caller's token function (``oauth_cb`` or ``sasl.oauthbearer.token.provider``)."""

    def __init__(self, callback: Callable[[str | None], Any], config_string: str | None, label: str):
        self._callback = callback
        self._config = config_string
        self._label = label

    def describe(self) -> str:
        return self._label

    def fetch(self, now_ms: int) -> OAuthToken:
        try:
            answer = self._callback(self._config)
        except Exception as exc:  # noqa: BLE001 - the caller's code: reported with its type
            raise AuthenticationError(f"{self._label} failed: {type(exc).__name__}: "
                                      f"{_redact(str(exc), self._config)}") from None
        return self._token(answer)

    def _token(self, answer: Any) -> OAuthToken:
        if not isinstance(answer, (tuple, list)) or len(answer) not in (2, 4):
            raise AuthenticationError(f"{self._label} must return (token, expiry) or (token, expiry, "
                                      f"principal, extensions), got a {type(answer).__name__}")
        value, expiry = answer[0], answer[1]
        principal, extensions = (answer[2], answer[3]) if len(answer) == 4 else (None, None)
        if isinstance(value, bytes):
            value = value.decode("ascii", "replace")
        if isinstance(expiry, bool) or not isinstance(expiry, (int, float)):
            raise AuthenticationError(f"{self._label} returned an expiry that is not a number of "
                                      f"epoch seconds: {type(expiry).__name__}")
        try:
            return OAuthToken(value, int(expiry * 1000), principal, extensions or {})
        except (TypeError, ValueError, OverflowError) as exc:
            raise AuthenticationError(f"{self._label} returned an unusable token: {exc}") from None

    def __repr__(self) -> str:
        return f"CallbackTokenSource({self._label})"


class UnsecuredJwtSource:
    """An unsigned JWT (``alg: none``) from librdkafka's ``sasl.oauthbearer.config`` syntax::

        principal=<name> [principalClaimName=sub] [scope=a,b] [scopeClaimName=scope]
        [lifeSeconds=3600] [extension_<name>=<value> ...]
    """

    def __init__(self, config_string: str | None):
        options = _space_separated(config_string or "")
        principal = options.pop("principal", None)
        if not principal:
            raise ConfigError("enable.sasl.oauthbearer.unsecure.jwt needs sasl.oauthbearer.config "
                              "with principal=<name> (e.g. 'principal=alice lifeSeconds=600')")
        self._principal = principal
        self._principal_claim = options.pop("principalClaimName", "sub")
        scope = options.pop("scope", "")
        self._scope = [s for s in scope.split(",") if s]
        self._scope_claim = options.pop("scopeClaimName", "scope")
        life = options.pop("lifeSeconds", "3600")
        if not life.isdigit() or int(life) < 1:
            raise ConfigError(f"sasl.oauthbearer.config: lifeSeconds must be a positive integer, got {life!r}")
        self._life_s = int(life)
        extensions = {key[len("extension_"):]: value for key, value in options.items()
                      if key.startswith("extension_")}
        unknown = sorted(key for key in options if not key.startswith("extension_"))
        if unknown:
            raise ConfigError(f"sasl.oauthbearer.config: unknown option(s) {unknown} for an unsecured "
                              f"JWT (principal, principalClaimName, scope, scopeClaimName, "
                              f"lifeSeconds, extension_<name>)")
        try:
            self._extensions = check_extensions(extensions)
        except ValueError as exc:
            raise ConfigError(f"sasl.oauthbearer.config: {exc}") from None

    def describe(self) -> str:
        return f"the unsecured JWT of principal {self._principal!r}"

    def fetch(self, now_ms: int) -> OAuthToken:
        issued = now_ms // 1000
        claims: dict[str, Any] = {self._principal_claim: self._principal, "iat": issued,
                                  "exp": issued + self._life_s}
        if self._scope:
            claims[self._scope_claim] = self._scope
        token = f"{_b64url(json.dumps({'alg': 'none'}))}.{_b64url(json.dumps(claims))}."
        return OAuthToken(token, (issued + self._life_s) * 1000, self._principal, self._extensions)

    def __repr__(self) -> str:
        return f"UnsecuredJwtSource(principal={self._principal!r})"


def token_source_from(config: Any, login: Any = None, *, resolve: bool = True) -> TokenSource | None:
    """The one token source ``config``'s OAUTHBEARER settings name (``login``: its parsed
    ``OAuthBearerLoginModule`` line, if any); ConfigError when there is none or more than one.
    ``resolve`` False checks the settings without importing a provider (then ``None`` may be
    returned for it)."""
    options = dict(login.options) if login is not None else {}
    jaas_unsecured = "unsecuredLoginStringClaim_sub" in options
    jaas_oidc = "clientId" in options or "clientSecret" in options
    chosen = [name for name, on in (
        ("oauth_cb", config.oauth_cb is not None),
        ("sasl.oauthbearer.token.provider", config.sasl_oauthbearer_token_provider is not None),
        ("sasl.oauthbearer.method=oidc", config.sasl_oauthbearer_method == "oidc"),
        ("enable.sasl.oauthbearer.unsecure.jwt", config.enable_sasl_oauthbearer_unsecure_jwt),
        ("sasl.jaas.config (OAuthBearerLoginModule with clientId)", jaas_oidc),
        ("sasl.jaas.config (OAuthBearerLoginModule with unsecuredLoginStringClaim_sub)", jaas_unsecured),
    ) if on]
    if not chosen:
        raise ConfigError("sasl.mechanism=OAUTHBEARER needs a token source: set oauth_cb (a function), "
                          "sasl.oauthbearer.token.provider (module:function), "
                          "sasl.oauthbearer.method=oidc with sasl.oauthbearer.token.endpoint.url, "
                          "sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret, or "
                          "enable.sasl.oauthbearer.unsecure.jwt=true (tests only)")
    if len(chosen) > 1:
        raise ConfigError(f"sasl.mechanism=OAUTHBEARER takes one token source, but these are all set: "
                          f"{'; '.join(chosen)}")
    extensions = parse_extensions(config.sasl_oauthbearer_extensions)
    kind = chosen[0]
    oidc = kind == "sasl.oauthbearer.method=oidc" or jaas_oidc
    if not oidc:
        endpoint_trust = [name for name in ("https.ca.location", "https.ca.pem")
                          if getattr(config, name.replace(".", "_"), None) is not None]
        if endpoint_trust:
            raise ConfigError(f"{' and '.join(endpoint_trust)} name the CAs of an OIDC token endpoint, "
                              f"but the token source is {kind}")
    if kind == "oauth_cb":
        callback = config.oauth_cb
        label = f"oauth_cb {getattr(callback, '__module__', '?')}.{getattr(callback, '__qualname__', '?')}"
        return _with_extensions(CallbackTokenSource(callback, config.sasl_oauthbearer_config, label),
                                extensions)
    if kind == "sasl.oauthbearer.token.provider":
        path = config.sasl_oauthbearer_token_provider
        if not resolve:
            if not _PROVIDER.fullmatch(path):
                raise ConfigError(f"sasl.oauthbearer.token.provider must be an import path "
                                  f"'module:function', got {path!r}")
            return None
        return _with_extensions(CallbackTokenSource(import_provider(path), config.sasl_oauthbearer_config,
                                                    f"sasl.oauthbearer.token.provider {path}"), extensions)
    if kind == "enable.sasl.oauthbearer.unsecure.jwt":
        return _with_extensions(UnsecuredJwtSource(config.sasl_oauthbearer_config), extensions)
    if jaas_unsecured:
        claims = " ".join(f"{key[len('unsecuredLoginStringClaim_'):]}={value}" for key, value in options.items()
                          if key.startswith("unsecuredLoginStringClaim_") and key != "unsecuredLoginStringClaim_sub")
        if claims:
            raise ConfigError("sasl.jaas.config: of the unsecuredLogin options only "
                              "unsecuredLoginStringClaim_sub (and unsecuredLoginLifetimeSeconds) are supported")
        life = options.get("unsecuredLoginLifetimeSeconds", "3600")
        return _with_extensions(UnsecuredJwtSource(
            f"principal={options['unsecuredLoginStringClaim_sub']} lifeSeconds={life}"),
            {**_jaas_extensions(options), **extensions})
    from .oidc import OidcTokenSource  # noqa: PLC0415 - only OIDC needs HTTP

    if jaas_oidc:
        return OidcTokenSource.from_settings(
            config, client_id=options.get("clientId"), client_secret=options.get("clientSecret"),
            scope=options.get("scope"), extensions={**_jaas_extensions(options), **extensions},
            where="sasl.jaas.config (clientId, clientSecret)", login_options=options)
    return OidcTokenSource.from_settings(
        config, client_id=config.sasl_oauthbearer_client_id,
        client_secret=config.sasl_oauthbearer_client_secret, scope=config.sasl_oauthbearer_scope,
        extensions=extensions, where="sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret")


def _jaas_extensions(options: Mapping[str, str]) -> dict[str, str]:
    """Java's ``extension_<name>="<value>"`` login options."""
    try:
        return check_extensions({key[len("extension_"):]: value for key, value in options.items()
                                 if key.startswith("extension_")})
    except ValueError as exc:
        raise ConfigError(f"sasl.jaas.config: {exc}") from None


class _WithExtensions:
    """A source whose tokens also carry the configured extensions (the source's own win)."""

    def __init__(self, source: TokenSource, extensions: Mapping[str, str]):
        self._source = source
        self._extensions = dict(extensions)

    def describe(self) -> str:
        return self._source.describe()

    def fetch(self, now_ms: int) -> OAuthToken:
        token = self._source.fetch(now_ms)
        return OAuthToken(token.value, token.expires_at_ms, token.principal,
                          {**self._extensions, **token.extensions})

    def __repr__(self) -> str:
        return repr(self._source)


def _with_extensions(source: TokenSource, extensions: Mapping[str, str]) -> TokenSource:
    return _WithExtensions(source, extensions) if extensions else source


@dataclass(frozen=True)
class TokenPoll:
    """What :meth:`TokenCache.poll` found: a usable ``token``; or the ``error`` of the last fetch
    when no valid token is held and the next fetch waits its backoff; or neither: a fetch is
    running (or was just started) and the caller should look again once it ends."""

    token: OAuthToken | None = None
    error: AuthenticationError | None = None

    @property
    def pending(self) -> bool:
        return self.token is None and self.error is None


class TokenCache:
    """One producer's current token; see the module docstring. Thread safe.

    Every fetch runs on a thread of its own (``spawn``), one at a time, never on the caller's:
    the network thread asks with :meth:`poll`, which never waits (a login whose token is not
    ready waits for a wake-up from :meth:`add_listener`, its node alone held back), and a
    blocking caller with :meth:`token`, which waits at most its ``timeout_s``. A token is usable
    until 90% of its lifetime; past that, with a fetch running or possible, a login waits for the
    new one (it would get a session of moments), and once that fetch failed it takes the held
    token while it is valid. The refresh of a valid token starts at about 80% of its lifetime
    (:meth:`maybe_refresh`, which the network client calls every poll, or any login). A failed
    fetch is retried after a backoff doubling up to a minute; whatever a token source raises
    becomes an :class:`AuthenticationError` naming the source."""

    def __init__(self, source: TokenSource, *, clock: Clock = SYSTEM_CLOCK,
                 rng: random.Random | None = None,
                 spawn: Callable[[Callable[[], None]], None] | None = None):
        self._source = source
        self._clock = clock
        self._rng = rng or random.Random()
        self._spawn = spawn or _daemon_thread
        self._cond = threading.Condition()
        self._token: OAuthToken | None = None
        self._refresh_at_ms = 0
        self._late_at_ms = 0
        self._life_ms = 0            # the held token's lifetime when it came
        self._failures = 0
        self._retry_at_ms = 0
        self._error: AuthenticationError | None = None   # the last fetch's, until one succeeds
        self._fetching = False
        self._listeners: list[Callable[[], None]] = []
        self.fetches = 0  # successful fetches (the tests check a token source is asked again)

    @property
    def source(self) -> TokenSource:
        return self._source

    def describe(self) -> str:
        return self._source.describe()

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` (from the fetching thread; it must be quick) after every fetch."""
        with self._cond:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[], None]) -> None:
        with self._cond:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def poll(self, min_life_ms: int = 0) -> TokenPoll:
        """The token a login may use now, never waiting: see :class:`TokenPoll`. Starts the fetch
        that is due (in the background). A held token with less than ``min_life_ms`` left counts as
        late (the login waits for a new one) when the source's tokens live twice that long."""
        with self._cond:
            answer, start = self._poll_locked(self._clock.now_ms(), min_life_ms=min_life_ms)
        if start:
            self._start_fetch()
            with self._cond:                 # a fetch that ended at once (a test's spawn)
                answer, _ = self._poll_locked(self._clock.now_ms(), start=False,
                                              min_life_ms=min_life_ms)
        return answer

    def token(self, timeout_s: float) -> OAuthToken:
        """A usable token, waiting up to ``timeout_s`` for a fetch (not on this thread);
        AuthenticationError naming the source when there is none by then, or the fetch failed."""
        deadline_ms = self._clock.monotonic_ms() + int(timeout_s * 1000)
        while True:
            answer = self.poll()
            if answer.token is not None:
                return answer.token
            if answer.error is not None:
                raise AuthenticationError(f"no OAuth token: {answer.error}") from None
            with self._cond:
                left_ms = deadline_ms - self._clock.monotonic_ms()
                if left_ms <= 0:
                    raise AuthenticationError(f"no OAuth token: {self._source.describe()} gave none "
                                              f"within {timeout_s:g} s")
                if self._fetching and not self._cond.wait(left_ms / 1000):
                    raise AuthenticationError(f"no OAuth token: {self._source.describe()} gave none "
                                              f"within {timeout_s:g} s")

    def maybe_refresh(self) -> None:
        """Start the background refresh when it is due (cheap when it is not)."""
        with self._cond:
            now = self._clock.now_ms()
            start = (self._token is not None and not self._fetching and now >= self._refresh_at_ms
                     and now >= self._retry_at_ms)
            if start:
                self._fetching = True
        if start:
            self._start_fetch()

    def _poll_locked(self, now: int, *, start: bool = True,
                     min_life_ms: int = 0) -> tuple[TokenPoll, bool]:
        """Under the lock: the answer, and whether a fetch was marked to start (by the caller,
        outside the lock)."""
        held = self._token
        valid = held is not None and now < held.expires_at_ms
        short = (valid and held.expires_at_ms - now < min_life_ms
                 and self._life_ms >= 2 * min_life_ms)
        can_fetch = start and not self._fetching and now >= self._retry_at_ms
        wanted = not valid or now >= self._refresh_at_ms or short
        if can_fetch and wanted:
            self._fetching = True
        fetching = self._fetching
        if valid and ((now < self._late_at_ms and not short) or not fetching):
            return TokenPoll(held), fetching and can_fetch and wanted
        if fetching:
            return TokenPoll(), can_fetch and wanted
        return TokenPoll(error=self._error or AuthenticationError(
            f"{self._source.describe()} gave no token yet")), False

    def _start_fetch(self) -> None:
        try:
            self._spawn(self._run_fetch)    # outside the lock: the fetch takes it to store
        except Exception as exc:  # noqa: BLE001 - no thread: a failed fetch, tried again after a backoff
            self._fetch_ended(None, AuthenticationError(
                f"{self._source.describe()}: cannot start a token fetch: {type(exc).__name__}"))

    def _run_fetch(self) -> None:
        """The fetch, on its own thread, outside the lock (logins meanwhile get the held token
        or wait): a new token, or the failure counted for the next try."""
        try:
            token = self._fetch(self._clock.now_ms())
        except AuthenticationError as exc:
            self._fetch_ended(None, exc)
        except BaseException as exc:        # noqa: BLE001 - never leave the fetch marked running
            self._fetch_ended(None, AuthenticationError(
                f"{self._source.describe()} failed: {type(exc).__name__}"))
            raise
        else:
            self._fetch_ended(token, None)

    def _fetch_ended(self, token: OAuthToken | None, error: AuthenticationError | None) -> None:
        with self._cond:
            now = self._clock.now_ms()
            if token is not None:
                try:
                    self._store(token, now)
                except AuthenticationError as exc:
                    error = exc
            if error is not None:
                self._failed(now, error)
            still_valid = self._token is not None and now < self._token.expires_at_ms
            self._fetching = False
            self._cond.notify_all()
            listeners = list(self._listeners)
        if error is not None and still_valid:
            log.warning("refreshing the OAuth token failed (the held one is still valid): %s", error)
        for listener in listeners:
            listener()

    def _fetch(self, now: int) -> OAuthToken:
        """The source's token; anything it raises as an AuthenticationError naming it."""
        try:
            return self._source.fetch(now)
        except AuthenticationError:
            raise
        except Exception as exc:  # noqa: BLE001 - a source's bug must not escape as something else
            raise AuthenticationError(f"{self._source.describe()} failed: {type(exc).__name__}") from None

    def _store(self, token: OAuthToken, now: int) -> OAuthToken:
        """Hold ``token`` and plan its refresh (under the lock)."""
        if token.expires_at_ms <= now:
            raise AuthenticationError(f"{self._source.describe()} returned a token that "
                                      f"expired {(now - token.expires_at_ms) / 1000:.0f} s ago")
        self._token, self._failures, self._retry_at_ms, self._error = token, 0, 0, None
        life = token.expires_at_ms - now
        jitter = self._rng.uniform(-REFRESH_JITTER, REFRESH_JITTER)
        self._refresh_at_ms = now + int(life * (REFRESH_FRACTION + jitter))
        self._late_at_ms = now + int(life * LATE_FRACTION)
        self._life_ms = life
        self.fetches += 1
        return token

    def _failed(self, now: int, error: AuthenticationError) -> None:
        self._failures += 1
        self._error = error
        self._retry_at_ms = now + min(RETRY_BACKOFF_MS * 2 ** (self._failures - 1), RETRY_BACKOFF_MAX_MS)

    def __repr__(self) -> str:
        return f"TokenCache({self._source.describe()})"


def _daemon_thread(work: Callable[[], None]) -> None:
    threading.Thread(target=work, name="oauth-token-refresh", daemon=True).start()


def _b64url(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


def _space_separated(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split():
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ConfigError(f"sasl.oauthbearer.config must be name=value pairs separated by "
                              f"spaces; an entry has no '=' (entry {len(out) + 1})")
        out[key] = value
    return out


def _redact(message: str, secret: str | None) -> str:
    """``message`` without ``secret`` in it, nor any of its words or ``key=value`` values of
    four characters or more (a callback may echo its config string, or one setting of it)."""
    if not secret:
        return message
    pieces = {secret}
    for word in re.split(r"[\s,;]+", secret):
        pieces.add(word)
        pieces.add(word.partition("=")[2])
    for piece in sorted((p for p in pieces if len(p) >= 4), key=len, reverse=True):
        message = message.replace(piece, "[hidden]")
    return message
