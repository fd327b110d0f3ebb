"""The streaming reader of ``kafka_txn``: ``spark.readStream.format("kafka_txn")``.

:class:`KafkaStreamReader` implements Spark's micro-batch source API: the initial offsets,
the end of each micro-batch (the LSO or high watermark, capped by the ``ReadLimit`` and
admitted by ``minOffsetsPerTrigger`` / ``maxTriggerDelay``), ``Trigger.AvailableNow``, new
and vanished partitions, and the ``"@origin"`` record that lets a re-run of the first
micro-batch read the same range. Offsets are Spark's checkpoint's; nothing is committed to
Kafka.

Where PySpark has no admission control for Python sources (before Apache Spark 4.2: no
``pyspark.sql.streaming.datasource``), Spark calls ``latestOffset()`` without a start or a
limit and never calls ``prepareForTriggerAvailableNow``. The reader then limits its own
answer: it keeps the offset the next micro-batch starts from (the last end it returned,
or the one Spark planned or announced on restart through ``partitions(end, end)``) and
applies ``maxOffsetsPerTrigger`` and ``minOffsetsPerTrigger`` / ``maxTriggerDelay`` to it,
as it applies Spark's ``ReadLimit`` otherwise. ``docs/compatibility.md`` says what differs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from pyspark_kafka_txn.errors import KafkaTxnError
from pyspark_kafka_txn.offsets import (
    ORIGIN,
    OffsetJson,
    PartitionOffsets,
    check_format,
    from_json_dict,
    origin_of,
    rate_limit,
    to_json_dict,
    with_origin,
)
from pyspark_kafka_txn.options import ReaderOptions
from pyspark_kafka_txn.reader.base import KafkaReader
from pyspark_kafka_txn.reader.common import report_data_loss
from pyspark_kafka_txn.reader.planning import LsoStallMonitor
from pyspark_kafka_txn.spark_api import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark_kafka_txn.wire import TopicPartition

__all__ = ["KafkaStreamReader"]

logger = logging.getLogger(__name__)


class KafkaStreamReader(KafkaReader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("kafka_txn")``: LSO-bounded micro-batches.

    Parameters
    ----------
    options
        Validated options (``ending`` is ``None``).
    """

    def __init__(self, options: ReaderOptions) -> None:
        super().__init__(options)
        self._latest: PartitionOffsets | None = None
        self._available_now: PartitionOffsets | None = None
        self._last_trigger_ms = 0.0
        self._initial: OffsetJson | None = None
        #: Where the next micro-batch starts, for a ``latestOffset()`` without arguments.
        self._next_start: OffsetJson | None = None
        #: The offsets last committed to ``commitOffsetsToGroup``.
        self._group_committed: PartitionOffsets | None = None
        self._stalls = (
            LsoStallMonitor(options.lso_stall_warn_ms)
            if options.read_committed and options.lso_stall_warn_ms > 0
            else None
        )

    # -- offsets ---------------------------------------------------------------------

    def initialOffset(self) -> OffsetJson:  # noqa: N802 - Spark's API name
        """Resolve ``startingOffsets`` / ``startingOffsetsByTimestamp`` / ``startingTimestamp``.

        Resolved once per reader: Spark asks again when it runs the first micro-batch.
        """
        if self._initial is None:
            client = self._offsets()
            tps = client.topic_partitions(at_start=True)
            offsets = client.resolve(self.options.starting, tps, ending=False)
            logger.info("Initial offsets: %s", to_json_dict(offsets))
            self._initial = to_json_dict(offsets)
        return dict(self._initial)

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802 - Spark's API name
        """``maxOffsetsPerTrigger`` → ReadMaxRows; ``minOffsetsPerTrigger`` → ReadMinRows."""
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - Spark's API name
        """Fix the end of an ``AvailableNow`` run at the current LSO / high watermark."""
        client = self._offsets()
        self._available_now = client.latest(client.topic_partitions())
        logger.info("Trigger.AvailableNow target: %s", to_json_dict(self._available_now))

    def latestOffset(  # noqa: N802 - Spark's API name
        self, start: OffsetJson | None = None, limit: ReadLimit | None = None
    ) -> OffsetJson:
        """End of the next micro-batch: the LSO (or high watermark), capped by ``limit``.

        The end of the query's first micro-batch (``start`` is what :meth:`initialOffset`
        returned) records that batch's start under :data:`~pyspark_kafka_txn.offsets.ORIGIN`,
        so that a re-run of the batch reads the same range (see :meth:`partitions`).

        A PySpark without admission control calls it without arguments: the start is then
        where the reader knows the next micro-batch begins (:meth:`initialOffset` for a new
        query) and the limit is :meth:`getDefaultReadLimit`'s.
        """
        if start is None or limit is None:
            start = self._next_start if self._next_start is not None else self.initialOffset()
            end = self._latest_offset(start, self.getDefaultReadLimit())
            self._next_start = end
            return end
        # Spark plans a micro-batch only once the previous one completed: ``start`` is the
        # end of a completed batch (or the query's start), also after a restart.
        self._commit_to_group(start)
        return self._latest_offset(start, limit)

    def _latest_offset(self, start: OffsetJson, limit: ReadLimit) -> OffsetJson:
        client = self._offsets()
        first = ORIGIN not in start and self._initial is not None and start == self._initial
        begin = from_json_dict(start)
        current = client.topic_partitions()
        for tp in sorted(set(begin) - current):
            report_data_loss(
                self.options.fail_on_data_loss,
                f"Partition {tp} is gone (it was at offset {begin[tp]}).",
            )
            del begin[tp]
        if self._available_now is not None:
            latest = {tp: o for tp, o in self._available_now.items() if tp in current}
            # A target below the start (fixed before a "latest" start was resolved): nothing.
            latest.update({tp: max(o, begin.get(tp, o)) for tp, o in latest.items()})
            latest.update({tp: o for tp, o in begin.items() if tp not in latest})
        else:
            latest = client.latest(current)
            if self._stalls is not None:
                self._stalls.observe(latest, client)
        self._latest = dict(latest)
        new = [tp for tp in latest if tp not in begin]
        if new:
            earliest = client.earliest(new)
            logger.info("New partitions start at earliest: %s", to_json_dict(earliest))
            from_offsets = {**begin, **earliest}
        else:
            from_offsets = begin
        admitted = self._admit(limit, from_offsets, latest)
        end = begin if admitted is None else admitted
        if first:
            # Spark runs the first batch even without new data, and a re-run of it gets a
            # freshly resolved initial offset: keep the start this batch was planned with.
            return with_origin(end, from_offsets)
        if ORIGIN in start and end == from_json_dict(start):
            return start  # nothing new: the same offset, so Spark plans no empty batch
        return to_json_dict(end)

    def _admit(
        self,
        limit: ReadLimit,
        start: Mapping[TopicPartition, int],
        latest: PartitionOffsets,
    ) -> PartitionOffsets | None:
        """Apply minOffsetsPerTrigger/maxTriggerDelay and maxOffsetsPerTrigger like Spark.

        Returns ``None`` when the batch is delayed (not enough new offsets yet).
        """
        if isinstance(limit, ReadAllAvailable):
            return latest
        now_ms = time.time() * 1000
        minimum = self.options.min_offsets_per_trigger
        if minimum is not None and self._available_now is None:
            if now_ms - self._last_trigger_ms < self.options.max_trigger_delay_ms:
                backlog = sum(latest[tp] - start.get(tp, latest[tp]) for tp in latest)
                if backlog < minimum:
                    logger.debug("Delaying the batch: %d < minOffsetsPerTrigger", backlog)
                    return None
            self._last_trigger_ms = now_ms
        maximum = self.options.max_offsets_per_trigger
        if isinstance(limit, ReadMaxRows):
            maximum = limit.max_rows
        if maximum is not None:
            return rate_limit(maximum, start, latest)
        return latest

    def reportLatestOffset(self) -> OffsetJson | None:  # noqa: N802 - Spark's API name
        """The uncapped LSO (or high watermark) seen by the last ``latestOffset`` call."""
        return None if self._latest is None else to_json_dict(self._latest)

    def partitions(self, start: OffsetJson, end: OffsetJson) -> Sequence[InputPartition]:
        """One task per topic-partition range (split by minPartitions/maxRecordsPerPartition,
        packed by minRecordsPerPartition).

        When ``end`` records an origin (the first micro-batch), the batch starts there,
        not at ``start``: a re-run of a first batch whose commit was never written gets a
        freshly resolved initial offset as ``start``, which differs from the original one
        when new records arrived (``latest``), retention deleted records (``earliest``) or
        partitions were added.
        """
        # Without admission control the next batch starts at the end of the one planned
        # last, or, after a restart, at the offset Spark announces here (start == end):
        # the checkpoint's offset, refused here if a newer package wrote it.
        check_format(end)
        self._next_start = end
        if start == end:
            return []  # also Spark's probe on restart (setLatestSeenOffset)
        origin = origin_of(end)
        begin = from_json_dict(start)
        if origin is not None:
            if origin != begin:
                logger.info(
                    "First micro-batch planned from its recorded start %s (Spark gave %s)",
                    to_json_dict(origin),
                    to_json_dict(begin),
                )
            begin = origin
        until = from_json_dict(end)
        new = [tp for tp in until if tp not in begin]
        if new:
            begin.update(self._offsets().earliest(new))
        return self._tasks(begin, until)

    def commit(self, end: OffsetJson) -> None:
        """A micro-batch ended at ``end`` is complete (its sink committed it).

        Spark's checkpoint owns the offsets. With ``commitOffsetsToGroup`` they are also
        committed to that consumer group, for lag tools only. Spark calls this when it plans
        the next micro-batch, and never for the last one of an ``availableNow`` run, so
        :meth:`latestOffset` commits its ``start`` too (Spark asks for more data after
        that last batch, which commits it in the same run).
        """
        self._commit_to_group(end)

    def _commit_to_group(self, completed: OffsetJson) -> None:
        """Commit ``completed`` to ``commitOffsetsToGroup`` unless already committed; a
        failure is logged as a WARNING and the query goes on (it never reads them back)."""
        group = self.options.offsets_group
        if group is None:
            return
        offsets = from_json_dict(completed)
        if offsets == self._group_committed:
            return
        try:
            self._offsets().commit_group_offsets(group, offsets)
        except KafkaTxnError as exc:
            logger.warning(
                "%s (commitOffsetsToGroup; the query goes on, lag tools see older offsets)",
                exc,
            )
            return
        self._group_committed = offsets
        logger.debug("committed the offsets of a completed micro-batch to group %r", group)

    def stop(self) -> None:
        """Drop the driver's Kafka handle."""
        self._client = None
