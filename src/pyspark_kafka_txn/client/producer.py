"""Transactional producer whose transactions any process can end.

:class:`TransactionalProducer` runs the KIP-98 flow on our own connections:
InitProducerId → (AddPartitionsToTxn → idempotent Produce)* → [AddOffsetsToTxn +
TxnOffsetCommit] → EndTxn, or stops before EndTxn with :meth:`~TransactionalProducer.prepare`,
handing ``(transactional_id, producer_id, epoch)`` to another process, which finishes
the transaction with :func:`end_transaction`.

This module owns the producer's calls to the transaction coordinator (InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit) and the split of produced rows by
partition. The rest lives in one module per role, whose public names are re-exported here:

* :mod:`~pyspark_kafka_txn.client.config`: :class:`ProducerConfig` (cheap to import);
* :mod:`~pyspark_kafka_txn.client.txn_state`: the :class:`TransactionState` machine: a call
  made in the wrong state raises :class:`TransactionError` naming the call and the state;
* :mod:`~pyspark_kafka_txn.client.sender`: batches, in-flight Produce requests, retries
  (its docstring states the delivery guarantees);
* :mod:`~pyspark_kafka_txn.client.ending`: :class:`PreparedTransaction`,
  :func:`end_transaction`, :func:`end_transactions`;
* :mod:`~pyspark_kafka_txn.client.error_codes`: :func:`check`, error code → exception.

Errors that retrying cannot fix surface as :class:`TransactionError` (``requires_abort``)
or :class:`ProducerFencedError`.

Transaction versions: with ``transaction_version=1`` (v1 flows, every broker since
0.11) partitions are added with AddPartitionsToTxn and EndTxn ≤ v4 keeps the epoch; with
``2`` (KIP-890, a broker whose finalized ``transaction.version`` is ≥ 2) Produce v12 /
TxnOffsetCommit v5 add partitions implicitly and EndTxn v5 returns the bumped epoch.

Two-phase commit participation (KIP-939): with ``transaction.two.phase.commit.enable``
set, InitProducerId v6 is sent with ``Enable2Pc``; the coordinator then never times the
transactions of this id out, so a prepared transaction waits for its
:func:`end_transaction` however long that takes. ``true`` requires a broker that
advertises InitProducerId v6 (:class:`ProtocolError` otherwise, before any transaction
state changes); ``auto`` uses 2PC where offered and the normal timeout elsewhere
(:attr:`TransactionalProducer.two_phase_commit` tells which). ``KeepPreparedTxn`` is not
offered: Kafka 4.3 and 4.4.0 brokers refuse it (UNSUPPORTED_VERSION, KAFKA-20739).
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from pyspark_kafka_txn.client.admin import offset_commit_topics
from pyspark_kafka_txn.client.config import TWO_PHASE_COMMIT_OPTION, ProducerConfig
from pyspark_kafka_txn.client.connection import Connection
from pyspark_kafka_txn.client.ending import (
    PreparedTransaction,
    end_transaction,
    end_transactions,
)
from pyspark_kafka_txn.client.error_codes import check
from pyspark_kafka_txn.client.errors import (
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    RESOURCE_TRANSACTIONAL_ID,
    ConfigError,
    KafkaTxnError,
    ProtocolError,
    TransactionError,
)
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.partitioner import choose_partitions
from pyspark_kafka_txn.client.records import RecordColumns
from pyspark_kafka_txn.client.sender import Sender
from pyspark_kafka_txn.client.txn_state import TransactionState, check_call, check_move
from pyspark_kafka_txn.wire import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    COORDINATOR_GROUP,
    COORDINATOR_TXN,
    INIT_PRODUCER_ID,
    TXN_OFFSET_COMMIT,
    TopicPartition,
)

__all__ = [
    "TWO_PHASE_COMMIT_OPTION",
    "PreparedTransaction",
    "ProducerConfig",
    "TransactionState",
    "TransactionalProducer",
    "check",
    "end_transaction",
    "end_transactions",
]

logger = logging.getLogger(__name__)

INIT_PRODUCER_ID_2PC = 6  # first InitProducerId version with Enable2Pc (KIP-939)

# Failed state -> the calls that raise the failure that put the transaction there.
_NEEDS_TXN = frozenset(
    {"add_partitions", "produce", "send_offsets_to_transaction", "prepare", "commit_transaction"}
)
_RAISE_FAILURE = {
    TransactionState.ABORTABLE_ERROR: _NEEDS_TXN,
    TransactionState.FATAL_ERROR: _NEEDS_TXN | {"abort_transaction"},
}


class TransactionalProducer:
    """A transactional, idempotent producer of Arrow data.

    Parameters
    ----------
    config
        Producer options.
    cluster
        An existing :class:`ClusterClient` to share (the producer then does not close it).

    Examples
    --------
    >>> producer = TransactionalProducer(ProducerConfig("localhost:9092", "tx-1"))  # doctest: +SKIP
    >>> producer.init_transactions()  # doctest: +SKIP
    >>> producer.begin_transaction()  # doctest: +SKIP
    >>> producer.produce("topic", values=pa.array([b"a", b"b"]))  # doctest: +SKIP
    >>> handle = producer.prepare()  # doctest: +SKIP
    >>> end_transaction("localhost:9092", handle, commit=True)  # doctest: +SKIP
    """

    def __init__(self, config: ProducerConfig, cluster: ClusterClient | None = None) -> None:
        self.config = config
        self._own_cluster = cluster is None
        self.cluster = cluster or ClusterClient(
            config.bootstrap_servers,
            config.connection_config(),
            retry_timeout_s=config.delivery_timeout_ms / 1000,
        )
        self.producer_id = -1
        self.producer_epoch = -1
        self.transaction_version = config.transaction_version
        # KIP-939 in effect for this producer's transactions (decided by InitProducerId).
        self.two_phase_commit = False
        self._two_phase_decided = False
        self._state = TransactionState.UNINITIALIZED
        self._sender = Sender(config, self.cluster)
        self._in_txn: set[TopicPartition] = set()
        self._offsets_added = False

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Close connections (an open transaction is left to its timeout)."""
        if self._own_cluster:
            self.cluster.close()

    def __enter__(self) -> TransactionalProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def transactional_id(self) -> str:
        """The transactional id."""
        return self.config.transactional_id

    @property
    def state(self) -> TransactionState:
        """Where the producer stands (see :mod:`~pyspark_kafka_txn.client.txn_state`)."""
        self._note_failure("state")
        return self._state

    @property
    def records_sent(self) -> int:
        """Records the brokers acknowledged."""
        return self._sender.records_sent

    @property
    def batches_sent(self) -> int:
        """Record batches the brokers acknowledged."""
        return self._sender.batches_sent

    def _move(self, target: TransactionState, call: str) -> None:
        check_move(self._state, target, call)
        self._state = target

    def _require(self, call: str) -> None:
        """Raise unless ``call`` may be made now.

        A batch of the open transaction that failed since the last call moves it to
        ABORTABLE_ERROR or FATAL_ERROR, and the calls that need the transaction raise that
        failure (its cause) rather than the state's.
        """
        failure = self._note_failure(call)
        if failure is not None and call in _RAISE_FAILURE.get(self._state, ()):
            raise failure
        check_call(self._state, call)

    def _note_failure(self, call: str) -> KafkaTxnError | None:
        """Move an open transaction whose batch failed to its error state; return the failure."""
        failure = self._sender.error
        if failure is not None and self._state is TransactionState.IN_TRANSACTION:
            fatal = isinstance(failure, TransactionError) and not failure.requires_abort
            failed = TransactionState.FATAL_ERROR if fatal else TransactionState.ABORTABLE_ERROR
            self._move(failed, call)
        return failure

    def _coordinator_call(self, what: str, call: Any) -> Any:
        return self.cluster.coordinator_call(COORDINATOR_TXN, self.transactional_id, what, call)

    def init_transactions(self) -> tuple[int, int]:
        """InitProducerId: fence earlier producers of the id; return ``(id, epoch)``.

        An open transaction of an earlier producer is aborted by the coordinator
        (answered with CONCURRENT_TRANSACTIONS until done, which is retried here).
        """
        self._require("init_transactions")
        return self._init_producer_id(-1, -1)

    def _init_producer_id(self, expected_id: int, expected_epoch: int) -> tuple[int, int]:
        """InitProducerId; with an expected (id, epoch) (v3+, KIP-360) it bumps our own
        epoch, which resets every partition's sequence numbers."""
        finalized = self.cluster.transaction_version()
        if self.transaction_version == 0:
            self.transaction_version = 2 if finalized >= 2 else 1
        elif self.transaction_version >= 2 and finalized < 2:
            # Kafka's own producer uses version 2 only where the cluster finalized it; a
            # broker without it refuses the implicit partition adds (3.x: Produce < v12).
            raise ConfigError(
                f"must not be {self.transaction_version} on this cluster: its finalized "
                f"transaction.version is {finalized} (use 0 to follow the cluster, or 1)",
                option="transaction.version",
            )

        def call(conn: Connection) -> tuple[int, int]:
            two_phase = self._wants_two_phase(conn)
            version = conn.version(INIT_PRODUCER_ID, 0, INIT_PRODUCER_ID_2PC if two_phase else 5)
            body = conn.request(
                INIT_PRODUCER_ID,
                version,
                transactional_id=self.transactional_id,
                transaction_timeout=timedelta(milliseconds=self.config.transaction_timeout_ms),
                producer_id=expected_id,
                producer_epoch=expected_epoch,
                enable2_pc=two_phase,
            )
            if (
                two_phase
                and not self._two_phase_decided
                and self.config.two_phase_commit == "auto"
                and body.error_code == ErrorCode.transactional_id_authorization_failed
            ):
                # v6 advertised but 2PC disabled on the broker (or the TWO_PHASE_COMMIT
                # ACL missing): fall back to the timeout behaviour. A missing WRITE ACL
                # fails the plain request below the same way.
                logger.warning(
                    "producer %r: broker refused two-phase commit (%s: no TWO_PHASE_COMMIT "
                    "ACL on the transactional id, or transaction.two.phase.commit.enable is "
                    "off on the broker); using transaction.timeout.ms",
                    self.transactional_id,
                    body.error_code.name.upper(),
                )
                self._decide_two_phase(False)
                return call(conn)
            # With Enable2Pc Kafka checks TWO_PHASE_COMMIT too (after WRITE; one code),
            # and a broker with two-phase commit disabled answers the same code.
            operation = "WRITE" if not two_phase else "WRITE and TWO_PHASE_COMMIT"
            what = (
                "InitProducerId"
                if not two_phase
                else (
                    "InitProducerId with Enable2Pc, which a broker with "
                    "transaction.two.phase.commit.enable=false refuses the same way"
                )
            )
            check(
                body.error_code,
                f"{what}({self.transactional_id!r})",
                {RESOURCE_TRANSACTIONAL_ID: (operation, self.transactional_id)},
            )
            self._decide_two_phase(two_phase)
            return int(body.producer_id), int(body.producer_epoch)

        self.producer_id, self.producer_epoch = self._coordinator_call("InitProducerId", call)
        self._sender.restart(self.producer_id, self.producer_epoch, self.transaction_version)
        self._sender.error = None
        self._move(TransactionState.READY, "init_transactions")
        logger.info(
            "producer %r: id %d epoch %d (transaction version %d, two-phase commit %s)",
            self.transactional_id,
            self.producer_id,
            self.producer_epoch,
            self.transaction_version,
            self.two_phase_commit,
        )
        return self.producer_id, self.producer_epoch

    def _wants_two_phase(self, conn: Connection) -> bool:
        """Whether this InitProducerId sets ``Enable2Pc``.

        Once an InitProducerId succeeded the choice is kept: a later one without the flag
        (e.g. the epoch bump after an abort) would turn the id back into a timed one.
        """
        if self._two_phase_decided:
            return self.two_phase_commit
        mode = self.config.two_phase_commit
        if mode == "false":
            return False
        broker_max = conn.api_ranges.get(INIT_PRODUCER_ID, (0, -1))[1]
        if broker_max >= INIT_PRODUCER_ID_2PC:
            return True
        if mode == "true":
            raise ProtocolError(
                f"{TWO_PHASE_COMMIT_OPTION}=true needs InitProducerId v{INIT_PRODUCER_ID_2PC} "
                f"(KIP-939); broker {conn.host}:{conn.port} supports up to v{broker_max}. "
                "Enable transaction.two.phase.commit.enable (and, up to Kafka 4.4 at least, "
                f"unstable.api.versions.enable) on the brokers, or set {TWO_PHASE_COMMIT_OPTION}"
                "=auto to fall back to transaction.timeout.ms"
            )
        return False

    def _decide_two_phase(self, two_phase: bool) -> None:
        self.two_phase_commit = two_phase
        self._two_phase_decided = True

    def begin_transaction(self) -> None:
        """Start a transaction (local state only, like the Java client)."""
        self._require("begin_transaction")
        self._move(TransactionState.IN_TRANSACTION, "begin_transaction")
        self._in_txn.clear()
        self._sender.error = None

    # -- partitions --------------------------------------------------------------------

    def add_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """AddPartitionsToTxn for partitions not yet in the transaction (TV1 only)."""
        self._require("add_partitions")
        new = sorted(set(tps) - self._in_txn)
        if not new:
            return
        if self.transaction_version >= 2:
            self._in_txn.update(new)  # Produce v12 adds them implicitly
            return
        by_topic: dict[str, list[int]] = collections.defaultdict(list)
        for topic, part in new:
            by_topic[topic].append(part)

        def call(conn: Connection) -> None:
            version = conn.version(ADD_PARTITIONS_TO_TXN, 0, 3)
            mod = load_payload_module(ADD_PARTITIONS_TO_TXN, version, EntityType.request)
            topics = tuple(
                mod.AddPartitionsToTxnTopic(name=t, partitions=tuple(ps))
                for t, ps in by_topic.items()
            )
            body = conn.request(
                ADD_PARTITIONS_TO_TXN,
                version,
                v3_and_below_transactional_id=self.transactional_id,
                v3_and_below_producer_id=self.producer_id,
                v3_and_below_producer_epoch=self.producer_epoch,
                v3_and_below_topics=topics,
            )
            worst, worst_topic = ErrorCode.none, ""
            for topic in body.results_by_topic_v3_and_below:
                for res in topic.results_by_partition:
                    code = res.partition_error_code
                    if code != ErrorCode.none and worst in (
                        ErrorCode.none,
                        ErrorCode.operation_not_attempted,
                    ):
                        worst, worst_topic = code, str(topic.name)
            check(
                worst,
                f"AddPartitionsToTxn({new})",
                {
                    RESOURCE_TRANSACTIONAL_ID: ("WRITE", self.transactional_id),
                    RESOURCE_TOPIC: ("WRITE", worst_topic),
                },
            )

        self._coordinator_call("AddPartitionsToTxn", call)
        self._in_txn.update(new)

    # -- produce -----------------------------------------------------------------------

    def produce_arrow(self, topic: str, batch: pa.RecordBatch | pa.Table) -> int:
        """Produce the rows of ``batch`` (columns ``value`` and optionally ``key``,
        ``headers``, ``timestamp``, ``partition`` as in Spark's Kafka sink schema)."""
        names = set(batch.schema.names)
        if "value" not in names:
            raise ConfigError("the batch needs a 'value' column")

        def col(name: str) -> Any:
            return batch.column(name) if name in names else None

        return self.produce(
            topic,
            values=col("value"),
            keys=col("key"),
            headers=col("headers"),
            timestamps=col("timestamp"),
            partitions=col("partition"),
        )

    def produce(
        self,
        topic: str,
        values: pa.Array | pa.ChunkedArray | None,
        keys: pa.Array | pa.ChunkedArray | None = None,
        *,
        headers: pa.Array | pa.ChunkedArray | None = None,
        timestamps: pa.Array | pa.ChunkedArray | npt.NDArray[np.int64] | int | None = None,
        partitions: pa.Array | pa.ChunkedArray | int | None = None,
    ) -> int:
        """Queue records (column-wise) in the open transaction and start sending them.

        Returns as soon as the batches are encoded and the in-flight window is full;
        :meth:`flush` (also called by :meth:`prepare` / :meth:`commit_transaction`) waits
        for every acknowledgement. Returns the number of records queued.
        """
        self._require("produce")
        records = RecordColumns.from_arrow(values, keys, timestamps=timestamps, headers=headers)
        n = len(records)
        if n == 0:
            return 0
        info = self.cluster.topic(topic)
        target = choose_partitions(
            records.keys,
            records.values,
            partitions,
            info.partitions,
            topic,
            batch_size=self.config.batch_size,
        )
        order = np.argsort(target, kind="stable")
        sorted_target = target[order]
        cuts = np.flatnonzero(np.diff(sorted_target)) + 1
        groups = np.split(order, cuts)
        tps = [TopicPartition(topic, int(target[g[0]])) for g in groups]
        self.add_partitions(tps)
        now = time.monotonic()
        for tp, rows in zip(tps, groups, strict=True):
            if len(rows) == n:
                subset = records
            elif int(rows[-1]) - int(rows[0]) + 1 == len(rows):  # contiguous (sticky)
                subset = records.slice(int(rows[0]), len(rows))
            else:
                subset = records.take(rows)
            self._sender.append(tp, subset, now)
        self._sender.send(now)
        return n

    def flush(self) -> None:
        """Wait until every queued batch is acknowledged (or raise its error)."""
        self._sender.flush()

    # -- offsets -----------------------------------------------------------------------

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        group_id: str,
        metadata: str | None = None,
    ) -> None:
        """Commit ``offsets`` for ``group_id`` as part of the transaction.

        TV1: AddOffsetsToTxn to the transaction coordinator, then TxnOffsetCommit to the
        group coordinator. TV2: TxnOffsetCommit v5 adds the group implicitly.
        """
        self._require("send_offsets_to_transaction")
        if self.transaction_version < 2:

            def add(conn: Connection) -> None:
                version = conn.version(ADD_OFFSETS_TO_TXN, 0, 4)
                body = conn.request(
                    ADD_OFFSETS_TO_TXN,
                    version,
                    **self._handle().request_fields(),
                    group_id=group_id,
                )
                check(
                    body.error_code,
                    f"AddOffsetsToTxn({group_id!r})",
                    {
                        RESOURCE_TRANSACTIONAL_ID: ("WRITE", self.transactional_id),
                        RESOURCE_GROUP: ("READ", group_id),
                    },
                )

            self._coordinator_call("AddOffsetsToTxn", add)

        with_metadata = {tp: (offset, metadata) for tp, offset in offsets.items()}

        def commit(conn: Connection) -> None:
            top = 5 if self.transaction_version >= 2 else 4
            version = conn.version(TXN_OFFSET_COMMIT, 0, top)
            topics = offset_commit_topics(
                TXN_OFFSET_COMMIT, version, "TxnOffsetCommitRequest", with_metadata
            )
            body = conn.request(
                TXN_OFFSET_COMMIT,
                version,
                **self._handle().request_fields(),
                group_id=group_id,
                generation_id=-1,
                member_id="",
                group_instance_id=None,
                topics=topics,
            )
            for topic in body.topics:
                for res in topic.partitions:
                    check(
                        res.error_code,
                        f"TxnOffsetCommit({group_id!r}, {topic.name})",
                        {
                            RESOURCE_TRANSACTIONAL_ID: ("WRITE", self.transactional_id),
                            RESOURCE_GROUP: ("READ", group_id),
                            RESOURCE_TOPIC: ("READ", str(topic.name)),
                        },
                    )

        self.cluster.coordinator_call(COORDINATOR_GROUP, group_id, "TxnOffsetCommit", commit)
        self._offsets_added = True

    # -- ending --------------------------------------------------------------------------

    def prepare(self) -> PreparedTransaction:
        """Flush and leave the transaction open; return what ends it elsewhere."""
        self._require("prepare")
        self.flush()
        self._move(TransactionState.PREPARED, "prepare")
        return self._handle()

    def _handle(self) -> PreparedTransaction:
        """The current transaction as another process would end it; its
        :meth:`~PreparedTransaction.request_fields` are those of our requests too."""
        return PreparedTransaction(
            self.transactional_id, self.producer_id, self.producer_epoch, self.transaction_version
        )

    def commit_transaction(self) -> None:
        """Flush, then EndTxn(commit)."""
        self._require("commit_transaction")
        self.flush()
        self._end("commit_transaction", commit=True)

    def abort_transaction(self) -> None:
        """Drop unsent batches, wait for in-flight ones, then EndTxn(abort)."""
        self._require("abort_transaction")
        self._move(TransactionState.ABORTING, "abort_transaction")
        try:
            gaps = self._sender.discard()
        except BaseException:
            self._move(TransactionState.IN_TRANSACTION, "abort_transaction")
            raise
        before = (self.producer_id, self.producer_epoch)
        self._end("abort_transaction", commit=False)
        # A TV2 end already bumped the epoch, or moved to a new producer id when the epoch
        # was exhausted (whose first epoch may equal the old one, so compare both).
        if gaps and (self.producer_id, self.producer_epoch) == before:
            self._init_producer_id(self.producer_id, self.producer_epoch)

    def _end(self, call: str, *, commit: bool) -> None:
        """EndTxn of the open transaction: COMMITTING / ABORTING, then READY.

        If the EndTxn fails the transaction stays open (IN_TRANSACTION), so it can be
        aborted.
        """
        if commit:
            self._move(TransactionState.COMMITTING, call)
        handle = self._handle()
        added = bool(self._in_txn or self._offsets_added)
        try:
            if added or self.transaction_version < 2:
                try:
                    pid, epoch = end_transaction(self.cluster, handle, commit=commit)
                except TransactionError as exc:
                    # TV1 (the coordinator may hold partitions whose add we never saw
                    # answered): an abort refused because the coordinator has no
                    # transaction open (e.g. the only AddPartitionsToTxn was refused by an
                    # ACL) has nothing to abort.
                    if commit or added or exc.code != ErrorCode.invalid_txn_state:
                        raise
                    pid, epoch = self.producer_id, self.producer_epoch
            else:
                pid, epoch = self.producer_id, self.producer_epoch  # nothing was added
        except BaseException:
            self._move(TransactionState.IN_TRANSACTION, call)
            raise
        self._move(TransactionState.READY, call)
        self._in_txn.clear()
        self._offsets_added = False
        if (pid, epoch) != (self.producer_id, self.producer_epoch):
            self.producer_id, self.producer_epoch = pid, epoch
            self._sender.restart(pid, epoch, self.transaction_version)
