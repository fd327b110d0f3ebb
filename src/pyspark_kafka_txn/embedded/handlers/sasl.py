"""SASL APIs: SaslHandshake, SaslAuthenticate, and the SCRAM credential admin APIs
(DescribeUserScramCredentials, AlterUserScramCredentials)."""

from __future__ import annotations

import datetime
import logging
from typing import Any

from pyspark_kafka_txn.embedded.acl import Operation
from pyspark_kafka_txn.embedded.dispatch import NO_THROTTLE, ApiSpec, Context
from pyspark_kafka_txn.embedded.protocol import ErrorCode, build, response_module
from pyspark_kafka_txn.embedded.security import (
    SCRAM_ITERATIONS,
    SCRAM_MAX_ITERATIONS,
    SCRAM_MECHANISM_CODES,
    SaslAuthenticationError,
    credential_from_salted,
)
from pyspark_kafka_txn.wire import (
    ALTER_USER_SCRAM_CREDENTIALS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
)

logger = logging.getLogger(__name__)


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
        # For OAUTHBEARER the reason (never the token) is said, as Kafka logs it.
        message = (
            f"Authentication failed: {exc}"
            if session.mechanism_name == "PLAIN"
            else f"Authentication failed with SASL mechanism OAUTHBEARER: {exc}"
            if session.mechanism_name == "OAUTHBEARER"
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
        session.complete()
    return build(
        mod.SaslAuthenticateResponse,
        error_code=ErrorCode.none,
        error_message=None,
        auth_bytes=token,
        session_lifetime=datetime.timedelta(0),
    )


#: Kafka's message of a ClusterAuthorizationException built from its error code.
_CLUSTER_REFUSED = "Cluster authorization failed."


def describe_user_scram_credentials(ctx: Context, req: Any) -> Any:
    """DescribeUserScramCredentials v0.

    Behaviour: every user with a SCRAM credential for a null or empty list; per user its
    mechanisms and iterations, RESOURCE_NOT_FOUND for a user without any, and
    DUPLICATE_RESOURCE for a user named twice (Kafka's messages). Salts and keys are
    never sent. ACLs: DESCRIBE on the cluster, else a top-level
    CLUSTER_AUTHORIZATION_FAILED and, as Kafka's error response has it, one result with
    that error and no user name per user named in the request.
    """
    mod = response_module(DESCRIBE_USER_SCRAM_CREDENTIALS, ctx.version)
    if ctx.cluster_allowed(Operation.DESCRIBE):
        code, message, results = ErrorCode.none, None, _user_credentials(ctx, mod, req)
    else:
        code, message = ErrorCode.cluster_authorization_failed, _CLUSTER_REFUSED
        results = tuple(
            build(
                mod.DescribeUserScramCredentialsResult,
                user="",
                error_code=code,
                error_message=message,
                credential_infos=(),
            )
            for _ in req.users or ()
        )
    return build(
        mod.DescribeUserScramCredentialsResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        error_message=message,
        results=results,
    )


def _user_credentials(ctx: Context, mod: Any, req: Any) -> tuple[Any, ...]:
    """DescribeUserScramCredentials' result per user asked for (every user, for a null or
    empty list), in request order."""
    stored = ctx.cluster.scram.credentials
    codes = {name: code for code, (name, _) in SCRAM_MECHANISM_CODES.items()}
    everyone = sorted({user for users in stored.values() for user in users})
    names = [u.name for u in req.users or ()] or everyone  # null or empty: every user
    results = []
    for user in dict.fromkeys(names):
        code, message, infos = ErrorCode.none, None, ()
        if names.count(user) > 1:
            code = ErrorCode.duplicate_resource
            message = (
                "Cannot describe SCRAM credentials for the same user twice in a single "
                f"request: {user}"
            )
        else:
            infos = tuple(
                build(mod.CredentialInfo, mechanism=codes[mechanism], iterations=c.iterations)
                for mechanism, users in sorted(stored.items())
                if (c := users.get(user)) is not None
            )
            if not infos:
                code = ErrorCode.resource_not_found
                message = f"Attempt to describe a user credential that does not exist: {user}"
        results.append(
            build(
                mod.DescribeUserScramCredentialsResult,
                user=user,
                error_code=code,
                error_message=message,
                credential_infos=infos,
            )
        )
    return tuple(results)


def _scram_change_error(
    ctx: Context, name: str, mechanism: int, seen: dict[tuple[str, int], int], upsert: Any
) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in SCRAM_MECHANISM_CODES:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    if seen[(name, mechanism)] > 1:
        return (
            ErrorCode.duplicate_resource,
            "A user credential cannot be altered twice in the same request",
        )
    if upsert is None:
        if name not in ctx.cluster.scram.credentials.get(SCRAM_MECHANISM_CODES[mechanism][0], {}):
            return (
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            )
        return None
    if upsert.iterations < SCRAM_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too few iterations"
    if upsert.iterations > SCRAM_MAX_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too many iterations"
    if not upsert.salt or not upsert.salted_password:
        return ErrorCode.unacceptable_credential, "Credential salt and password must not be empty"
    return None


def alter_user_scram_credentials(ctx: Context, req: Any) -> Any:
    """AlterUserScramCredentials v0.

    Behaviour: deletions and upsertions (the client's salted password, salt and
    iterations, from which the stored and server keys are derived) per user; a user any
    of whose changes is invalid gets the error and none of its changes apply: empty name
    or iterations outside 4096-16384 UNACCEPTABLE_CREDENTIAL, an unknown mechanism
    UNSUPPORTED_SASL_MECHANISM, a (user, mechanism) changed twice DUPLICATE_RESOURCE,
    deleting a missing credential RESOURCE_NOT_FOUND. Takes effect for the next
    authentication; persisted. ACLs: ALTER on the cluster, else every user
    CLUSTER_AUTHORIZATION_FAILED.
    """
    mod = response_module(ALTER_USER_SCRAM_CREDENTIALS, ctx.version)
    changes = [(d.name, int(d.mechanism), None) for d in req.deletions] + [
        (u.name, int(u.mechanism), u) for u in req.upsertions
    ]
    seen: dict[tuple[str, int], int] = {}
    for name, mechanism, _ in changes:
        seen[(name, mechanism)] = seen.get((name, mechanism), 0) + 1
    errors: dict[str, tuple[ErrorCode, str | None]] = {}
    if not ctx.cluster_allowed(Operation.ALTER):
        errors = dict.fromkeys(
            (name for name, _, _ in changes), (ErrorCode.cluster_authorization_failed, None)
        )
    for name, mechanism, upsert in changes:
        error = _scram_change_error(ctx, name, mechanism, seen, upsert)
        if error is not None and name not in errors:
            errors[name] = error
    stored = ctx.cluster.scram.credentials
    for name, mechanism, upsert in changes:
        if name in errors:
            continue
        mechanism_name, hash_name = SCRAM_MECHANISM_CODES[mechanism]
        users = stored.setdefault(mechanism_name, {})
        if upsert is None:
            users.pop(name, None)
        else:
            users[name] = credential_from_salted(
                upsert.salted_password, upsert.salt, upsert.iterations, hash_name
            )
    ctx.cluster.save_meta()
    results = tuple(
        build(
            mod.AlterUserScramCredentialsResult,
            user=name,
            error_code=errors[name][0] if name in errors else ErrorCode.none,
            error_message=errors[name][1] if name in errors else None,
        )
        for name in dict.fromkeys(name for name, _, _ in changes)
    )
    return build(mod.AlterUserScramCredentialsResponse, throttle_time=NO_THROTTLE, results=results)


SPECS = (
    ApiSpec(SASL_HANDSHAKE, "SaslHandshake", 0, 1, sasl_handshake),
    ApiSpec(SASL_AUTHENTICATE, "SaslAuthenticate", 0, 2, sasl_authenticate),
    ApiSpec(
        DESCRIBE_USER_SCRAM_CREDENTIALS,
        "DescribeUserScramCredentials",
        0,
        0,
        describe_user_scram_credentials,
    ),
    ApiSpec(
        ALTER_USER_SCRAM_CREDENTIALS,
        "AlterUserScramCredentials",
        0,
        0,
        alter_user_scram_credentials,
    ),
)
