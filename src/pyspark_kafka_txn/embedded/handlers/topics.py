"""Topic administration: CreateTopics, DeleteTopics, CreatePartitions.

Also the topic ACL checks these APIs and Metadata share (:func:`describable`,
:func:`creatable`, :func:`deletable`). The cluster state they change is
:class:`~pyspark_kafka_txn.embedded.cluster.Cluster`'s.
"""

from __future__ import annotations

from typing import Any

from pyspark_kafka_txn.embedded.acl import Operation, ResourceType
from pyspark_kafka_txn.embedded.cluster import (
    TOPIC_CONFIG_DEFAULTS,
    Topic,
    TopicError,
    validate_topic_config,
    validate_topic_name,
)
from pyspark_kafka_txn.embedded.dispatch import (
    DENIED_MESSAGES,
    NO_THROTTLE,
    ApiSpec,
    Context,
)
from pyspark_kafka_txn.embedded.protocol import ErrorCode, build, response_module
from pyspark_kafka_txn.wire import (
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
)


def describable(ctx: Context, topic: str) -> bool:
    """DESCRIBE on the topic."""
    return ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, topic)


def deletable(ctx: Context, topic: str) -> bool:
    """DELETE on the cluster, or on the topic."""
    return ctx.cluster_allowed(Operation.DELETE) or ctx.allowed(
        Operation.DELETE, ResourceType.TOPIC, topic
    )


def creatable(ctx: Context, topic: str) -> bool:
    """CREATE on the cluster, or on the topic (Kafka's CreateTopics and auto-creation)."""
    return ctx.cluster_allowed(Operation.CREATE) or ctx.allowed(
        Operation.CREATE, ResourceType.TOPIC, topic
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
            if not creatable(ctx, item.name):
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
                    DENIED_MESSAGES[ErrorCode.topic_authorization_failed],
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
            elif not deletable(ctx, topic.name):
                name = topic.name if describable(ctx, topic.name) else None
                code, message = ErrorCode.topic_authorization_failed, None
        elif not ctx.cluster_allowed(Operation.DELETE) and (
            not describable(ctx, name or "")
            or (name in cluster.topics and not deletable(ctx, name or ""))
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


SPECS = (
    ApiSpec(CREATE_TOPICS, "CreateTopics", 2, 7, create_topics),
    ApiSpec(DELETE_TOPICS, "DeleteTopics", 1, 6, delete_topics),
    ApiSpec(CREATE_PARTITIONS, "CreatePartitions", 0, 3, create_partitions),
)
