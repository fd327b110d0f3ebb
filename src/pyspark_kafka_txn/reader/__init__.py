"""The ``kafka_txn`` reader: LSO-bounded planning on the driver, position-based reads.

Modules
-------
:mod:`~pyspark_kafka_txn.reader.planning`
    Driver planning: metadata, ListOffsets with the isolation level, offset resolution,
    retries, the LSO stall monitor, and what the batch and stream readers share.
:mod:`~pyspark_kafka_txn.reader.stream`
    :class:`KafkaStreamReader`, the micro-batch reader (``spark.readStream``).
:mod:`~pyspark_kafka_txn.reader.batch`
    :class:`KafkaBatchReader`, the bounded reader (``spark.read``).
:mod:`~pyspark_kafka_txn.reader.executor`
    :func:`read_range`: one planned range read on an executor into Arrow record batches;
    ``read_ranges``: the ranges of a packed task, their consumers fetching together.
:mod:`~pyspark_kafka_txn.reader.common`
    :class:`KafkaInputPartition` (one range), :class:`KafkaInputPartitions` (ranges packed
    into one task) and the errors both sides raise.

The names below are re-exported lazily: importing this package imports none of its
modules, and ``from pyspark_kafka_txn.reader import read_range`` loads the executor part
without the driver's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark_kafka_txn._lazy import lazy_exports

if TYPE_CHECKING:
    from pyspark_kafka_txn.errors import DataLossError
    from pyspark_kafka_txn.reader.batch import KafkaBatchReader
    from pyspark_kafka_txn.reader.common import KafkaInputPartition, KafkaInputPartitions
    from pyspark_kafka_txn.reader.executor import read_range
    from pyspark_kafka_txn.reader.stream import KafkaStreamReader

__all__ = [
    "DataLossError",
    "KafkaBatchReader",
    "KafkaInputPartition",
    "KafkaInputPartitions",
    "KafkaStreamReader",
    "read_range",
]

#: Where each re-exported name is defined.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "DataLossError": "pyspark_kafka_txn.errors",
        "KafkaBatchReader": "pyspark_kafka_txn.reader.batch",
        "KafkaInputPartition": "pyspark_kafka_txn.reader.common",
        "KafkaInputPartitions": "pyspark_kafka_txn.reader.common",
        "KafkaStreamReader": "pyspark_kafka_txn.reader.stream",
        "read_range": "pyspark_kafka_txn.reader.executor",
    },
)
