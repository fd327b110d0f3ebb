"""The producer's sender: batches, in-flight Produce requests, acknowledgements, retries.

This module owns everything between "these rows go to this partition" and "the broker
acknowledged them": encoding rows into record batches with the partition's next sequence
numbers (at once, or after ``linger.ms`` / ``batch.size``), the per-partition queues, the
Produce requests on the wire and their answers, retries and lost connections.

Delivery guarantees:

* one batch per partition per request, at most ``max_in_flight`` (≤ 5) batches per
  partition on the wire, sequence numbers assigned once per batch;
* a retriable failure of a batch (connection lost, timeout, NOT_LEADER_OR_FOLLOWER,
  NOT_ENOUGH_REPLICAS, ...) waits until every other batch of that partition has been
  answered, then resends all unacknowledged batches *unchanged* (same sequence numbers),
  in order; the broker acknowledges a resent batch it already has with its original
  offset, so a retry never duplicates;
* errors that retrying cannot fix are recorded in :attr:`Sender.error` (the first one
  wins) and raised by :meth:`Sender.flush`; the producer's state machine takes it from
  there.
"""

from __future__ import annotations

import collections
import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from pyspark_kafka_txn.client.config import ProducerConfig
from pyspark_kafka_txn.client.connection import Connection
from pyspark_kafka_txn.client.error_codes import check
from pyspark_kafka_txn.client.errors import (
    RESOURCE_TOPIC,
    RESOURCE_TRANSACTIONAL_ID,
    BrokerError,
    KafkaConnectionError,
    KafkaTxnError,
    RecordTooLargeError,
    TransactionError,
)
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.records import RecordColumns, encode_batches
from pyspark_kafka_txn.wire import PRODUCE, TopicPartition

__all__ = ["Sender"]

logger = logging.getLogger(__name__)

_METADATA_STALE = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.leader_not_available,
        ErrorCode.fenced_leader_epoch,
    }
)


@dataclass(eq=False)
class _Batch:
    tp: TopicPartition
    data: bytes
    count: int
    sequence: int
    created: float
    generation: int = -1
    acked: bool = False
    base_offset: int = -1


@dataclass(eq=False)
class _Partition:
    tp: TopicPartition
    next_sequence: int = 0
    queue: collections.deque[_Batch] = field(default_factory=collections.deque)
    inflight: collections.deque[_Batch] = field(default_factory=collections.deque)
    outstanding: int = 0
    generation: int = 0
    retry_at: float = 0.0
    backoff: float = 0.0
    blocked: bool = False  # a retry waits for outstanding sends to drain
    # Until the broker acknowledged one batch of this epoch, it has no producer state
    # for us on this partition and would accept any sequence number; a pipelined second
    # batch could then be appended before a failed first one. So: one in flight.
    acknowledged: bool = False
    # Rows waiting for linger.ms / batch.size, not yet encoded (no sequence numbers).
    lingering: list[RecordColumns] = field(default_factory=list)
    lingering_bytes: int = 0
    linger_since: float = 0.0


class Sender:
    """Batches, sends and retries the records of one transactional producer.

    Parameters
    ----------
    config
        The producer's options (batching, windows, timeouts, back-off).
    cluster
        Leaders and connections.

    Attributes
    ----------
    error
        The first error no retry can fix, or None.
    records_sent, batches_sent
        Acknowledged so far.
    """

    def __init__(self, config: ProducerConfig, cluster: ClusterClient) -> None:
        self.config = config
        self.cluster = cluster
        self.error: KafkaTxnError | None = None
        self.records_sent = 0
        self.batches_sent = 0
        self._producer_id = -1
        self._producer_epoch = -1
        self._produce_top = 11
        self._timeout = timedelta(milliseconds=config.request_timeout_ms)
        self._partitions: dict[TopicPartition, _Partition] = {}
        # connection -> {correlation id: batches in that request}
        self._requests: dict[Connection, dict[int, list[_Batch]]] = {}

    def restart(self, producer_id: int, producer_epoch: int, transaction_version: int) -> None:
        """Use a new producer id or epoch: every partition's sequence numbers restart at 0.

        Queued and in-flight batches are forgotten (answers to them are ignored).
        """
        self._producer_id, self._producer_epoch = producer_id, producer_epoch
        self._produce_top = 12 if transaction_version >= 2 else 11  # v12 adds partitions
        self._partitions.clear()
        self._requests.clear()

    # -- queueing ----------------------------------------------------------------------

    def append(self, tp: TopicPartition, records: RecordColumns, now: float) -> None:
        """Encode ``records`` for ``tp`` now (``linger.ms`` = 0), or let them linger."""
        part = self._partitions.get(tp)
        if part is None:
            part = self._partitions[tp] = _Partition(tp)
        if self.config.linger_ms <= 0:
            self._encode(part, records, now)
            return
        if not part.lingering:
            part.linger_since = now
        part.lingering.append(records)
        part.lingering_bytes += records.approximate_bytes()
        if part.lingering_bytes >= self.config.batch_size:
            self._drain(part, now)

    def send(self, now: float) -> None:
        """Encode rows that lingered long enough; put what the windows allow on the wire."""
        if self.config.linger_ms > 0:
            expired = now - self.config.linger_ms / 1000
            for part in self._partitions.values():
                if part.lingering and part.linger_since <= expired:
                    self._drain(part, now)
        self._pump(block=False)

    def flush(self) -> None:
        """Wait until every queued batch is acknowledged (or raise :attr:`error`)."""
        if self.error is None:
            now = time.monotonic()
            for part in self._partitions.values():
                self._drain(part, now)
        self._pump(block=True)
        if self.error is not None:
            raise self.error

    def discard(self) -> bool:
        """Drop what is not sent yet, wait for what is in flight, forget :attr:`error`.

        For an abort. Returns whether the transaction leaves gaps in the sequence numbers
        (a batch failed or was never sent; a batch whose ack was lost may still be in the
        log), after which the epoch must be bumped (KIP-360).
        """
        gaps = self.error is not None or any(
            b for p in self._partitions.values() for b in (*p.queue, *p.inflight) if not b.acked
        )
        for part in self._partitions.values():
            part.queue.clear()
            part.lingering, part.lingering_bytes = [], 0
        self.error = None
        try:
            self._pump(block=True)
        finally:
            self.error = None
        return gaps

    def _encode(self, part: _Partition, records: RecordColumns, now: float) -> None:
        """Encode ``records`` into batches with the partition's next sequence numbers."""
        try:
            encoded = encode_batches(
                records,
                producer_id=self._producer_id,
                producer_epoch=self._producer_epoch,
                base_sequence=part.next_sequence,
                transactional=True,
                compression=self.config.compression,
                batch_size=self.config.batch_size,
                max_batch_bytes=self.config.max_request_size,
            )
        except RecordTooLargeError as exc:
            raise RecordTooLargeError(f"{part.tp[0]}-{part.tp[1]}: {exc}") from None
        for enc in encoded:
            part.queue.append(_Batch(part.tp, enc.data, enc.record_count, enc.base_sequence, now))
            part.next_sequence = (part.next_sequence + enc.record_count) & 0x7FFFFFFF

    def _drain(self, part: _Partition, now: float) -> None:
        """Encode the rows lingering for ``part`` (``linger.ms`` > 0)."""
        pending, part.lingering, part.lingering_bytes = part.lingering, [], 0
        if pending:
            self._encode(part, RecordColumns.concat(pending), now)

    # -- the send/receive loop ---------------------------------------------------------

    def _pump(self, *, block: bool) -> None:
        """Send what the windows allow; receive responses while blocked.

        With ``block=False`` returns once every queued batch is on the wire (or waits
        for a retry back-off); with ``block=True`` returns when every batch is
        acknowledged or an error is recorded.
        """
        while self.error is None:
            if self._send_ready():
                continue
            now = time.monotonic()
            waiting = [p for p in self._partitions.values() if p.queue]
            if not block and not any(p.retry_at <= now for p in waiting):
                return
            busy = [c for c, reqs in self._requests.items() if reqs]
            if busy:
                conn = busy[0]
                self._receive(conn, next(iter(self._requests[conn])))
            elif waiting:
                wake = min(p.retry_at for p in waiting)
                time.sleep(min(max(0.0, wake - now), 0.5))
            else:
                return

    def _send_ready(self) -> bool:
        """Send one request per leader with the head batch of each ready partition."""
        now = time.monotonic()
        by_leader: dict[int, list[_Partition]] = collections.defaultdict(list)
        for part in self._partitions.values():
            while part.queue and part.queue[0].acked:
                part.queue.popleft()
            if not part.queue or part.retry_at > now:
                continue
            if part.blocked:
                if part.outstanding:
                    continue
                part.blocked = False
            window = self.config.max_in_flight if part.acknowledged else 1
            if part.outstanding >= window:
                continue
            try:
                leader = self.cluster.topic(part.tp[0]).leaders[part.tp[1]]
            except KafkaTxnError as exc:
                self._fail_batch(part.queue[0], exc)
                return False
            by_leader[leader].append(part)
        sent = False
        for leader, parts in by_leader.items():
            try:
                conn = self.cluster.connection(leader)
            except KafkaConnectionError as exc:
                for part in parts:
                    self._retry(part, exc, stale_metadata=True)
                continue
            reqs = self._requests.setdefault(conn, {})
            if len(reqs) >= self.config.max_in_flight:
                continue
            batches = [part.queue.popleft() for part in parts]
            try:
                cid = self._send_produce(conn, batches)
            except KafkaConnectionError as exc:
                for part, batch in zip(parts, batches, strict=True):
                    part.queue.appendleft(batch)
                self._connection_lost(conn, exc)
                continue
            for part, batch in zip(parts, batches, strict=True):
                batch.generation = part.generation
                part.inflight.append(batch)
                part.outstanding += 1
            reqs[cid] = batches
            sent = True
        return sent

    def _send_produce(self, conn: Connection, batches: list[_Batch]) -> int:
        version = conn.version(PRODUCE, 3, self._produce_top)
        mod = load_payload_module(PRODUCE, version, EntityType.request)
        by_topic: dict[str, list[Any]] = collections.defaultdict(list)
        for batch in batches:
            by_topic[batch.tp[0]].append(
                mod.PartitionProduceData(index=batch.tp[1], records=batch.data)
            )
        topic_data = tuple(
            mod.TopicProduceData(name=name, partition_data=tuple(parts))
            for name, parts in by_topic.items()
        )
        return conn.send(
            PRODUCE,
            version,
            transactional_id=self.config.transactional_id,
            acks=-1,
            timeout=self._timeout,
            topic_data=topic_data,
        )

    def _receive(self, conn: Connection, cid: int) -> None:
        batches = self._requests[conn][cid]
        try:
            body = conn.receive(cid)
        except KafkaConnectionError as exc:
            self._connection_lost(conn, exc)
            return
        del self._requests[conn][cid]
        results: dict[TopicPartition, Any] = {}
        for topic in body.responses:
            for res in topic.partition_responses:
                results[TopicPartition(str(topic.name), int(res.index))] = res
        for batch in batches:
            part = self._partitions.get(batch.tp)
            if part is None:  # producer re-initialised meanwhile
                continue
            part.outstanding -= 1
            res = results.get(batch.tp)
            code = ErrorCode.unknown_server_error if res is None else res.error_code
            if res is not None and code == ErrorCode.none:
                self._ack(part, batch, int(res.base_offset))
            elif batch.generation != part.generation or batch.acked:
                continue  # already scheduled for resend by an earlier failure
            elif code == ErrorCode.out_of_order_sequence_number and not self._is_first_unacked(
                part, batch
            ):
                self._retry(part, BrokerError(code, "produce"), stale_metadata=False)
            else:
                context = f"Produce to {batch.tp[0]}-{batch.tp[1]}"
                if code in (ErrorCode.message_too_large, ErrorCode.record_list_too_large):
                    context += (
                        f": a batch of {batch.count} record(s), {len(batch.data)} bytes, is "
                        "above the topic's max.message.bytes (lower batch.size below it, or "
                        "raise the topic's limit for records this large)"
                    )
                needs = {
                    RESOURCE_TRANSACTIONAL_ID: ("WRITE", self.config.transactional_id),
                    RESOURCE_TOPIC: ("WRITE", batch.tp[0]),
                }
                try:
                    check(code, context, needs)
                except BrokerError as exc:
                    if exc.retriable:
                        self._retry(part, exc, stale_metadata=code in _METADATA_STALE)
                    else:
                        self._fail_batch(batch, exc)

    @staticmethod
    def _is_first_unacked(part: _Partition, batch: _Batch) -> bool:
        for other in part.inflight:
            if not other.acked:
                return other is batch
        return True

    def _ack(self, part: _Partition, batch: _Batch, offset: int) -> None:
        if batch.acked:
            return
        batch.acked = True
        batch.base_offset = offset
        part.acknowledged = True
        self.records_sent += batch.count
        self.batches_sent += 1
        if batch in part.inflight:
            part.inflight.remove(batch)
        part.backoff = 0.0

    def _retry(self, part: _Partition, exc: KafkaTxnError, *, stale_metadata: bool) -> None:
        """Resend every unacknowledged batch of ``part``, unchanged, after back-off."""
        now = time.monotonic()
        oldest = min((b.created for b in (*part.inflight, *part.queue) if not b.acked), default=now)
        if now - oldest > self.config.delivery_timeout_ms / 1000:
            self.error = TransactionError(
                ErrorCode.request_timed_out,
                f"delivery to {part.tp[0]}-{part.tp[1]} timed out; last error: {exc}",
            )
            return
        logger.info("retrying %s-%s after %s", part.tp[0], part.tp[1], exc)
        if stale_metadata:
            self.cluster.invalidate_topic(part.tp[0])
        part.generation += 1
        unacked = [b for b in part.inflight if not b.acked]
        part.inflight.clear()
        part.queue.extendleft(reversed(unacked))
        part.blocked = True
        base = self.config.retry_backoff_ms / 1000
        part.backoff = min(max(base, part.backoff * 2), self.config.retry_backoff_max_ms / 1000)
        part.retry_at = now + part.backoff

    def _fail_batch(self, batch: _Batch, exc: KafkaTxnError) -> None:
        logger.warning("batch to %s-%s failed: %s", batch.tp[0], batch.tp[1], exc)
        if self.error is None:
            self.error = exc

    def _connection_lost(self, conn: Connection, exc: KafkaConnectionError) -> None:
        lost = self._requests.pop(conn, {})
        affected: dict[TopicPartition, _Partition] = {}
        for batches in lost.values():
            for batch in batches:
                part = self._partitions.get(batch.tp)
                if part is None:
                    continue
                part.outstanding -= 1
                affected[batch.tp] = part
        for part in affected.values():
            self._retry(part, exc, stale_metadata=True)
