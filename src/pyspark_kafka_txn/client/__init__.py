"""Our own Kafka protocol client (transactional producer, admin calls) on kio.

It imports neither pyspark nor the embedded cluster (an import-linter contract).

Modules: ``errors`` (exception hierarchy), ``connection`` (framing, pipelining, version
negotiation), ``metadata`` (leaders, coordinators), ``records`` (record batch v2 encoding
from Arrow), ``partitioner`` (Java-compatible murmur2, each record's partition),
``config`` (``ProducerConfig``, free of kio, numpy and pyarrow), ``txn_state`` (the
producer's transaction state machine), ``sender`` (batches, in-flight requests, retries),
``ending`` (``PreparedTransaction``, ``end_transaction``, ``end_transactions``),
``error_codes`` (error code → exception), ``producer`` (``TransactionalProducer``; re-exports
the names above), ``admin`` (CreateTopics, DescribeConfigs, List/DescribeTransactions,
OffsetFetch). See docs/client.md.

The names of ``__all__`` are importable from this package; each is loaded on first use, so
``import pyspark_kafka_txn.client`` (on the reader's import path) loads no kio.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark_kafka_txn._lazy import lazy_exports

if TYPE_CHECKING:
    from pyspark_kafka_txn.client.config import ProducerConfig
    from pyspark_kafka_txn.client.ending import (
        PreparedTransaction,
        end_transaction,
        end_transactions,
    )
    from pyspark_kafka_txn.client.metadata import ClusterClient
    from pyspark_kafka_txn.client.producer import TransactionalProducer
    from pyspark_kafka_txn.client.txn_state import TransactionState

__all__ = [
    "ClusterClient",
    "PreparedTransaction",
    "ProducerConfig",
    "TransactionState",
    "TransactionalProducer",
    "end_transaction",
    "end_transactions",
]

# Public name -> the module that defines it.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ClusterClient": f"{__name__}.metadata",
        "PreparedTransaction": f"{__name__}.ending",
        "ProducerConfig": f"{__name__}.config",
        "TransactionState": f"{__name__}.txn_state",
        "TransactionalProducer": f"{__name__}.producer",
        "end_transaction": f"{__name__}.ending",
        "end_transactions": f"{__name__}.ending",
    },
)
