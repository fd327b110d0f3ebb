"""Group offset APIs: OffsetCommit, OffsetFetch and OffsetDelete."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from pyspark_kafka_txn.embedded.acl import Operation, ResourceType
from pyspark_kafka_txn.embedded.dispatch import NO_THROTTLE, ApiSpec, Context
from pyspark_kafka_txn.embedded.groups import OFFSET_METADATA_MAX_BYTES
from pyspark_kafka_txn.embedded.protocol import (
    ErrorCode,
    build,
    partition_entries,
    partition_results,
    response_module,
)
from pyspark_kafka_txn.wire import (
    COORDINATOR_GROUP,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    TopicPartition,
)


def _topic_allowed(ctx: Context, operation: Operation, topic: str) -> bool:
    return ctx.allowed(operation, ResourceType.TOPIC, topic)


def _group_error(ctx: Context, group: str | None) -> ErrorCode:
    if not group:
        return ErrorCode.invalid_group_id
    if ctx.cluster.coordinator(COORDINATOR_GROUP, group) != ctx.node_id:
        return ErrorCode.not_coordinator
    return ErrorCode.none


def apply_offset(
    ctx: Context, topic: str, p: Any, apply: Callable[[TopicPartition, int, int, str | None], None]
) -> ErrorCode:
    """What OffsetCommit and TxnOffsetCommit do with one offset of a permitted topic.

    The partition must exist (else UNKNOWN_TOPIC_OR_PARTITION) and its metadata fit (else
    OFFSET_METADATA_TOO_LARGE); then ``apply(partition, offset, leader epoch, metadata)``
    commits or stages it.
    """
    if ctx.cluster.partition(topic, p.partition_index) is None:
        return ErrorCode.unknown_topic_or_partition
    if len(p.committed_metadata or "") > OFFSET_METADATA_MAX_BYTES:
        return ErrorCode.offset_metadata_too_large
    epoch = getattr(p, "committed_leader_epoch", -1)
    apply(TopicPartition(topic, p.partition_index), p.committed_offset, epoch, p.committed_metadata)
    return ErrorCode.none


def offset_commit(ctx: Context, req: Any) -> Any:
    """OffsetCommit v2-9.

    Behaviour: without READ on the group every partition GROUP_AUTHORIZATION_FAILED; the
    partitions of a topic without READ TOPIC_AUTHORIZATION_FAILED, whatever else fails
    (when every topic is refused the group is not touched); empty group id
    INVALID_GROUP_ID; wrong node NOT_COORDINATOR; member and generation validated by the
    membership state (generation -1 with no member id is accepted for a group without
    members; a generation for a group that does not exist is GROUP_ID_NOT_FOUND from v9,
    ILLEGAL_GENERATION before); unknown topics/partitions get UNKNOWN_TOPIC_OR_PARTITION
    while the others are committed; metadata over 4096 characters
    OFFSET_METADATA_TOO_LARGE. The offset value itself is not validated.
    """
    cluster = ctx.cluster
    group = req.group_id
    if not ctx.allowed(Operation.READ, ResourceType.GROUP, group or ""):
        return offset_commit_error(ctx, req, ErrorCode.group_authorization_failed)
    allowed = {t.name for t in req.topics if _topic_allowed(ctx, Operation.READ, t.name)}
    top = _group_error(ctx, group)
    if top is ErrorCode.none and (allowed or not req.topics):
        top = cluster.membership.validate_offset_commit(
            group,
            req.generation_id_or_member_epoch,
            req.member_id or "",
            getattr(req, "group_instance_id", None),
            transactional=False,
        )
        if top is ErrorCode.group_id_not_found and ctx.version < 9:
            top = ErrorCode.illegal_generation  # pre-v9 clients know no GROUP_ID_NOT_FOUND

    commit_offset = functools.partial(cluster.offsets.commit, group)

    def commit(topic: str, p: Any) -> ErrorCode:
        if topic not in allowed:
            return ErrorCode.topic_authorization_failed
        if top is not ErrorCode.none:
            return top
        return apply_offset(ctx, topic, p, commit_offset)

    return commit_response(ctx, req, OFFSET_COMMIT, commit)


def commit_response(
    ctx: Context, req: Any, api_key: int, code_for: Callable[[str, Any], ErrorCode]
) -> Any:
    """The OffsetCommit or TxnOffsetCommit (``api_key``) response: one result per requested
    partition; ``code_for(topic, partition)`` is called once per entry, in request order."""
    name = "OffsetCommit" if api_key == OFFSET_COMMIT else "TxnOffsetCommit"
    mod = response_module(api_key, ctx.version)
    topics = partition_results(
        req.topics,
        getattr(mod, f"{name}ResponseTopic"),
        getattr(mod, f"{name}ResponsePartition"),
        code_for,
    )
    return build(getattr(mod, f"{name}Response"), throttle_time=NO_THROTTLE, topics=topics)


def _fetch_group(
    ctx: Context,
    mod: Any,
    group: str,
    topics: Any,
    require_stable: bool,
    names: tuple[str, str, str],
) -> tuple[ErrorCode, tuple[Any, ...]]:
    topic_cls, part_cls, _ = names
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, group or ""):
        return ErrorCode.group_authorization_failed, ()
    top = _group_error(ctx, group)
    offsets = ctx.cluster.offsets
    if top is not ErrorCode.none:
        return top, ()
    wanted: dict[str, list[int]] = {}
    denied: dict[str, list[int]] = {}
    if topics is None:
        # Every committed partition, less the topics the principal may not describe.
        visible: dict[str, bool] = {}
        for t, p in offsets.committed_partitions(group):
            if t not in visible:
                visible[t] = _topic_allowed(ctx, Operation.DESCRIBE, t)
            if visible[t]:
                wanted.setdefault(t, []).append(p)
    else:
        for t in topics:
            allowed = _topic_allowed(ctx, Operation.DESCRIBE, t.name)
            (wanted if allowed else denied)[t.name] = list(t.partition_indexes)
    out = []
    # Kafka lists the requested topics it refused after the others.
    for name, indexes in (*wanted.items(), *denied.items()):
        parts = []
        for index in indexes:
            if name in denied:
                code, value = ErrorCode.topic_authorization_failed, None
            else:
                code, value = offsets.fetch(
                    group, TopicPartition(name, index), require_stable=require_stable
                )
            parts.append(
                build(
                    getattr(mod, part_cls),
                    partition_index=index,
                    committed_offset=value.offset if value else -1,
                    committed_leader_epoch=value.leader_epoch if value else -1,
                    metadata=(value.metadata if value else "") or "",
                    error_code=code,
                )
            )
        out.append(build(getattr(mod, topic_cls), name=name, partitions=tuple(parts)))
    return ErrorCode.none, tuple(out)


def offset_fetch(ctx: Context, req: Any) -> Any:
    """OffsetFetch v1-9.

    Behaviour: without DESCRIBE on the group GROUP_AUTHORIZATION_FAILED (top level
    before v8, per group from v8; v1 puts it on every requested partition, as it has no
    top-level error); committed offsets (-1 when none, no error, no topic existence
    check); requested topics without DESCRIBE get TOPIC_AUTHORIZATION_FAILED per
    partition, listed after the others; a null topic list returns every partition with a
    committed offset of the topics the principal may describe; with RequireStable (v7+) a
    partition with a staged transactional offset gets UNSTABLE_OFFSET_COMMIT; v8+ is
    batched by group.
    """
    mod = response_module(OFFSET_FETCH, ctx.version)
    stable = getattr(req, "require_stable", False)
    if ctx.version >= 8:
        groups = []
        for g in req.groups:
            code, topics = _fetch_group(
                ctx,
                mod,
                g.group_id,
                g.topics,
                stable,
                ("OffsetFetchResponseTopics", "OffsetFetchResponsePartitions", ""),
            )
            groups.append(
                build(
                    mod.OffsetFetchResponseGroup,
                    group_id=g.group_id,
                    topics=topics,
                    error_code=code,
                )
            )
        return build(mod.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))
    code, topics = _fetch_group(
        ctx,
        mod,
        req.group_id,
        req.topics,
        stable,
        ("OffsetFetchResponseTopic", "OffsetFetchResponsePartition", ""),
    )
    if code is not ErrorCode.none and ctx.version < 2:
        # v0-1 have no top-level error: report it on every requested partition.
        failed = {"committed_offset": -1, "metadata": "", "error_code": code}
        topics = partition_entries(
            req.topics or (),
            mod.OffsetFetchResponseTopic,
            mod.OffsetFetchResponsePartition,
            lambda _topic, _i: failed,
            request_partitions="partition_indexes",
        )
    return build(mod.OffsetFetchResponse, throttle_time=NO_THROTTLE, topics=topics, error_code=code)


def offset_delete(ctx: Context, req: Any) -> Any:
    """OffsetDelete v0.

    Behaviour: without DELETE on the group GROUP_AUTHORIZATION_FAILED, else
    INVALID_GROUP_ID, NOT_COORDINATOR, or GROUP_ID_NOT_FOUND (neither members nor
    offsets) for the whole request; per partition TOPIC_AUTHORIZATION_FAILED for a topic
    without READ, UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist,
    GROUP_SUBSCRIBED_TO_TOPIC while a live member consumes the topic (consumer protocol
    subscriptions; any other protocol type with members counts as subscribed); otherwise
    the committed offset is deleted (persisted; none is no error). In the answer, as Kafka
    4.4 orders it (measured), the partitions refused before the group is consulted
    (authorization, unknown topic or partition) come first, then the others; one entry
    per topic name.
    """
    cluster = ctx.cluster
    mod = response_module(OFFSET_DELETE, ctx.version)
    group = req.group_id
    if not ctx.allowed(Operation.DELETE, ResourceType.GROUP, group or ""):
        return _offset_delete_error(ctx, req, ErrorCode.group_authorization_failed)
    top = _group_error(ctx, group)
    if top is ErrorCode.none and cluster.membership.group(group) is None:
        top = ErrorCode.group_id_not_found
    if top is not ErrorCode.none:
        return _offset_delete_error(ctx, req, top)
    # As Kafka's handleOffsetDeleteRequest: the partitions that fail before the group
    # coordinator sees them come first in the answer, the coordinator's results are merged
    # in after them (topic by topic).
    answered: dict[str, list[Any]] = {}

    def answer(topic: str, index: int, code: ErrorCode) -> None:
        answered.setdefault(topic, []).append(
            build(mod.OffsetDeleteResponsePartition, partition_index=index, error_code=code)
        )

    valid: list[TopicPartition] = []
    for t in req.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if not _topic_allowed(ctx, Operation.READ, t.name):
                answer(*tp, ErrorCode.topic_authorization_failed)
            elif cluster.partition(*tp) is None:
                answer(*tp, ErrorCode.unknown_topic_or_partition)
            else:
                valid.append(tp)
    for tp in valid:
        if cluster.membership.subscribes_to(group, tp[0]):
            answer(*tp, ErrorCode.group_subscribed_to_topic)
        else:
            cluster.offsets.delete_offsets(group, [tp])
            answer(*tp, ErrorCode.none)
    topics = tuple(
        build(mod.OffsetDeleteResponseTopic, name=name, partitions=tuple(parts))
        for name, parts in answered.items()
    )
    return build(
        mod.OffsetDeleteResponse,
        error_code=ErrorCode.none,
        throttle_time=NO_THROTTLE,
        topics=topics,
    )


def _offset_delete_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    mod = response_module(OFFSET_DELETE, ctx.version)
    return build(mod.OffsetDeleteResponse, error_code=code, throttle_time=NO_THROTTLE, topics=())


def offset_commit_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    """OffsetCommit: every partition fails with ``code`` (nothing committed)."""
    return commit_response(ctx, req, OFFSET_COMMIT, lambda _topic, _p: code)


SPECS = (
    ApiSpec(OFFSET_COMMIT, "OffsetCommit", 2, 9, offset_commit, offset_commit_error),
    ApiSpec(OFFSET_FETCH, "OffsetFetch", 1, 9, offset_fetch),
    ApiSpec(OFFSET_DELETE, "OffsetDelete", 0, 0, offset_delete, _offset_delete_error),
)
