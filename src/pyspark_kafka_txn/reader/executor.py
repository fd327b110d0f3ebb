"""The executor part of the reader: one topic-partition range into Arrow record batches.

:func:`read_range` runs in Spark's Python worker for each planned
:class:`~pyspark_kafka_txn.reader.common.KafkaInputPartition`: a librdkafka consumer in
assign mode (configured by :func:`_consumer_config`) reads ``[start, end)``. Completion is
decided by the consumer's **position**, never by the offset of the last record seen, so
ranges that end on a commit/abort marker or hold nothing but aborted records finish. Offset
gaps left by markers and aborted records are never data loss; only offsets below the log
start offset and vanished partitions are, and they follow ``failOnDataLoss``.

This is the reader's hot path: :meth:`_RangeReader.batches` and :func:`_to_batch` turn
librdkafka messages into Arrow columns in bulk, from numpy buffers (``pyarrow.array`` would
import pandas into every fresh Python worker). Measure (``bench/reader_throughput.py``)
before changing them.
"""

from __future__ import annotations

import gc
import itertools
import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from operator import itemgetter
from typing import TYPE_CHECKING, Any, cast

from pyspark_kafka_txn.errors import KafkaTxnError, StallTimeoutError
from pyspark_kafka_txn.options import ReaderOptions
from pyspark_kafka_txn.options.kafka import librdkafka_client_config
from pyspark_kafka_txn.pool import Pool
from pyspark_kafka_txn.reader.common import KafkaInputPartition, not_authorized, report_data_loss
from pyspark_kafka_txn.schema import arrow_schema
from pyspark_kafka_txn.wire import TopicPartition

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["ARROW_BATCH_BYTES", "ARROW_BATCH_ROWS", "CONSUMERS", "read_range", "read_ranges"]

logger = logging.getLogger(__name__)

#: Rows collected before ``read()`` yields an Arrow record batch. Whole ``consume()``
#: results are collected, so every batch but the last of a range holds at least this many
#: rows and fewer than this plus :data:`_CONSUME_MESSAGES`; the last one holds the rest.
#: Larger batches amortise the per-batch cost of the Python worker → JVM hand-over (see
#: docs/benchmarks.md, Reader).
ARROW_BATCH_ROWS = 10_000
#: Most bytes of record values in one Arrow record batch (a larger record gets a batch of
#: its own), and the value bytes collected before ``read()`` yields whatever the rows: a
#: range of large records never holds thousands of them in the worker at once.
ARROW_BATCH_BYTES = 64 * 1024 * 1024
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
    # The range's size rounded up to a power of two: a pooled consumer serves the ranges
    # of about its size (the setting is fixed when the consumer is made).
    size = 1 << max(0, partition.end - partition.start - 1).bit_length()
    config.setdefault("queued.min.messages", min(max(size, _PREFETCH_MIN), _PREFETCH_MAX))
    return config


#: The executor's consumers kept between tasks of one Python worker (Spark reuses its
#: workers, so the next micro-batch's range of a topic-partition usually lands in a
#: process that read the previous one): the consumer, its connections and metadata are
#: reused, only its assignment is new. Found by the whole librdkafka configuration
#: (credentials included) and the topic-partition; unassigned (no fetching) while idle;
#: at most 16 kept, each for five minutes of idleness (as Spark's own consumer cache);
#: one whose range raised is closed.
CONSUMERS: Pool[tuple[object, ...], Any] = Pool(
    "consumer", lambda consumer: consumer.close(), capacity=16, idle_s=300.0
)


@contextmanager
def _assigned_consumer(
    options: ReaderOptions, partition: KafkaInputPartition, group_id: str
) -> Iterator[Any]:
    """A consumer assigned to ``partition`` from its start (pooled, see :data:`CONSUMERS`)."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CkTopicPartition

    config = librdkafka_client_config(_consumer_config(options, partition, group_id))
    tp = partition.tp
    key = (tuple(sorted(config.items(), key=itemgetter(0))), tp.topic, tp.partition)
    with CONSUMERS.use(key, lambda: Consumer(config)) as consumer:
        consumer.assign([CkTopicPartition(tp.topic, tp.partition, partition.start)])
        yield consumer
        consumer.unassign()  # stop fetching while idle (its prefetched records are dropped)


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


def _to_batches(msgs: list[Any], tp: TopicPartition, include_headers: bool) -> list[pa.RecordBatch]:
    """Arrow record batches of consumed records (all of ``tp``, in offset order).

    Consecutive records go into one batch while their values hold at most
    :data:`ARROW_BATCH_BYTES` (a larger record gets a batch of its own); a batch whose keys
    or values would still pass Arrow's 2 GiB for one binary column is halved.
    """
    import numpy as np

    ends = np.cumsum(np.fromiter(map(len, msgs), np.int64, len(msgs)))  # len: value bytes
    batches: list[pa.RecordBatch] = []
    start = 0
    while start < len(msgs):
        before = int(ends[start - 1]) if start else 0
        stop = int(np.searchsorted(ends, before + ARROW_BATCH_BYTES, side="right"))
        stop = max(stop, start + 1)
        batches.extend(_halved_until_fit(msgs[start:stop], tp, include_headers))
        start = stop
    return batches


def _halved_until_fit(
    msgs: list[Any], tp: TopicPartition, include_headers: bool
) -> list[pa.RecordBatch]:
    """One batch of ``msgs``, or batches of its halves while a binary column overflows."""
    try:
        return [_to_batch(msgs, tp, include_headers)]
    except _ColumnTooLargeError:
        if len(msgs) < 2:
            raise KafkaTxnError(
                f"A record of {tp} at offset {msgs[0].offset()} does not fit in one Arrow "
                "column (2 GiB)"
            ) from None
        half = len(msgs) // 2
        return _halved_until_fit(msgs[:half], tp, include_headers) + _halved_until_fit(
            msgs[half:], tp, include_headers
        )


def _to_batch(msgs: list[Any], tp: TopicPartition, include_headers: bool) -> pa.RecordBatch:
    """One Arrow record batch of consumed records (all of ``tp``, in offset order).

    Every column is assembled from its buffers (numpy, ``bytes.join``) instead of
    ``pyarrow.array`` and ``pyarrow.compute``: those import pandas on their first call in a
    process, which costs a fresh Spark Python worker 0.3 s or more on its first batch.

    Raises
    ------
    _ColumnTooLargeError
        When the keys or the values hold more bytes than one Arrow binary column can.
    """
    import numpy as np
    import pyarrow as pa
    from confluent_kafka import Message

    schema = arrow_schema(include_headers)
    n = len(msgs)
    # map() over the unbound C methods: no attribute lookup or bound method per row.
    timestamps = list(map(Message.timestamp, msgs))  # (type, milliseconds) pairs
    # librdkafka's 0/1/2 (none/create/log-append) are Kafka's -1/0/1; anything else -1.
    types = np.fromiter(map(itemgetter(0), timestamps), np.int32, n) - 1
    types[(types < -1) | (types > 1)] = -1
    micros = np.fromiter(map(itemgetter(1), timestamps), np.int64, n) * 1000
    topic = tp.topic.encode()
    arrays = [
        _binary_array(list(map(Message.key, msgs)), pa.binary()),
        _binary_array(list(map(Message.value, msgs)), pa.binary()),
        _from_buffers(
            pa.string(), n, None, np.arange(n + 1, dtype=np.int32) * len(topic), topic * n
        ),
        _from_buffers(pa.int32(), n, None, np.full(n, tp.partition, np.int32)),
        _from_buffers(pa.int64(), n, None, np.fromiter(map(Message.offset, msgs), np.int64, n)),
        _from_buffers(schema.field("timestamp").type, n, None, micros),
        _from_buffers(pa.int32(), n, None, types),
    ]
    if include_headers:
        arrays.append(_headers_array(list(map(Message.headers, msgs)), schema))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class _ColumnTooLargeError(Exception):
    """A binary column of one batch would hold more than Arrow's int32 offsets address."""


#: The most bytes one Arrow binary or string column can hold (int32 offsets).
_COLUMN_BYTES_MAX = 2**31 - 1


def _from_buffers(
    dtype: pa.DataType,
    n: int,
    valid: Any,
    values: Any,
    data: bytes | None = None,
    nulls: int = 0,
    children: list[pa.Array] | None = None,
) -> pa.Array:
    """An Arrow array of ``n`` slots from numpy buffers.

    ``valid`` is a boolean array (None: no nulls); ``values`` the fixed-width values, or
    the offsets of a binary, string or list array; ``data`` the bytes of a binary or string
    array; ``children`` the child arrays of a list.
    """
    import numpy as np
    import pyarrow as pa

    validity = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    buffers = [validity, pa.py_buffer(values)]
    if data is not None:
        buffers.append(pa.py_buffer(data))
    return pa.Array.from_buffers(dtype, n, buffers, null_count=nulls, children=children)


def _offsets(lengths: Any) -> Any:
    """int32 offsets of consecutive items of ``lengths`` bytes each (n + 1 of them)."""
    import numpy as np

    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > _COLUMN_BYTES_MAX:
        raise _ColumnTooLargeError
    return offsets.astype(np.int32)


def _binary_array(items: list[bytes | None], dtype: pa.DataType) -> pa.Array:
    """A binary (or, of UTF-8 bytes, string) Arrow array of ``items``; None is null."""
    import numpy as np

    n = len(items)
    nulls = items.count(None)
    if nulls == n:  # e.g. the keys of a topic written without keys
        return _from_buffers(dtype, n, np.zeros(n, np.bool_), np.zeros(n + 1, np.int32), b"", n)
    valid = None
    filled = cast("list[bytes]", items)
    if nulls:
        valid = np.fromiter([item is not None for item in items], np.bool_, n)
        filled = [b"" if item is None else item for item in items]
    offsets = _offsets(np.fromiter(map(len, filled), np.int64, n))
    return _from_buffers(dtype, n, valid, offsets, b"".join(filled), nulls)


def _headers_array(headers: list[Any], schema: pa.Schema) -> pa.Array:
    """The ``headers`` column: per record its (name, value) pairs, null when it has none."""
    import numpy as np
    import pyarrow as pa

    n = len(headers)
    list_type = schema.field("headers").type
    valid = np.fromiter(map(bool, headers), np.bool_, n)
    present = [h for h in headers if h]
    counts = np.zeros(n, np.int64)
    counts[valid] = np.fromiter(map(len, present), np.int64, len(present))
    pairs = list(itertools.chain.from_iterable(present))
    names = _binary_array([name.encode() for name, _ in pairs], list_type.value_type.field(0).type)
    values = _binary_array([value for _, value in pairs], list_type.value_type.field(1).type)
    entries = pa.Array.from_buffers(
        list_type.value_type, len(pairs), [None], children=[names, values]
    )
    nulls = n - len(present)
    return _from_buffers(
        list_type, n, valid if nulls else None, _offsets(counts), None, nulls, [entries]
    )


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

    Every range's consumer is assigned (and starts fetching in librdkafka's threads) before
    the first range is read, so the connections and first fetches of the later ranges
    overlap with the reading of the earlier ones instead of following it. The ranges are
    small by construction (packed up to the option's size), so prefetching all of them
    at once is bounded.

    Yields
    ------
    pyarrow.RecordBatch
        The batches of each range in turn (see :func:`read_range`).
    """
    with ExitStack() as consumers:
        readers = [
            _RangeReader(
                options,
                partition,
                consumers.enter_context(_assigned_consumer(options, partition, group_id)),
            )
            for partition in partitions
            if partition.end > partition.start
        ]
        for reader in readers:
            yield from reader.batches()


class _RangeReader:
    """The consumer loop behind :func:`read_range`."""

    def __init__(self, options: ReaderOptions, partition: KafkaInputPartition, consumer: Any):
        from confluent_kafka import TopicPartition as CkTopicPartition

        self.options = options
        self.tp = partition.tp
        self.start, self.end = partition.start, partition.end
        self.ck_tp = CkTopicPartition(self.tp.topic, self.tp.partition)
        self.consumer = consumer  # assigned to the range's start (_assigned_consumer)
        self.position = self.start
        self.done = False
        self.group_refused = False

    def batches(self) -> Iterator[pa.RecordBatch]:
        include_headers = self.options.include_headers
        pending: list[Any] = []
        pending_bytes = 0
        last_progress = time.monotonic()
        while self.position < self.end and not self.done:
            # consume() waits until it has the number asked for or the timeout passes.
            # Asking for no more than the offsets left lets the last call return once
            # the range is complete (markers and aborted records are made up for by
            # the end-of-partition event or by records past the end).
            wanted = min(_CONSUME_MESSAGES, self.end - self.position)
            batches: list[pa.RecordBatch] = []
            with _gc_paused():
                msgs = self.consumer.consume(wanted, _CONSUME_TIMEOUT_S)
                if msgs:
                    records = self._records(msgs)
                    pending.extend(records)
                    pending_bytes += sum(map(len, records))  # value bytes
                    msgs.clear()
                if len(pending) >= ARROW_BATCH_ROWS or pending_bytes >= ARROW_BATCH_BYTES:
                    batches = _to_batches(pending, self.tp, include_headers)
                    pending, pending_bytes = [], 0
            yield from batches
            [now] = self.consumer.position([self.ck_tp])
            if now.offset > self.position:
                self.position = now.offset
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > self.options.poll_timeout_ms / 1000:
                self._on_stall()
        if pending:
            with _gc_paused():
                batches = _to_batches(pending, self.tp, include_headers)
            yield from batches

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
