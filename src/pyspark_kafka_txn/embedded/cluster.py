"""Cluster state: topics, partition placement, coordinators, and the state owners.

Everything here runs on the broker's single event-loop thread (as franz-go's kfake runs
all state changes on one goroutine), so no locks are needed. Request handlers and the
public :class:`~pyspark_kafka_txn.embedded.EmbeddedKafka` API call into it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark_kafka_txn.embedded.acl import Authorizer
from pyspark_kafka_txn.embedded.config import (
    DEFAULT_TIMESTAMP_AFTER_MAX_MS,
    DEFAULT_TIMESTAMP_BEFORE_MAX_MS,
    ClusterConfig,
)
from pyspark_kafka_txn.embedded.faults import Faults
from pyspark_kafka_txn.embedded.groups import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    GroupOffsets,
    coordinator_partition,
)
from pyspark_kafka_txn.embedded.log import PartitionLog
from pyspark_kafka_txn.embedded.membership import GroupMembership
from pyspark_kafka_txn.embedded.protocol import ErrorCode
from pyspark_kafka_txn.embedded.records import RecordError
from pyspark_kafka_txn.embedded.security import ScramStore
from pyspark_kafka_txn.embedded.storage import Storage
from pyspark_kafka_txn.embedded.topic_config import (
    TOPIC_CONFIGS,
    InvalidConfigError,
    check_together,
    normalize,
)
from pyspark_kafka_txn.embedded.txn import TransactionCoordinator
from pyspark_kafka_txn.wire import COORDINATOR_GROUP, COORDINATOR_TXN, TopicPartition

logger = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})
MAX_TOPIC_NAME = 249
#: The coordinator key type whose state each internal topic holds.
_INTERNAL_KEY_TYPE = {OFFSETS_TOPIC: COORDINATOR_GROUP, TRANSACTION_STATE_TOPIC: COORDINATOR_TXN}

#: Every Kafka 4.x topic config with its default (:mod:`.topic_config`).
TOPIC_CONFIG_DEFAULTS: dict[str, str] = {
    **{name: key.default for name, key in TOPIC_CONFIGS.items()},
    "message.timestamp.before.max.ms": str(DEFAULT_TIMESTAMP_BEFORE_MAX_MS),
    "message.timestamp.after.max.ms": str(DEFAULT_TIMESTAMP_AFTER_MAX_MS),
}


class TopicError(Exception):
    """A topic operation failed with ``code``."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def validate_topic_name(name: str) -> None:
    """Reject names Kafka rejects (``Topic.validate``)."""
    if not name or name in (".", ".."):
        raise TopicError(ErrorCode.invalid_topic_exception, f"invalid topic name {name!r}")
    if len(name) > MAX_TOPIC_NAME:
        raise TopicError(
            ErrorCode.invalid_topic_exception,
            f"topic name {name!r} is longer than {MAX_TOPIC_NAME} characters",
        )
    if not all(c.isascii() and (c.isalnum() or c in "._-") for c in name):
        raise TopicError(
            ErrorCode.invalid_topic_exception,
            f"topic name {name!r} contains characters other than ASCII alphanumerics, '.', "
            "'_' and '-'",
        )


def validate_topic_config(config: Mapping[str, str | None]) -> dict[str, str]:
    """The topic configs as stored, or :class:`TopicError` INVALID_CONFIG naming the one
    Kafka would refuse (unknown name, wrong type, out of range, in conflict with another)."""
    try:
        stored = {key: normalize(key, value) for key, value in config.items()}
        check_together(stored)
    except InvalidConfigError as exc:
        raise TopicError(ErrorCode.invalid_config, str(exc)) from None
    return stored


@dataclass(slots=True)
class Topic:
    """A topic and its partitions."""

    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionLog]
    leaders: list[int]
    config: dict[str, str] = field(default_factory=dict)
    #: The cluster's defaults for the configs the topic does not set.
    defaults: Mapping[str, str] = field(default_factory=lambda: TOPIC_CONFIG_DEFAULTS)

    def config_value(self, key: str) -> str:
        return self.config.get(key, self.defaults.get(key, ""))


class Notifier:
    """Wakes long-polling fetches when any log changes."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def fire(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout_s: float) -> None:
        event = self._event
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
        except TimeoutError:
            return


@dataclass(frozen=True)
class Handover:
    """A coordinator partition moving to another node (``time.monotonic()`` instants):
    owned by no node until ``owned_at``, then loaded by the new one until ``loaded_at``."""

    owned_at: float
    loaded_at: float


class Cluster:
    """The state of the whole embedded cluster."""

    def __init__(self, config: ClusterConfig, loop: asyncio.AbstractEventLoop) -> None:
        self.config = config
        self.loop = loop
        self.topic_defaults = {
            **TOPIC_CONFIG_DEFAULTS,
            "message.timestamp.before.max.ms": str(config.log_message_timestamp_before_max_ms),
            "message.timestamp.after.max.ms": str(config.log_message_timestamp_after_max_ms),
        }
        self.node_ids = list(range(config.brokers))
        self.addresses: dict[int, tuple[str, int]] = {}
        self.running: set[int] = set()
        self.topics: dict[str, Topic] = {}
        self.topics_by_id: dict[uuid.UUID, Topic] = {}
        self.notifier = Notifier()
        self.faults = Faults()
        self.internal_errors: list[str] = []
        self.coordinator_overrides: dict[tuple[int, int], int] = {}
        #: Coordinator partitions between two nodes (not persisted: a restart ends them).
        self.handovers: dict[tuple[int, int], Handover] = {}
        #: Per coordinator partition, the requests for one of its keys that its new node
        #: refused while no node owned it (a test's proof that its gap was met).
        self.unowned_refusals: dict[tuple[int, int], int] = {}
        self.storage = Storage(config.data_dir) if config.data_dir is not None else None
        self.offsets = GroupOffsets(
            sink=self.storage.line_sink(OFFSETS_TOPIC) if self.storage else None
        )
        self.membership = GroupMembership(
            loop=loop,
            offsets=self.offsets,
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            report_error=self.internal_errors.append,
        )
        self.txn = TransactionCoordinator(
            clock_ms=self.now_ms,
            write_markers=self.write_markers,
            schedule=self.schedule,
            transaction_version=config.transaction_version,
            max_timeout_ms=config.transaction_max_timeout_ms,
            two_phase_commit=config.transaction_two_phase_commit,
            sink=self.storage.line_sink(TRANSACTION_STATE_TOPIC) if self.storage else None,
            initial_producer_epoch=config.initial_producer_epoch,
            handover_s=lambda tid: self.handover_s(COORDINATOR_TXN, tid),
        )
        self.scram = ScramStore(config.security.users)
        self.authorizer = (
            Authorizer(
                config.super_users,
                allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
            )
            if config.authorizer
            else None
        )
        self._dormant_acls: list[Any] = []  # kept while a restart runs without ACLs
        self.internal_logs: dict[str, list[PartitionLog]] = {}
        self._log_starts: dict[str, list[int]] = {}
        if self.storage is not None:
            self._recover()

    # --- time and scheduling -----------------------------------------------------

    @staticmethod
    def now_ms() -> int:
        return int(time.time() * 1000)

    def schedule(self, delay_s: float, fn: Callable[[], None]) -> None:
        if delay_s <= 0:
            self.loop.call_soon(fn)
        else:
            self.loop.call_later(delay_s, fn)

    # --- recovery -----------------------------------------------------------------

    def _recover(self) -> None:
        assert self.storage is not None
        meta = self.storage.load_meta()
        if meta is not None:
            for t in meta["topics"]:
                self._add_topic(
                    t["name"],
                    uuid.UUID(t["id"]),
                    t["partitions"],
                    dict(t["config"]),
                    log_starts=t.get("log_starts"),
                    leaders=t.get("leaders"),
                    leader_epochs=t.get("leader_epochs"),
                )
            for key_type, part, node in meta.get("coordinators", ()):
                if node in self.node_ids:
                    self.coordinator_overrides[(key_type, part)] = node
            if "scram" in meta:
                self.scram.load(meta["scram"])
            self._dormant_acls = meta.get("acls", [])
            if self.authorizer is not None:
                self.authorizer.load(self._dormant_acls)
            for name in meta.get("internal_topics", ()):
                self.use_internal_topic(name, save=False)
        self.offsets.load(self.storage.read_lines(OFFSETS_TOPIC))
        self.txn.load(self.storage.read_lines(TRANSACTION_STATE_TOPIC))

    def save_meta(self) -> None:
        """Persist the cluster's metadata (topics, coordinators, SCRAM credentials, ACLs)."""
        if self.storage is None:
            return
        self.storage.save_meta(
            {
                # ACLs outlive a restart without the authorizer, as Kafka's metadata does.
                "acls": (
                    self.authorizer.to_json() if self.authorizer is not None else self._dormant_acls
                ),
                "cluster_id": self.config.cluster_id,
                "coordinators": [[k, p, n] for (k, p), n in self.coordinator_overrides.items()],
                "scram": self.scram.to_json(),
                "internal_topics": sorted(self.internal_logs),
                "topics": [
                    {
                        "name": t.name,
                        "id": str(t.topic_id),
                        "partitions": len(t.partitions),
                        "config": t.config,
                        "log_starts": [p.log_start_offset for p in t.partitions],
                        "leaders": list(t.leaders),
                        "leader_epochs": [p.leader_epoch for p in t.partitions],
                    }
                    for t in self.topics.values()
                ],
            }
        )

    # --- topics -------------------------------------------------------------------

    def _add_topic(
        self,
        name: str,
        topic_id: uuid.UUID,
        partitions: int,
        config: dict[str, str],
        *,
        log_starts: list[int] | None = None,
        leaders: list[int] | None = None,
        leader_epochs: list[int] | None = None,
    ) -> Topic:
        """Register a topic, loading its partitions from storage when there is any.

        ``log_starts``, ``leaders`` and ``leader_epochs`` come from the saved metadata
        on recovery (leaders on nodes that no longer exist are placed afresh).
        """
        logs = []
        for p in range(partitions):
            log = self._new_log(name, p, config)
            if self.storage is not None:
                if log_starts:
                    log.log_start_offset = min(log_starts[p], log.log_end_offset)
                if leader_epochs:
                    log.leader_epoch = max(log.leader_epoch, leader_epochs[p])
            logs.append(log)
        n = len(self.node_ids)
        offset = len(self.topics)
        placed = [self.node_ids[(offset + p) % n] for p in range(partitions)]
        if leaders and len(leaders) == partitions:
            placed = [
                node if node in self.node_ids else placed[p] for p, node in enumerate(leaders)
            ]
        leaders = placed
        topic = Topic(name, topic_id, logs, leaders, config, self.topic_defaults)
        self.topics[name] = topic
        self.topics_by_id[topic_id] = topic
        return topic

    def create_topic(
        self, name: str, partitions: int | None = None, config: dict[str, str] | None = None
    ) -> Topic:
        """Create a topic; raises :class:`TopicError` with Kafka's error code."""
        validate_topic_name(name)
        if name in INTERNAL_TOPICS:
            raise TopicError(
                ErrorCode.invalid_request, f"{name} is an internal topic of the embedded cluster"
            )
        if name in self.topics:
            raise TopicError(ErrorCode.topic_already_exists, f"topic {name!r} already exists")
        count = self.config.num_partitions if partitions in (None, -1) else partitions
        assert count is not None
        if count <= 0:
            raise TopicError(
                ErrorCode.invalid_partitions, f"number of partitions must be > 0, got {count}"
            )
        config = validate_topic_config(config or {})
        topic = self._add_topic(name, uuid.uuid4(), count, config)
        self.save_meta()
        logger.info("created topic %s with %d partition(s)", name, count)
        return topic

    def _new_log(self, name: str, partition: int, config: Mapping[str, str]) -> PartitionLog:
        """The log of one partition, loaded from storage when there is any."""
        log_append = config.get("message.timestamp.type") == "LogAppendTime"
        log = PartitionLog(name, partition, log_append_time=log_append)
        if self.storage is not None:
            data = self.storage.read_partition(name, partition)
            if data:
                try:
                    log.load(data)
                except RecordError as exc:
                    logger.warning("truncating torn tail of %s-%d: %s", name, partition, exc)
                    self.storage.truncate_partition(name, partition, log.size_bytes)
            log._sink = self.storage.partition_sink(name, partition)
        return log

    def add_partitions(
        self,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> Topic:
        """Grow topic ``name`` to ``count`` partitions (CreatePartitions).

        ``assignments`` lists the replicas of each new partition (its first broker leads);
        without, leaders are placed round-robin from the node after the last partition's.
        Raises :class:`TopicError` with Kafka's error code and message.
        """
        topic = self.topics.get(name)
        if topic is None:
            raise TopicError(
                ErrorCode.unknown_topic_or_partition,
                f"This server does not host this topic: {name!r}",
            )
        current = len(topic.partitions)
        if count == current:
            raise TopicError(
                ErrorCode.invalid_partitions, f"Topic already has {current} partition(s)."
            )
        if count < current:
            raise TopicError(
                ErrorCode.invalid_partitions,
                f"The topic {name} currently has {current} partition(s); {count} would not be "
                "an increase.",
            )
        added = count - current
        if assignments is not None:
            if len(assignments) != added:
                raise TopicError(
                    ErrorCode.invalid_replica_assignment,
                    f"Attempted to add {added} additional partition(s), but only "
                    f"{len(assignments)} assignment(s) were specified.",
                )
            for replicas in assignments:
                unknown = [b for b in replicas if b not in self.node_ids]
                if unknown:
                    raise TopicError(
                        ErrorCode.invalid_replica_assignment,
                        f"The manual partition assignment includes broker {unknown[0]}, but "
                        "no broker with that ID is registered.",
                    )
                if len(replicas) != 1:
                    raise TopicError(
                        ErrorCode.invalid_replica_assignment,
                        f"The manual partition assignment includes a partition with "
                        f"{len(replicas)} replica(s), but this is not consistent with previous "
                        "partitions, which have 1 replica(s).",
                    )
        if validate_only:
            return topic
        n = len(self.node_ids)
        start = (
            self.node_ids.index(topic.leaders[-1]) + 1 if topic.leaders[-1] in self.node_ids else 0
        )
        for i, p in enumerate(range(current, count)):
            topic.partitions.append(self._new_log(name, p, topic.config))
            leader = assignments[i][0] if assignments else self.node_ids[(start + i) % n]
            topic.leaders.append(leader)
        self.save_meta()
        self.notifier.fire()
        logger.info("topic %s grew from %d to %d partition(s)", name, current, count)
        return topic

    def alter_topic_config(
        self, name: str, config: Mapping[str, str | None], *, validate_only: bool = False
    ) -> Topic:
        """Replace topic ``name``'s explicit configs with ``config`` (AlterConfigs).

        Raises :class:`TopicError`: UNKNOWN_TOPIC_OR_PARTITION, or INVALID_CONFIG.
        """
        topic = self.topics.get(name)
        if topic is None:
            raise TopicError(
                ErrorCode.unknown_topic_or_partition,
                f"This server does not host this topic: {name!r}",
            )
        stored = validate_topic_config(config)
        if validate_only:
            return topic
        topic.config = stored
        log_append = topic.config_value("message.timestamp.type") == "LogAppendTime"
        for log in topic.partitions:
            log.log_append_time = log_append
        self.save_meta()
        logger.info("topic %s configs set to %s", name, stored)
        return topic

    def delete_topic(self, name: str) -> None:
        topic = self.topics.pop(name, None)
        if topic is None:
            raise TopicError(ErrorCode.unknown_topic_or_partition, f"unknown topic {name!r}")
        del self.topics_by_id[topic.topic_id]
        self.offsets.delete_topic(name)
        if self.storage is not None:
            for p in range(len(topic.partitions)):
                self.storage.delete_partition(name, p)
        self.save_meta()
        self.notifier.fire()

    def partition(self, topic: str, partition: int) -> PartitionLog | None:
        t = self.topics.get(topic)
        logs = t.partitions if t is not None else self.internal_logs.get(topic)
        if logs is None or not 0 <= partition < len(logs):
            return None
        return logs[partition]

    def leader(self, topic: str, partition: int) -> int:
        t = self.topics.get(topic)
        if t is None:  # an internal topic: its partitions are led by their coordinators
            return self.coordinator_of_partition(_INTERNAL_KEY_TYPE[topic], partition)
        return t.leaders[partition]

    # --- internal topics ----------------------------------------------------------

    def use_internal_topic(self, name: str, *, save: bool = True) -> None:
        """``__consumer_offsets`` or ``__transaction_state``, created on first use as Kafka
        does (its coordinators keep their state elsewhere here: the logs stay empty)."""
        if name not in self.internal_logs:
            self.internal_logs[name] = [
                PartitionLog(name, p) for p in range(OFFSETS_TOPIC_PARTITIONS)
            ]
            if save:
                logger.info("created internal topic %s", name)
                self.save_meta()

    def internal_topic(self, name: str) -> Topic:
        """An internal topic in use, its partitions led by their coordinators' nodes."""
        logs = self.internal_logs[name]
        key_type = _INTERNAL_KEY_TYPE[name]
        leaders = [self.coordinator_of_partition(key_type, p) for p in range(len(logs))]
        topic_id = uuid.uuid5(uuid.NAMESPACE_URL, f"kafka-internal:{self.config.cluster_id}:{name}")
        return Topic(name, topic_id, logs, leaders, {}, self.topic_defaults)

    def move_leader(self, topic: str, partition: int, node: int) -> None:
        t = self.topics[topic]
        t.leaders[partition] = node
        t.partitions[partition].leader_epoch += 1
        self.save_meta()
        self.notifier.fire()

    def log_start_changed(self) -> None:
        self.save_meta()

    # --- coordinators -------------------------------------------------------------

    def coordinator(self, key_type: int, key: str) -> int:
        """Node id of the group (0) or transaction (1) coordinator of ``key``."""
        return self.coordinator_of_partition(
            key_type, coordinator_partition(key, OFFSETS_TOPIC_PARTITIONS)
        )

    def coordinator_of_partition(self, key_type: int, part: int) -> int:
        """Node id leading partition ``part`` of the internal topic of ``key_type``."""
        node = self.coordinator_overrides.get((key_type, part))
        if node is not None:
            return node
        return self.node_ids[part % len(self.node_ids)]

    def move_coordinator(
        self,
        key_type: int,
        key: str,
        node: int,
        *,
        unowned_s: float = 0.0,
        loading_s: float = 0.0,
    ) -> None:
        """Make ``node`` the coordinator of ``key``'s partition of its internal topic.

        With ``unowned_s`` / ``loading_s`` (transaction coordinators only) the move is a
        handover as in Apache Kafka: FindCoordinator names ``node`` at once, but for
        ``unowned_s`` no node owns the partition (the old one resigned, ``node`` has not
        begun loading it), then ``node`` loads it for ``loading_s``; see
        :meth:`coordinator_error` and :meth:`loading_on`.
        """
        part = coordinator_partition(key, OFFSETS_TOPIC_PARTITIONS)
        self.coordinator_overrides[(key_type, part)] = node
        self.handovers.pop((key_type, part), None)
        if unowned_s > 0 or loading_s > 0:
            if key_type != COORDINATOR_TXN:
                raise ValueError("a coordinator handover is modelled for transactions only")
            owned = time.monotonic() + unowned_s
            self.handovers[(key_type, part)] = Handover(owned, owned + loading_s)
        self.save_meta()

    def _handover(self, key_type: int, part: int) -> Handover | None:
        """The handover of a partition still under way, if any (ended ones are dropped)."""
        handover = self.handovers.get((key_type, part))
        if handover is not None and time.monotonic() >= handover.loaded_at:
            del self.handovers[(key_type, part)]
            return None
        return handover

    def coordinator_error(self, key_type: int, key: str, node: int) -> ErrorCode:
        """What ``node`` answers a request for ``key`` that its coordinator must serve.

        NONE when ``node`` serves it; NOT_COORDINATOR when another node does, or none does
        for the moment (a handover before the new coordinator began loading: Kafka's
        ``TransactionStateManager`` neither holds nor loads the partition then);
        COORDINATOR_LOAD_IN_PROGRESS while ``node``, the new coordinator, loads it.
        """
        part = coordinator_partition(key, OFFSETS_TOPIC_PARTITIONS)
        if self.coordinator_of_partition(key_type, part) != node:
            return ErrorCode.not_coordinator
        handover = self._handover(key_type, part)
        if handover is None:
            return ErrorCode.none
        if time.monotonic() < handover.owned_at:
            self.unowned_refusals[(key_type, part)] = (
                self.unowned_refusals.get((key_type, part), 0) + 1
            )
            return ErrorCode.not_coordinator
        return ErrorCode.coordinator_load_in_progress

    def unowned_refused(self, key_type: int, key: str) -> int:
        """How many requests (one per key a listing skipped) for the keys of ``key``'s
        coordinator partition its new node refused while a handover left it unowned."""
        part = coordinator_partition(key, OFFSETS_TOPIC_PARTITIONS)
        return self.unowned_refusals.get((key_type, part), 0)

    def loading_on(self, key_type: int, node: int) -> bool:
        """Whether ``node`` is loading a partition it took over (Kafka then answers
        ListTransactions with COORDINATOR_LOAD_IN_PROGRESS)."""
        now = time.monotonic()
        return any(
            self.coordinator_of_partition(kt, part) == node and now >= h.owned_at
            for (kt, part), h in list(self.handovers.items())
            if kt == key_type and self._handover(kt, part) is not None
        )

    def handover_s(self, key_type: int, key: str) -> float:
        """Seconds until ``key``'s coordinator has loaded its partition (0 when it has)."""
        handover = self._handover(key_type, coordinator_partition(key, OFFSETS_TOPIC_PARTITIONS))
        return 0.0 if handover is None else max(0.0, handover.loaded_at - time.monotonic())

    # --- transactions -------------------------------------------------------------

    def write_markers(
        self, producer_id: int, epoch: int, commit: bool, partitions: Iterable[TopicPartition]
    ) -> None:
        """Write COMMIT/ABORT markers of a transaction to each of its partitions."""
        now = self.now_ms()
        for topic, index in partitions:
            if topic == OFFSETS_TOPIC:
                self.offsets.complete(index, producer_id, commit)
                continue
            log = self.partition(topic, index)
            if log is None:  # topic deleted meanwhile: nothing to mark
                continue
            try:
                log.append_marker(
                    producer_id, epoch, commit=commit, coordinator_epoch=0, now_ms=now
                )
            except RecordError as exc:
                # Only a marker written with WriteTxnMarkers (Kafka's admin abort) with a
                # higher coordinator epoch fences this coordinator's (always 0) markers;
                # Kafka's coordinator gives up on such a partition too.
                logger.warning(
                    "marker of producer %d on %s-%d refused: %s", producer_id, topic, index, exc
                )
        self.notifier.fire()

    def close(self) -> None:
        if self.storage is not None:
            self.storage.close()
