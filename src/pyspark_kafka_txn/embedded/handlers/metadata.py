"""Discovery APIs: ApiVersions, Metadata, FindCoordinator.

What a client asks before anything else: which APIs and versions the broker serves, the
brokers, topics, partitions and leaders of the cluster (creating a topic on demand when
``auto.create.topics.enable`` is on), and which node coordinates a group or a
transactional id. Each API's error response (for the ``error`` fault action) is built
next to its handler.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from pyspark_kafka_txn.embedded.acl import CLUSTER_NAME, Operation, ResourceType
from pyspark_kafka_txn.embedded.cluster import (
    INTERNAL_TOPICS,
    TRANSACTION_STATE_TOPIC,
    Topic,
    TopicError,
)
from pyspark_kafka_txn.embedded.dispatch import (
    NO_AUTHORIZED_OPS,
    NO_THROTTLE,
    ApiSpec,
    Context,
)
from pyspark_kafka_txn.embedded.groups import OFFSETS_TOPIC
from pyspark_kafka_txn.embedded.handlers.topics import creatable, describable
from pyspark_kafka_txn.embedded.protocol import ErrorCode, build, response_module
from pyspark_kafka_txn.wire import (
    API_VERSIONS,
    COORDINATOR_GROUP,
    COORDINATOR_TXN,
    FIND_COORDINATOR,
    METADATA,
)

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def api_versions(ctx: Context, req: Any) -> Any:
    """ApiVersions v0-4.

    Behaviour: lists every served API from the dispatch table; v3+ validates the client
    software name/version (INVALID_REQUEST) and reports the ``transaction.version``
    feature (supported 0-2, finalized at the cluster's level, epoch 0), omitting
    supported features whose minimum is 0 for requests below v4 as Kafka does. A request
    above v4 is answered by the server with the v0-body UNSUPPORTED_VERSION fallback.
    """
    mod = response_module(API_VERSIONS, ctx.version)
    keys = tuple(
        build(
            mod.ApiVersion, api_key=s.api_key, min_version=s.min_version, max_version=s.max_version
        )
        for s in sorted(ctx.apis.values(), key=lambda s: s.api_key)
    )
    error = ErrorCode.none
    if ctx.version >= 3 and not (
        _SOFTWARE.fullmatch(req.client_software_name or "")
        and _SOFTWARE.fullmatch(req.client_software_version or "")
    ):
        error = ErrorCode.invalid_request
    level = ctx.cluster.config.transaction_version
    supported: tuple[Any, ...] = ()
    finalized: tuple[Any, ...] = ()
    if ctx.version >= 3:
        if ctx.version >= 4:
            supported = (
                build(
                    mod.SupportedFeatureKey,
                    name="transaction.version",
                    min_version=0,
                    max_version=2,
                ),
            )
        finalized = (
            build(
                mod.FinalizedFeatureKey,
                name="transaction.version",
                max_version_level=level,
                min_version_level=level,
            ),
        )
    return build(
        mod.ApiVersionsResponse,
        error_code=error,
        api_keys=keys,
        throttle_time=NO_THROTTLE,
        supported_features=supported,
        finalized_features_epoch=0 if ctx.version >= 3 else -1,
        finalized_features=finalized,
        zk_migration_ready=False,
    )


def _topic_metadata(ctx: Context, mod: Any, topic: Topic, *, internal: bool = False) -> Any:
    cluster = ctx.cluster
    parts = []
    for index, log in enumerate(topic.partitions):
        leader = topic.leaders[index]
        up = leader in cluster.running
        parts.append(
            build(
                mod.MetadataResponsePartition,
                error_code=ErrorCode.none if up else ErrorCode.leader_not_available,
                partition_index=index,
                leader_id=leader if up else -1,
                leader_epoch=log.leader_epoch,
                replica_nodes=(leader,),
                isr_nodes=(leader,) if up else (),
                offline_replicas=() if up else (leader,),
            )
        )
    return build(
        mod.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=internal,
        partitions=tuple(parts),
        topic_authorized_operations=NO_AUTHORIZED_OPS,
    )


def metadata(ctx: Context, req: Any) -> Any:
    """Metadata v0-13.

    Behaviour: all topics for a null topic list (or an empty one in v0); unknown topics
    get UNKNOWN_TOPIC_OR_PARTITION (or UNKNOWN_TOPIC_ID when asked by id) unless
    auto-creation is both enabled on the cluster and allowed by the request; partitions
    whose leader is stopped get LEADER_NOT_AVAILABLE. Topic ids are real UUIDs. The
    internal topics (``__consumer_offsets``, ``__transaction_state``: 50 partitions each,
    led by their coordinators, ``is_internal``) are listed once used (a FindCoordinator,
    or asked for by name), as Kafka creates them on first use; their logs are empty here
    (the coordinators keep their state in their own structures). Asked for
    (v8+), authorized operations are every operation Kafka supports on a topic (on the
    cluster: v8-10), as Kafka answers without an authorizer; with one, the operations
    the principal may perform. ACLs: topics without DESCRIBE are left out of an
    all-topics answer and get TOPIC_AUTHORIZATION_FAILED when named (whether or not
    they exist; by id the name stays null); auto-creation needs CREATE on the cluster or
    the topic (else TOPIC_AUTHORIZATION_FAILED); cluster authorized operations are 0
    without DESCRIBE on the cluster. Simplifications: one replica per partition.
    """
    cluster = ctx.cluster
    mod = response_module(METADATA, ctx.version)
    wanted = req.topics
    if wanted is None or (ctx.version == 0 and not wanted):
        topics = [
            _topic_metadata(ctx, mod, t)
            for t in cluster.topics.values()
            if describable(ctx, t.name)
        ]
        for name in sorted(cluster.internal_logs):
            if describable(ctx, name):
                topics.append(
                    _topic_metadata(ctx, mod, cluster.internal_topic(name), internal=True)
                )
    else:
        topics = []
        allow_auto = getattr(req, "allow_auto_topic_creation", True)
        for item in wanted:
            name = item.name
            topic_id = getattr(item, "topic_id", None)
            if name is None and topic_id is not None:
                found = cluster.topics_by_id.get(topic_id)
                if found is None:
                    topics.append(
                        topic_without_partitions(mod, None, topic_id, ErrorCode.unknown_topic_id)
                    )
                    continue
                name = found.name
            if not describable(ctx, name):
                topics.append(
                    topic_without_partitions(
                        mod,
                        None if topic_id is not None and item.name is None else name,
                        topic_id,
                        ErrorCode.topic_authorization_failed,
                    )
                )
                continue
            if name in INTERNAL_TOPICS:  # created on first use, as by Kafka
                cluster.use_internal_topic(name)
                topics.append(
                    _topic_metadata(ctx, mod, cluster.internal_topic(name), internal=True)
                )
                continue
            topic = cluster.topics.get(name)
            if topic is None and allow_auto and cluster.config.auto_create_topics:
                if not creatable(ctx, name):
                    topics.append(
                        topic_without_partitions(
                            mod, name, None, ErrorCode.topic_authorization_failed
                        )
                    )
                    continue
                try:
                    topic = cluster.create_topic(name)
                except TopicError as exc:
                    topics.append(topic_without_partitions(mod, name, None, exc.code))
                    continue
            if topic is None:
                topics.append(
                    topic_without_partitions(mod, name, None, ErrorCode.unknown_topic_or_partition)
                )
            else:
                topics.append(_topic_metadata(ctx, mod, topic))
    if ctx.version >= 8 and getattr(req, "include_topic_authorized_operations", False):
        topics = [
            t
            if t.error_code is ErrorCode.topic_authorization_failed
            else dataclasses.replace(
                t,
                topic_authorized_operations=ctx.authorized_operations(ResourceType.TOPIC, t.name),
            )
            for t in topics
        ]
    cluster_ops = NO_AUTHORIZED_OPS
    if 8 <= ctx.version <= 10 and getattr(req, "include_cluster_authorized_operations", False):
        cluster_ops = (
            ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
            if ctx.cluster_allowed(Operation.DESCRIBE)
            else 0
        )
    return _metadata_response(ctx, mod, topics, cluster_ops)


def _metadata_response(
    ctx: Context, mod: Any, topics: Iterable[Any], cluster_ops: int = NO_AUTHORIZED_OPS
) -> Any:
    """A Metadata response listing ``topics``: the running brokers, the cluster id and the
    controller (the lowest running node, -1 when none runs)."""
    cluster = ctx.cluster
    brokers = tuple(
        build(mod.MetadataResponseBroker, node_id=n, host=h, port=p, rack=None)
        for n, (h, p) in sorted(cluster.addresses.items())
        if n in cluster.running
    )
    return build(
        mod.MetadataResponse,
        throttle_time=NO_THROTTLE,
        brokers=brokers,
        cluster_id=cluster.config.cluster_id,
        controller_id=min(cluster.running) if cluster.running else -1,
        topics=tuple(topics),
        cluster_authorized_operations=cluster_ops,
        error_code=ErrorCode.none,
    )


def topic_without_partitions(mod: Any, name: str | None, topic_id: Any, code: ErrorCode) -> Any:
    """A Metadata topic entry carrying only a topic-level error."""
    return build(
        mod.MetadataResponseTopic,
        error_code=code,
        name=name,
        topic_id=topic_id,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=NO_AUTHORIZED_OPS,
    )


def metadata_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    """Metadata: the live brokers, and every topic asked for (all, for a null list)
    with a topic-level ``code`` and no partitions, as Kafka reports e.g.
    LEADER_NOT_AVAILABLE for a topic still being created."""
    cluster = ctx.cluster
    mod = response_module(METADATA, ctx.version)
    wanted: list[tuple[str | None, Any]]
    if req.topics is None or (ctx.version == 0 and not req.topics):
        wanted = [(t.name, t.topic_id) for t in cluster.topics.values()]
    else:
        wanted = [(t.name, getattr(t, "topic_id", None)) for t in req.topics]
    return _metadata_response(
        ctx, mod, (topic_without_partitions(mod, name, topic_id, code) for name, topic_id in wanted)
    )


class _Answer(NamedTuple):
    """FindCoordinator's answer for one key, named as the response fields (at the top level
    before v4, one ``Coordinator`` per key from v4); -1 / empty where there is no node."""

    error_code: ErrorCode
    error_message: str | None = None
    node_id: int = -1
    host: str = ""
    port: int = -1


def _coordinator_response(ctx: Context, req: Any, answer: Callable[[str], _Answer]) -> Any:
    """The FindCoordinator response: ``answer(key)`` for the key (v0-3) or for every key,
    in request order (v4+)."""
    mod = response_module(FIND_COORDINATOR, ctx.version)
    if ctx.version >= 4:
        coords = tuple(
            build(mod.Coordinator, key=key, **answer(key)._asdict()) for key in req.coordinator_keys
        )
        return build(mod.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=coords)
    return build(
        mod.FindCoordinatorResponse, throttle_time=NO_THROTTLE, **answer(req.key)._asdict()
    )


def find_coordinator(ctx: Context, req: Any) -> Any:
    """FindCoordinator v0-6.

    Behaviour: key type 0 (group) and 1 (transaction, v1+); v4+ batched keys. The
    coordinator is the node owning the key's partition of the internal topic
    (``abs(hashCode) % 50`` spread over the nodes, movable by fault injection); an
    unknown key type gets INVALID_REQUEST, a stopped coordinator
    COORDINATOR_NOT_AVAILABLE. ACLs: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED)
    or the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
    """
    cluster = ctx.cluster
    key_type = getattr(req, "key_type", COORDINATOR_GROUP)

    def lookup(key: str) -> _Answer:
        if key_type == COORDINATOR_GROUP and not ctx.allowed(
            Operation.DESCRIBE, ResourceType.GROUP, key
        ):
            return _Answer(ErrorCode.group_authorization_failed)
        if key_type == COORDINATOR_TXN and not ctx.allowed(
            Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
        ):
            return _Answer(ErrorCode.transactional_id_authorization_failed)
        if key_type not in (COORDINATOR_GROUP, COORDINATOR_TXN):
            return _Answer(ErrorCode.invalid_request, f"unsupported key type {key_type}")
        if key_type == COORDINATOR_TXN and not key:
            return _Answer(ErrorCode.invalid_request, "empty transactional id")
        cluster.use_internal_topic(
            OFFSETS_TOPIC if key_type == COORDINATOR_GROUP else TRANSACTION_STATE_TOPIC
        )
        node = cluster.coordinator(key_type, key)
        if node not in cluster.running:
            return _Answer(ErrorCode.coordinator_not_available)
        host, port = cluster.addresses[node]
        # An empty message on success, not null (measured on Apache Kafka 4.4.0, v4).
        return _Answer(ErrorCode.none, "", node, host, port)

    return _coordinator_response(ctx, req, lookup)


def find_coordinator_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    """FindCoordinator: ``code`` for the key (v0-3) or for every key (v4+)."""
    return _coordinator_response(ctx, req, lambda _key: _Answer(code))


SPECS = (
    ApiSpec(API_VERSIONS, "ApiVersions", 0, 4, api_versions),
    ApiSpec(METADATA, "Metadata", 0, 13, metadata, metadata_error),
    ApiSpec(FIND_COORDINATOR, "FindCoordinator", 0, 6, find_coordinator, find_coordinator_error),
)
