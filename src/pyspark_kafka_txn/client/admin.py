"""Admin calls the exactly-once writer needs.

* :func:`create_topics` (CreateTopics, sent to the controller);
* :func:`describe_broker_configs` (DescribeConfigs, e.g. ``transaction.max.timeout.ms``);
* :func:`list_transactions` / :func:`describe_transactions` (find lingering transactions:
  ListTransactions goes to every broker, each coordinating a share of the ids);
* :func:`fetch_offsets` (OffsetFetch with RequireStable; UNSTABLE_OFFSET_COMMIT, i.e. a
  transactional offset commit still pending, is retried until it settles);
* :func:`commit_offsets` (OffsetCommit outside any group generation: the writer's durable
  commit decision).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from pyspark_kafka_txn.client.connection import Connection, request_entity
from pyspark_kafka_txn.client.errors import (
    CLUSTER_NAME,
    RESOURCE_CLUSTER,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    RESOURCE_TRANSACTIONAL_ID,
    BrokerError,
    authorization_error,
)
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.wire import (
    BROKER_RESOURCE,
    COORDINATOR_GROUP,
    COORDINATOR_TXN,
    CREATE_TOPICS,
    DESCRIBE_CONFIGS,
    DESCRIBE_TRANSACTIONS,
    LIST_TRANSACTIONS,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    TopicPartition,
)

__all__ = [
    "CommittedOffset",
    "TransactionDescription",
    "TransactionListing",
    "commit_offsets",
    "create_topics",
    "describe_broker_configs",
    "describe_transactions",
    "fetch_offsets",
    "list_transactions",
    "literal",
]


@dataclass(frozen=True, slots=True)
class TransactionListing:
    """One entry of ListTransactions."""

    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """DescribeTransactions result of one transactional id."""

    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """A committed offset (-1 if none) and its metadata."""

    offset: int
    metadata: str | None


def create_topics(
    cluster: ClusterClient,
    topics: Mapping[str, int],
    *,
    replication_factor: int = -1,
    configs: Mapping[str, str] | None = None,
    exist_ok: bool = False,
    timeout_ms: int = 30_000,
) -> None:
    """Create ``{name: partitions}``; TOPIC_ALREADY_EXISTS is ignored with ``exist_ok``."""

    def call() -> None:
        conn = cluster.controller()
        version = conn.version(CREATE_TOPICS, 2, 7)
        entries = tuple(
            request_entity(
                CREATE_TOPICS,
                version,
                "CreatableTopic",
                name=name,
                num_partitions=parts,
                replication_factor=replication_factor,
                assignments=(),
                configs=tuple(
                    request_entity(CREATE_TOPICS, version, "CreatableTopicConfig", name=k, value=v)
                    for k, v in (configs or {}).items()
                ),
            )
            for name, parts in topics.items()
        )
        body = conn.request(
            CREATE_TOPICS,
            version,
            topics=entries,
            timeout=timedelta(milliseconds=timeout_ms),
            validate_only=False,
        )
        for res in body.topics:
            code = res.error_code
            if code == ErrorCode.topic_already_exists and exist_ok:
                continue
            _raise_for(
                code,
                "CreateTopics",
                {RESOURCE_TOPIC: ("CREATE", str(res.name))},
                f"CreateTopics({res.name}): {res.error_message or ''}",
            )

    cluster.retrying("CreateTopics", call)


def describe_broker_configs(
    cluster: ClusterClient, keys: Iterable[str], *, broker_id: int | None = None
) -> dict[str, str | None]:
    """Values of broker configs ``keys`` (of ``broker_id`` or any broker)."""
    wanted = tuple(keys)

    def call() -> dict[str, str | None]:
        node = broker_id if broker_id is not None else min(cluster.brokers())
        conn = cluster.connection(node)
        version = conn.version(DESCRIBE_CONFIGS, 1, 4)
        resource = request_entity(
            DESCRIBE_CONFIGS,
            version,
            "DescribeConfigsResource",
            resource_type=BROKER_RESOURCE,
            resource_name=str(node),
            configuration_keys=wanted,
        )
        body = conn.request(
            DESCRIBE_CONFIGS,
            version,
            resources=(resource,),
            include_synonyms=False,
            include_documentation=False,
        )
        out: dict[str, str | None] = {}
        for result in body.results:
            _raise_for(
                result.error_code,
                "DescribeConfigs",
                {RESOURCE_CLUSTER: ("DESCRIBE_CONFIGS", CLUSTER_NAME)},
                f"DescribeConfigs({result.error_message})",
            )
            for entry in result.configs:
                out[str(entry.name)] = entry.value
        return out

    return cluster.retrying("DescribeConfigs", call)


#: The characters with a meaning in a regular expression outside a class, in RE2 (Kafka's
#: engine for ListTransactions' id pattern) and in Python's ``re`` alike.
_META = frozenset("\\.^$|?*+()[]{}")


def literal(text: str) -> str:
    """``text`` as a regular expression that matches exactly it, read alike by RE2 and
    Python's ``re``: each metacharacter escaped with a backslash (both take an escaped
    punctuation character as itself), every other character as is."""
    return "".join("\\" + c if c in _META else c for c in text)


def list_transactions(
    cluster: ClusterClient,
    *,
    states: Iterable[str] = (),
    producer_ids: Iterable[int] = (),
    min_duration_ms: int = -1,
    id_pattern: str | None = None,
) -> list[TransactionListing]:
    """ListTransactions on every broker, filters AND-ed.

    ``min_duration_ms`` (KIP-994) needs ListTransactions v1, which brokers serve from
    Kafka 3.8 on. An older broker (v0) cannot filter by age: it lists every transaction
    the other filters match, so a caller that needs the age checks it itself, from
    :func:`describe_transactions`' start time (``writer/abandoned.py`` does).

    ``id_pattern``: a regular expression the whole transactional id must match, in the
    syntax RE2 and Python's ``re`` share (build it with :func:`literal`). A broker that
    serves ListTransactions v2 (KIP-1152, Kafka 4.1 on) filters by it, so that the answer
    holds only the ids asked about however many transactions other writers have open;
    an older broker lists them all and the ids are filtered here, with the same result.
    """
    states, producer_ids = tuple(states), tuple(producer_ids)
    matcher = re.compile(id_pattern) if id_pattern else None
    out: list[TransactionListing] = []
    for node in sorted(cluster.brokers()):

        def call(node: int = node) -> list[TransactionListing]:
            conn = cluster.connection(node)
            version = conn.version(LIST_TRANSACTIONS, 0, 2 if matcher else 1)
            pattern: dict[str, Any] = (
                {"transactional_id_pattern": id_pattern} if version >= 2 else {}
            )
            body = conn.request(
                LIST_TRANSACTIONS,
                version,
                state_filters=states,
                producer_id_filters=producer_ids,
                duration_filter=min_duration_ms,
                **pattern,
            )
            if body.error_code != ErrorCode.none:
                raise BrokerError(body.error_code, f"ListTransactions on broker {node}")
            return [
                TransactionListing(
                    str(t.transactional_id), int(t.producer_id), str(t.transaction_state)
                )
                for t in body.transaction_states
                if matcher is None or matcher.fullmatch(str(t.transactional_id))
            ]

        out.extend(cluster.retrying("ListTransactions", call))
    return sorted(out, key=lambda t: t.transactional_id)


def describe_transactions(
    cluster: ClusterClient, transactional_ids: Iterable[str]
) -> dict[str, TransactionDescription | None]:
    """DescribeTransactions per id at its coordinator; None for unknown ids."""
    out: dict[str, TransactionDescription | None] = {}
    for tid in transactional_ids:

        def call(conn: Connection, tid: str = tid) -> TransactionDescription | None:
            version = conn.version(DESCRIBE_TRANSACTIONS, 0, 0)
            # kio rejects the -1 start time Kafka sends for unknown/Empty ids: decode here.
            frame, pos = conn.request(
                DESCRIBE_TRANSACTIONS, version, transactional_ids=(tid,), raw_response=True
            )
            (state,) = _decode_describe_transactions_v0(frame, pos)
            if state.code == ErrorCode.transactional_id_not_found:
                return None
            _raise_for(
                state.code,
                "DescribeTransactions",
                {RESOURCE_TRANSACTIONAL_ID: ("DESCRIBE", tid)},
                f"DescribeTransactions({tid!r})",
            )
            return state.description

        out[tid] = cluster.coordinator_call(COORDINATOR_TXN, tid, "DescribeTransactions", call)
    return out


def fetch_offsets(
    cluster: ClusterClient,
    group_id: str,
    partitions: Iterable[TopicPartition] | None,
    *,
    require_stable: bool = True,
) -> dict[TopicPartition, CommittedOffset]:
    """OffsetFetch (v7 or lower) of ``partitions`` (None: every committed one) of a group.

    With ``require_stable`` a partition with a pending transactional offset answers
    UNSTABLE_OFFSET_COMMIT, which is retried until the transaction ends (or time runs out).
    """
    by_topic: dict[str, list[int]] | None = None
    if partitions is not None:
        by_topic = {}
        for topic, part in partitions:
            by_topic.setdefault(topic, []).append(part)

    def call(conn: Connection) -> dict[TopicPartition, CommittedOffset]:
        version = conn.version(OFFSET_FETCH, 1, 7)
        if require_stable and version < 7:
            raise BrokerError(ErrorCode.unsupported_version, "OffsetFetch with RequireStable")
        topics = (
            None
            if by_topic is None
            else tuple(
                request_entity(
                    OFFSET_FETCH,
                    version,
                    "OffsetFetchRequestTopic",
                    name=t,
                    partition_indexes=tuple(sorted(ps)),
                )
                for t, ps in by_topic.items()
            )
        )
        body = conn.request(
            OFFSET_FETCH, version, group_id=group_id, topics=topics, require_stable=require_stable
        )
        top = getattr(body, "error_code", ErrorCode.none)
        needs = {RESOURCE_GROUP: ("DESCRIBE", group_id)}
        _raise_for(top, "OffsetFetch", needs, f"OffsetFetch({group_id!r})")
        out: dict[TopicPartition, CommittedOffset] = {}
        for topic in body.topics:
            for res in topic.partitions:
                needs[RESOURCE_TOPIC] = ("DESCRIBE", str(topic.name))
                _raise_for(
                    res.error_code, "OffsetFetch", needs, f"OffsetFetch({group_id!r}, {topic.name})"
                )
                out[TopicPartition(str(topic.name), int(res.partition_index))] = CommittedOffset(
                    int(res.committed_offset), res.metadata
                )
        return out

    return cluster.coordinator_call(COORDINATOR_GROUP, group_id, "OffsetFetch", call)


def commit_offsets(
    cluster: ClusterClient,
    group_id: str,
    offsets: Mapping[TopicPartition, tuple[int, str | None]],
) -> None:
    """OffsetCommit (v5-8) for a group without members (generation -1, no member id).

    Parameters
    ----------
    offsets
        ``(topic, partition) -> (offset, metadata)``; the partitions must exist and each
        metadata must fit the broker's ``offset.metadata.max.bytes`` (4096 by default).

    Raises
    ------
    BrokerError
        The first partition's error (e.g. OFFSET_METADATA_TOO_LARGE,
        UNKNOWN_TOPIC_OR_PARTITION); retriable ones are retried first.
    """

    def call(conn: Connection) -> None:
        version = conn.version(OFFSET_COMMIT, 5, 8)  # v5+: no retention field
        body = conn.request(
            OFFSET_COMMIT,
            version,
            group_id=group_id,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=offset_commit_topics(OFFSET_COMMIT, version, "OffsetCommitRequest", offsets),
        )
        for topic in body.topics:
            for res in topic.partitions:
                _raise_for(
                    res.error_code,
                    "OffsetCommit",
                    {RESOURCE_GROUP: ("READ", group_id), RESOURCE_TOPIC: ("READ", str(topic.name))},
                    f"OffsetCommit({group_id!r}, {topic.name})",
                )

    cluster.coordinator_call(COORDINATOR_GROUP, group_id, "OffsetCommit", call)


def offset_commit_topics(
    api_key: int,
    version: int,
    entity_prefix: str,
    offsets: Mapping[TopicPartition, tuple[int, str | None]],
) -> tuple[Any, ...]:
    """The ``topics`` of an OffsetCommit or a TxnOffsetCommit request (the same fields).

    Parameters
    ----------
    api_key, version
        The request's API key and version.
    entity_prefix
        Its entities' common prefix: ``"OffsetCommitRequest"`` or
        ``"TxnOffsetCommitRequest"`` (``…Topic`` holds ``…Partition`` entries).
    offsets
        ``(topic, partition) -> (offset, metadata)``, sent sorted by topic and partition.
    """
    by_topic: dict[str, list[tuple[int, int, str | None]]] = {}
    for (topic, part), (offset, metadata) in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append((part, offset, metadata))
    return tuple(
        request_entity(
            api_key,
            version,
            f"{entity_prefix}Topic",
            name=t,
            partitions=tuple(
                request_entity(
                    api_key,
                    version,
                    f"{entity_prefix}Partition",
                    partition_index=p,
                    committed_offset=o,
                    committed_leader_epoch=-1,  # v2+ of TxnOffsetCommit
                    committed_metadata=m,
                )
                for p, o, m in ps
            ),
        )
        for t, ps in by_topic.items()
    )


def _raise_for(
    code: ErrorCode, api: str, needs: Mapping[str, tuple[str, str]], context: str
) -> None:
    """Raise for an admin response's error code (nothing for NONE).

    An authorization code raises :class:`AuthorizationError` naming what ``api`` needs
    (``needs``, as :func:`authorization_error` takes it); any other, :class:`BrokerError`
    with ``context``.
    """
    denied = authorization_error(code, api, needs)
    if denied is not None:
        raise denied
    if code != ErrorCode.none:
        raise BrokerError(code, context)


@dataclass(frozen=True, slots=True)
class _DescribedState:
    code: ErrorCode
    description: TransactionDescription


class _Reader:
    """Minimal reader of flexible-version primitives (DescribeTransactions v0 only)."""

    def __init__(self, data: bytes, pos: int) -> None:
        self.data = data
        self.pos = pos

    def fixed(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    def string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            return ""
        text = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return text

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


def _decode_describe_transactions_v0(data: bytes, pos: int) -> list[_DescribedState]:
    r = _Reader(data, pos)
    r.fixed(">i")  # throttle time
    out = []
    for _ in range(r.uvarint() - 1):
        code = ErrorCode(r.fixed(">h"))
        tid = r.string()
        state = r.string()
        timeout_ms = r.fixed(">i")
        start_ms = r.fixed(">q")
        producer_id = r.fixed(">q")
        epoch = r.fixed(">h")
        parts: list[TopicPartition] = []
        for _ in range(r.uvarint() - 1):
            topic = r.string()
            parts.extend(TopicPartition(topic, r.fixed(">i")) for _ in range(r.uvarint() - 1))
            r.skip_tags()
        r.skip_tags()
        desc = TransactionDescription(
            tid, state, producer_id, epoch, timeout_ms, start_ms, tuple(sorted(parts))
        )
        out.append(_DescribedState(code, desc))
    return out
