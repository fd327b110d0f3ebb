"""Partition data APIs: Produce, Fetch, ListOffsets, DeleteRecords, DescribeProducers,
OffsetForLeaderEpoch."""

from __future__ import annotations

import datetime
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pyspark_kafka_txn.embedded.acl import Operation, ResourceType
from pyspark_kafka_txn.embedded.cluster import INTERNAL_TOPICS
from pyspark_kafka_txn.embedded.dispatch import NO_THROTTLE, ApiSpec, Context, NoResponse
from pyspark_kafka_txn.embedded.log import PartitionLog
from pyspark_kafka_txn.embedded.protocol import (
    ErrorCode,
    build,
    partition_entries,
    response_module,
)
from pyspark_kafka_txn.embedded.records import ATTR_TRANSACTIONAL, CRC_START, RecordError
from pyspark_kafka_txn.embedded.validation import BatchRules, prepare_client_batch
from pyspark_kafka_txn.wire import (
    DELETE_RECORDS,
    DESCRIBE_PRODUCERS,
    EARLIEST,
    EARLIEST_LOCAL,
    FETCH,
    LATEST,
    LIST_OFFSETS,
    MAX_TIMESTAMP,
    OFFSET_FOR_LEADER_EPOCH,
    PRODUCE,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TopicPartition,
)

# Coordinator answers to a produce verification and what the leader reports instead.
_VERIFY_RETRIABLE = {
    ErrorCode.concurrent_transactions,
    ErrorCode.network_exception,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
}


def _is_transactional(records: bytes | None) -> bool:
    if records is None or len(records) <= CRC_START + 1:
        return False
    return bool(records[CRC_START + 1] & ATTR_TRANSACTIONAL)


def _leader_error(
    ctx: Context, topic: str, index: int, operation: Operation
) -> tuple[ErrorCode, PartitionLog | None]:
    """The partition's log, or why this request may not use it here: the principal may
    not perform ``operation`` on the topic (checked first, as Kafka does, so an unknown
    topic is not revealed), the partition is unknown, or this node does not lead it."""
    if not ctx.allowed(operation, ResourceType.TOPIC, topic):
        return ErrorCode.topic_authorization_failed, None
    log = ctx.cluster.partition(topic, index)
    if log is None:
        return ErrorCode.unknown_topic_or_partition, None
    if ctx.cluster.leader(topic, index) != ctx.node_id:
        return ErrorCode.not_leader_or_follower, None
    return ErrorCode.none, log


def _verify(
    ctx: Context, transactional_id: str, log: PartitionLog, producer_id: int, epoch: int
) -> ErrorCode:
    """KIP-890 verification of a first transactional write, as the leader does it."""
    cluster = ctx.cluster
    coordinator = cluster.coordinator(1, transactional_id)
    if (
        coordinator not in cluster.running
        or cluster.coordinator_error(1, transactional_id, coordinator) is not ErrorCode.none
    ):  # down, or moving (Kafka maps its NOT_COORDINATOR / LOAD_IN_PROGRESS so)
        return ErrorCode.not_enough_replicas
    tp = TopicPartition(log.topic, log.partition)
    if ctx.version >= 12:
        code = cluster.txn.add_partitions(transactional_id, producer_id, epoch, {tp})
    else:
        code = cluster.txn.verify_partition(transactional_id, producer_id, epoch, tp)
    if code is ErrorCode.none:
        return code
    if code is ErrorCode.transaction_abortable:
        return ErrorCode.transaction_abortable if ctx.version >= 11 else ErrorCode.invalid_txn_state
    if code is ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    if code in _VERIFY_RETRIABLE:
        return ErrorCode.not_enough_replicas
    return code


def _produce_target(
    ctx: Context, topic: str, index: int
) -> tuple[ErrorCode, str | None, PartitionLog | None]:
    """The log a Produce appends to, or why not: no WRITE on the topic, an internal
    topic (Kafka: "Cannot append to internal topic"), unknown, or led elsewhere."""
    code, log = _leader_error(ctx, topic, index, Operation.WRITE)
    if code is ErrorCode.topic_authorization_failed or topic not in INTERNAL_TOPICS:
        return code, None, log
    return ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {topic}", None


def produce(ctx: Context, req: Any) -> Any:
    """Produce v3-12 (v0-2 advertised for librdkafka feature detection, rejected).

    Behaviour (Kafka's ``handleProduceRequest`` order): transactional batches without a
    transactional id, or with one the principal may not WRITE, fail the whole request
    (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); a topic without WRITE gets
    TOPIC_AUTHORIZATION_FAILED;
    invalid ``acks`` gives INVALID_REQUIRED_ACKS; per partition: unknown partition,
    not-leader, batch validation (one v2 batch, CRC-32C, counts, size, then every record:
    structure, offset deltas, timestamps, null keys on compacted topics, with the failing
    records in ``record_errors`` from v8), one producer id
    per request for transactional data, KIP-890 verification of a first transactional
    write (v12 adds the partition implicitly), then idempotence checks (duplicates
    acknowledged with their original offset). ``acks=0`` sends no response and closes
    the connection if any partition failed.
    """
    cluster = ctx.cluster
    mod = response_module(PRODUCE, ctx.version)
    now = cluster.now_ms()
    txn_id = req.transactional_id
    any_txn = any(_is_transactional(p.records) for t in req.topic_data for p in t.partition_data)
    whole_error = ErrorCode.none
    if any_txn and (
        txn_id is None or not ctx.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id)
    ):
        whole_error = ErrorCode.transactional_id_authorization_failed
    elif req.acks not in (-1, 0, 1):
        whole_error = ErrorCode.invalid_required_acks
    txn_pid: int | None = None
    topics = []
    failed = False
    for topic in req.topic_data:
        parts = []
        for pdata in topic.partition_data:
            code, message, base, append_time, log = whole_error, None, -1, -1, None
            record_errors: tuple[tuple[int, str], ...] = ()
            start_offset_known = True
            if code is ErrorCode.none:
                code, message, log = _produce_target(ctx, topic.name, pdata.index)
            if code is ErrorCode.none and log is not None:
                topic_state = cluster.topics[topic.name]
                rules = BatchRules(
                    max_message_bytes=int(topic_state.config_value("max.message.bytes")),
                    log_append_time=log.log_append_time,
                    compacted="compact" in topic_state.config_value("cleanup.policy"),
                    timestamp_before_max_ms=int(
                        topic_state.config_value("message.timestamp.before.max.ms")
                    ),
                    timestamp_after_max_ms=int(
                        topic_state.config_value("message.timestamp.after.max.ms")
                    ),
                )
                try:
                    header, records = prepare_client_batch(
                        bytes(pdata.records or b""), rules, api_version=ctx.version, now_ms=now
                    )
                    verified = False
                    if header.is_transactional:
                        if txn_pid is None:
                            txn_pid = header.producer_id
                        elif txn_pid != header.producer_id:
                            raise RecordError(
                                ErrorCode.invalid_producer_id_mapping,
                                "transactional batches of one request must share a producer id",
                            )
                        if not log.has_ongoing_transaction(
                            header.producer_id, header.producer_epoch
                        ):
                            vcode = _verify(
                                ctx, txn_id, log, header.producer_id, header.producer_epoch
                            )
                            if vcode is not ErrorCode.none:
                                raise _VerificationError(vcode, "transaction verification failed")
                            verified = True
                    result = log.append_client_batch(header, records, now_ms=now, verified=verified)
                    base, append_time = result.base_offset, result.log_append_time
                except RecordError as exc:
                    code, record_errors = exc.code, exc.record_errors
                    # An unexpected failure (UNKNOWN_SERVER_ERROR) comes without a message
                    # from Kafka: its text is the broker's, not the client's business. A
                    # batch refused by transaction verification never reached the log:
                    # Kafka answers with neither a message nor the log start offset.
                    verification = isinstance(exc, _VerificationError)
                    if code is not ErrorCode.unknown_server_error and not verification:
                        message = str(exc)
                    start_offset_known = not verification
            failed = failed or code is not ErrorCode.none
            parts.append(
                _produce_partition(
                    mod,
                    pdata.index,
                    code,
                    base_offset=base,
                    log_append_time_ms=append_time,
                    log_start_offset=(
                        log.log_start_offset if log is not None and start_offset_known else -1
                    ),
                    message=message,
                    record_errors=record_errors,
                )
            )
        topics.append(_produce_topic(mod, topic.name, parts))
    cluster.notifier.fire()
    if req.acks == 0:
        return NoResponse(close=failed)
    return build(mod.ProduceResponse, responses=tuple(topics), throttle_time=NO_THROTTLE)


class _VerificationError(RecordError):
    """A transactional batch refused by the partition's transaction verification
    (KIP-890): answered without a message and without the log start offset, as by Kafka
    (measured on Apache Kafka 4.4.0: a fenced producer's Produce)."""


def _produce_partition(
    mod: Any,
    index: int,
    code: ErrorCode,
    *,
    base_offset: int = -1,
    log_append_time_ms: int = -1,
    log_start_offset: int = -1,
    message: str | None = None,
    record_errors: tuple[tuple[int, str], ...] = (),
) -> Any:
    """One partition of a Produce response (-1 / null where there is no value);
    ``record_errors`` are ``(batch index, message)`` pairs (v8+)."""
    errors = ()
    if record_errors and hasattr(mod, "BatchIndexAndErrorMessage"):
        errors = tuple(
            build(mod.BatchIndexAndErrorMessage, batch_index=i, batch_index_error_message=text)
            for i, text in record_errors
        )
    return build(
        mod.PartitionProduceResponse,
        index=index,
        error_code=code,
        base_offset=base_offset,
        log_append_time=(
            datetime.datetime.fromtimestamp(log_append_time_ms / 1000, tz=datetime.UTC)
            if log_append_time_ms >= 0
            else None
        ),
        log_start_offset=log_start_offset,
        record_errors=errors,
        error_message=message,
    )


def _produce_topic(mod: Any, name: str, parts: Iterable[Any]) -> Any:
    return build(mod.TopicProduceResponse, name=name, partition_responses=tuple(parts))


def produce_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    """Produce fault response: every partition fails with ``code`` (nothing appended)."""
    mod = response_module(PRODUCE, ctx.version)
    topics = tuple(
        _produce_topic(
            mod, topic.name, (_produce_partition(mod, p.index, code) for p in topic.partition_data)
        )
        for topic in req.topic_data
    )
    return build(mod.ProduceResponse, responses=topics, throttle_time=NO_THROTTLE)


def _fetch_partition(
    ctx: Context, topic: str, part: Any, isolation: int, limit: int, first: bool
) -> tuple[ErrorCode, PartitionLog | None, Any]:
    code, log = _leader_error(ctx, topic, part.partition, Operation.READ)
    if code is not ErrorCode.none or log is None:
        return code, None, None
    requested_epoch = getattr(part, "current_leader_epoch", -1)
    if requested_epoch >= 0 and requested_epoch != log.leader_epoch:
        code = (
            ErrorCode.unknown_leader_epoch
            if requested_epoch > log.leader_epoch
            else ErrorCode.fenced_leader_epoch
        )
        return code, log, None
    try:
        return (
            ErrorCode.none,
            log,
            log.read(part.fetch_offset, limit, isolation, at_least_one=first),
        )
    except RecordError as exc:
        return exc.code, log, None


async def fetch(ctx: Context, req: Any) -> Any:
    """Fetch v4-17.

    Behaviour: topics by name (v4-12) or id (v13+, UNKNOWN_TOPIC_ID); per partition:
    not-leader, leader-epoch checks (v9+), OFFSET_OUT_OF_RANGE outside
    [log start, log end]; whole batches up to the LSO (read_committed) or high
    watermark, at least one batch in the first non-empty partition (KIP-74); aborted
    transactions overlapping the returned range for read_committed (an empty list, not
    null, when there are none); long-poll until ``min_bytes`` visible bytes or
    ``max_wait``, but answer at once when no partition is requested or any partition
    has an error (as ``ReplicaManager.fetchMessages``). Exactly the requested partitions
    are answered. A topic the principal may not READ: TOPIC_AUTHORIZATION_FAILED.
    Simplification: no fetch sessions (session id 0, as Kafka answers when
    it declines a session).
    """
    cluster = ctx.cluster
    mod = response_module(FETCH, ctx.version)
    isolation = getattr(req, "isolation_level", READ_UNCOMMITTED)
    deadline = time.monotonic() + req.max_wait.total_seconds()
    by_id = ctx.version >= 13
    while True:
        total = 0
        failed = False  # Kafka answers at once if any partition has an error
        topics = []
        for ftopic in req.topics:
            name = getattr(ftopic, "topic", None)
            topic_error = ErrorCode.none
            if by_id:
                found = cluster.topics_by_id.get(ftopic.topic_id)
                name = found.name if found else None
                topic_error = ErrorCode.none if found else ErrorCode.unknown_topic_id
            parts = []
            for part in ftopic.partitions:
                code, log, result = topic_error, None, None
                if code is ErrorCode.none and name is not None:
                    limit = min(part.partition_max_bytes, max(req.max_bytes - total, 0))
                    code, log, result = _fetch_partition(
                        ctx, name, part, isolation, limit, first=total == 0
                    )
                records = result.records if result else b""
                total += len(records)
                failed = failed or code is not ErrorCode.none
                aborted = None
                if result is not None and result.aborted is not None:
                    aborted = tuple(
                        build(
                            mod.AbortedTransaction,
                            producer_id=a.producer_id,
                            first_offset=a.first_offset,
                        )
                        for a in result.aborted
                    )
                elif isolation == READ_COMMITTED:
                    aborted = ()
                parts.append(
                    build(
                        mod.PartitionData,
                        partition_index=part.partition,
                        error_code=code,
                        high_watermark=log.high_watermark if log else -1,
                        last_stable_offset=log.last_stable_offset if log else -1,
                        log_start_offset=log.log_start_offset if log else -1,
                        aborted_transactions=aborted,
                        preferred_read_replica=-1,
                        records=records,
                    )
                )
            topics.append(
                build(
                    mod.FetchableTopicResponse,
                    topic=name,
                    topic_id=getattr(ftopic, "topic_id", None),
                    partitions=tuple(parts),
                )
            )
        remaining = deadline - time.monotonic()
        if total >= req.min_bytes or remaining <= 0 or (total > 0 and req.min_bytes <= 1):
            break
        if failed or not any(t.partitions for t in req.topics):
            break  # errors, or nothing requested (the Java consumer's session-close fetch)
        await cluster.notifier.wait(remaining)
        if ctx.node_id not in cluster.running:
            break
    return build(
        mod.FetchResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=0,
        responses=tuple(topics),
    )


def list_offsets(ctx: Context, req: Any) -> Any:
    """ListOffsets v1-10.

    Behaviour: EARLIEST (-2) = log start; LATEST (-1) = LSO for read_committed, high
    watermark otherwise (v1 is read_uncommitted); MAX_TIMESTAMP (-3, v7+); EARLIEST_LOCAL
    (-4, v8+) = log start; a timestamp gives the first record at or after it below the
    isolation bound, else -1/-1; not-leader and unknown partitions as Kafka.

    The answer is shaped as Kafka 4.4 shapes it (measured): one topic entry per topic
    name, however many entries of it the request has, and one result per distinct
    partition; a partition asked more than once (in one entry or two) gets a single
    INVALID_REQUEST. A topic without DESCRIBE gets its request entries back, after the
    others, every partition TOPIC_AUTHORIZATION_FAILED. Kafka's order of topics and
    partitions is a hash map's; here it is the order of first appearance.
    """
    mod = response_module(LIST_OFFSETS, ctx.version)
    isolation = getattr(req, "isolation_level", READ_UNCOMMITTED)
    requested = Counter((t.name, p.partition_index) for t in req.topics for p in t.partitions)

    def offsets(topic: str, part: Any) -> dict[str, Any]:
        code, log = _leader_error(ctx, topic, part.partition_index, Operation.DESCRIBE)
        offset, ts = -1, -1
        if requested[topic, part.partition_index] > 1:
            code = ErrorCode.invalid_request
        if code is ErrorCode.none and log is not None:
            target = part.timestamp
            if target == EARLIEST or (target == EARLIEST_LOCAL and ctx.version >= 8):
                offset = log.log_start_offset
            elif target == LATEST:
                offset = log.bound(isolation)
            elif target == MAX_TIMESTAMP and ctx.version >= 7:
                offset, ts = log.max_timestamp_offset(isolation)
            elif target >= 0:
                try:
                    offset, ts = log.offset_for_timestamp(target, isolation)
                except RecordError as exc:
                    code = exc.code
            else:
                code = ErrorCode.unsupported_version
        epoch = log.leader_epoch if log and offset >= 0 else -1
        return {"error_code": code, "timestamp": ts, "offset": offset, "leader_epoch": epoch}

    answered: dict[str, dict[int, Any]] = {}
    refused = []
    for topic in req.topics:
        if not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, topic.name):
            refused.append(topic)
            continue
        results = answered.setdefault(topic.name, {})
        for part in topic.partitions:
            if part.partition_index not in results:
                results[part.partition_index] = build(
                    mod.ListOffsetsPartitionResponse,
                    partition_index=part.partition_index,
                    **offsets(topic.name, part),
                )
    topics = tuple(
        build(mod.ListOffsetsTopicResponse, name=name, partitions=tuple(results.values()))
        for name, results in answered.items()
    )
    denied = {
        "error_code": ErrorCode.topic_authorization_failed,
        "timestamp": -1,
        "offset": -1,
        "leader_epoch": -1,
    }
    topics += partition_entries(
        refused, mod.ListOffsetsTopicResponse, mod.ListOffsetsPartitionResponse, lambda *_: denied
    )
    return build(mod.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=topics)


def _list_offsets_response(
    ctx: Context, req: Any, fields_for: Callable[[str, Any], Mapping[str, Any]]
) -> Any:
    mod = response_module(LIST_OFFSETS, ctx.version)
    topics = partition_entries(
        req.topics, mod.ListOffsetsTopicResponse, mod.ListOffsetsPartitionResponse, fields_for
    )
    return build(mod.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=topics)


def delete_records(ctx: Context, req: Any) -> Any:
    """DeleteRecords v0-2.

    Behaviour: moves the log start offset to the given offset (-1 = high watermark);
    an offset above the high watermark gets OFFSET_OUT_OF_RANGE; not-leader and unknown
    partitions as Kafka; a topic without DELETE: TOPIC_AUTHORIZATION_FAILED. The new
    log start survives a restart.
    """
    mod = response_module(DELETE_RECORDS, ctx.version)

    def delete(topic: str, part: Any) -> dict[str, Any]:
        code, log = _leader_error(ctx, topic, part.partition_index, Operation.DELETE)
        low = -1
        if code is ErrorCode.none and log is not None:
            try:
                low = log.delete_records(part.offset)
            except RecordError as exc:
                code = exc.code
        return {"error_code": code, "low_watermark": low}

    topics = partition_entries(
        req.topics, mod.DeleteRecordsTopicResult, mod.DeleteRecordsPartitionResult, delete
    )
    ctx.cluster.log_start_changed()
    return build(mod.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=topics)


def describe_producers(ctx: Context, req: Any) -> Any:
    """DescribeProducers v0: the active producer entries of each partition (a topic
    without READ: TOPIC_AUTHORIZATION_FAILED)."""
    mod = response_module(DESCRIBE_PRODUCERS, ctx.version)

    def producers(topic: str, index: int) -> dict[str, Any]:
        code, log = _leader_error(ctx, topic, index, Operation.READ)
        states = ()
        if log is not None:
            states = tuple(
                build(
                    mod.ProducerState,
                    producer_id=pid,
                    producer_epoch=entry.epoch,
                    last_sequence=entry.last_seq,
                    last_timestamp=entry.last_timestamp,
                    coordinator_epoch=entry.coordinator_epoch,
                    current_txn_start_offset=(
                        -1 if entry.txn_first_offset is None else entry.txn_first_offset
                    ),
                )
                for pid, entry in sorted(log.producers.items())
            )
        return {"error_code": code, "error_message": None, "active_producers": states}

    topics = partition_entries(
        req.topics,
        mod.TopicResponse,
        mod.PartitionResponse,
        producers,
        request_partitions="partition_indexes",
    )
    return build(mod.DescribeProducersResponse, throttle_time=NO_THROTTLE, topics=topics)


def offset_for_leader_epoch(ctx: Context, req: Any) -> Any:
    """OffsetForLeaderEpoch v2-4.

    Behaviour: the current leader epoch maps to the log end offset; an epoch above it, or
    -1, to -1/-1 (Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET); a current leader
    epoch above the partition's UNKNOWN_LEADER_EPOCH, below it FENCED_LEADER_EPOCH.
    Simplification: the broker does not remember where earlier epochs ended, so an older
    epoch also maps to the log end (no truncation is ever needed: there is one replica). A
    topic without DESCRIBE: TOPIC_AUTHORIZATION_FAILED.
    """
    mod = response_module(OFFSET_FOR_LEADER_EPOCH, ctx.version)

    def end_offset(topic: str, part: Any) -> dict[str, Any]:
        code, log = _leader_error(ctx, topic, part.partition, Operation.DESCRIBE)
        epoch, end = -1, -1
        if log is not None:
            if part.current_leader_epoch > log.leader_epoch:
                code = ErrorCode.unknown_leader_epoch
            elif 0 <= part.current_leader_epoch < log.leader_epoch:
                code = ErrorCode.fenced_leader_epoch
            elif 0 <= part.leader_epoch <= log.leader_epoch:
                epoch, end = part.leader_epoch, log.log_end_offset
            # else an epoch above the current one, or -1: UNDEFINED_EPOCH(_OFFSET), as Kafka
        return {"error_code": code, "leader_epoch": epoch, "end_offset": end}

    topics = partition_entries(
        req.topics,
        mod.OffsetForLeaderTopicResult,
        mod.EpochEndOffset,
        end_offset,
        topic_name="topic",
        index="partition",
    )
    return build(mod.OffsetForLeaderEpochResponse, throttle_time=NO_THROTTLE, topics=topics)


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
    failed = {"error_code": code, "timestamp": -1, "offset": -1, "leader_epoch": -1}
    return _list_offsets_response(ctx, req, lambda _topic, _p: failed)


SPECS = (
    ApiSpec(PRODUCE, "Produce", 0, 12, produce, produce_error, min_accepted=3),
    ApiSpec(FETCH, "Fetch", 4, 17, fetch, fetch_error),
    ApiSpec(LIST_OFFSETS, "ListOffsets", 1, 10, list_offsets, list_offsets_error),
    ApiSpec(DELETE_RECORDS, "DeleteRecords", 0, 2, delete_records),
    ApiSpec(OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpoch", 2, 4, offset_for_leader_epoch),
    ApiSpec(DESCRIBE_PRODUCERS, "DescribeProducers", 0, 0, describe_producers),
)
