"""pyspark-kafka-txn: Kafka transactions (KIP-98) for PySpark Structured Streaming.

Importing the package is cheap: nothing here imports pyspark or starts anything.
``DefaultSource`` / ``KafkaTxnDataSource`` (the ``kafka_txn`` data source) are loaded on
first access; Spark auto-registers ``DefaultSource`` of modules named ``pyspark_*``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark_kafka_txn.source import KafkaTxnDataSource

    DefaultSource = KafkaTxnDataSource

__version__ = "0.1.0.dev0"

__all__ = ["DefaultSource", "KafkaTxnDataSource", "__version__"]


def __getattr__(name: str) -> Any:
    if name in {"DefaultSource", "KafkaTxnDataSource"}:
        from pyspark_kafka_txn.source import KafkaTxnDataSource

        return KafkaTxnDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
