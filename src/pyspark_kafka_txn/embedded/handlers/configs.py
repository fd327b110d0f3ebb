"""Config APIs: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs.

Topic configs (validated as Kafka 4.x validates them, :mod:`..topic_config`), the
broker's read-only configs and the group configs' defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pyspark_kafka_txn.embedded.acl import Operation, ResourceType
from pyspark_kafka_txn.embedded.cluster import (
    TOPIC_CONFIG_DEFAULTS,
    Topic,
    TopicError,
)
from pyspark_kafka_txn.embedded.dispatch import (
    DENIED_MESSAGES,
    NO_THROTTLE,
    ApiSpec,
    Context,
)
from pyspark_kafka_txn.embedded.protocol import ErrorCode, build, response_module
from pyspark_kafka_txn.embedded.topic_config import TOPIC_CONFIGS, ConfigType
from pyspark_kafka_txn.wire import (
    ALTER_CONFIGS,
    APPEND,
    BROKER_RESOURCE,
    DELETE,
    DESCRIBE_CONFIGS,
    GROUP_RESOURCE,
    INCREMENTAL_ALTER_CONFIGS,
    SET,
    SUBTRACT,
    TOPIC_RESOURCE,
)

_T = ConfigType
#: Kafka 4.4's group configs (``GroupConfig``) with their types and the defaults a group
#: without overrides reports (measured): the KIP-848 consumer, KIP-932 share and KIP-1071
#: streams group settings, and the share groups' dead-letter queue.
GROUP_CONFIGS: Mapping[str, tuple[ConfigType, str]] = {
    "consumer.assignment.interval.ms": (_T.INT, "1000"),
    "consumer.heartbeat.interval.ms": (_T.INT, "5000"),
    "consumer.session.timeout.ms": (_T.INT, "45000"),
    "errors.deadletterqueue.copy.record.enable": (_T.BOOLEAN, "false"),
    "errors.deadletterqueue.topic.name": (_T.STRING, ""),
    "share.assignment.interval.ms": (_T.INT, "1000"),
    "share.auto.offset.reset": (_T.STRING, "latest"),
    "share.delivery.count.limit": (_T.INT, "5"),
    "share.heartbeat.interval.ms": (_T.INT, "5000"),
    "share.isolation.level": (_T.STRING, "read_uncommitted"),
    "share.partition.max.record.locks": (_T.INT, "2000"),
    "share.record.lock.duration.ms": (_T.INT, "30000"),
    "share.renew.acknowledge.enable": (_T.BOOLEAN, "true"),
    "share.session.timeout.ms": (_T.INT, "45000"),
    "streams.assignment.interval.ms": (_T.INT, "1000"),
    "streams.assignor.name": (_T.STRING, "sticky"),
    "streams.heartbeat.interval.ms": (_T.INT, "5000"),
    "streams.initial.rebalance.delay.ms": (_T.INT, "3000"),
    "streams.num.standby.replicas": (_T.INT, "0"),
    "streams.rack.aware.assignment.tags": (_T.LIST, ""),
    "streams.session.timeout.ms": (_T.INT, "45000"),
}


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


def _resource_result(
    cls: type[Any], res: Any, code: ErrorCode, message: str | None, **fields: Any
) -> Any:
    """The result of one config resource: the request's resource type and name, the error."""
    return build(
        cls,
        error_code=code,
        error_message=message,
        resource_type=res.resource_type,
        resource_name=res.resource_name,
        **fields,
    )


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
                raise TopicError(refusal, DENIED_MESSAGES[refusal])
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
        responses.append(_resource_result(mod.AlterConfigsResourceResponse, res, code, message))
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
            if key is None and op not in (APPEND, SUBTRACT):
                raise TopicError(ErrorCode.invalid_config, f"Unknown topic config name: {c.name}")
            if op == SET:
                config[c.name] = c.value
            elif op == DELETE:
                config.pop(c.name, None)
            elif op in (APPEND, SUBTRACT):
                if key is None or key.type is not ConfigType.LIST:
                    verb = "APPEND" if op == APPEND else "SUBTRACT"
                    raise TopicError(
                        ErrorCode.invalid_config,
                        f"Can't {verb} to key {c.name} because its type is not LIST.",
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
    return GROUP_CONFIGS[name][0] if resource_type == GROUP_RESOURCE else 0


def describe_configs(ctx: Context, req: Any) -> Any:
    """DescribeConfigs v1-4.

    Behaviour: topic (type 2), broker (type 4) and group (type 32) resources; unknown
    topics get UNKNOWN_TOPIC_OR_PARTITION, unknown brokers, an empty group name or other
    types INVALID_REQUEST; any group name, existing or not, reports Kafka 4.4's group
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
            code, message = refusal, DENIED_MESSAGES[refusal]
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
                values = {name: default for name, (_, default) in GROUP_CONFIGS.items()}
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
            _resource_result(mod.DescribeConfigsResult, res, code, message, configs=entries)
        )
    refused = set(DENIED_MESSAGES)
    ordered = [r for r in results if r.error_code not in refused] + [
        r for r in results if r.error_code in refused
    ]
    return build(mod.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=tuple(ordered))


SPECS = (
    ApiSpec(DESCRIBE_CONFIGS, "DescribeConfigs", 1, 4, describe_configs),
    ApiSpec(ALTER_CONFIGS, "AlterConfigs", 0, 2, alter_configs),
    ApiSpec(INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 0, 1, incremental_alter_configs),
)
