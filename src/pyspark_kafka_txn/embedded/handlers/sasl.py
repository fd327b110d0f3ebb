"""SASL APIs: SaslHandshake and SaslAuthenticate."""

from __future__ import annotations

import datetime
import logging
from typing import Any

from pyspark_kafka_txn.embedded.dispatch import ApiSpec, Context
from pyspark_kafka_txn.embedded.protocol import ErrorCode, build, response_module
from pyspark_kafka_txn.embedded.security import SaslAuthenticationError

logger = logging.getLogger(__name__)

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


def sasl_handshake(ctx: Context, req: Any) -> Any:
    """SaslHandshake v0-1.

    Behaviour: on a SASL listener, selects the mechanism (UNSUPPORTED_SASL_MECHANISM
    with the enabled list otherwise); v0 switches the connection to raw SASL tokens,
    v1 expects SaslAuthenticate. On a non-SASL listener, or once authenticated:
    ILLEGAL_SASL_STATE.
    """
    mod = response_module(SASL_HANDSHAKE, ctx.version)
    session = ctx.session
    enabled = session.authenticator.security.sasl_mechanisms if session else ()
    code = ErrorCode.none
    if session is None or not session.needs_auth or session.mechanism is not None:
        code = ErrorCode.illegal_sasl_state
    else:
        mechanism = session.authenticator.mechanism(req.mechanism)
        if mechanism is None:
            code = ErrorCode.unsupported_sasl_mechanism
        else:
            session.mechanism = mechanism
            session.mechanism_name = req.mechanism
            session.raw_tokens = ctx.version == 0
    if code is not ErrorCode.none and session is not None and session.needs_auth:
        session.close_after_response = True
    return build(mod.SaslHandshakeResponse, error_code=code, mechanisms=tuple(enabled))


def sasl_authenticate(ctx: Context, req: Any) -> Any:
    """SaslAuthenticate v0-2.

    Behaviour: feeds the token to the mechanism chosen by SaslHandshake v1; a wrong
    state gets ILLEGAL_SASL_STATE, bad credentials SASL_AUTHENTICATION_FAILED with
    Kafka's message, and the connection is closed after either answer.
    """
    mod = response_module(SASL_AUTHENTICATE, ctx.version)
    session = ctx.session
    if session is None or session.mechanism is None or session.raw_tokens:
        if session is not None:
            session.close_after_response = True
        return build(
            mod.SaslAuthenticateResponse,
            error_code=ErrorCode.illegal_sasl_state,
            error_message="SaslAuthenticate without a SaslHandshake v1",
            auth_bytes=b"",
            session_lifetime=datetime.timedelta(0),
        )
    try:
        token, done = session.mechanism.step(req.auth_bytes)
    except SaslAuthenticationError as exc:
        session.close_after_response = True
        logger.info("failed authentication with SASL/%s: %s", session.mechanism_name, exc)
        # Kafka sends PlainSaslServer's own message, and a generic one for SCRAM.
        message = (
            f"Authentication failed: {exc}"
            if session.mechanism_name == "PLAIN"
            else "Authentication failed during authentication due to invalid credentials "
            f"with SASL mechanism {session.mechanism_name}"
        )
        return build(
            mod.SaslAuthenticateResponse,
            error_code=ErrorCode.sasl_authentication_failed,
            error_message=message,
            auth_bytes=b"",
            session_lifetime=datetime.timedelta(0),
        )
    if done:
        session.authenticated = True
    return build(
        mod.SaslAuthenticateResponse,
        error_code=ErrorCode.none,
        error_message=None,
        auth_bytes=token,
        session_lifetime=datetime.timedelta(0),
    )


SPECS = (
    ApiSpec(SASL_HANDSHAKE, "SaslHandshake", 0, 1, sasl_handshake),
    ApiSpec(SASL_AUTHENTICATE, "SaslAuthenticate", 0, 2, sasl_authenticate),
)
