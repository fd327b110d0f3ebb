"""pyspark-kafka-txn: Kafka transactions (KIP-98) for PySpark Structured Streaming.

Importing the package is cheap: nothing here imports pyspark or starts anything.
"""

from __future__ import annotations

__version__ = "0.1.0.dev0"

__all__ = ["__version__"]
