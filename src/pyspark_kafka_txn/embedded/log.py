"""One partition's log: offsets, high watermark, LSO, producer state, aborted index.

Semantics follow Kafka's ``UnifiedLog`` / ``ProducerStateManager`` on a single-replica
partition (so the high watermark equals the log end offset after every append):

* idempotence: per producer id the last five batches are remembered; an exact
  duplicate is acknowledged with its original offset, a gap or an old epoch is an
  error (OUT_OF_ORDER_SEQUENCE_NUMBER / INVALID_PRODUCER_EPOCH);
* transactions: the first offset of each open transaction pins the Last Stable
  Offset; an ABORT marker adds an entry to the aborted-transaction index;
* reads return whole batches, bounded by the LSO (read_committed) or the high
  watermark (read_uncommitted), with the aborted transactions that overlap them.
"""

from __future__ import annotations

import bisect
import logging
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import crc32c

from pyspark_kafka_txn.embedded.protocol import ErrorCode
from pyspark_kafka_txn.embedded.records import (
    ATTR_TIMESTAMP_TYPE,
    CRC_START,
    LOG_OVERHEAD,
    BatchHeader,
    RecordError,
    control_batch,
    control_type,
    iter_headers,
    read_header,
    record_timestamps,
)
from pyspark_kafka_txn.wire import CONTROL_COMMIT, READ_COMMITTED

logger = logging.getLogger(__name__)

BATCHES_TO_RETAIN = 5
# baseOffset, batchLength, partitionLeaderEpoch: the part of a stored batch the broker
# writes (it precedes the CRC-covered region).
_STAMP = struct.Struct(">qii")


@dataclass(slots=True)
class BatchEntry:
    """Index entry of one stored batch."""

    base_offset: int
    last_offset: int
    position: int
    size: int
    max_timestamp: int
    producer_id: int
    is_transactional: bool
    is_control: bool
    leader_epoch: int

    def stamp(self) -> bytes:
        """The first 16 bytes of the stored batch: its offset, length and leader epoch."""
        return _STAMP.pack(self.base_offset, self.size - LOG_OVERHEAD, self.leader_epoch)


class BatchMeta(NamedTuple):
    """What the duplicate cache remembers about a producer's recent batch."""

    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    """Per-(partition, producer id) state, as ``ProducerStateEntry``."""

    epoch: int = -1
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    txn_first_offset: int | None = None
    batches: deque[BatchMeta] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch

    def record_batch(self, header: BatchHeader, base: int, max_timestamp: int) -> None:
        """Remember a batch of this producer stored at ``base`` (appended or recovered)."""
        self.set_epoch(header.producer_epoch)
        self.batches.append(
            BatchMeta(
                header.base_sequence,
                header.last_sequence,
                base,
                base + header.last_offset_delta,
                max_timestamp,
            )
        )
        self.last_timestamp = max_timestamp
        if header.is_transactional and self.txn_first_offset is None:
            self.txn_first_offset = base


class AbortedTxn(NamedTuple):
    """An entry of the aborted-transaction index."""

    producer_id: int
    first_offset: int
    last_offset: int  # offset of the ABORT marker
    last_stable_offset: int


class AppendResult(NamedTuple):
    """Where a produced batch landed (or had landed, for a duplicate)."""

    base_offset: int
    log_append_time: int
    duplicate: bool


class ReadResult(NamedTuple):
    """What a Fetch gets from one partition."""

    records: bytes
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[AbortedTxn] | None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == 2**31 - 1)


class PartitionLog:
    """The log of one topic partition.

    Parameters
    ----------
    topic, partition
        Identity, used in log and error messages.
    leader_epoch
        Written into every stored batch.
    sink
        Optional callable that receives every appended batch's bytes (persistence).
    """

    def __init__(
        self,
        topic: str,
        partition: int,
        *,
        leader_epoch: int = 0,
        log_append_time: bool = False,
        sink: Callable[[bytes], None] | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.log_append_time = log_append_time
        # The batches as the producer sent them, parallel to ``entries``; their first 16
        # bytes are stale: reads put ``BatchEntry.stamp()`` in front of the rest. So a
        # Produce stores its batch without copying it, and a Fetch copies it once.
        self._batches: list[bytes] = []
        self.size_bytes = 0
        self.entries: list[BatchEntry] = []
        self._last_offsets: list[int] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.producers: dict[int, ProducerEntry] = {}
        self.aborted: list[AbortedTxn] = []
        self._sink = sink

    # --- offsets ------------------------------------------------------------------

    @property
    def data(self) -> bytes:
        """All stored batches as one contiguous copy (recovery and diagnostics only)."""
        return self._join(0, len(self.entries))

    def _join(self, first: int, last: int) -> bytes:
        """Stored batches ``first`` to ``last`` (exclusive) as they are served."""
        pieces: list[bytes | memoryview] = []
        for entry, batch in zip(self.entries[first:last], self._batches[first:last], strict=True):
            pieces.append(entry.stamp())
            pieces.append(memoryview(batch)[_STAMP.size :])
        return b"".join(pieces)

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        firsts = [
            p.txn_first_offset for p in self.producers.values() if p.txn_first_offset is not None
        ]
        return min(firsts) if firsts else self.high_watermark

    def has_ongoing_transaction(self, producer_id: int, epoch: int) -> bool:
        entry = self.producers.get(producer_id)
        return entry is not None and entry.txn_first_offset is not None and entry.epoch == epoch

    # --- appends ------------------------------------------------------------------

    def append_client_batch(
        self, header: BatchHeader, records: bytes, *, now_ms: int, verified: bool
    ) -> AppendResult:
        """Validate producer state and append one client batch.

        ``verified`` says the transaction coordinator confirmed this partition is part of
        the producer's ongoing transaction (needed for the first transactional write).
        """
        pid = header.producer_id
        entry = self.producers.get(pid) if pid >= 0 else None
        if pid >= 0:
            dup = self._check_producer(header, entry, verified)
            if dup is not None:
                return AppendResult(dup.base_offset, -1, True)
        buf: bytes | bytearray = records
        log_append_time = -1
        max_timestamp = header.max_timestamp
        if self.log_append_time:
            buf = bytearray(records)
            log_append_time = now_ms
            max_timestamp = now_ms
            attrs = header.attributes | ATTR_TIMESTAMP_TYPE
            struct.pack_into(">h", buf, CRC_START, attrs)
            struct.pack_into(">q", buf, CRC_START + 14, now_ms)
            struct.pack_into(">I", buf, 17, crc32c.crc32c(memoryview(buf)[CRC_START:]))
        base = self._store(buf, header, max_timestamp)
        if pid >= 0:
            if entry is None:
                entry = ProducerEntry()
                self.producers[pid] = entry
            entry.record_batch(header, base, max_timestamp)
        return AppendResult(base, log_append_time, False)

    def _check_producer(
        self, header: BatchHeader, entry: ProducerEntry | None, verified: bool
    ) -> BatchMeta | None:
        epoch = header.producer_epoch
        if entry is not None:
            if epoch < entry.epoch:
                raise RecordError(
                    ErrorCode.invalid_producer_epoch,
                    f"producer {header.producer_id} epoch {epoch} is older than {entry.epoch} "
                    f"on {self.topic}-{self.partition}",
                )
            if not header.is_transactional and entry.txn_first_offset is not None:
                raise RecordError(
                    ErrorCode.invalid_txn_state,
                    "non-transactional batch from a producer with an open transaction",
                )
            if epoch == entry.epoch:
                for meta in entry.batches:
                    if meta.first_seq == header.base_sequence and meta.last_seq == (
                        header.last_sequence
                    ):
                        return meta
            if entry.epoch != -1:
                if epoch != entry.epoch:
                    if header.base_sequence != 0:
                        raise RecordError(
                            ErrorCode.out_of_order_sequence_number,
                            f"new epoch {epoch} must start at sequence 0, "
                            f"got {header.base_sequence}",
                        )
                elif not _in_sequence(entry.last_seq, header.base_sequence):
                    raise RecordError(
                        ErrorCode.out_of_order_sequence_number,
                        f"out of order sequence {header.base_sequence} after {entry.last_seq} "
                        f"for producer {header.producer_id} on {self.topic}-{self.partition}",
                    )
        if (
            header.is_transactional
            and not verified
            and not self.has_ongoing_transaction(header.producer_id, epoch)
        ):
            raise RecordError(
                ErrorCode.invalid_txn_state, "record was not part of an ongoing transaction"
            )
        return None

    def append_marker(
        self,
        producer_id: int,
        epoch: int,
        *,
        commit: bool,
        coordinator_epoch: int,
        now_ms: int,
        transaction_version: int = 0,
    ) -> int:
        """Append a COMMIT/ABORT marker for ``producer_id``; return its offset.

        Checked as Kafka's ``ProducerAppendInfo.appendEndTxnMarker`` checks a marker: its
        epoch may not be older than the producer's (a TV2 marker, ``transaction_version``
        2, must be newer: the coordinator bumped it), else INVALID_PRODUCER_EPOCH; its
        coordinator epoch may not be older than the last marker's, else
        TRANSACTION_COORDINATOR_FENCED. A marker without an open transaction of the
        producer is written all the same (it ends nothing).
        """
        entry = self.producers.get(producer_id)
        if entry is not None and (
            epoch <= entry.epoch if transaction_version >= 2 else epoch < entry.epoch
        ):
            raise RecordError(
                ErrorCode.invalid_producer_epoch,
                f"marker epoch {epoch} older than producer epoch {entry.epoch}",
            )
        if entry is not None and entry.coordinator_epoch > coordinator_epoch:
            raise RecordError(
                ErrorCode.transaction_coordinator_fenced,
                f"invalid coordinator epoch for {self.topic}-{self.partition}: "
                f"{coordinator_epoch} (zombie), {entry.coordinator_epoch} (current)",
            )
        buf = control_batch(
            producer_id=producer_id,
            producer_epoch=epoch,
            commit=commit,
            coordinator_epoch=coordinator_epoch,
            timestamp_ms=now_ms,
        )
        header = next(iter_headers(buf))
        offset = self._store(buf, header, now_ms)
        self._apply_marker(producer_id, epoch, commit, coordinator_epoch, offset, now_ms)
        return offset

    def _apply_marker(
        self,
        producer_id: int,
        epoch: int,
        commit: bool,
        coordinator_epoch: int,
        offset: int,
        timestamp: int,
    ) -> None:
        entry = self.producers.setdefault(producer_id, ProducerEntry())
        # The marker's time is the producer's last timestamp (DescribeProducers; what
        # kafka-transactions find-hanging measures a transaction's age from), as in Kafka.
        entry.last_timestamp = timestamp
        entry.set_epoch(epoch)
        entry.coordinator_epoch = coordinator_epoch
        first = entry.txn_first_offset
        entry.txn_first_offset = None
        if first is not None and not commit:
            self.aborted.append(AbortedTxn(producer_id, first, offset, self.last_stable_offset))

    def _store(self, buf: bytes | bytearray, header: BatchHeader, max_timestamp: int) -> int:
        base = self.log_end_offset
        stored = buf if isinstance(buf, bytes) else bytes(buf)
        position = self.size_bytes
        self._batches.append(stored)
        self.size_bytes += len(stored)
        last = base + header.last_offset_delta
        self.entries.append(
            BatchEntry(
                base,
                last,
                position,
                len(stored),
                max_timestamp,
                header.producer_id,
                header.is_transactional,
                header.is_control,
                self.leader_epoch,
            )
        )
        self._last_offsets.append(last)
        self.log_end_offset = last + 1
        if self._sink is not None:
            self._sink(self._join(len(self.entries) - 1, len(self.entries)))
        return base

    def load(self, data: bytes) -> None:
        """Rebuild the log and its producer state from stored batch bytes (recovery).

        Batches are replayed in order, as Kafka's log recovery rebuilds producer state
        from the segments: the duplicate cache of each producer (so a retry after a
        restart is still recognised), open transactions (which pin the LSO again) and
        the aborted-transaction index. Stored leader epochs are kept.

        Raises
        ------
        RecordError
            At the first batch that is incomplete, fails its CRC-32C or does not follow
            the previous one; everything before it has been loaded (``len(self.data)``
            is where the valid prefix ends, for the caller to truncate the torn tail).
        """
        epoch = self.leader_epoch
        for header in iter_headers(data):
            chunk = bytearray(data[header.position : header.position + header.size])
            if header.base_offset < self.log_end_offset:
                raise RecordError(
                    ErrorCode.corrupt_message,
                    f"stored batch at {header.base_offset} overlaps the log end "
                    f"{self.log_end_offset}",
                )
            if crc32c.crc32c(memoryview(chunk)[CRC_START:]) != header.crc:
                raise RecordError(
                    ErrorCode.corrupt_message,
                    f"stored batch at {header.base_offset} fails its CRC-32C",
                )
            self.log_end_offset = header.base_offset
            sink, self._sink = self._sink, None
            self.leader_epoch = header.leader_epoch
            try:
                base = self._store(chunk, header, header.max_timestamp)
            finally:
                self._sink = sink
                self.leader_epoch = max(epoch, header.leader_epoch)
            epoch = self.leader_epoch
            pid = header.producer_id
            if header.is_control:
                commit = control_type(chunk, next(iter_headers(chunk))) == CONTROL_COMMIT
                self._apply_marker(
                    pid, header.producer_epoch, commit, -1, base, header.max_timestamp
                )
            elif pid >= 0:
                self.producers.setdefault(pid, ProducerEntry()).record_batch(
                    header, base, header.max_timestamp
                )

    # --- reads --------------------------------------------------------------------

    def bound(self, isolation_level: int) -> int:
        """Highest offset (exclusive) visible at ``isolation_level``."""
        if isolation_level == READ_COMMITTED:
            return self.last_stable_offset
        return self.high_watermark

    def read(
        self, offset: int, max_bytes: int, isolation_level: int, *, at_least_one: bool = True
    ) -> ReadResult:
        """Read whole batches from ``offset`` within ``max_bytes``.

        With ``at_least_one`` the first visible batch is returned even if it is larger
        than ``max_bytes`` (KIP-74), so a consumer can always make progress.

        Raises
        ------
        RecordError
            OFFSET_OUT_OF_RANGE when ``offset`` is below the log start or past the end.
        """
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise RecordError(
                ErrorCode.offset_out_of_range,
                f"offset {offset} outside [{self.log_start_offset}, {self.log_end_offset}] "
                f"of {self.topic}-{self.partition}",
            )
        hw, lso, start = self.high_watermark, self.last_stable_offset, self.log_start_offset
        bound = lso if isolation_level == READ_COMMITTED else hw
        aborted: list[AbortedTxn] | None = [] if isolation_level == READ_COMMITTED else None
        if offset >= bound:
            return ReadResult(b"", hw, lso, start, aborted)
        first = bisect.bisect_left(self._last_offsets, offset)
        last = first
        total = 0
        while last < len(self.entries):
            entry = self.entries[last]
            if entry.last_offset >= bound:
                break
            if (total or not at_least_one) and total + entry.size > max_bytes:
                break
            total += entry.size
            last += 1
        if last == first:
            return ReadResult(b"", hw, lso, start, aborted)
        end_entry = self.entries[last - 1]
        records = self._join(first, last)
        if aborted is not None:
            upper = end_entry.last_offset + 1
            aborted = [
                a for a in self.aborted if a.last_offset >= offset and a.first_offset < upper
            ]
        return ReadResult(records, hw, lso, start, aborted)

    def offset_for_timestamp(self, timestamp: int, isolation_level: int) -> tuple[int, int]:
        """First record with timestamp >= ``timestamp``: ``(offset, ts)`` or ``(-1, -1)``.

        Control records (transaction markers) count, as in Kafka: a marker stamped at or
        after ``timestamp`` can be the answer.
        """
        bound = self.bound(isolation_level)
        for index, entry in enumerate(self.entries):
            if entry.last_offset < self.log_start_offset:
                continue
            if entry.max_timestamp < timestamp:
                continue
            batch = self._join(index, index + 1)
            header = read_header(batch, 0)
            for off, ts in record_timestamps(batch, header):
                if off >= self.log_start_offset and ts >= timestamp:
                    if off >= bound:
                        return -1, -1
                    return off, ts
        return -1, -1

    def max_timestamp_offset(self, isolation_level: int) -> tuple[int, int]:
        """The record with the largest timestamp (ListOffsets -3): ``(offset, ts)``.

        As Kafka since KAFKA-16310: the record itself, not the last offset of its batch;
        the first one on a tie; searched in the whole log, then returned only if below the
        isolation level's bound (``(-1, -1)`` otherwise, or for an empty log). Control
        batches count as Kafka counts them: a transaction marker, stamped with the time it
        was written, is often the record with the largest timestamp.
        """
        best_ts, best_index = -1, -1
        for index, entry in enumerate(self.entries):
            if entry.last_offset < self.log_start_offset:
                continue
            if entry.max_timestamp > best_ts:
                best_ts, best_index = entry.max_timestamp, index
        if best_index < 0:
            return -1, -1
        batch = self._join(best_index, best_index + 1)
        offsets = [
            (off, ts)
            for off, ts in record_timestamps(batch, read_header(batch, 0))
            if off >= self.log_start_offset
        ]
        offset = next((off for off, ts in offsets if ts == best_ts), offsets[0][0])
        if offset >= self.bound(isolation_level):
            return -1, -1
        return offset, best_ts

    def delete_records(self, offset: int) -> int:
        """Advance the log start offset (DeleteRecords); ``-1`` means the high watermark."""
        target = self.high_watermark if offset == -1 else offset
        if target < 0 or target > self.high_watermark:
            raise RecordError(
                ErrorCode.offset_out_of_range,
                f"cannot delete records before {offset} in {self.topic}-{self.partition} "
                f"(high watermark {self.high_watermark})",
            )
        self.log_start_offset = max(self.log_start_offset, target)
        return self.log_start_offset
