"""The transaction coordinator: producer ids, epochs, the KIP-98 state machine.

Behaviour follows Kafka 4.x's ``TransactionCoordinator`` / ``TransactionMetadata``
(Kafka's ``TransactionCoordinator.scala`` and ``TransactionMetadata.scala``):

* ``InitProducerId`` bumps the epoch (fencing older producers) and, when a
  transaction is ongoing, aborts it server-side and answers CONCURRENT_TRANSACTIONS
  until the abort is complete;
* ``EndTxn`` persists PrepareCommit/PrepareAbort, replies at once, and writes the
  markers asynchronously (the window in which read_committed readers do not yet see the
  data and retries get CONCURRENT_TRANSACTIONS is real, and can be widened with
  ``marker_delay_s``);
* transaction version 2 (EndTxn v5+) bumps the epoch on every completion (KIP-890);
* epoch exhaustion (an epoch of ``Short.MAX_VALUE - 1`` or more, see
  :func:`is_epoch_exhausted`): InitProducerId hands out a new producer id instead of a
  bump (``prepareProducerIdRotation``); a TV2 completion that bumps an exhausted epoch
  allocates the next producer id up front, writes its markers with ``Short.MAX_VALUE``
  and switches to the new id when it completes (``nextProducerId`` / ``prepareComplete``),
  and EndTxn v5 answers with the new id (KAFKA-18660). A retry with the old id and
  epoch is recognised (``retryOnOverflow``);
* transactions older than their timeout (measured from the first partition add) are
  aborted with an epoch bump by :meth:`TransactionCoordinator.abort_timed_out`;
* KIP-939 (two-phase commit participation, InitProducerId v6 ``Enable2Pc``, Kafka
  4.1+): when ``transaction.two.phase.commit.enable`` is on, a producer asking for 2PC
  gets its timeout stored as ``Integer.MAX_VALUE`` — Kafka's marker of a "distributed
  two-phase commit" transaction — which the timeout sweep never aborts; asked while
  off: TRANSACTIONAL_ID_AUTHORIZATION_FAILED. ``KeepPreparedTxn`` is refused with
  UNSUPPORTED_VERSION, as Kafka 4.2/4.3 do (KAFKA-20739). Fencing by a later
  InitProducerId still aborts an ongoing 2PC transaction.

The states, Kafka's transition table between them and the per-id metadata are
:mod:`.txn_state`'s; every state change here goes through
:meth:`~.txn_state.TxnMetadata.transition_to`, which refuses a transition the table does
not allow (:class:`~.txn_state.IllegalTxnTransitionError`, naming both states).

Test aid: ``initial_producer_epoch`` makes every newly allocated producer id of a
transactional id start at that epoch instead of 0, so that a few transactions reach
exhaustion (Kafka has no such setting).

Simplifications: one coordinator epoch (0); the transaction log is the in-memory map
plus an optional append-only sink (JSON lines) replayed by :meth:`load`. A server-side
abort of an ongoing transaction bumps the epoch once on both transaction versions, as
Kafka 4.0.1+ (KAFKA-19367; Kafka 4.0.0 bumped twice on TV2), measured against Apache
Kafka 4.4.0. From an exhausted epoch a TV2 abort bumps once, to ``Short.MAX_VALUE``, and
rotates the producer id (Kafka 4.3, KAFKA-20090).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Iterable

from pyspark_kafka_txn.embedded.protocol import ErrorCode
from pyspark_kafka_txn.embedded.txn_state import (
    MAX_EPOCH,
    MAX_EPOCH_BEFORE_EXHAUSTED,
    TWO_PHASE_TIMEOUT_MS,
    VALID_PREVIOUS_STATES,
    IllegalTxnTransitionError,
    TxnMetadata,
    TxnResult,
    check_initial_producer_epoch,
    is_epoch_exhausted,
)
from pyspark_kafka_txn.wire import NO_EPOCH, NO_PRODUCER_ID, TopicPartition, TxnState

__all__ = [
    "MAX_EPOCH",
    "MAX_EPOCH_BEFORE_EXHAUSTED",
    "TWO_PHASE_TIMEOUT_MS",
    "VALID_PREVIOUS_STATES",
    "IllegalTxnTransitionError",
    "MarkerWriter",
    "TransactionCoordinator",
    "TxnMetadata",
    "TxnResult",
    "check_initial_producer_epoch",
    "is_epoch_exhausted",
]

logger = logging.getLogger(__name__)


_COMPLETE = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
_PREPARE = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


MarkerWriter = Callable[[int, int, bool, Iterable[TopicPartition]], None]
"""``(producer_id, epoch, commit, partitions)``: write the markers of a completion."""


class TransactionCoordinator:
    """State owner for all transactional ids of the embedded cluster.

    Parameters
    ----------
    clock_ms
        Wall clock in milliseconds.
    write_markers
        Writes COMMIT/ABORT markers to the data partitions (and completes pending
        group offsets) of a transaction.
    schedule
        ``schedule(delay_s, fn)`` runs ``fn`` later on the broker's event loop.
    transaction_version
        The cluster's finalized ``transaction.version`` (1 or 2), used for aborts the
        server starts itself (timeouts, fencing).
    max_timeout_ms
        ``transaction.max.timeout.ms``.
    two_phase_commit
        ``transaction.two.phase.commit.enable`` (KIP-939).
    sink
        Appends one transaction-log line (JSON) to durable storage.
    initial_producer_epoch
        Test aid (no Kafka setting): the epoch a newly allocated producer id of a
        transactional id starts at (a new transactional id, or a rotation), 0 as in Kafka.
        Idempotent producers (no transactional id) always start at 0.
    handover_s
        Seconds until the coordinator of a transactional id has loaded its partition
        (0 when it has; see ``Cluster.move_coordinator``): a transaction in PrepareCommit
        or PrepareAbort is completed only then, as Kafka's new coordinator completes it
        once it has loaded the partition.
    """

    def __init__(
        self,
        *,
        clock_ms: Callable[[], int],
        write_markers: MarkerWriter,
        schedule: Callable[[float, Callable[[], None]], None],
        transaction_version: int = 2,
        max_timeout_ms: int = 900_000,
        two_phase_commit: bool = False,
        sink: Callable[[str], None] | None = None,
        initial_producer_epoch: int = 0,
        handover_s: Callable[[str], float] | None = None,
    ) -> None:
        self._clock_ms = clock_ms
        self._write_markers = write_markers
        self._schedule = schedule
        self.transaction_version = transaction_version
        self.max_timeout_ms = max_timeout_ms
        self.two_phase_commit = two_phase_commit
        self.initial_producer_epoch = check_initial_producer_epoch(initial_producer_epoch)
        self.marker_delay_s = 0.0
        self._sink = sink
        self._handover_s = handover_s or (lambda _tid: 0.0)
        self.txns: dict[str, TxnMetadata] = {}
        self._next_producer_id = 1000

    # --- producer ids -------------------------------------------------------------

    def allocate_producer_id(self) -> int:
        pid = self._next_producer_id
        self._next_producer_id += 1
        self._persist_json(json.dumps({"next_pid": self._next_producer_id}))
        return pid

    def _persist(self, meta: TxnMetadata, *, prev_producer_id: int | None = None) -> None:
        """Log a transition. As in Kafka, the previous producer id becomes the one the
        metadata had before it: ``prev_producer_id`` when the transition rotated the id,
        else the current one."""
        meta.prev_producer_id = meta.producer_id if prev_producer_id is None else prev_producer_id
        meta.last_update_ms = self._clock_ms()
        self._persist_json(meta.to_json())

    def _persist_json(self, line: str) -> None:
        if self._sink is not None:
            self._sink(line)

    def load(self, lines: Iterable[str]) -> None:
        """Replay a transaction log written through ``sink``; resume interrupted commits."""
        for line in lines:
            if not line.strip():
                continue
            data = json.loads(line)
            if "tid" not in data:  # the producer id allocator
                self._next_producer_id = max(self._next_producer_id, data["next_pid"])
                continue
            meta = TxnMetadata.from_json(line)
            self.txns[meta.transactional_id] = meta
            top = max(meta.producer_id, meta.next_producer_id)
            self._next_producer_id = max(self._next_producer_id, top + 1)
        for meta in self.txns.values():
            if meta.state in _PREPARE:
                logger.info(
                    "recovering %s transaction of %s", meta.state.value, meta.transactional_id
                )
                self._schedule(0.0, functools.partial(self._complete, meta))

    # --- InitProducerId -----------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str | None,
        timeout_ms: int,
        expected_pid: int = NO_PRODUCER_ID,
        expected_epoch: int = NO_EPOCH,
        *,
        enable_2pc: bool = False,
        keep_prepared: bool = False,
    ) -> TxnResult:
        """Handle InitProducerId (both the idempotent and the transactional path).

        ``enable_2pc``/``keep_prepared`` are the v6 (KIP-939) flags. Checked in Kafka's
        order: empty id, 2PC asked while disabled, keep-prepared (not implemented in
        Kafka 4.4.0 either), then the timeout, which Kafka validates only without
        ``Enable2Pc`` (the stored timeout of a 2PC id is ``Integer.MAX_VALUE``).
        """
        if (expected_pid == NO_PRODUCER_ID) != (expected_epoch == NO_EPOCH):
            return TxnResult(ErrorCode.invalid_request)
        if transactional_id is None:
            return TxnResult(ErrorCode.none, self.allocate_producer_id(), 0)
        error = self._init_request_error(transactional_id, timeout_ms, enable_2pc, keep_prepared)
        if error is not None:
            return TxnResult(error)
        if enable_2pc:
            timeout_ms = TWO_PHASE_TIMEOUT_MS
        meta = self.txns.get(transactional_id)
        if meta is None or meta.state is TxnState.DEAD:
            meta = TxnMetadata(transactional_id, self.allocate_producer_id(), timeout_ms=timeout_ms)
            self.txns[transactional_id] = meta
        if meta.state in _PREPARE or meta.state is TxnState.PREPARE_EPOCH_FENCE:
            return TxnResult(ErrorCode.concurrent_transactions)
        if expected_pid != NO_PRODUCER_ID and not (
            meta.epoch == NO_EPOCH
            or expected_pid == meta.producer_id
            or (expected_pid == meta.prev_producer_id and is_epoch_exhausted(expected_epoch))
        ):
            return TxnResult(ErrorCode.producer_fenced)
        if meta.state is TxnState.ONGOING:
            self._fence_and_abort(meta)
            return TxnResult(ErrorCode.concurrent_transactions)
        # Empty / CompleteCommit / CompleteAbort
        previous = meta.producer_id
        answer = self._next_epoch_on_init(meta, expected_pid, expected_epoch)
        if answer is not None:
            return answer
        meta.transition_to(TxnState.EMPTY)
        meta.partitions = set()
        meta.start_ms = -1
        meta.timeout_ms = timeout_ms
        self._persist(meta, prev_producer_id=previous)
        return TxnResult(ErrorCode.none, meta.producer_id, meta.epoch)

    def _next_epoch_on_init(
        self, meta: TxnMetadata, expected_pid: int, expected_epoch: int
    ) -> TxnResult | None:
        """Kafka's ``prepareIncrementProducerEpoch`` / ``prepareProducerIdRotation``.

        Updates ``meta``'s producer id, epoch and last epoch and returns ``None``, or
        returns the answer when nothing is to be logged (the retry of a successful call,
        or PRODUCER_FENCED).
        """
        if meta.epoch == NO_EPOCH:  # metadata just created: the first epoch
            meta.epoch = self.initial_producer_epoch
            meta.last_epoch = NO_EPOCH
            return None
        if expected_pid not in (NO_PRODUCER_ID, meta.producer_id):
            # The previous id with an exhausted epoch (checked by the caller): a retry
            # of an InitProducerId that rotated the id. Kafka reaches the same answers
            # through prepareIncrementProducerEpoch; with initial_producer_epoch the
            # rotated epoch may equal the expected one, hence the explicit branch.
            if expected_epoch == meta.last_epoch:
                return TxnResult(ErrorCode.none, meta.producer_id, meta.epoch)
            return TxnResult(ErrorCode.producer_fenced)
        if is_epoch_exhausted(meta.epoch) and expected_epoch in (NO_EPOCH, meta.epoch):
            old = meta.producer_id
            meta.last_epoch = meta.epoch if expected_epoch != NO_EPOCH else NO_EPOCH
            meta.producer_id = self.allocate_producer_id()
            meta.epoch = self.initial_producer_epoch
            logger.info(
                "producer id of %s rotated: %d -> %d (epoch exhausted)",
                meta.transactional_id,
                old,
                meta.producer_id,
            )
            return None
        if expected_epoch == NO_EPOCH:
            meta.epoch += 1
            meta.last_epoch = NO_EPOCH
            return None
        if expected_epoch == meta.epoch:
            meta.last_epoch = meta.epoch
            meta.epoch += 1
            return None
        if expected_epoch == meta.last_epoch:
            return TxnResult(ErrorCode.none, meta.producer_id, meta.epoch)
        return TxnResult(ErrorCode.producer_fenced)

    def _init_request_error(
        self, transactional_id: str, timeout_ms: int, enable_2pc: bool, keep_prepared: bool
    ) -> ErrorCode | None:
        if transactional_id == "":
            return ErrorCode.invalid_request
        if enable_2pc and not self.two_phase_commit:
            return ErrorCode.transactional_id_authorization_failed
        if keep_prepared:
            return ErrorCode.unsupported_version
        if not enable_2pc and (timeout_ms <= 0 or timeout_ms > self.max_timeout_ms):
            return ErrorCode.invalid_transaction_timeout
        return None

    def _fence_and_abort(self, meta: TxnMetadata) -> None:
        """Server-initiated abort of an ongoing transaction, with an epoch bump.

        One bump (``prepareFenceProducerEpoch``): on a TV1 cluster never past
        ``Short.MAX_VALUE``; on a TV2 cluster the abort that follows does not bump again
        (Kafka 4.0.1+, KAFKA-19367: measured on Apache Kafka 4.4.0, a transaction aborted
        at its timeout ends at epoch 1 from 0, and the producer's own EndTxn with the old
        epoch is then taken for a retry and refused with INVALID_TXN_STATE). From an
        exhausted epoch only the completion bump, which allocates the next producer id
        (Kafka 4.3, KAFKA-20090). The state passes through PrepareEpochFence (not logged,
        as in Kafka) on its way to PrepareAbort.
        """
        meta.transition_to(TxnState.PREPARE_EPOCH_FENCE)
        if self.transaction_version >= 2 and is_epoch_exhausted(meta.epoch):
            self._bump_for_completion(meta)
        elif self.transaction_version >= 2:
            meta.last_epoch = meta.epoch
            meta.epoch += 1  # PrepareEpochFence, the only bump
        else:
            meta.epoch = min(meta.epoch + 1, MAX_EPOCH)  # PrepareEpochFence
            meta.last_epoch = NO_EPOCH
        self._prepare(meta, commit=False)

    # --- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------

    def _check_producer(self, transactional_id: str, producer_id: int, epoch: int) -> TxnResult:
        if not transactional_id:
            return TxnResult(ErrorCode.invalid_request)
        meta = self.txns.get(transactional_id)
        if meta is None or meta.state is TxnState.DEAD:
            return TxnResult(ErrorCode.invalid_producer_id_mapping)
        # A completion in progress comes first (KAFKA-18660): after a TV2 end that
        # rotated the producer id, the producer's next transaction may arrive with the
        # new id before the markers of the last one are written; it must retry, not fail.
        if meta.state in _PREPARE:
            return TxnResult(ErrorCode.concurrent_transactions)
        if meta.producer_id != producer_id:
            return TxnResult(ErrorCode.invalid_producer_id_mapping)
        if meta.epoch != epoch:
            return TxnResult(ErrorCode.producer_fenced)
        return TxnResult(ErrorCode.none, meta.producer_id, meta.epoch)

    def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: set[TopicPartition]
    ) -> ErrorCode:
        """Add ``partitions`` to the ongoing transaction (starting one if needed)."""
        check = self._check_producer(transactional_id, producer_id, epoch)
        if check.error is not ErrorCode.none:
            return check.error
        meta = self.txns[transactional_id]
        if meta.state is TxnState.ONGOING and partitions <= meta.partitions:
            return ErrorCode.none
        if meta.state in _COMPLETE:
            meta.start_ms = self._clock_ms()
        meta.partitions |= partitions
        meta.transition_to(TxnState.ONGOING)
        self._persist(meta)
        return ErrorCode.none

    def verify_partition(
        self, transactional_id: str, producer_id: int, epoch: int, partition: TopicPartition
    ) -> ErrorCode:
        """KIP-890 verification: is ``partition`` part of this producer's transaction?"""
        meta = self.txns.get(transactional_id)
        if meta is None or meta.state is TxnState.DEAD or meta.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if meta.epoch != epoch:
            return ErrorCode.producer_fenced
        if meta.state in _PREPARE:
            return ErrorCode.concurrent_transactions
        if meta.state is TxnState.ONGOING and partition in meta.partitions:
            return ErrorCode.none
        return ErrorCode.transaction_abortable

    # --- EndTxn -------------------------------------------------------------------

    def end_txn(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool, *, tv2: bool
    ) -> TxnResult:
        """Handle EndTxn; ``tv2`` is true for request version 5+."""
        if not transactional_id:
            return TxnResult(ErrorCode.invalid_request)
        meta = self.txns.get(transactional_id)
        if meta is None or meta.state is TxnState.DEAD:
            return TxnResult(ErrorCode.invalid_producer_id_mapping)
        if tv2:
            return self._end_txn_v2(meta, producer_id, epoch, commit)
        if meta.producer_id != producer_id:
            return TxnResult(ErrorCode.invalid_producer_id_mapping)
        return self._end_txn_v1(meta, epoch, commit)

    def _end_txn_v1(self, meta: TxnMetadata, epoch: int, commit: bool) -> TxnResult:
        if epoch != meta.epoch:
            return TxnResult(ErrorCode.producer_fenced)
        ok = TxnResult(ErrorCode.none, meta.producer_id, meta.epoch)
        state = meta.state
        if state is TxnState.ONGOING:
            self._prepare(meta, commit=commit)
            return ok
        if state is TxnState.PREPARE_COMMIT:
            return TxnResult(
                ErrorCode.concurrent_transactions if commit else ErrorCode.invalid_txn_state
            )
        if state is TxnState.PREPARE_ABORT:
            return TxnResult(
                ErrorCode.invalid_txn_state if commit else ErrorCode.concurrent_transactions
            )
        if state is TxnState.COMPLETE_COMMIT and commit:
            return ok
        if state is TxnState.COMPLETE_ABORT and not commit:
            return ok
        return TxnResult(ErrorCode.invalid_txn_state)

    def _retry_on_overflow(self, meta: TxnMetadata, producer_id: int, epoch: int) -> bool:
        """Kafka's ``retryOnOverflow``: a retried EndTxn v5 whose first attempt rotated
        the producer id (sent with the previous id and the exhausted epoch) after the
        rotation completed."""
        return (
            producer_id != meta.producer_id
            and producer_id == meta.prev_producer_id
            and epoch == MAX_EPOCH_BEFORE_EXHAUSTED
            and meta.epoch == self.initial_producer_epoch
            and meta.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        )

    def _end_txn_v2(
        self, meta: TxnMetadata, producer_id: int, epoch: int, commit: bool
    ) -> TxnResult:
        state = meta.state
        overflow_retry = self._retry_on_overflow(meta, producer_id, epoch)
        if meta.producer_id != producer_id and not overflow_retry:
            return TxnResult(ErrorCode.invalid_producer_id_mapping)
        # Right after a rotation the new id has no earlier epoch a retry could carry.
        just_rotated = meta.prev_producer_id not in (NO_PRODUCER_ID, meta.producer_id)
        retry = overflow_retry or (epoch == meta.epoch - 1 and not just_rotated)
        current = not overflow_retry and epoch == meta.epoch
        if not (retry or current):
            return TxnResult(ErrorCode.producer_fenced)
        if state is TxnState.ONGOING:
            if retry:
                return TxnResult(ErrorCode.producer_fenced)
            self._bump_for_completion(meta)
            self._prepare(meta, commit=commit)
            return self._after_completion(meta)
        if state in _PREPARE:
            if current:
                return TxnResult(ErrorCode.producer_fenced)
            same = (state is TxnState.PREPARE_COMMIT) == commit
            return TxnResult(
                ErrorCode.concurrent_transactions if same else ErrorCode.invalid_txn_state
            )
        # Empty / CompleteCommit / CompleteAbort
        if retry:
            done_commit = state is TxnState.COMPLETE_COMMIT
            done_abort = state is TxnState.COMPLETE_ABORT
            if (commit and done_commit) or (not commit and done_abort):
                return TxnResult(ErrorCode.none, meta.producer_id, meta.epoch)
            if state is TxnState.EMPTY:
                return TxnResult(ErrorCode.producer_fenced)
            return TxnResult(ErrorCode.invalid_txn_state)
        if commit:
            return TxnResult(ErrorCode.invalid_txn_state)
        # "abort when unsure": an empty abort that bumps the epoch
        meta.partitions = set()
        self._bump_for_completion(meta)
        self._prepare(meta, commit=False)
        return self._after_completion(meta)

    def _bump_for_completion(self, meta: TxnMetadata) -> None:
        """The TV2 epoch bump of a completion (``prepareAbortOrCommit``).

        From an exhausted epoch the next producer id is allocated now, the markers carry
        ``Short.MAX_VALUE`` (an abort already there stays there) and :meth:`_complete`
        switches to the new id.
        """
        if is_epoch_exhausted(meta.epoch):
            meta.next_producer_id = self.allocate_producer_id()
        meta.last_epoch = meta.epoch
        meta.epoch = min(meta.epoch + 1, MAX_EPOCH)

    def _after_completion(self, meta: TxnMetadata) -> TxnResult:
        """The EndTxn v5 answer: the producer id and epoch the producer goes on with."""
        if meta.next_producer_id != NO_PRODUCER_ID:
            return TxnResult(ErrorCode.none, meta.next_producer_id, self.initial_producer_epoch)
        return TxnResult(ErrorCode.none, meta.producer_id, meta.epoch)

    def _prepare(self, meta: TxnMetadata, *, commit: bool) -> None:
        meta.transition_to(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
        self._persist(meta)
        self._schedule(self.marker_delay_s, lambda: self._complete(meta))

    def _complete(self, meta: TxnMetadata) -> None:
        if meta.state not in _PREPARE:
            return
        wait_s = self._handover_s(meta.transactional_id)
        if wait_s > 0:  # its coordinator is moving: the new one completes it once loaded
            self._schedule(wait_s, lambda: self._complete(meta))
            return
        commit = meta.state is TxnState.PREPARE_COMMIT
        if meta.partitions:
            self._write_markers(meta.producer_id, meta.epoch, commit, sorted(meta.partitions))
        meta.transition_to(TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
        meta.partitions = set()
        # The start time stays (Kafka's prepareComplete keeps txnStartTimestamp):
        # DescribeTransactions shows it, ListTransactions' duration filter counts it.
        previous = meta.producer_id
        if meta.next_producer_id != NO_PRODUCER_ID:
            # prepareComplete of an overflow: the new id at the initial epoch; the last
            # epoch stays the exhausted one the producer saw.
            meta.producer_id = meta.next_producer_id
            meta.epoch = self.initial_producer_epoch
            meta.next_producer_id = NO_PRODUCER_ID
            logger.info(
                "producer id of %s rotated: %d -> %d (epoch exhausted)",
                meta.transactional_id,
                previous,
                meta.producer_id,
            )
        self._persist(meta, prev_producer_id=previous)
        logger.debug(
            "completed %s of %s (pid=%d epoch=%d)",
            meta.state.value,
            meta.transactional_id,
            meta.producer_id,
            meta.epoch,
        )

    # --- timeouts -----------------------------------------------------------------

    def abort_timed_out(self) -> list[str]:
        """Abort every Ongoing transaction older than its timeout; return their ids."""
        now = self._clock_ms()
        expired = [
            m
            for m in self.txns.values()
            if m.state is TxnState.ONGOING and not m.two_phase and m.start_ms + m.timeout_ms < now
        ]
        for meta in expired:
            logger.info(
                "aborting transaction of %s: timed out after %d ms",
                meta.transactional_id,
                meta.timeout_ms,
            )
            self._fence_and_abort(meta)
        return [m.transactional_id for m in expired]

    # --- introspection ------------------------------------------------------------

    def describe(self, transactional_id: str) -> TxnMetadata | None:
        meta = self.txns.get(transactional_id)
        if meta is None or meta.state is TxnState.DEAD:
            return None
        return meta
