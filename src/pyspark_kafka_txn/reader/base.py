"""What the batch and the stream reader are made of besides planning.

:class:`KafkaReader` owns a reader's construction (the validated options, the id of this
read), its pickling (the driver's cluster client stays on the driver) and ``read()``, the
executor's side: it hands a planned task to :func:`~pyspark_kafka_txn.reader.executor.read_range`
or :func:`~pyspark_kafka_txn.reader.executor.read_ranges`. The planning it asks for lives in
:mod:`~pyspark_kafka_txn.reader.planning`, created lazily on the driver only.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import InputPartition

from pyspark_kafka_txn.options import ReaderOptions
from pyspark_kafka_txn.reader.common import KafkaInputPartition, KafkaInputPartitions
from pyspark_kafka_txn.reader.executor import read_range, read_ranges
from pyspark_kafka_txn.wire import TopicPartition

if TYPE_CHECKING:
    import pyarrow as pa

    from pyspark_kafka_txn.reader.planning import OffsetClient

__all__ = ["KafkaReader"]


class KafkaReader:
    """The part of :class:`~pyspark_kafka_txn.reader.batch.KafkaBatchReader` and
    :class:`~pyspark_kafka_txn.reader.stream.KafkaStreamReader` that is not planning.

    Parameters
    ----------
    options
        The validated reader options.
    """

    def __init__(self, options: ReaderOptions) -> None:
        self.options = options
        #: The id of this read: the executors' consumer group is named after it.
        self._read_id = uuid.uuid4().hex
        self._client: OffsetClient | None = None

    # -- driver --------------------------------------------------------------------------

    def _offsets(self) -> OffsetClient:
        """The driver's cluster client, created at its first use (never pickled)."""
        if self._client is None:
            from pyspark_kafka_txn.reader.planning import OffsetClient

            self._client = OffsetClient(self.options)
        return self._client

    def _tasks(
        self, start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]
    ) -> list[KafkaInputPartition | KafkaInputPartitions]:
        """Spark's input partitions for the ranges ``start`` → ``end``."""
        from pyspark_kafka_txn.reader.planning import plan_tasks

        return plan_tasks(self.options, start, end)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    # -- executor ------------------------------------------------------------------------

    @property
    def executor_group_id(self) -> str:
        """The group id of the executors' consumers (nothing is ever committed to it)."""
        return f"{self.options.group_id_prefix}-{self._read_id}-executor"

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one planned task on an executor: its range or ranges (see :func:`read_range`)."""
        group_id = self.executor_group_id
        if isinstance(partition, KafkaInputPartitions):
            return read_ranges(self.options, partition.ranges, group_id=group_id)
        if not isinstance(partition, KafkaInputPartition):
            return iter(())  # Spark plans one placeholder partition when there is nothing
        return read_range(self.options, partition, group_id=group_id)
