"""ACL APIs: CreateAcls, DescribeAcls and DeleteAcls.

Served at v1-3, as Kafka 4.x (which removed v0, KIP-896; librdkafka sends v2). Without
an authorizer every answer is SECURITY_DISABLED with Kafka's message. Creating and
deleting need ALTER on the cluster, describing DESCRIBE on the cluster; otherwise
CLUSTER_AUTHORIZATION_FAILED. A raw 0 (UNKNOWN) in any enum field of a creation or filter
closes the connection, as Kafka's request parser does. A change is persisted with the
cluster's metadata at once.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from pyspark_kafka_txn.embedded.acl import (
    AclBinding,
    AclFilter,
    Authorizer,
    InvalidAclError,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from pyspark_kafka_txn.embedded.dispatch import NO_THROTTLE, ApiSpec, Context, NoResponse
from pyspark_kafka_txn.embedded.protocol import ErrorCode, build, response_module
from pyspark_kafka_txn.wire import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS

_NO_AUTHORIZER = "No Authorizer is configured."
_NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"
# The wire field of a CreateAcls creation and of a DescribeAcls / DeleteAcls filter that
# gives each field of AclBinding / AclFilter.
_CREATION_FIELDS = {
    "resource_type": "resource_type",
    "resource_name": "resource_name",
    "pattern_type": "resource_pattern_type",
    "principal": "principal",
    "host": "host",
    "operation": "operation",
    "permission": "permission_type",
}
_FILTER_FIELDS = {
    "resource_type": "resource_type_filter",
    "resource_name": "resource_name_filter",
    "pattern_type": "pattern_type_filter",
    "principal": "principal_filter",
    "host": "host_filter",
    "operation": "operation",
    "permission": "permission_type",
}
# The fields that are enum codes on the wire.
_ENUMS = {
    "resource_type": ResourceType,
    "pattern_type": PatternType,
    "operation": Operation,
    "permission": Permission,
}
_CREATION_CODES = tuple(_CREATION_FIELDS[field] for field in _ENUMS)
_FILTER_CODES = tuple(_FILTER_FIELDS[field] for field in _ENUMS)


def _has_raw_zero(entries: Any, fields: tuple[str, ...]) -> bool:
    return any(getattr(entry, name) == 0 for entry in entries for name in fields)


def _enum(kind: Any, code: int) -> Any:
    """The enum member of a wire code; codes Kafka does not know read as UNKNOWN (0)."""
    try:
        return kind(code)
    except ValueError:
        return kind(0)


def _refusal(
    ctx: Context, operation: Operation, message: str = _NO_AUTHORIZER
) -> tuple[ErrorCode, str | None]:
    """Why the request may not run: no authorizer, or the principal lacks the right."""
    if ctx.cluster.authorizer is None:
        return ErrorCode.security_disabled, message
    if not ctx.cluster_allowed(operation):
        return ErrorCode.cluster_authorization_failed, None
    return ErrorCode.none, None


def _decoded(entry: Any, fields: Mapping[str, str]) -> dict[str, Any]:
    """The AclBinding or AclFilter fields of a wire creation or filter (``fields``: the
    wire name of each), the enum codes as their members."""
    return {
        field: _enum(_ENUMS[field], getattr(entry, wire))
        if field in _ENUMS
        else getattr(entry, wire)
        for field, wire in fields.items()
    }


def _filter(entry: Any) -> AclFilter:
    return AclFilter(**_decoded(entry, _FILTER_FIELDS))


def create_acls(ctx: Context, req: Any) -> Any:
    """CreateAcls v1-3.

    Behaviour: a creation with ANY (1) as its resource type, pattern, operation or
    permission, or the MATCH pattern, fails the whole request with UNKNOWN_SERVER_ERROR
    (Kafka cannot build the binding); otherwise each is checked as Kafka's
    AclControlManager does (known codes, LITERAL or PREFIXED pattern, non-empty name,
    ``kafka-cluster`` as the only CLUSTER name, a ``Type:name`` principal; stricter: a
    non-empty host) and an invalid one gets INVALID_REQUEST with the reason while the
    others are created. Creating an existing ACL succeeds and changes nothing.
    """
    if _has_raw_zero(req.creations, _CREATION_CODES):
        return NoResponse(close=True)
    mod = response_module(CREATE_ACLS, ctx.version)
    code, message = _refusal(ctx, Operation.ALTER)
    if code is ErrorCode.none and _has_any(req.creations):
        code = ErrorCode.unknown_server_error
    results = []
    authorizer = ctx.cluster.authorizer
    for creation in req.creations:
        error, text = code, message
        if code is ErrorCode.none:
            assert authorizer is not None
            error, text = _create_one(authorizer, creation)
        results.append(build(mod.AclCreationResult, error_code=error, error_message=text))
    if code is ErrorCode.none and req.creations:
        ctx.cluster.save_meta()
    return build(mod.CreateAclsResponse, throttle_time=NO_THROTTLE, results=tuple(results))


def _has_any(creations: Any) -> bool:
    """Whether a creation names ANY (or the MATCH pattern), which Kafka's ResourcePattern
    and AccessControlEntry refuse to build."""
    return any(
        c.resource_type == ResourceType.ANY
        or c.resource_pattern_type in (PatternType.ANY, PatternType.MATCH)
        or c.operation == Operation.ANY
        or c.permission_type == Permission.ANY
        for c in creations
    )


def _create_one(authorizer: Authorizer, creation: Any) -> tuple[ErrorCode, str | None]:
    try:
        authorizer.add(AclBinding(**_decoded(creation, _CREATION_FIELDS)))
    except InvalidAclError as exc:
        return ErrorCode.invalid_request, str(exc)
    return ErrorCode.none, None


def describe_acls(ctx: Context, req: Any) -> Any:
    """DescribeAcls v1-3.

    Behaviour: the ACLs matching the filter (ANY, MATCH, LITERAL or PREFIXED patterns;
    null strings and ANY codes match everything), grouped by resource pattern; a code
    Kafka does not know matches nothing.
    """
    if _has_raw_zero((req,), _FILTER_CODES):
        return NoResponse(close=True)
    mod = response_module(DESCRIBE_ACLS, ctx.version)
    code, message = _refusal(ctx, Operation.DESCRIBE, _NO_AUTHORIZER_DESCRIBE)
    resources: tuple[Any, ...] = ()
    if code is ErrorCode.none:
        assert ctx.cluster.authorizer is not None
        acl_filter = _filter(req)
        try:
            acl_filter.check()
        except InvalidAclError:
            pass  # an unknown code: nothing matches
        else:
            resources = _grouped(mod, ctx.cluster.authorizer.describe(acl_filter))
    return build(
        mod.DescribeAclsResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        error_message=message,
        resources=resources,
    )


def _pattern(acl: AclBinding) -> tuple[int, str, int]:
    return (int(acl.resource_type), acl.resource_name, int(acl.pattern_type))


def _entry(acl: AclBinding) -> dict[str, Any]:
    """The fields every ACL entry of a response shares: who, from where, what, allowed or not."""
    return {
        "principal": acl.principal,
        "host": acl.host,
        "operation": int(acl.operation),
        "permission_type": int(acl.permission),
    }


def _grouped(mod: Any, acls: list[AclBinding]) -> tuple[Any, ...]:
    return tuple(
        build(
            mod.DescribeAclsResource,
            resource_type=rtype,
            resource_name=name,
            pattern_type=pattern,
            acls=tuple(build(mod.AclDescription, **_entry(acl)) for acl in group),
        )
        for (rtype, name, pattern), group in itertools.groupby(
            sorted(acls, key=_pattern), key=_pattern
        )
    )


def delete_acls(ctx: Context, req: Any) -> Any:
    """DeleteAcls v1-3.

    Behaviour: each filter deletes the ACLs it matches and lists them; a filter with a
    code Kafka does not know is INVALID_REQUEST while the other filters run.
    """
    if _has_raw_zero(req.filters, _FILTER_CODES):
        return NoResponse(close=True)
    mod = response_module(DELETE_ACLS, ctx.version)
    code, message = _refusal(ctx, Operation.ALTER)
    authorizer = ctx.cluster.authorizer
    results = []
    deleted = False
    for entry in req.filters:
        error, text, matched = code, message, []
        if code is ErrorCode.none:
            assert authorizer is not None
            acl_filter = _filter(entry)
            try:
                acl_filter.check()
            except InvalidAclError as exc:
                error, text = ErrorCode.invalid_request, str(exc)
            else:
                matched = authorizer.delete(acl_filter)
                deleted = deleted or bool(matched)
        results.append(
            build(
                mod.DeleteAclsFilterResult,
                error_code=error,
                error_message=text,
                matching_acls=tuple(
                    build(
                        mod.DeleteAclsMatchingAcl,
                        error_code=ErrorCode.none,
                        error_message=None,
                        resource_type=int(acl.resource_type),
                        resource_name=acl.resource_name,
                        pattern_type=int(acl.pattern_type),
                        **_entry(acl),
                    )
                    for acl in matched
                ),
            )
        )
    if deleted:
        ctx.cluster.save_meta()
    return build(mod.DeleteAclsResponse, throttle_time=NO_THROTTLE, filter_results=tuple(results))


SPECS = (
    ApiSpec(DESCRIBE_ACLS, "DescribeAcls", 1, 3, describe_acls),
    ApiSpec(CREATE_ACLS, "CreateAcls", 1, 3, create_acls),
    ApiSpec(DELETE_ACLS, "DeleteAcls", 1, 3, delete_acls),
)
