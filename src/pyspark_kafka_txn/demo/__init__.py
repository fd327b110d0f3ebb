"""``make demo`` / ``kafka-txn demo``: Kafka → Spark → Kafka, exactly once, through faults.

Modules
-------
:mod:`~pyspark_kafka_txn.demo.run`
    The story, step by step (:func:`run_demo`), and its plan (:class:`FeedPlan`).
:mod:`~pyspark_kafka_txn.demo.feed`
    The independent producer of orders.
:mod:`~pyspark_kafka_txn.demo.job`, :mod:`~pyspark_kafka_txn.demo.child`
    The streaming query, in a Spark process of its own, and its handle.
:mod:`~pyspark_kafka_txn.demo.output`
    The read_committed check of the output.
:mod:`~pyspark_kafka_txn.demo.plot`, :mod:`~pyspark_kafka_txn.demo.protocol`
    The progress chart; what the demo and its job process tell each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark_kafka_txn._lazy import lazy_exports

if TYPE_CHECKING:
    from pyspark_kafka_txn.demo.feed import FeedPlan
    from pyspark_kafka_txn.demo.run import run_demo

__all__ = ["FeedPlan", "run_demo"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {"FeedPlan": "pyspark_kafka_txn.demo.feed", "run_demo": "pyspark_kafka_txn.demo.run"},
)
