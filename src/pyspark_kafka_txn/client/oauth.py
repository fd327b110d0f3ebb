"""SASL/OAUTHBEARER tokens (RFC 7628) for client connections.

A token comes from one of two sources, named with Kafka's option names (``kafka.`` prefix
removed):

* a user token provider, ``sasl.oauthbearer.token.provider`` = ``"module:function"``: an
  importable function without arguments returning the token string, or a pair
  ``(token, expiry)`` with the expiry as seconds (or milliseconds, as
  ``aws-msk-iam-sasl-signer-python`` returns them) since the epoch;
* OIDC client credentials (KIP-768): ``sasl.oauthbearer.token.endpoint.url`` and
  ``sasl.jaas.config`` = ``...OAuthBearerLoginModule required clientId="..."
  clientSecret="..." scope="...";``: a ``grant_type=client_credentials`` POST with HTTP
  basic authentication, whose ``access_token`` and ``expires_in`` are used.

SASL extensions (KIP-342, e.g. Confluent Cloud's ``logicalCluster`` and ``identityPoolId``)
come from ``extension_<name>="value"`` arguments of the same JAAS line, with either source.

Tokens are cached per process and source and fetched again shortly before they expire,
so every new connection (and every librdkafka refresh) presents a valid one. Tokens,
client secrets and the JAAS line never appear in ``repr``, logs or exception messages.
"""

from __future__ import annotations

import base64
import importlib
import json
import logging
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark_kafka_txn.client.errors import AuthenticationError, ConfigError

__all__ = [
    "OAUTH_OPTIONS",
    "OAuthConfig",
    "OAuthToken",
    "challenge_status",
    "current_token",
    "initial_response",
    "librdkafka_oauth_cb",
]

logger = logging.getLogger(__name__)

#: Option names (besides ``sasl.jaas.config``) read by :meth:`OAuthConfig.from_options`.
OAUTH_OPTIONS = frozenset(
    {"sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.token.provider"}
)
#: A token is fetched again when less than this share of its lifetime is left ...
_REFRESH_SHARE = 0.2
#: ... or less than this many seconds.
_REFRESH_MARGIN_S = 30.0
#: Above this an expiry is in milliseconds since the epoch (seconds reach it in year 5138).
_MS_THRESHOLD = 1e11
#: Lifetime librdkafka is told for a token whose provider gave no expiry.
_UNKNOWN_LIFETIME_S = 300.0
_MECHANISM = "OAUTHBEARER"
#: RFC 7628 section 3.1 (key) and Kafka's SaslExtensions rules (value).
_EXTENSION_NAME = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")
_JAAS_EXTENSION = "extension_"


@dataclass(frozen=True)
class OAuthToken:
    """A bearer token and when it expires.

    Attributes
    ----------
    value
        The token (hidden from repr).
    expires_at
        Expiry in seconds since the epoch, None when unknown.
    issued_at
        When it was obtained (seconds since the epoch).
    """

    value: str = field(repr=False)
    expires_at: float | None = None
    issued_at: float = 0.0

    def fresh(self, now: float) -> bool:
        """Whether the token can still be presented at ``now`` (with a refresh margin)."""
        if self.expires_at is None:
            return False  # never cached: the provider is asked again
        margin = max(_REFRESH_MARGIN_S, (self.expires_at - self.issued_at) * _REFRESH_SHARE)
        return now < self.expires_at - min(margin, (self.expires_at - self.issued_at) / 2)


@dataclass(frozen=True)
class OAuthConfig:
    """Where OAUTHBEARER tokens come from: a provider, or OIDC client credentials.

    Attributes
    ----------
    provider
        ``"module:function"`` returning a token (or ``(token, expiry)``).
    token_endpoint_url
        OIDC token endpoint for the client credentials grant.
    client_id, client_secret, scope
        Client credentials (the secret is hidden from repr; scope optional).
    extensions
        SASL extensions sent with every token, ``(name, value)`` pairs.
    timeout_s
        Bound on one token request.
    """

    provider: str | None = None
    token_endpoint_url: str | None = None
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    scope: str | None = None
    extensions: tuple[tuple[str, str], ...] = ()
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        for name, value in self.extensions:
            if not _EXTENSION_NAME.fullmatch(name) or name == "auth":
                raise ConfigError(
                    f"sasl.jaas.config: SASL extension name {name!r} must be letters only "
                    "and not 'auth'"
                )
            if not _EXTENSION_VALUE.fullmatch(value):
                raise ConfigError(
                    f"sasl.jaas.config: the value of SASL extension {name!r} must be "
                    "printable ASCII"
                )
        if (self.provider is None) == (self.token_endpoint_url is None):
            raise ConfigError(
                "sasl.mechanism=OAUTHBEARER needs exactly one token source: "
                "sasl.oauthbearer.token.provider (module:function) or "
                "sasl.oauthbearer.token.endpoint.url with clientId and clientSecret in "
                "sasl.jaas.config (OAuthBearerLoginModule)"
            )
        if self.provider is not None:
            module, _, function = self.provider.partition(":")
            if not module or not function:
                raise ConfigError(
                    "sasl.oauthbearer.token.provider must be 'module:function' "
                    "(an importable function)"
                )
        elif not self.client_id or not self.client_secret:
            raise ConfigError(
                "sasl.oauthbearer.token.endpoint.url needs clientId and clientSecret in "
                "sasl.jaas.config (OAuthBearerLoginModule required clientId=... "
                "clientSecret=...;)"
            )
        else:
            scheme = urllib.parse.urlsplit(self.token_endpoint_url or "").scheme
            if scheme not in ("http", "https"):
                raise ConfigError("sasl.oauthbearer.token.endpoint.url must be an http(s) URL")

    @classmethod
    def from_options(cls, options: dict[str, str], jaas_args: dict[str, str] | None) -> OAuthConfig:
        """The token source of ``sasl.oauthbearer.*`` options and the JAAS arguments.

        Parameters
        ----------
        options
            Kafka option names (without ``kafka.``) to values.
        jaas_args
            Arguments of an ``OAuthBearerLoginModule`` JAAS line (None without one).

        Raises
        ------
        ConfigError
            Without exactly one usable token source; never with a secret's value.
        """
        args = jaas_args or {}
        return cls(
            provider=options.get("sasl.oauthbearer.token.provider") or None,
            token_endpoint_url=options.get("sasl.oauthbearer.token.endpoint.url") or None,
            client_id=args.get("clientId"),
            client_secret=args.get("clientSecret"),
            scope=args.get("scope"),
            extensions=tuple(
                (key.removeprefix(_JAAS_EXTENSION), value)
                for key, value in args.items()
                if key.startswith(_JAAS_EXTENSION)
            ),
        )

    @property
    def source(self) -> str:
        """The token source, for messages (never a secret)."""
        if self.provider is not None:
            return f"token provider {self.provider}"
        return f"token endpoint {self.token_endpoint_url}"

    def fetch(self) -> OAuthToken:
        """A new token from the source (uncached).

        Raises
        ------
        AuthenticationError
            Naming OAUTHBEARER and the source when no token could be obtained.
        """
        if self.provider is not None:
            return _call_provider(self.provider)
        return _client_credentials(self)


def _call_provider(spec: str) -> OAuthToken:
    module_name, _, function_name = spec.partition(":")
    try:
        function: Callable[[], object] = getattr(
            importlib.import_module(module_name), function_name
        )
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"sasl.oauthbearer.token.provider {spec!r} cannot be imported ({type(exc).__name__})"
        ) from None
    now = time.time()
    try:
        result = function()
    except Exception as exc:  # noqa: BLE001 - the provider's message may hold secrets
        raise AuthenticationError(
            f"{_MECHANISM}: the token provider {spec} failed ({type(exc).__name__})"
        ) from None
    expiry: object = None
    if isinstance(result, tuple) and len(result) == 2:
        result, expiry = result
    if not isinstance(result, str) or not result:
        raise AuthenticationError(
            f"{_MECHANISM}: the token provider {spec} must return a non-empty str or "
            f"(str, expiry), got {type(result).__name__}"
        )
    if expiry is not None and not isinstance(expiry, (int, float)):
        raise AuthenticationError(
            f"{_MECHANISM}: the token provider {spec} returned an expiry of type "
            f"{type(expiry).__name__} (seconds or milliseconds since the epoch expected)"
        )
    expires_at = None
    if expiry is not None:
        expires_at = float(expiry) / 1000 if expiry > _MS_THRESHOLD else float(expiry)
    return OAuthToken(result, expires_at, now)


def _client_credentials(config: OAuthConfig) -> OAuthToken:
    assert config.token_endpoint_url and config.client_id and config.client_secret
    fields = {"grant_type": "client_credentials"}
    if config.scope:
        fields["scope"] = config.scope
    # RFC 6749 section 2.3.1: both parts form-encoded before the basic credentials.
    basic = ":".join(
        urllib.parse.quote_plus(part) for part in (config.client_id, config.client_secret)
    )
    # The scheme is http(s), checked by OAuthConfig.
    request = urllib.request.Request(  # noqa: S310
        config.token_endpoint_url,
        data=urllib.parse.urlencode(fields).encode(),
        headers={
            "Authorization": "Basic " + base64.b64encode(basic.encode()).decode(),
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        },
        method="POST",
    )
    where = f"the token endpoint {config.token_endpoint_url}"
    now = time.time()
    try:
        with urllib.request.urlopen(request, timeout=config.timeout_s) as response:  # noqa: S310
            body = response.read()
    except urllib.error.HTTPError as exc:
        exc.close()  # the error response holds the socket
        raise AuthenticationError(
            f"{_MECHANISM}: {where} refused the client credentials of client id "
            f"{config.client_id!r} (HTTP {exc.code})"
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise AuthenticationError(
            f"{_MECHANISM}: cannot reach {where} ({type(reason).__name__})"
        ) from None
    try:
        answer = json.loads(body)
        token = answer["access_token"]
        expires_in = answer.get("expires_in")
    except (ValueError, KeyError, TypeError, AttributeError):
        raise AuthenticationError(
            f"{_MECHANISM}: {where} answered without an access_token in a JSON object"
        ) from None
    if not isinstance(token, str) or not token:
        raise AuthenticationError(f"{_MECHANISM}: {where} answered an empty access_token")
    try:
        expires_at = now + float(expires_in) if expires_in is not None else None
    except (TypeError, ValueError):
        expires_at = None
    logger.debug("OAUTHBEARER token obtained from %s for client id %r", where, config.client_id)
    return OAuthToken(token, expires_at, now)


_cache: dict[OAuthConfig, OAuthToken] = {}
_cache_lock = threading.Lock()


def current_token(config: OAuthConfig) -> OAuthToken:
    """A token valid for a while yet: the cached one, or a new one.

    Parameters
    ----------
    config
        The token source.

    Returns
    -------
    OAuthToken
        Cached per process and source until shortly before it expires (tokens without an
        expiry are never cached).
    """
    with _cache_lock:
        token = _cache.get(config)
        if token is not None and token.fresh(time.time()):
            return token
        token = config.fetch()
        if token.expires_at is not None:
            if token.expires_at <= time.time():
                raise AuthenticationError(
                    f"{_MECHANISM}: the {config.source} gave an already expired token"
                )
            _cache[config] = token
        return token


def initial_response(
    token: str, authzid: str = "", extensions: tuple[tuple[str, str], ...] = ()
) -> bytes:
    """The RFC 7628 client initial response.

    ``n,a=<authzid>,^Aauth=Bearer <token>^A<name>=<value>^A...^A`` (``^A`` = %x01), with
    one key/value pair per SASL extension.
    """
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    pairs = "".join(f"{name}={value}\x01" for name, value in extensions)
    return f"{gs2}\x01auth=Bearer {token}\x01{pairs}\x01".encode()


def challenge_status(challenge: bytes) -> str:
    """The ``status`` of a server's RFC 7628 error challenge (a JSON object), for messages."""
    try:
        status = json.loads(challenge).get("status")
    except (ValueError, AttributeError):
        status = None
    return f"status {status}" if isinstance(status, str) else "an unreadable error challenge"


def _jwt_subject(token: str) -> str | None:
    """The ``sub`` claim of a JWT, unverified (only for librdkafka's principal name)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        sub = claims.get("sub")
    except (IndexError, ValueError, AttributeError):
        return None
    return sub if isinstance(sub, str) and sub else None


def librdkafka_oauth_cb(
    config: OAuthConfig,
) -> Callable[[object], tuple[str, float, str, dict[str, str]]]:
    """confluent-kafka's ``oauth_cb`` for this token source.

    librdkafka calls it for a token and again at 80 % of the token's lifetime; it answers
    ``(token, expiry in seconds since the epoch, principal name, SASL extensions)``.
    """

    def oauth_cb(_sasl_oauthbearer_config: object) -> tuple[str, float, str, dict[str, str]]:
        token = current_token(config)
        expires_at = token.expires_at or time.time() + _UNKNOWN_LIFETIME_S
        principal = _jwt_subject(token.value) or "kafka_txn"
        return token.value, expires_at, principal, dict(config.extensions)

    return oauth_cb
