"""The executor part of the reader: one topic-partition range into Arrow record batches.

:func:`read_range` runs in Spark's Python worker for each planned
:class:`~pyspark_kafka_txn.reader.common.KafkaInputPartition`: a librdkafka consumer in
assign mode (configured by :func:`_consumer_config`) reads ``[start, end)``. Completion is
decided by the consumer's **position**, never by the offset of the last record seen, so
ranges that end on a commit/abort marker or hold nothing but aborted records finish. Offset
gaps left by markers and aborted records are never data loss; only offsets below the log
start offset and vanished partitions are, and they follow ``failOnDataLoss``.

This is the reader's hot path: :meth:`_RangeReader.batches` and :func:`_to_batch` turn
librdkafka messages into Arrow columns in bulk. Measure (``bench/reader_throughput.py``)
before changing them.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from pyspark_kafka_txn.errors import KafkaTxnError, StallTimeoutError
from pyspark_kafka_txn.options import ReaderOptions, TopicPartition
from pyspark_kafka_txn.reader.common import KafkaInputPartition, not_authorized, report_data_loss
from pyspark_kafka_txn.schema import arrow_schema

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["ARROW_BATCH_ROWS", "read_range", "read_ranges"]

logger = logging.getLogger(__name__)

#: Rows collected before ``read()`` yields an Arrow record batch. Whole ``consume()``
#: results are collected, so every batch but the last of a range holds at least this many
#: rows and fewer than this plus :data:`_CONSUME_MESSAGES`; the last one holds the rest.
#: Larger batches amortise the per-batch cost of the Python worker → JVM hand-over (see
#: docs/benchmarks.md, Reader).
ARROW_BATCH_ROWS = 10_000
#: Most messages taken from librdkafka per ``consume()`` call.
_CONSUME_MESSAGES = 10_000
_CONSUME_TIMEOUT_S = 0.2
#: Bounds of librdkafka's per-partition prefetch target (``queued.min.messages``), which
#: the reader sets to the size of its range unless ``kafka.queued.min.messages`` is given.
_PREFETCH_MIN, _PREFETCH_MAX = 1_000, 1_000_000
#: librdkafka settings of the executor's consumer unless given as ``kafka.*`` options.
#: With librdkafka's default ``fetch.queue.backoff.ms=1000``, a partition whose prefetch
#: queue holds ``queued.min.messages`` stops fetching for a second, which sets the read
#: rate of any range longer than that; 4 MiB per partition and fetch halves the number
#: of Fetch round trips.
_CONSUMER_DEFAULTS: dict[str, str | int | float | bool] = {
    "fetch.queue.backoff.ms": 0,
    "max.partition.fetch.bytes": 4_194_304,
}


def _consumer_config(
    options: ReaderOptions, partition: KafkaInputPartition, group_id: str
) -> dict[str, str | int | float | bool]:
    """The executor consumer's configuration: the options' plus throughput defaults."""
    config = options.consumer_config(group_id)
    for key, value in _CONSUMER_DEFAULTS.items():
        config.setdefault(key, value)
    size = partition.end - partition.start
    config.setdefault("queued.min.messages", min(max(size, _PREFETCH_MIN), _PREFETCH_MAX))
    return config


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector (when enabled) for the duration.

    ``consume()`` creates one GC-tracked ``Message`` (and timestamp tuple) per record.
    Record objects that live through a collection are promoted, and every few
    ``consume()`` calls they trigger a full collection of the whole heap, which in a
    Spark Python worker (pyspark, pandas, pyarrow loaded) costs tens of milliseconds.
    The reader's objects form no cycles, so pausing the collector while a batch is
    consumed and converted frees nothing later than reference counting does; the
    collector runs again before the batch is handed to Spark.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _to_batch(msgs: list[Any], tp: TopicPartition, include_headers: bool) -> pa.RecordBatch:
    """One Arrow record batch of consumed records (all of ``tp``, in offset order)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from confluent_kafka import Message

    schema = arrow_schema(include_headers)
    n = len(msgs)
    # map() over the unbound C methods: no attribute lookup or bound method per row.
    timestamps = list(map(Message.timestamp, msgs))  # (type, milliseconds) pairs
    ts_types = list(map(itemgetter(0), timestamps))
    stamps = list(map(itemgetter(1), timestamps))
    if set(ts_types) <= _TIMESTAMP_TYPES:
        # librdkafka's 0/1/2 (none/create/log-append) are Kafka's -1/0/1.
        types = pc.subtract(pa.array(ts_types, pa.int32()), 1)
    else:
        types = pa.array([t - 1 if t in _TIMESTAMP_TYPES else -1 for t in ts_types], pa.int32())
    arrays = [
        pa.array(list(map(Message.key, msgs)), pa.binary()),
        pa.array(list(map(Message.value, msgs)), pa.binary()),
        pa.repeat(pa.scalar(tp.topic, pa.string()), n),
        pa.repeat(pa.scalar(tp.partition, pa.int32()), n),
        pa.array(list(map(Message.offset, msgs)), pa.int64()),
        pc.multiply(pa.array(stamps, pa.int64()), 1000).cast(pa.timestamp("us", tz="UTC")),
        types,
    ]
    if include_headers:
        raw_headers: list[Any] = list(map(Message.headers, msgs))
        headers = [[{"key": k, "value": v} for k, v in h] if h else None for h in raw_headers]
        arrays.append(pa.array(headers, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


#: librdkafka's timestamp types (none, create time, log-append time).
_TIMESTAMP_TYPES = frozenset({0, 1, 2})


def read_range(
    options: ReaderOptions, partition: KafkaInputPartition, *, group_id: str
) -> Iterator[pa.RecordBatch]:
    """Read ``[start, end)`` of one topic-partition as Arrow record batches.

    The range is finished when the consumer's position reaches ``end``: librdkafka advances
    the position past control markers and (under read_committed) aborted records, so
    ranges ending on a marker or holding no visible record complete without waiting.

    Parameters
    ----------
    options
        The validated reader options.
    partition
        The range to read.
    group_id
        Consumer group id (nothing is committed to it).

    Yields
    ------
    pyarrow.RecordBatch
        Rows of the built-in Kafka source's schema, in offset order.

    Raises
    ------
    DataLossError
        When the start offset was deleted or the partition vanished and
        ``failOnDataLoss`` is true.
    StallTimeoutError
        When the consumer made no progress for ``kafkaConsumer.pollTimeoutMs`` (and
        ``failOnDataLoss`` is true; otherwise the rest of the range is skipped). It is
        also a :class:`TimeoutError`.
    """
    return read_ranges(options, (partition,), group_id=group_id)


def read_ranges(
    options: ReaderOptions, partitions: Sequence[KafkaInputPartition], *, group_id: str
) -> Iterator[pa.RecordBatch]:
    """Read several ranges in one task (``minRecordsPerPartition``), one after the other.

    Every range's consumer is created (and starts fetching in librdkafka's threads) before
    the first range is read, so the connections and first fetches of the later ranges
    overlap with the reading of the earlier ones instead of following it. The ranges are
    small by construction (packed up to the option's size), so prefetching all of them
    at once is bounded.

    Yields
    ------
    pyarrow.RecordBatch
        The batches of each range in turn (see :func:`read_range`).
    """
    readers: list[_RangeReader] = []
    try:
        for partition in partitions:
            if partition.end > partition.start:
                readers.append(_RangeReader(options, partition, group_id))
        for reader in readers:
            yield from reader.batches()
    finally:
        for reader in readers:
            reader.close()


class _RangeReader:
    """The consumer loop behind :func:`read_range`."""

    def __init__(self, options: ReaderOptions, partition: KafkaInputPartition, group_id: str):
        from confluent_kafka import Consumer
        from confluent_kafka import TopicPartition as CkTopicPartition

        self.options = options
        self.tp = partition.tp
        self.start, self.end = partition.start, partition.end
        self.ck_tp = CkTopicPartition(self.tp.topic, self.tp.partition)
        self.consumer = Consumer(_consumer_config(options, partition, group_id))
        self.consumer.assign([CkTopicPartition(self.tp.topic, self.tp.partition, self.start)])
        self.position = self.start
        self.done = False
        self.group_refused = False

    def close(self) -> None:
        self.consumer.close()

    def batches(self) -> Iterator[pa.RecordBatch]:
        include_headers = self.options.include_headers
        pending: list[Any] = []
        last_progress = time.monotonic()
        while self.position < self.end and not self.done:
            # consume() waits until it has the number asked for or the timeout passes.
            # Asking for no more than the offsets left lets the last call return once
            # the range is complete (markers and aborted records are made up for by
            # the end-of-partition event or by records past the end).
            wanted = min(_CONSUME_MESSAGES, self.end - self.position)
            batch = None
            with _gc_paused():
                msgs = self.consumer.consume(wanted, _CONSUME_TIMEOUT_S)
                if msgs:
                    pending.extend(self._records(msgs))
                    msgs.clear()
                if len(pending) >= ARROW_BATCH_ROWS:
                    batch = _to_batch(pending, self.tp, include_headers)
                    pending = []
            if batch is not None:
                yield batch
            [now] = self.consumer.position([self.ck_tp])
            if now.offset > self.position:
                self.position = now.offset
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > self.options.poll_timeout_ms / 1000:
                self._on_stall()
        if pending:
            with _gc_paused():
                batch = _to_batch(pending, self.tp, include_headers)
            yield batch

    def _records(self, msgs: list[Any]) -> list[Any]:
        """The records of one ``consume()`` result that lie in ``[start, end)``.

        Error events are handled in order; when one makes the rest of the result stale
        (the consumer was re-assigned or the range is abandoned), the rest is dropped.
        """
        from confluent_kafka import Message

        if any(map(Message.error, msgs)):  # KafkaError is always truthy; None is not
            records = []
            for msg in msgs:
                err = msg.error()
                if err is None:
                    records.append(msg)
                elif self._on_error(err):
                    break
            msgs = records
            if not msgs:
                return msgs
        # One partition, in offset order: only the ends of the result can be out of range.
        if msgs[0].offset() < self.start or msgs[-1].offset() >= self.end:
            start, end = self.start, self.end
            msgs = [m for m in msgs if start <= m.offset() < end]
        return msgs

    def _on_stall(self) -> None:
        message = (
            f"Cannot fetch records of {self.tp} beyond offset {self.position} (reading "
            f"[{self.start}, {self.end})) in {self.options.poll_timeout_ms} milliseconds "
            "(kafkaConsumer.pollTimeoutMs)"
        )
        if self.options.fail_on_data_loss:
            raise StallTimeoutError(message)
        logger.warning("%s; skipping the rest of the range", message)
        self.done = True

    def _on_error(self, err: Any) -> bool:
        """Handle a consumer error event; True when the current poll result is stale."""
        from confluent_kafka import KafkaError
        from confluent_kafka import TopicPartition as CkTopicPartition

        code = err.code()
        if code == KafkaError._PARTITION_EOF:
            return False
        if code == KafkaError.GROUP_AUTHORIZATION_FAILED:
            # librdkafka looks up the coordinator of group.id even in assign mode; the
            # reader never uses the group (explicit offsets, nothing committed), so it
            # needs no ACL on it.
            if not self.group_refused:
                self.group_refused = True
                logger.debug("Ignoring the consumer group's %s (group unused)", err.str())
            return False
        where = f"reading [{self.start}, {self.end}) of {self.tp}"
        if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            raise not_authorized(self.options, code, "READ", self.tp.topic, f"Fetch, {where}")
        if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            low, _ = self.consumer.get_watermark_offsets(self.ck_tp, timeout=30, cached=False)
            report_data_loss(
                self.options.fail_on_data_loss,
                f"Cannot fetch offset {self.position} of {self.tp}: the earliest available "
                f"offset is now {low} ({where}).",
            )
            if low >= self.end:
                self.done = True
            else:
                resume = max(low, self.position)
                self.consumer.assign([CkTopicPartition(self.tp.topic, self.tp.partition, resume)])
            return True
        if code in (
            KafkaError.UNKNOWN_TOPIC_OR_PART,
            KafkaError._UNKNOWN_PARTITION,
            KafkaError._UNKNOWN_TOPIC,
        ):
            report_data_loss(
                self.options.fail_on_data_loss,
                f"Partition {self.tp} vanished at offset {self.position} ({where}).",
            )
            self.done = True
            return True
        if err.fatal() or not err.retriable():
            raise KafkaTxnError(f"Kafka error {where}: {err.str()}")
        logger.warning("Transient Kafka error %s: %s", where, err.str())
        return False
