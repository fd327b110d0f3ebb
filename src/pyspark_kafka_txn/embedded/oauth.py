"""SASL/OAUTHBEARER (RFC 7628) on the embedded cluster, with unsecured JWTs.

Like Kafka's default ``OAuthBearerUnsecuredValidatorCallbackHandler``, and stricter: the
token must be a compact JWS of three base64url parts whose header says ``"alg": "none"``
and whose signature part is empty; its claims must hold a non-blank string ``sub`` (the
principal, as ``User:<sub>``) and a numeric ``exp`` in the future; ``iat``, when present,
must be a number not in the future, and ``nbf``, when present, a number not in the future.
An authorization id in the GS2 header must equal ``sub``. Anything else fails with a
reason that never contains the token.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable
from typing import Any

__all__ = ["OAuthBearerMechanism", "unsecured_jwt"]

#: Seconds a claim may lie in the future (clock skew); Kafka's default is 0 as well.
_CLOCK_SKEW_S = 0.0


class OAuthBearerMechanism:
    """SASL/OAUTHBEARER, server side: one client message, validated as an unsecured JWT.

    Parameters
    ----------
    error
        The exception type to raise on a rejected exchange (the listener's
        ``SaslAuthenticationError``).
    clock
        Seconds since the epoch (tests may fix it).
    """

    def __init__(self, error: type[Exception], clock: Callable[[], float] = time.time) -> None:
        self._error = error
        self._clock = clock
        self.user: str | None = None
        #: The client's SASL extensions (KIP-342), accepted as Kafka's unsecured validator
        #: accepts every one.
        self.extensions: dict[str, str] = {}

    def step(self, token: bytes) -> tuple[bytes, bool]:
        """Validate the client's initial response; complete the exchange or raise."""
        if self.user is not None:
            raise self._error("unexpected OAUTHBEARER message after completion")
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._error("the OAUTHBEARER message is not UTF-8") from None
        gs2, sep, rest = message.partition(",\x01")
        if not sep or not rest.endswith("\x01\x01"):
            raise self._error("malformed OAUTHBEARER client message (RFC 7628)")
        flag, _, authzid = gs2.partition(",")
        if flag != "n" or (authzid and not authzid.startswith("a=")):
            raise self._error("malformed OAUTHBEARER GS2 header")
        pairs: dict[str, str] = {}
        for item in rest[:-2].split("\x01"):
            key, eq, value = item.partition("=")
            if not eq or key in pairs or not key.isascii() or not key.isalpha():
                raise self._error("malformed OAUTHBEARER key/value pairs")
            pairs[key] = value
        auth = pairs.get("auth", "")
        scheme, _, jwt = auth.partition(" ")
        if scheme.lower() != "bearer" or not jwt.strip():
            raise self._error("no bearer token in the OAUTHBEARER message")
        claims = unsecured_jwt(jwt.strip(), self._clock(), self._error)
        sub = claims["sub"]
        if authzid and authzid[2:] != sub:
            raise self._error("the authorization id does not match the token's subject")
        self.user = sub
        self.extensions = {k: v for k, v in pairs.items() if k != "auth"}
        return b"", True


def _b64url_json(part: str, what: str, error: type[Exception]) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError):
        raise error(f"the token's {what} is not base64url-encoded JSON") from None
    if not isinstance(value, dict):
        raise error(f"the token's {what} is not a JSON object")
    return value


def _number(claims: dict[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(name)
    return float(value)


def unsecured_jwt(token: str, now: float, error: type[Exception]) -> dict[str, Any]:
    """The claims of a valid unsecured JWT (rules in the module docstring).

    Parameters
    ----------
    token
        The compact serialization ``header.claims.`` (empty signature).
    now
        Seconds since the epoch.
    error
        The exception type to raise; its message never contains the token.

    Returns
    -------
    dict
        The claims; ``sub`` is a non-blank string.
    """
    parts = token.split(".")
    if len(parts) != 3:
        raise error("the token is not a compact JWT (three dot-separated parts)")
    if parts[2]:
        raise error("the token is signed: only unsecured JWTs (alg none) are accepted")
    header = _b64url_json(parts[0], "header", error)
    if header.get("alg") != "none":
        raise error("the token's header must have alg none")
    claims = _b64url_json(parts[1], "claims", error)
    sub = claims.get("sub")
    if not isinstance(sub, str) or not sub.strip():
        raise error("the token has no principal name (sub claim)")
    try:
        exp, iat, nbf = (_number(claims, name) for name in ("exp", "iat", "nbf"))
    except TypeError as exc:
        raise error(f"the token's {exc} claim is not a number") from None
    if exp is None:
        raise error("the token has no expiration time (exp claim)")
    if exp <= now - _CLOCK_SKEW_S:
        raise error("the token has expired")
    for name, value in (("iat", iat), ("nbf", nbf)):
        if value is not None and value > now + _CLOCK_SKEW_S:
            raise error(f"the token's {name} claim lies in the future")
    return claims
