"""Error responses built from a request without executing it (fault injection).

Each builder ``(ctx, request, code) -> response`` answers every partition, key or the
whole request with ``code``, in the shape the negotiated version needs, the way a
Kafka broker answers a request it refused before touching any state (for example
NOT_LEADER_OR_FOLLOWER from a former leader, or COORDINATOR_LOAD_IN_PROGRESS from a
coordinator still loading its log). ``BrokerServer`` uses them for the ``error``
fault action; the handler of the request is never called.

The builders of APIs whose per-partition response shape the handler also builds
(Produce, AddPartitionsToTxn, TxnOffsetCommit) live next to that handler and share its
shape builder: ``data.produce_error``, ``txn.add_partitions_error``,
``txn.txn_offset_commit_error``.
"""

from __future__ import annotations

from typing import Any

from pyspark_kafka_txn.embedded.dispatch import NO_AUTHORIZED_OPS, NO_THROTTLE, Context
from pyspark_kafka_txn.embedded.protocol import ErrorCode, build, response_module
from pyspark_kafka_txn.embedded.wire import (
    ADD_OFFSETS_TO_TXN,
    END_TXN,
    FETCH,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    METADATA,
    OFFSET_COMMIT,
)


def fetch_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    """Fetch: every requested partition fails with ``code`` (no records)."""
    mod = response_module(FETCH, ctx.version)
    topics = tuple(
        build(
            mod.FetchableTopicResponse,
            topic=getattr(topic, "topic", None),
            topic_id=getattr(topic, "topic_id", None),
            partitions=tuple(
                build(
                    mod.PartitionData,
                    partition_index=p.partition,
                    error_code=code,
                    high_watermark=-1,
                    last_stable_offset=-1,
                    log_start_offset=-1,
                    aborted_transactions=None,
                    preferred_read_replica=-1,
                    records=None,
                )
                for p in topic.partitions
            ),
        )
        for topic in req.topics
    )
    return build(
        mod.FetchResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=0,
        responses=topics,
    )


def list_offsets_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    """ListOffsets: every partition fails with ``code``."""
    mod = response_module(LIST_OFFSETS, ctx.version)
    topics = tuple(
        build(
            mod.ListOffsetsTopicResponse,
            name=topic.name,
            partitions=tuple(
                build(
                    mod.ListOffsetsPartitionResponse,
                    partition_index=p.partition_index,
                    error_code=code,
                    timestamp=-1,
                    offset=-1,
                    leader_epoch=-1,
                )
                for p in topic.partitions
            ),
        )
        for topic in req.topics
    )
    return build(mod.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=topics)


def metadata_brokers(ctx: Context, mod: Any) -> tuple[Any, ...]:
    """The running brokers, as a Metadata response lists them."""
    cluster = ctx.cluster
    return tuple(
        build(mod.MetadataResponseBroker, node_id=n, host=h, port=p, rack=None)
        for n, (h, p) in sorted(cluster.addresses.items())
        if n in cluster.running
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
    topics = tuple(topic_without_partitions(mod, name, topic_id, code) for name, topic_id in wanted)
    return build(
        mod.MetadataResponse,
        throttle_time=NO_THROTTLE,
        brokers=metadata_brokers(ctx, mod),
        cluster_id=cluster.config.cluster_id,
        controller_id=min(cluster.running) if cluster.running else -1,
        topics=topics,
        cluster_authorized_operations=NO_AUTHORIZED_OPS,
        error_code=ErrorCode.none,
    )


def offset_commit_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    """OffsetCommit: every partition fails with ``code`` (nothing committed)."""
    mod = response_module(OFFSET_COMMIT, ctx.version)
    topics = tuple(
        build(
            mod.OffsetCommitResponseTopic,
            name=topic.name,
            partitions=tuple(
                build(
                    mod.OffsetCommitResponsePartition,
                    partition_index=p.partition_index,
                    error_code=code,
                )
                for p in topic.partitions
            ),
        )
        for topic in req.topics
    )
    return build(mod.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)


def find_coordinator_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    """FindCoordinator: ``code`` for the key (v0-3) or for every key (v4+)."""
    mod = response_module(FIND_COORDINATOR, ctx.version)
    if ctx.version >= 4:
        coords = tuple(
            build(
                mod.Coordinator,
                key=key,
                node_id=-1,
                host="",
                port=-1,
                error_code=code,
                error_message=None,
            )
            for key in req.coordinator_keys
        )
        return build(mod.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=coords)
    return build(
        mod.FindCoordinatorResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        error_message=None,
        node_id=-1,
        host="",
        port=-1,
    )


def init_producer_id_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    """InitProducerId: ``code``, no producer id or epoch."""
    mod = response_module(INIT_PRODUCER_ID, ctx.version)
    return build(
        mod.InitProducerIdResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        producer_id=-1,
        producer_epoch=-1,
    )


def add_offsets_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    """AddOffsetsToTxn: ``code``."""
    mod = response_module(ADD_OFFSETS_TO_TXN, ctx.version)
    return build(mod.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE, error_code=code)


def end_txn_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    """EndTxn: ``code``, no producer id or epoch (v5)."""
    mod = response_module(END_TXN, ctx.version)
    return build(
        mod.EndTxnResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        producer_id=-1,
        producer_epoch=-1,
    )
