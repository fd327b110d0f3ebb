"""Classic group membership APIs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups, ListGroups, DeleteGroups.

The handlers translate between kio entities and :mod:`..membership`, which holds the
rebalance state machine; JoinGroup and SyncGroup are coroutines that wait for the
rebalance. Every group request must reach the group's coordinator (NOT_COORDINATOR
otherwise) and name a group (INVALID_GROUP_ID). With an authorizer, the ACL checks of
Kafka 4.x's KafkaApis come first: READ on the group for JoinGroup, SyncGroup, Heartbeat
and LeaveGroup, DESCRIBE for DescribeGroups and ListGroups, DELETE for DeleteGroups
(GROUP_AUTHORIZATION_FAILED otherwise).
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from pyspark_kafka_txn.embedded.acl import Operation, ResourceType
from pyspark_kafka_txn.embedded.dispatch import NO_AUTHORIZED_OPS, NO_THROTTLE, ApiSpec, Context
from pyspark_kafka_txn.embedded.membership import (
    CLASSIC_GROUP_TYPE,
    GroupDescription,
    GroupState,
    JoinRequest,
    JoinResult,
    MemberOutcome,
    SyncResult,
)
from pyspark_kafka_txn.embedded.protocol import ErrorCode, build, response_module
from pyspark_kafka_txn.wire import (
    COORDINATOR_GROUP,
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    SYNC_GROUP,
)

_MS = datetime.timedelta(milliseconds=1)


def _not_coordinator(ctx: Context, group: str) -> bool:
    return ctx.cluster.coordinator(COORDINATOR_GROUP, group) != ctx.node_id


def _allowed(ctx: Context, operation: Operation, group: str | None) -> bool:
    return ctx.allowed(operation, ResourceType.GROUP, group or "")


def _join_response(ctx: Context, result: JoinResult) -> Any:
    mod = response_module(JOIN_GROUP, ctx.version)
    name = result.protocol_name
    if ctx.version < 7:
        name = name or ""  # not nullable before v7
    elif name == "":
        name = None
    members = tuple(
        build(mod.JoinGroupResponseMember, member_id=m, group_instance_id=i, metadata=md)
        for m, i, md in result.members
    )
    return build(
        mod.JoinGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        generation_id=result.generation,
        protocol_type=result.protocol_type,
        protocol_name=name,
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=members,
    )


async def join_group(ctx: Context, req: Any) -> Any:
    """JoinGroup v0-9.

    Behaviour: without READ on the group GROUP_AUTHORIZATION_FAILED (empty member id,
    generation -1); empty group id INVALID_GROUP_ID; session timeout outside
    [group.min.session.timeout.ms, group.max.session.timeout.ms] INVALID_SESSION_TIMEOUT;
    wrong node NOT_COORDINATOR; v4+ dynamic members without an id get MEMBER_ID_REQUIRED
    and a generated id; incompatible protocol type or names INCONSISTENT_GROUP_PROTOCOL;
    unknown member ids UNKNOWN_MEMBER_ID (FENCED_INSTANCE_ID for a static member whose id
    was replaced). The answer waits until the join phase completes (initial rebalance
    delay, all members rejoined, or rebalance timeout); the leader gets the members'
    metadata. v0 has no rebalance timeout: the session timeout is used.
    Simplifications: the client host is not known (reported empty); no group size limit.
    """
    cluster = ctx.cluster
    config = cluster.config
    session_ms = req.session_timeout // _MS
    rebalance_ms = req.rebalance_timeout // _MS if ctx.version >= 1 else session_ms
    if not _allowed(ctx, Operation.READ, req.group_id):
        return _join_error(ctx, req, ErrorCode.group_authorization_failed)
    error = ErrorCode.none
    if not req.group_id:
        error = ErrorCode.invalid_group_id
    elif not (
        config.group_min_session_timeout_ms <= session_ms <= config.group_max_session_timeout_ms
    ):
        error = ErrorCode.invalid_session_timeout
    elif _not_coordinator(ctx, req.group_id):
        return _join_response(ctx, JoinResult(error=ErrorCode.not_coordinator, member_id=""))
    if error is not ErrorCode.none:
        return _join_response(ctx, JoinResult(error=error, member_id=req.member_id))
    result = await cluster.membership.join(
        JoinRequest(
            group_id=req.group_id,
            member_id=req.member_id,
            group_instance_id=getattr(req, "group_instance_id", None),
            client_id=ctx.client_id or "",
            client_host="",
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            protocol_type=req.protocol_type,
            protocols=tuple((p.name, p.metadata) for p in req.protocols),
            version=ctx.version,
        )
    )
    return _join_response(ctx, result)


def _sync_response(ctx: Context, result: SyncResult) -> Any:
    mod = response_module(SYNC_GROUP, ctx.version)
    return build(
        mod.SyncGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


async def sync_group(ctx: Context, req: Any) -> Any:
    """SyncGroup v0-5.

    Behaviour: v5+ without protocol type or name INCONSISTENT_GROUP_PROTOCOL (checked
    before authorization, as Kafka does); without READ on the group
    GROUP_AUTHORIZATION_FAILED; empty group id INVALID_GROUP_ID; wrong node
    NOT_COORDINATOR; unknown group, empty group or unknown member UNKNOWN_MEMBER_ID
    (FENCED_INSTANCE_ID for a replaced static member); generation mismatch
    ILLEGAL_GENERATION; protocol type/name differing from the group's
    INCONSISTENT_GROUP_PROTOCOL; during PreparingRebalance REBALANCE_IN_PROGRESS.
    In CompletingRebalance the answer waits for the leader's SyncGroup, whose assignment
    (empty for members it leaves out) then goes to every member and makes the group
    Stable; in Stable the member's current assignment is returned.
    """
    protocol_type = getattr(req, "protocol_type", None)
    protocol_name = getattr(req, "protocol_name", None)
    if ctx.version >= 5 and (protocol_type is None or protocol_name is None):
        return _sync_response(ctx, SyncResult(error=ErrorCode.inconsistent_group_protocol))
    if not _allowed(ctx, Operation.READ, req.group_id):
        return _sync_response(ctx, SyncResult(error=ErrorCode.group_authorization_failed))
    if not req.group_id:
        return _sync_response(ctx, SyncResult(error=ErrorCode.invalid_group_id))
    if _not_coordinator(ctx, req.group_id):
        return _sync_response(ctx, SyncResult(error=ErrorCode.not_coordinator))
    result = await ctx.cluster.membership.sync(
        req.group_id,
        req.generation_id,
        req.member_id,
        getattr(req, "group_instance_id", None),
        protocol_type,
        protocol_name,
        {a.member_id: a.assignment for a in req.assignments},
    )
    return _sync_response(ctx, result)


def _heartbeat_response(ctx: Context, error: ErrorCode) -> Any:
    mod = response_module(HEARTBEAT, ctx.version)
    return build(mod.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=error)


def heartbeat(ctx: Context, req: Any) -> Any:
    """Heartbeat v0-4.

    Behaviour: without READ on the group GROUP_AUTHORIZATION_FAILED; empty group id
    INVALID_GROUP_ID; wrong node NOT_COORDINATOR; unknown group or member
    UNKNOWN_MEMBER_ID (FENCED_INSTANCE_ID for a replaced static member); generation
    mismatch ILLEGAL_GENERATION; PreparingRebalance REBALANCE_IN_PROGRESS (the member
    must rejoin). A valid heartbeat re-arms the member's session timer.
    """
    if not _allowed(ctx, Operation.READ, req.group_id):
        return _heartbeat_response(ctx, ErrorCode.group_authorization_failed)
    if not req.group_id:
        return _heartbeat_response(ctx, ErrorCode.invalid_group_id)
    if _not_coordinator(ctx, req.group_id):
        return _heartbeat_response(ctx, ErrorCode.not_coordinator)
    error = ctx.cluster.membership.heartbeat(
        req.group_id, req.generation_id, req.member_id, getattr(req, "group_instance_id", None)
    )
    return _heartbeat_response(ctx, error)


def _leave_response(ctx: Context, top: ErrorCode, outcomes: list[MemberOutcome]) -> Any:
    mod = response_module(LEAVE_GROUP, ctx.version)
    if ctx.version < 3:
        if top is ErrorCode.none and outcomes:
            top = outcomes[0].error
        return build(mod.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=top)
    members = tuple(
        build(
            mod.MemberResponse,
            member_id=o.member_id,
            group_instance_id=o.group_instance_id,
            error_code=o.error,
        )
        for o in outcomes
    )
    return build(mod.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=top, members=members)


def leave_group(ctx: Context, req: Any) -> Any:
    """LeaveGroup v0-5.

    Behaviour: without READ on the group GROUP_AUTHORIZATION_FAILED at the top level (no
    member leaves); empty group id INVALID_GROUP_ID; wrong node NOT_COORDINATOR; v3+
    removes a batch of members, each with its own error (UNKNOWN_MEMBER_ID,
    FENCED_INSTANCE_ID; an empty member id with a group.instance.id removes that static
    member); v0-2 carry one member and report its error at the top level. Members
    leaving a Stable or CompletingRebalance group trigger a rebalance.
    """
    if ctx.version >= 3:
        identities = [(m.member_id, m.group_instance_id) for m in req.members]
    else:
        identities = [(req.member_id, None)]
    if not _allowed(ctx, Operation.READ, req.group_id):
        return _leave_response(ctx, ErrorCode.group_authorization_failed, [])
    if not req.group_id:
        return _leave_response(ctx, ErrorCode.invalid_group_id, [])
    if _not_coordinator(ctx, req.group_id):
        return _leave_response(ctx, ErrorCode.not_coordinator, [])
    top, outcomes = ctx.cluster.membership.leave(req.group_id, identities)
    return _leave_response(ctx, top, outcomes)


def _described_group(
    mod: Any,
    group: GroupDescription,
    code: ErrorCode = ErrorCode.none,
    message: str | None = None,
    operations: int = NO_AUTHORIZED_OPS,
) -> Any:
    """A DescribeGroups entry: the group's state (empty when ``None``), protocol and
    members, with ``code`` and ``message``."""
    members = tuple(
        build(
            mod.DescribedGroupMember,
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            member_metadata=m.metadata,
            member_assignment=m.assignment,
        )
        for m in group.members
    )
    return build(
        mod.DescribedGroup,
        error_code=code,
        error_message=message,
        group_id=group.group_id,
        group_state=group.state.value if group.state is not None else "",
        protocol_type=group.protocol_type,
        protocol_data=group.protocol_data,
        members=members,
        authorized_operations=operations,
    )


def _failed_group(mod: Any, group_id: str, code: ErrorCode, message: str | None = None) -> Any:
    """A DescribeGroups entry with only the group id and the error."""
    return _described_group(mod, GroupDescription(group_id=group_id, state=None), code, message)


def describe_groups(ctx: Context, req: Any) -> Any:
    """DescribeGroups v0-6.

    Behaviour: per group: without DESCRIBE on it GROUP_AUTHORIZATION_FAILED (these are
    listed first, as Kafka does); wrong node NOT_COORDINATOR; an unknown group is
    reported in the Dead state without error before v6 and as GROUP_ID_NOT_FOUND from
    v6; member metadata and the protocol name are only given for Stable groups;
    authorized operations (v3+, when asked, for groups without error) are the group
    operations the principal may perform (all five without an authorizer).
    """
    mod = response_module(DESCRIBE_GROUPS, ctx.version)
    membership = ctx.cluster.membership
    want_ops = getattr(req, "include_authorized_operations", False)
    denied = []
    groups = []
    for group_id in req.groups:
        if not _allowed(ctx, Operation.DESCRIBE, group_id):
            denied.append(_failed_group(mod, group_id, ErrorCode.group_authorization_failed))
            continue
        if _not_coordinator(ctx, group_id):
            groups.append(_failed_group(mod, group_id, ErrorCode.not_coordinator))
            continue
        described = membership.describe(group_id)
        if described.state is None:
            if ctx.version >= 6:
                groups.append(
                    _failed_group(
                        mod, group_id, ErrorCode.group_id_not_found, f"Group {group_id} not found."
                    )
                )
                continue
            described = dataclasses.replace(described, state=GroupState.DEAD)  # before v6
        operations = (
            ctx.authorized_operations(ResourceType.GROUP, group_id)
            if want_ops
            else NO_AUTHORIZED_OPS
        )
        groups.append(_described_group(mod, described, operations=operations))
    return build(mod.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=(*denied, *groups))


def list_groups(ctx: Context, req: Any) -> Any:
    """ListGroups v0-5.

    Behaviour: the groups this node coordinates, including "simple" groups that only
    have committed offsets (Empty, protocol type ""); v4+ filters by state
    (case-insensitive), v5+ by type (every group here is "classic"; unknown types match
    nothing). A principal without DESCRIBE on the cluster only sees the groups it may
    DESCRIBE (no error).
    """
    mod = response_module(LIST_GROUPS, ctx.version)
    every_group = ctx.cluster_allowed(Operation.DESCRIBE)
    states = {s.strip().lower() for s in getattr(req, "states_filter", ())}
    types = {t.lower() for t in getattr(req, "types_filter", ())}
    groups = []
    if not types or CLASSIC_GROUP_TYPE in types:
        for g in ctx.cluster.membership.list_groups(lambda gid: not _not_coordinator(ctx, gid)):
            assert g.state is not None
            if states and g.state.value.lower() not in states:
                continue
            if not every_group and not _allowed(ctx, Operation.DESCRIBE, g.group_id):
                continue
            groups.append(
                build(
                    mod.ListedGroup,
                    group_id=g.group_id,
                    protocol_type=g.protocol_type,
                    group_state=g.state.value,
                    group_type=CLASSIC_GROUP_TYPE,
                )
            )
    return build(
        mod.ListGroupsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        groups=tuple(groups),
    )


def _join_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    return _join_response(ctx, JoinResult(error=code, member_id=""))


def _sync_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    return _sync_response(ctx, SyncResult(error=code))


def _heartbeat_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    return _heartbeat_response(ctx, code)


def _leave_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    return _leave_response(ctx, code, [])


def _describe_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    mod = response_module(DESCRIBE_GROUPS, ctx.version)
    groups = tuple(_failed_group(mod, group_id, code) for group_id in req.groups)
    return build(mod.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=groups)


def delete_groups(ctx: Context, req: Any) -> Any:
    """DeleteGroups v0-2.

    Behaviour: per group, GROUP_AUTHORIZATION_FAILED without DELETE on it (listed
    last, as Kafka does), INVALID_GROUP_ID for an empty id, NOT_COORDINATOR on another
    node, GROUP_ID_NOT_FOUND for a group with neither members nor offsets, NON_EMPTY_GROUP
    while it has members (any state but Empty); otherwise the group and all its offsets,
    committed and staged, are deleted (persisted).
    """
    mod = response_module(DELETE_GROUPS, ctx.version)
    results = []
    denied = []
    for group_id in req.groups_names:
        if not _allowed(ctx, Operation.DELETE, group_id):
            denied.append(
                build(
                    mod.DeletableGroupResult,
                    group_id=group_id,
                    error_code=ErrorCode.group_authorization_failed,
                )
            )
            continue
        if not group_id:
            code = ErrorCode.invalid_group_id
        elif _not_coordinator(ctx, group_id):
            code = ErrorCode.not_coordinator
        else:
            code = ctx.cluster.membership.delete(group_id)
        results.append(build(mod.DeletableGroupResult, group_id=group_id, error_code=code))
    return build(mod.DeleteGroupsResponse, throttle_time=NO_THROTTLE, results=(*results, *denied))


def _delete_groups_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    mod = response_module(DELETE_GROUPS, ctx.version)
    results = tuple(
        build(mod.DeletableGroupResult, group_id=g, error_code=code) for g in req.groups_names
    )
    return build(mod.DeleteGroupsResponse, throttle_time=NO_THROTTLE, results=results)


def _list_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    mod = response_module(LIST_GROUPS, ctx.version)
    return build(mod.ListGroupsResponse, throttle_time=NO_THROTTLE, error_code=code, groups=())


SPECS = (
    ApiSpec(JOIN_GROUP, "JoinGroup", 0, 9, join_group, _join_error),
    ApiSpec(HEARTBEAT, "Heartbeat", 0, 4, heartbeat, _heartbeat_error),
    ApiSpec(LEAVE_GROUP, "LeaveGroup", 0, 5, leave_group, _leave_error),
    ApiSpec(SYNC_GROUP, "SyncGroup", 0, 5, sync_group, _sync_error),
    ApiSpec(DESCRIBE_GROUPS, "DescribeGroups", 0, 6, describe_groups, _describe_error),
    ApiSpec(LIST_GROUPS, "ListGroups", 0, 5, list_groups, _list_error),
    ApiSpec(DELETE_GROUPS, "DeleteGroups", 0, 2, delete_groups, _delete_groups_error),
)
