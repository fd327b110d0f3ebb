"""Transaction APIs: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
WriteTxnMarkers, TxnOffsetCommit, DescribeTransactions, ListTransactions."""

from __future__ import annotations

import datetime
import functools
import re
from collections.abc import Callable
from typing import Any

from pyspark_kafka_txn.embedded.acl import Operation, ResourceType
from pyspark_kafka_txn.embedded.cluster import INTERNAL_TOPICS
from pyspark_kafka_txn.embedded.dispatch import NO_THROTTLE, ApiSpec, Context
from pyspark_kafka_txn.embedded.groups import (
    OFFSETS_TOPIC,
    coordinator_partition,
)
from pyspark_kafka_txn.embedded.handlers.groups import apply_offset, commit_response
from pyspark_kafka_txn.embedded.protocol import (
    ErrorCode,
    build,
    partition_entries,
    response_module,
)
from pyspark_kafka_txn.embedded.records import RecordError
from pyspark_kafka_txn.embedded.txn import TxnResult
from pyspark_kafka_txn.wire import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    COORDINATOR_GROUP,
    COORDINATOR_TXN,
    DESCRIBE_TRANSACTIONS,
    END_TXN,
    INIT_PRODUCER_ID,
    LIST_TRANSACTIONS,
    TXN_OFFSET_COMMIT,
    WRITE_TXN_MARKERS,
    TopicPartition,
    TxnState,
)

INIT_PRODUCER_ID_2PC_VERSION = 6  # KIP-939; latestVersionUnstable in Kafka 4.3


def _fenced_for_old(version: int, code: ErrorCode, first_new: int) -> ErrorCode:
    """Requests below ``first_new`` report PRODUCER_FENCED as INVALID_PRODUCER_EPOCH."""
    if code is ErrorCode.producer_fenced and version < first_new:
        return ErrorCode.invalid_producer_epoch
    return code


def _not_coordinator(ctx: Context, key_type: int, key: str) -> bool:
    return ctx.cluster.coordinator(key_type, key) != ctx.node_id


def _txn_coordinator_error(ctx: Context, tid: str) -> ErrorCode:
    """NONE when this node serves ``tid``'s coordinator; else NOT_COORDINATOR, or
    COORDINATOR_LOAD_IN_PROGRESS while it loads the partition it took over
    (``Cluster.coordinator_error``)."""
    return ctx.cluster.coordinator_error(COORDINATOR_TXN, tid, ctx.node_id)


def _producer_response(
    response_cls: type[Any], code: ErrorCode, producer_id: int = -1, epoch: int = -1
) -> Any:
    """An InitProducerId or EndTxn response (``response_cls``): both answer an error code,
    a producer id and its epoch (-1 without them)."""
    return build(
        response_cls,
        throttle_time=NO_THROTTLE,
        error_code=code,
        producer_id=producer_id,
        producer_epoch=epoch,
    )


def init_producer_id(ctx: Context, req: Any) -> Any:
    """InitProducerId v0-5, and v6 (KIP-939) when the cluster advertises it.

    Behaviour: a null transactional id allocates a fresh producer id (idempotent
    producer); otherwise the coordinator bumps the epoch (fencing), aborts an ongoing
    transaction first (CONCURRENT_TRANSACTIONS until done), validates the timeout
    against ``transaction.max.timeout.ms`` and the expected id/epoch (v3+). v<4 reports
    PRODUCER_FENCED as INVALID_PRODUCER_EPOCH. Sent to a node that is not the
    transaction coordinator: NOT_COORDINATOR. v6: ``Enable2Pc`` makes the transaction
    never time out (``transaction.two.phase.commit.enable`` off:
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED); ``KeepPreparedTxn``: UNSUPPORTED_VERSION as
    in Kafka 4.3; ``OngoingTxnProducerId``/``Epoch`` are always -1. ACLs: WRITE on the
    transactional id (and TWO_PHASE_COMMIT for ``Enable2Pc``), else
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED; without a transactional id IDEMPOTENT_WRITE on
    the cluster or WRITE on some topic, else CLUSTER_AUTHORIZATION_FAILED.
    """
    mod = response_module(INIT_PRODUCER_ID, ctx.version)
    tid = req.transactional_id
    refused = _init_producer_id_refusal(ctx, tid, getattr(req, "enable2_pc", False))
    if refused is not None:
        result = TxnResult(refused)
    elif tid and (moved := _txn_coordinator_error(ctx, tid)) is not ErrorCode.none:
        result = TxnResult(moved)
    else:
        result = ctx.cluster.txn.init_producer_id(
            tid,
            int(req.transaction_timeout.total_seconds() * 1000),
            getattr(req, "producer_id", -1),
            getattr(req, "producer_epoch", -1),
            enable_2pc=getattr(req, "enable2_pc", False),
            keep_prepared=getattr(req, "keep_prepared_txn", False),
        )
    return _producer_response(
        mod.InitProducerIdResponse,
        _fenced_for_old(ctx.version, result.error, 4),
        result.producer_id,
        result.epoch,
    )


def _init_producer_id_refusal(ctx: Context, tid: str | None, enable_2pc: bool) -> ErrorCode | None:
    """The authorization error of an InitProducerId, if any (KafkaApis' order)."""
    if tid is not None:
        if not ctx.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
            return ErrorCode.transactional_id_authorization_failed
        if enable_2pc and not ctx.allowed(
            Operation.TWO_PHASE_COMMIT, ResourceType.TRANSACTIONAL_ID, tid
        ):
            return ErrorCode.transactional_id_authorization_failed
        return None
    if ctx.cluster_allowed(Operation.IDEMPOTENT_WRITE) or ctx.allowed_any(
        Operation.WRITE, ResourceType.TOPIC
    ):
        return None
    return ErrorCode.cluster_authorization_failed


def _txn_id_allowed(ctx: Context, tid: str | None) -> bool:
    return ctx.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, tid or "")


def add_partitions_to_txn(ctx: Context, req: Any) -> Any:
    """AddPartitionsToTxn v0-3 (the client path).

    Behaviour: without WRITE on the transactional id every partition gets
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED; any partition of a topic without WRITE or of
    an internal topic (TOPIC_AUTHORIZATION_FAILED) or unknown
    (UNKNOWN_TOPIC_OR_PARTITION) fails the whole request (the rest
    OPERATION_NOT_ATTEMPTED, nothing added);
    otherwise the coordinator's single answer is copied to every partition. v<2 reports
    PRODUCER_FENCED as INVALID_PRODUCER_EPOCH. Simplification: the broker-to-broker
    batched form (v4+) is not served; verification happens in-process.
    """
    cluster = ctx.cluster
    tid = req.v3_and_below_transactional_id
    wanted = [TopicPartition(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
    # Kafka never authorizes internal topics here, with or without ACLs.
    writable = {
        t
        for t in {t for t, _ in wanted}
        if t not in INTERNAL_TOPICS and ctx.allowed(Operation.WRITE, ResourceType.TOPIC, t)
    }
    refused = {
        tp: ErrorCode.topic_authorization_failed
        if tp[0] not in writable
        else ErrorCode.unknown_topic_or_partition
        for tp in wanted
        if tp[0] not in writable or cluster.partition(*tp) is None
    }
    if not _txn_id_allowed(ctx, tid):
        codes = dict.fromkeys(wanted, ErrorCode.transactional_id_authorization_failed)
    elif refused:
        codes = {tp: refused.get(tp, ErrorCode.operation_not_attempted) for tp in wanted}
    else:
        code = _txn_coordinator_error(ctx, tid or "")
        if code is ErrorCode.none:
            code = cluster.txn.add_partitions(
                tid,
                req.v3_and_below_producer_id,
                req.v3_and_below_producer_epoch,
                set(wanted),
            )
        code = _fenced_for_old(ctx.version, code, 2)
        codes = dict.fromkeys(wanted, code)
    return _add_partitions_response(ctx, req, lambda topic, p: codes[TopicPartition(topic, p)])


def _add_partitions_response(
    ctx: Context, req: Any, code_for: Callable[[str, int], ErrorCode]
) -> Any:
    """AddPartitionsToTxn v0-3 response: one result per requested partition."""
    mod = response_module(ADD_PARTITIONS_TO_TXN, ctx.version)
    results = partition_entries(
        req.v3_and_below_topics,
        mod.AddPartitionsToTxnTopicResult,
        mod.AddPartitionsToTxnPartitionResult,
        lambda topic, p: {"partition_error_code": code_for(topic, p)},
        result_partitions="results_by_partition",
    )
    return build(
        mod.AddPartitionsToTxnResponse,
        throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=results,
    )


def add_partitions_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    """AddPartitionsToTxn v0-3 fault response: every partition fails with ``code``."""
    return _add_partitions_response(ctx, req, lambda _topic, _p: code)


def add_offsets_to_txn(ctx: Context, req: Any) -> Any:
    """AddOffsetsToTxn v0-4.

    Behaviour: adds the group's ``__consumer_offsets`` partition
    (``abs(hashCode(group)) % 50``) to the transaction with the AddPartitions rules;
    empty group id: INVALID_GROUP_ID; v<2 reports PRODUCER_FENCED as
    INVALID_PRODUCER_EPOCH. ACLs: WRITE on the transactional id
    (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group
    (GROUP_AUTHORIZATION_FAILED).
    """
    mod = response_module(ADD_OFFSETS_TO_TXN, ctx.version)
    if not _txn_id_allowed(ctx, req.transactional_id):
        code = ErrorCode.transactional_id_authorization_failed
    elif not ctx.allowed(Operation.READ, ResourceType.GROUP, req.group_id or ""):
        code = ErrorCode.group_authorization_failed
    elif not req.group_id:
        code = ErrorCode.invalid_group_id
    elif (moved := _txn_coordinator_error(ctx, req.transactional_id or "")) is not ErrorCode.none:
        code = moved
    else:
        tp = TopicPartition(OFFSETS_TOPIC, coordinator_partition(req.group_id))
        code = ctx.cluster.txn.add_partitions(
            req.transactional_id, req.producer_id, req.producer_epoch, {tp}
        )
    return build(
        mod.AddOffsetsToTxnResponse,
        throttle_time=NO_THROTTLE,
        error_code=_fenced_for_old(ctx.version, code, 2),
    )


def end_txn(ctx: Context, req: Any) -> Any:
    """EndTxn v0-5.

    Behaviour: the TV1 table for v0-4 and the TV2 table (epoch bump on every
    completion, new epoch returned) for v5+, as in ``TransactionCoordinator``; the
    reply comes once Prepare* is logged, markers follow asynchronously. v<2 reports
    PRODUCER_FENCED as INVALID_PRODUCER_EPOCH. ACLs: WRITE on the transactional id,
    else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
    """
    mod = response_module(END_TXN, ctx.version)
    tid = req.transactional_id
    if not _txn_id_allowed(ctx, tid):
        result = TxnResult(ErrorCode.transactional_id_authorization_failed)
    elif (moved := _txn_coordinator_error(ctx, tid or "")) is not ErrorCode.none:
        result = TxnResult(moved)
    else:
        result = ctx.cluster.txn.end_txn(
            tid, req.producer_id, req.producer_epoch, req.committed, tv2=ctx.version >= 5
        )
    ok = result.error is ErrorCode.none
    return _producer_response(
        mod.EndTxnResponse,
        _fenced_for_old(ctx.version, result.error, 2),
        result.producer_id if ok else -1,
        result.epoch if ok else -1,
    )


_TXN_COMMIT_VERIFY_MAP = {
    ErrorCode.producer_fenced: ErrorCode.invalid_producer_epoch,
    ErrorCode.concurrent_transactions: ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_not_available: ErrorCode.coordinator_not_available,
}


def txn_offset_commit(ctx: Context, req: Any) -> Any:
    """TxnOffsetCommit v0-5.

    Behaviour: sent to the group coordinator (NOT_COORDINATOR otherwise); empty group
    id: INVALID_GROUP_ID; unknown topics/partitions: UNKNOWN_TOPIC_OR_PARTITION for
    those; the group's offsets partition must be in the transaction (v5 adds it
    implicitly), else INVALID_TXN_STATE (v<=3) / TRANSACTION_ABORTABLE (v4); member and
    generation validated as Kafka does for transactional commits; metadata over 4096
    characters: OFFSET_METADATA_TOO_LARGE. Accepted offsets are staged until the
    transaction's marker. ACLs: WRITE on the transactional id, READ on the group (every
    partition TRANSACTIONAL_ID_/GROUP_AUTHORIZATION_FAILED), READ on each topic (that
    topic's partitions TOPIC_AUTHORIZATION_FAILED, the others staged).
    """
    cluster = ctx.cluster
    group = req.group_id
    part = coordinator_partition(group) if group else -1
    top_error = ErrorCode.none
    readable = {
        t.name for t in req.topics if ctx.allowed(Operation.READ, ResourceType.TOPIC, t.name)
    }
    if not _txn_id_allowed(ctx, req.transactional_id):
        top_error = ErrorCode.transactional_id_authorization_failed
    elif not ctx.allowed(Operation.READ, ResourceType.GROUP, group or ""):
        top_error = ErrorCode.group_authorization_failed
    elif not group:
        top_error = ErrorCode.invalid_group_id
    elif _not_coordinator(ctx, COORDINATOR_GROUP, group):
        top_error = ErrorCode.not_coordinator
    else:
        tp = TopicPartition(OFFSETS_TOPIC, part)
        if ctx.version >= 5:
            code = cluster.txn.add_partitions(
                req.transactional_id, req.producer_id, req.producer_epoch, {tp}
            )
        else:
            code = cluster.txn.verify_partition(
                req.transactional_id, req.producer_id, req.producer_epoch, tp
            )
            if code is ErrorCode.transaction_abortable and ctx.version <= 3:
                code = ErrorCode.invalid_txn_state
        top_error = _TXN_COMMIT_VERIFY_MAP.get(code, code)
        if top_error is ErrorCode.none:
            top_error = cluster.membership.validate_offset_commit(
                group,
                getattr(req, "generation_id", -1),
                getattr(req, "member_id", ""),
                getattr(req, "group_instance_id", None),
                transactional=True,
            )

    stage_offset = functools.partial(cluster.offsets.stage, group, req.producer_id)

    def stage(topic: str, p: Any) -> ErrorCode:
        if top_error is not ErrorCode.none:
            return top_error
        if topic not in readable:
            return ErrorCode.topic_authorization_failed
        return apply_offset(ctx, topic, p, stage_offset)

    return commit_response(ctx, req, TXN_OFFSET_COMMIT, stage)


def txn_offset_commit_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    """TxnOffsetCommit fault response: every partition fails with ``code`` (nothing
    staged)."""
    return commit_response(ctx, req, TXN_OFFSET_COMMIT, lambda _topic, _p: code)


def write_txn_markers(ctx: Context, req: Any) -> Any:
    """WriteTxnMarkers v1-2: write COMMIT/ABORT markers to partitions this node leads.

    The request a transaction coordinator sends to partition leaders, and the one Kafka's
    admin client sends for ``abortTransaction`` (``kafka-transactions.sh abort``): it ends
    a producer's open transaction on each named partition (an ABORT marker unpins the
    LSO), whatever the coordinator's state of that transaction, which it does not
    change. Per partition, as Kafka's ``handleWriteTxnMarkersRequest``: an unknown
    partition is UNKNOWN_TOPIC_OR_PARTITION, one led elsewhere NOT_LEADER_OR_FOLLOWER; the
    marker's epoch older than the producer's (not newer, for a v2 marker of transaction
    version 2) is INVALID_PRODUCER_EPOCH; an older coordinator epoch than the last
    marker's TRANSACTION_COORDINATOR_FENCED. A marker on ``__consumer_offsets`` completes
    the producer's staged offset commits. ACLs: ALTER or CLUSTER_ACTION on the cluster,
    else every partition CLUSTER_AUTHORIZATION_FAILED.
    """
    mod = response_module(WRITE_TXN_MARKERS, ctx.version)
    cluster = ctx.cluster
    authorized = ctx.cluster_allowed(Operation.ALTER) or ctx.cluster_allowed(
        Operation.CLUSTER_ACTION
    )
    now = cluster.now_ms()
    written = False

    def write(marker: Any, topic: str, index: int) -> ErrorCode:
        nonlocal written
        if not authorized:
            return ErrorCode.cluster_authorization_failed
        log = cluster.partition(topic, index)
        if log is None:
            return ErrorCode.unknown_topic_or_partition
        if cluster.leader(topic, index) != ctx.node_id:
            return ErrorCode.not_leader_or_follower
        commit = bool(marker.transaction_result)
        if topic == OFFSETS_TOPIC:
            cluster.offsets.complete(index, marker.producer_id, commit)
            return ErrorCode.none
        try:
            log.append_marker(
                marker.producer_id,
                marker.producer_epoch,
                commit=commit,
                coordinator_epoch=marker.coordinator_epoch,
                now_ms=now,
                transaction_version=getattr(marker, "transaction_version", 0),
            )
        except RecordError as exc:
            return exc.code
        written = True
        return ErrorCode.none

    results = tuple(
        build(
            mod.WritableTxnMarkerResult,
            producer_id=marker.producer_id,
            topics=tuple(
                build(
                    mod.WritableTxnMarkerTopicResult,
                    name=topic.name,
                    partitions=tuple(
                        build(
                            mod.WritableTxnMarkerPartitionResult,
                            partition_index=index,
                            error_code=write(marker, topic.name, index),
                        )
                        for index in topic.partition_indexes
                    ),
                )
                for topic in marker.topics
            ),
        )
        for marker in req.markers
    )
    if written:
        cluster.notifier.fire()  # long-polling read_committed fetches see the new LSO
    return build(mod.WriteTxnMarkersResponse, markers=results)


def describe_transactions(ctx: Context, req: Any) -> Any:
    """DescribeTransactions v0: state, timeout, start time, producer id/epoch, partitions.

    The start time is the last transaction's, also once it completed (CompleteCommit,
    CompleteAbort), as Kafka keeps it; -1 when Empty (after InitProducerId).

    Unknown (or expired) ids: TRANSACTIONAL_ID_NOT_FOUND; empty id: INVALID_REQUEST;
    ids coordinated by another node, or by none during a handover: NOT_COORDINATOR; ids
    of a partition this node is loading: COORDINATOR_LOAD_IN_PROGRESS. ACLs: DESCRIBE on the
    transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED; the partitions of
    topics the principal may not DESCRIBE are left out.
    """
    mod = response_module(DESCRIBE_TRANSACTIONS, ctx.version)
    states = []
    for tid in req.transactional_ids:
        meta = None
        if not ctx.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
            code = ErrorCode.transactional_id_authorization_failed
        elif not tid:
            code = ErrorCode.invalid_request
        elif (moved := _txn_coordinator_error(ctx, tid)) is not ErrorCode.none:
            code = moved
        else:
            meta = ctx.cluster.txn.describe(tid)
            code = ErrorCode.none if meta else ErrorCode.transactional_id_not_found
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(meta.partitions) if meta else ():
            if not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, topic):
                continue
            by_topic.setdefault(topic, []).append(p)
        states.append(
            build(
                mod.TransactionState,
                error_code=code,
                transactional_id=tid,
                transaction_state=meta.state.value if meta else "",
                transaction_timeout=datetime.timedelta(milliseconds=meta.timeout_ms if meta else 0),
                # Not nullable: -1 (Empty, or an error) is 1 ms before the epoch.
                transaction_start_time=datetime.datetime.fromtimestamp(
                    (meta.start_ms if meta and meta.start_ms >= 0 else -1) / 1000,
                    tz=datetime.UTC,
                ),
                producer_id=meta.producer_id if meta else -1,
                producer_epoch=meta.epoch if meta else -1,
                topics=tuple(
                    build(mod.TopicData, topic=t, partitions=tuple(ps))
                    for t, ps in by_topic.items()
                ),
            )
        )
    return build(
        mod.DescribeTransactionsResponse,
        throttle_time=NO_THROTTLE,
        transaction_states=tuple(states),
    )


#: What Python's ``re`` accepts and RE2 (the engine of Kafka's id pattern) refuses:
#: lookarounds, backreferences (numbered or named) and possessive or atomic forms.
_NOT_RE2 = re.compile(r"\(\?<?[=!]|\\[1-9]|\(\?P=|\(\?>|[*+?}]\+")


def _id_pattern(text: str | None) -> re.Pattern[str] | None:
    """ListTransactions v2's ``TransactionalIdPattern`` (KIP-1152) compiled, None for no
    filter (null or empty, as Kafka reads it). Kafka compiles it with RE2 and keeps an id
    when the whole id matches.

    Raises
    ------
    re.error
        For a pattern RE2 refuses (what Python's ``re`` refuses too, and the forms only
        Python accepts).
    """
    if not text:
        return None
    if _NOT_RE2.search(text):
        raise re.error(f"not an RE2 regular expression: {text!r}")
    return re.compile(text)


def list_transactions(ctx: Context, req: Any) -> Any:
    """ListTransactions v0-2: the transactions this node coordinates, filtered.

    Filters are AND-ed: state names (unknown ones echoed in ``unknown_state_filters``),
    producer ids, (v1) a minimum running duration, measured as Kafka measures it
    from the last transaction's start time, kept after its completion; an id without one
    (Empty: -1) passes every duration; (v2, KIP-1152) a regular expression the whole
    transactional id must match (an invalid one: INVALID_REGULAR_EXPRESSION). Dead ids
    are never listed, nor ids the principal may not DESCRIBE.

    A coordinator move with a handover (``Cluster.move_coordinator``) is answered as
    Kafka's ``TransactionStateManager.listTransactionStates`` answers it: while no node
    owns the partition, its ids are listed nowhere, without an error; while this node
    loads a partition, the whole answer is COORDINATOR_LOAD_IN_PROGRESS.
    """
    mod = response_module(LIST_TRANSACTIONS, ctx.version)

    def refused(code: ErrorCode) -> Any:
        return build(
            mod.ListTransactionsResponse,
            throttle_time=NO_THROTTLE,
            error_code=code,
            unknown_state_filters=(),
            transaction_states=(),
        )

    if ctx.cluster.loading_on(COORDINATOR_TXN, ctx.node_id):
        return refused(ErrorCode.coordinator_load_in_progress)
    try:
        pattern = _id_pattern(getattr(req, "transactional_id_pattern", None))
    except re.error:
        return refused(ErrorCode.invalid_regular_expression)
    valid = {s.value for s in TxnState}
    unknown = tuple(s for s in req.state_filters if s not in valid)
    states = set(req.state_filters) - set(unknown)
    pids = set(req.producer_id_filters)
    duration_ms = getattr(req, "duration_filter", -1)
    now = ctx.cluster.now_ms()
    rows = []
    for tid, meta in sorted(ctx.cluster.txn.txns.items()):
        if meta.state is TxnState.DEAD or _txn_coordinator_error(ctx, tid) is not ErrorCode.none:
            continue
        if not ctx.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
            continue
        if req.state_filters and meta.state.value not in states:
            continue
        if pids and meta.producer_id not in pids:
            continue
        if pattern is not None and pattern.fullmatch(tid) is None:
            continue
        # Kafka's test: now - start > filter, also for the start of -1 (Empty: listed).
        if duration_ms >= 0 and not now - meta.start_ms > duration_ms:
            continue
        rows.append(
            build(
                mod.TransactionState,
                transactional_id=tid,
                producer_id=meta.producer_id,
                transaction_state=meta.state.value,
            )
        )
    return build(
        mod.ListTransactionsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        unknown_state_filters=unknown,
        transaction_states=tuple(rows),
    )


def init_producer_id_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    """InitProducerId: ``code``, no producer id or epoch."""
    return _producer_response(
        response_module(INIT_PRODUCER_ID, ctx.version).InitProducerIdResponse, code
    )


def add_offsets_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    """AddOffsetsToTxn: ``code``."""
    mod = response_module(ADD_OFFSETS_TO_TXN, ctx.version)
    return build(mod.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE, error_code=code)


def end_txn_error(ctx: Context, req: Any, code: ErrorCode) -> Any:
    """EndTxn: ``code``, no producer id or epoch (v5)."""
    return _producer_response(response_module(END_TXN, ctx.version).EndTxnResponse, code)


SPECS = (
    ApiSpec(INIT_PRODUCER_ID, "InitProducerId", 0, 5, init_producer_id, init_producer_id_error),
    ApiSpec(
        ADD_PARTITIONS_TO_TXN,
        "AddPartitionsToTxn",
        0,
        3,
        add_partitions_to_txn,
        add_partitions_error,
    ),
    ApiSpec(ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", 0, 4, add_offsets_to_txn, add_offsets_error),
    ApiSpec(END_TXN, "EndTxn", 0, 5, end_txn, end_txn_error),
    ApiSpec(WRITE_TXN_MARKERS, "WriteTxnMarkers", 1, 2, write_txn_markers),
    ApiSpec(
        TXN_OFFSET_COMMIT,
        "TxnOffsetCommit",
        0,
        5,
        txn_offset_commit,
        txn_offset_commit_error,
    ),
    ApiSpec(DESCRIBE_TRANSACTIONS, "DescribeTransactions", 0, 0, describe_transactions),
    ApiSpec(LIST_TRANSACTIONS, "ListTransactions", 0, 2, list_transactions),
)
