"""Cluster-level APIs: ApiVersions, Metadata, CreateTopics, DeleteTopics,
FindCoordinator, DescribeConfigs."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from pyspark_kafka_txn.embedded.acl import CLUSTER_NAME, Operation, ResourceType
from pyspark_kafka_txn.embedded.cluster import (
    INTERNAL_TOPICS,
    TOPIC_CONFIG_DEFAULTS,
    TRANSACTION_STATE_TOPIC,
    Topic,
    TopicError,
    validate_topic_config,
    validate_topic_name,
)
from pyspark_kafka_txn.embedded.dispatch import (
    NO_AUTHORIZED_OPS,
    NO_THROTTLE,
    ApiSpec,
    Context,
)
from pyspark_kafka_txn.embedded.groups import OFFSETS_TOPIC
from pyspark_kafka_txn.embedded.handlers import errors
from pyspark_kafka_txn.embedded.protocol import ErrorCode, build, response_module
from pyspark_kafka_txn.embedded.topic_config import TOPIC_CONFIGS, ConfigType
from pyspark_kafka_txn.embedded.wire import (
    ALTER_CONFIGS,
    API_VERSIONS,
    APPEND,
    BROKER_RESOURCE,
    COORDINATOR_GROUP,
    COORDINATOR_TXN,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    FIND_COORDINATOR,
    GROUP_RESOURCE,
    INCREMENTAL_ALTER_CONFIGS,
    METADATA,
    SET,
    SUBTRACT,
    TOPIC_RESOURCE,
)

# Kafka 4.0's group configs (GroupConfig) and their defaults, which a group without
# overrides reports: the KIP-848 consumer and KIP-932 share group settings.
GROUP_CONFIG_DEFAULTS = {
    "consumer.heartbeat.interval.ms": "5000",
    "consumer.session.timeout.ms": "45000",
    "share.heartbeat.interval.ms": "5000",
    "share.record.lock.duration.ms": "30000",
    "share.session.timeout.ms": "45000",
}
# The messages of Kafka's authorization exceptions.
_DENIED = {
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
}
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


def _describable(ctx: Context, topic: str) -> bool:
    return ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, topic)


def _deletable(ctx: Context, topic: str) -> bool:
    return ctx.cluster_allowed(Operation.DELETE) or ctx.allowed(
        Operation.DELETE, ResourceType.TOPIC, topic
    )


def _creatable(ctx: Context, topic: str) -> bool:
    """CREATE on the cluster, or on the topic (Kafka's CreateTopics and auto-creation)."""
    return ctx.cluster_allowed(Operation.CREATE) or ctx.allowed(
        Operation.CREATE, ResourceType.TOPIC, topic
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
            if _describable(ctx, t.name)
        ]
        for name in sorted(cluster.internal_logs):
            if _describable(ctx, name):
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
                        errors.topic_without_partitions(
                            mod, None, topic_id, ErrorCode.unknown_topic_id
                        )
                    )
                    continue
                name = found.name
            if not _describable(ctx, name):
                topics.append(
                    errors.topic_without_partitions(
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
                if not _creatable(ctx, name):
                    topics.append(
                        errors.topic_without_partitions(
                            mod, name, None, ErrorCode.topic_authorization_failed
                        )
                    )
                    continue
                try:
                    topic = cluster.create_topic(name)
                except TopicError as exc:
                    topics.append(errors.topic_without_partitions(mod, name, None, exc.code))
                    continue
            if topic is None:
                topics.append(
                    errors.topic_without_partitions(
                        mod, name, None, ErrorCode.unknown_topic_or_partition
                    )
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
    return build(
        mod.MetadataResponse,
        throttle_time=NO_THROTTLE,
        brokers=errors.metadata_brokers(ctx, mod),
        cluster_id=cluster.config.cluster_id,
        controller_id=min(cluster.running) if cluster.running else -1,
        topics=tuple(topics),
        cluster_authorized_operations=cluster_ops,
        error_code=ErrorCode.none,
    )


def create_topics(ctx: Context, req: Any) -> Any:
    """CreateTopics v2-7.

    Behaviour: validates names (INVALID_TOPIC_EXCEPTION), duplicates within the request
    (INVALID_REQUEST), existing topics (TOPIC_ALREADY_EXISTS), partition counts
    (INVALID_PARTITIONS), replication factor above the broker count
    (INVALID_REPLICATION_FACTOR), unknown configs (INVALID_CONFIG); ``validate_only``
    checks without creating. ACLs: CREATE on the cluster or the topic, else
    TOPIC_AUTHORIZATION_FAILED; the created topic's configs, partition count and
    replication factor are returned only with DESCRIBE_CONFIGS on it (else
    ``topic_config_error_code`` TOPIC_AUTHORIZATION_FAILED, no configs, -1 and -1).
    Simplifications: one replica; explicit assignments only choose the leader (first
    broker of each list).
    """
    cluster = ctx.cluster
    mod = response_module(CREATE_TOPICS, ctx.version)
    names = [t.name for t in req.topics]
    results = []
    for item in req.topics:
        code, message, topic = ErrorCode.none, None, None
        configs = {c.name: c.value for c in item.configs}
        try:
            if names.count(item.name) > 1:
                raise TopicError(ErrorCode.invalid_request, f"topic {item.name!r} listed twice")
            if not _creatable(ctx, item.name):
                raise TopicError(ErrorCode.topic_authorization_failed, "Authorization failed.")
            rf = item.replication_factor
            if rf != -1 and (rf <= 0 or rf > len(cluster.node_ids)):
                raise TopicError(
                    ErrorCode.invalid_replication_factor,
                    f"replication factor {rf} is not in 1..{len(cluster.node_ids)}",
                )
            partitions = item.num_partitions
            if item.assignments:
                partitions = len(item.assignments)
            if req.validate_only:
                probe = _validate_only(ctx, item.name, partitions, configs)
                code, message = probe
            else:
                topic = cluster.create_topic(item.name, partitions, configs)
                for a in item.assignments:
                    if a.broker_ids and a.broker_ids[0] in cluster.node_ids:
                        topic.leaders[a.partition_index] = a.broker_ids[0]
        except TopicError as exc:
            code, message = exc.code, str(exc)
        config_error = ErrorCode.none
        if topic is not None and not ctx.allowed(
            Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, topic.name
        ):
            config_error = ErrorCode.topic_authorization_failed
        shown = topic is not None and config_error is ErrorCode.none
        count = len(topic.partitions) if topic is not None and shown else -1
        results.append(
            build(
                mod.CreatableTopicResult,
                name=item.name,
                topic_id=topic.topic_id if topic else None,
                error_code=code,
                error_message=message,
                topic_config_error_code=config_error,
                num_partitions=count,
                replication_factor=1 if shown else -1,
                configs=(
                    _creatable_configs(mod, topic)
                    if topic is not None and shown
                    else (None if topic is None else ())
                ),
            )
        )
    return build(mod.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=tuple(results))


def _validate_only(
    ctx: Context, name: str, partitions: int, configs: dict[str, str]
) -> tuple[ErrorCode, str | None]:
    validate_topic_name(name)
    if name in ctx.cluster.topics:
        return ErrorCode.topic_already_exists, f"topic {name!r} already exists"
    if partitions == 0 or partitions < -1:
        return ErrorCode.invalid_partitions, f"number of partitions must be > 0, got {partitions}"
    try:
        validate_topic_config(configs)
    except TopicError as exc:
        return exc.code, str(exc)
    return ErrorCode.none, None


def _creatable_configs(mod: Any, topic: Topic) -> tuple[Any, ...]:
    if not hasattr(mod, "CreatableTopicConfigs"):
        return ()
    return tuple(
        build(
            mod.CreatableTopicConfigs,
            name=key,
            value=topic.config_value(key),
            read_only=False,
            config_source=1 if key in topic.config else 5,
            is_sensitive=False,
        )
        for key in sorted(TOPIC_CONFIG_DEFAULTS)
    )


def _config_refusal(ctx: Context, res: Any, operation: Operation) -> ErrorCode | None:
    """The authorization error of a config resource (topic, broker or group), if any."""
    if res.resource_type == TOPIC_RESOURCE:
        if not ctx.allowed(operation, ResourceType.TOPIC, res.resource_name):
            return ErrorCode.topic_authorization_failed
    elif res.resource_type == BROKER_RESOURCE:
        if not ctx.cluster_allowed(operation):
            return ErrorCode.cluster_authorization_failed
    elif res.resource_type == GROUP_RESOURCE and not ctx.allowed(
        operation, ResourceType.GROUP, res.resource_name
    ):
        return ErrorCode.group_authorization_failed
    return None


def _alter_resources(
    ctx: Context, req: Any, api: int, new_config: Callable[[Topic, Any], dict[str, str | None]]
) -> Any:
    """AlterConfigs and IncrementalAlterConfigs: validate each resource, then apply."""
    mod = response_module(api, ctx.version)
    seen = [(r.resource_type, r.resource_name) for r in req.resources]
    responses = []
    for res in req.resources:
        code, message = ErrorCode.none, None
        try:
            if seen.count((res.resource_type, res.resource_name)) > 1:
                raise TopicError(ErrorCode.invalid_request, "Duplicate resource in the request.")
            refusal = _config_refusal(ctx, res, Operation.ALTER_CONFIGS)
            if refusal is not None:
                raise TopicError(refusal, _DENIED[refusal])
            if res.resource_type == BROKER_RESOURCE:
                raise TopicError(
                    ErrorCode.invalid_request,
                    "broker configs are static on the embedded cluster (set them on ClusterConfig)",
                )
            if res.resource_type != TOPIC_RESOURCE:
                raise TopicError(
                    ErrorCode.invalid_request, f"unsupported resource type {res.resource_type}"
                )
            topic = ctx.cluster.topics.get(res.resource_name)
            if topic is None:
                raise TopicError(
                    ErrorCode.unknown_topic_or_partition,
                    f"This server does not host this topic: {res.resource_name!r}",
                )
            names = [c.name for c in res.configs]
            if len(set(names)) != len(names):
                raise TopicError(ErrorCode.invalid_request, "Error due to duplicate config keys")
            ctx.cluster.alter_topic_config(
                topic.name, new_config(topic, res), validate_only=req.validate_only
            )
        except TopicError as exc:
            code, message = exc.code, str(exc)
        responses.append(
            build(
                mod.AlterConfigsResourceResponse,
                error_code=code,
                error_message=message,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
            )
        )
    response = (
        mod.AlterConfigsResponse if api == ALTER_CONFIGS else mod.IncrementalAlterConfigsResponse
    )
    return build(response, throttle_time=NO_THROTTLE, responses=tuple(responses))


def alter_configs(ctx: Context, req: Any) -> Any:
    """AlterConfigs v0-2.

    Behaviour: a topic's explicit configs become exactly the ones given (the others go
    back to their defaults), each checked as CreateTopics checks them (INVALID_CONFIG);
    unknown topics UNKNOWN_TOPIC_OR_PARTITION; a resource named twice, broker resources
    (static here) and other resource types INVALID_REQUEST; ``validate_only`` changes
    nothing. Persisted. ACLs: ALTER_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED)
    or the cluster for brokers (CLUSTER_AUTHORIZATION_FAILED).
    """
    return _alter_resources(
        ctx, req, ALTER_CONFIGS, lambda _topic, res: {c.name: c.value for c in res.configs}
    )


def incremental_alter_configs(ctx: Context, req: Any) -> Any:
    """IncrementalAlterConfigs v0-1.

    Behaviour: per config SET, DELETE (back to the default), APPEND and SUBTRACT (list
    configs only, on the current value, explicit or default; INVALID_CONFIG otherwise);
    a config named twice INVALID_REQUEST; otherwise as AlterConfigs.
    """

    def changed(topic: Topic, res: Any) -> dict[str, str | None]:
        config: dict[str, str | None] = dict(topic.config)
        for c in res.configs:
            op = c.config_operation
            key = TOPIC_CONFIGS.get(c.name)
            if key is None:
                raise TopicError(ErrorCode.invalid_config, f"Unknown topic config name: {c.name}")
            if op == SET:
                config[c.name] = c.value
            elif op == DELETE:
                config.pop(c.name, None)
            elif op in (APPEND, SUBTRACT):
                if key.type is not ConfigType.LIST:
                    verb = "append" if op == APPEND else "subtract"
                    raise TopicError(
                        ErrorCode.invalid_config,
                        f"Config value {verb} is not allowed for config key: {c.name}",
                    )
                current = [v for v in topic.config_value(c.name).split(",") if v]
                given = [v.strip() for v in (c.value or "").split(",") if v.strip()]
                if op == APPEND:
                    current += [v for v in given if v not in current]
                else:
                    current = [v for v in current if v not in given]
                config[c.name] = ",".join(current)
            else:
                raise TopicError(ErrorCode.invalid_request, f"unknown config operation {op}")
        return config

    return _alter_resources(ctx, req, INCREMENTAL_ALTER_CONFIGS, changed)


def create_partitions(ctx: Context, req: Any) -> Any:
    """CreatePartitions v0-3.

    Behaviour: grows each topic to ``count`` partitions. Unknown topics get
    UNKNOWN_TOPIC_OR_PARTITION, a topic named twice INVALID_REQUEST, a count that is not
    an increase INVALID_PARTITIONS, assignments of the wrong number, with unknown brokers
    or another replica count than the topic's INVALID_REPLICA_ASSIGNMENT (Kafka's
    messages); ``validate_only`` checks without growing. New partitions are empty, led by
    the first broker of their assignment or placed round-robin, and announced by Metadata
    at once; ``timeout_ms`` is not needed (nothing to wait for). ACLs: ALTER on the
    topic, else TOPIC_AUTHORIZATION_FAILED. Simplification: one replica per partition.
    """
    mod = response_module(CREATE_PARTITIONS, ctx.version)
    names = [t.name for t in req.topics]
    results = []
    for item in req.topics:
        code, message = ErrorCode.none, None
        try:
            if names.count(item.name) > 1:
                raise TopicError(ErrorCode.invalid_request, "Duplicate topic name.")
            if not ctx.allowed(Operation.ALTER, ResourceType.TOPIC, item.name):
                raise TopicError(
                    ErrorCode.topic_authorization_failed,
                    _DENIED[ErrorCode.topic_authorization_failed],
                )
            assignments = (
                None
                if item.assignments is None
                else [[int(b) for b in a.broker_ids] for a in item.assignments]
            )
            ctx.cluster.add_partitions(
                item.name, item.count, assignments, validate_only=req.validate_only
            )
        except TopicError as exc:
            code, message = exc.code, str(exc)
        results.append(
            build(mod.CreatePartitionsTopicResult, name=item.name, error_code=code,
                  error_message=message)
        )  # fmt: skip
    return build(mod.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=tuple(results))


def delete_topics(ctx: Context, req: Any) -> Any:
    """DeleteTopics v1-6.

    Behaviour: unknown names get UNKNOWN_TOPIC_OR_PARTITION, unknown ids
    UNKNOWN_TOPIC_ID; the topic's partitions, logs and committed offsets are removed.
    ACLs (as Kafka's controller): DELETE on the cluster allows every deletion; otherwise
    a name the principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED whether or not it
    exists, then unknown names UNKNOWN_TOPIC_OR_PARTITION, then a topic without DELETE
    TOPIC_AUTHORIZATION_FAILED; an unknown id is UNKNOWN_TOPIC_ID, a known one without
    DELETE TOPIC_AUTHORIZATION_FAILED with its name only if describable.
    """
    cluster = ctx.cluster
    mod = response_module(DELETE_TOPICS, ctx.version)
    if hasattr(req, "topic_names"):
        items: list[tuple[str | None, Any]] = [(n, None) for n in req.topic_names]
    else:
        items = [(t.name, t.topic_id) for t in req.topics]
    results = []
    for name, topic_id in items:
        code, message = ErrorCode.none, None
        if name is None and topic_id is not None:
            topic = cluster.topics_by_id.get(topic_id)
            name = topic.name if topic else None
            if topic is None:
                code, message = ErrorCode.unknown_topic_id, f"unknown topic id {topic_id}"
            elif not _deletable(ctx, topic.name):
                name = topic.name if _describable(ctx, topic.name) else None
                code, message = ErrorCode.topic_authorization_failed, None
        elif not ctx.cluster_allowed(Operation.DELETE) and (
            not _describable(ctx, name or "")
            or (name in cluster.topics and not _deletable(ctx, name or ""))
        ):
            code, message = ErrorCode.topic_authorization_failed, None
        if code is ErrorCode.none:
            try:
                topic_id = cluster.topics[name].topic_id if name in cluster.topics else topic_id
                cluster.delete_topic(name or "")
            except TopicError as exc:
                code, message = exc.code, str(exc)
        results.append(
            build(
                mod.DeletableTopicResult,
                name=name,
                topic_id=topic_id,
                error_code=code,
                error_message=message,
            )
        )
    return build(mod.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))


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
    mod = response_module(FIND_COORDINATOR, ctx.version)
    key_type = getattr(req, "key_type", COORDINATOR_GROUP)

    def lookup(key: str) -> tuple[ErrorCode, str | None, int, str, int]:
        if key_type == COORDINATOR_GROUP and not ctx.allowed(
            Operation.DESCRIBE, ResourceType.GROUP, key
        ):
            return ErrorCode.group_authorization_failed, None, -1, "", -1
        if key_type == COORDINATOR_TXN and not ctx.allowed(
            Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
        ):
            return ErrorCode.transactional_id_authorization_failed, None, -1, "", -1
        if key_type not in (COORDINATOR_GROUP, COORDINATOR_TXN):
            return ErrorCode.invalid_request, f"unsupported key type {key_type}", -1, "", -1
        if key_type == COORDINATOR_TXN and not key:
            return ErrorCode.invalid_request, "empty transactional id", -1, "", -1
        cluster.use_internal_topic(
            OFFSETS_TOPIC if key_type == COORDINATOR_GROUP else TRANSACTION_STATE_TOPIC
        )
        node = cluster.coordinator(key_type, key)
        if node not in cluster.running:
            return ErrorCode.coordinator_not_available, None, -1, "", -1
        host, port = cluster.addresses[node]
        return ErrorCode.none, None, node, host, port

    if ctx.version >= 4:
        coords = []
        for key in req.coordinator_keys:
            code, msg, node, host, port = lookup(key)
            coords.append(
                build(
                    mod.Coordinator,
                    key=key,
                    node_id=node,
                    host=host,
                    port=port,
                    error_code=code,
                    error_message=msg,
                )
            )
        return build(
            mod.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=tuple(coords)
        )
    code, msg, node, host, port = lookup(req.key)
    return build(
        mod.FindCoordinatorResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        error_message=msg,
        node_id=node,
        host=host,
        port=port,
    )


def _broker_configs(ctx: Context) -> dict[str, str]:
    config = ctx.cluster.config
    return {
        "transaction.max.timeout.ms": str(config.transaction_max_timeout_ms),
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": str(
            config.transaction_abort_interval_ms
        ),
        "message.max.bytes": str(config.message_max_bytes),
        "num.partitions": str(config.num_partitions),
        "auto.create.topics.enable": str(config.auto_create_topics).lower(),
        "group.initial.rebalance.delay.ms": str(config.group_initial_rebalance_delay_ms),
        "offsets.topic.num.partitions": "50",
        "transaction.state.log.num.partitions": "50",
    }


def _config_type(resource_type: int, name: str) -> int:
    if resource_type == TOPIC_RESOURCE:
        return TOPIC_CONFIGS[name].type
    return int(ConfigType.INT) if resource_type == GROUP_RESOURCE else 0


def describe_configs(ctx: Context, req: Any) -> Any:
    """DescribeConfigs v1-4.

    Behaviour: topic (type 2), broker (type 4) and group (type 32) resources; unknown
    topics get UNKNOWN_TOPIC_OR_PARTITION, unknown brokers, an empty group name or other
    types INVALID_REQUEST; any group name, existing or not, reports Kafka 4.0's group
    config defaults (as Kafka does for a group without overrides); a non-null key list
    restricts the answer. ACLs: DESCRIBE_CONFIGS on the topic, the cluster (brokers)
    or the group, else TOPIC_/CLUSTER_/GROUP_AUTHORIZATION_FAILED; as in Kafka, the
    refused resources come after the others in the response. Simplifications: no
    synonyms, no documentation, no group config overrides.
    """
    cluster = ctx.cluster
    mod = response_module(DESCRIBE_CONFIGS, ctx.version)
    results = []
    for res in req.resources:
        code, message = ErrorCode.none, None
        values: dict[str, str] = {}
        explicit: set[str] = set()
        refusal = _config_refusal(ctx, res, Operation.DESCRIBE_CONFIGS)
        if refusal is not None:
            code, message = refusal, _DENIED[refusal]
        elif res.resource_type == TOPIC_RESOURCE:
            topic = cluster.topics.get(res.resource_name)
            if topic is None:
                code = ErrorCode.unknown_topic_or_partition
                message = f"unknown topic {res.resource_name!r}"
            else:
                values = {k: topic.config_value(k) for k in TOPIC_CONFIG_DEFAULTS}
                explicit = set(topic.config)
        elif res.resource_type == BROKER_RESOURCE:
            if res.resource_name not in ("", *(str(n) for n in cluster.node_ids)):
                code, message = ErrorCode.invalid_request, f"unknown broker {res.resource_name!r}"
            else:
                values = _broker_configs(ctx)
        elif res.resource_type == GROUP_RESOURCE:
            if not res.resource_name:
                code, message = ErrorCode.invalid_request, "Group name must not be empty"
            else:
                values = dict(GROUP_CONFIG_DEFAULTS)
        else:
            code, message = (
                ErrorCode.invalid_request,
                f"unsupported resource type {res.resource_type}",
            )
        keys = res.configuration_keys
        entries = tuple(
            build(
                mod.DescribeConfigsResourceResult,
                name=k,
                value=v,
                read_only=res.resource_type == BROKER_RESOURCE,
                config_source=(1 if k in explicit else 5),
                is_sensitive=False,
                synonyms=(),
                config_type=_config_type(res.resource_type, k),
                documentation=None,
            )
            for k, v in sorted(values.items())
            if keys is None or k in keys
        )
        results.append(
            build(
                mod.DescribeConfigsResult,
                error_code=code,
                error_message=message,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
                configs=entries,
            )
        )
    refused = set(_DENIED)
    ordered = [r for r in results if r.error_code not in refused] + [
        r for r in results if r.error_code in refused
    ]
    return build(mod.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=tuple(ordered))


SPECS = (
    ApiSpec(API_VERSIONS, "ApiVersions", 0, 4, api_versions),
    ApiSpec(METADATA, "Metadata", 0, 13, metadata, errors.metadata_error),
    ApiSpec(
        FIND_COORDINATOR, "FindCoordinator", 0, 6, find_coordinator, errors.find_coordinator_error
    ),
    ApiSpec(CREATE_TOPICS, "CreateTopics", 2, 7, create_topics),
    ApiSpec(DELETE_TOPICS, "DeleteTopics", 1, 6, delete_topics),
    ApiSpec(DESCRIBE_CONFIGS, "DescribeConfigs", 1, 4, describe_configs),
    ApiSpec(CREATE_PARTITIONS, "CreatePartitions", 0, 3, create_partitions),
    ApiSpec(ALTER_CONFIGS, "AlterConfigs", 0, 2, alter_configs),
    ApiSpec(INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 0, 1, incremental_alter_configs),
)
