"""An embedded, Kafka-wire-compatible cluster with real transaction semantics.

Used by the tests, the demo and the notebooks; users point the connector at their own
Kafka. See :class:`EmbeddedKafka` (``kafka.py``); its settings are :class:`ClusterConfig`
(``config.py``), its listeners' security :class:`ListenerSecurity` (``security.py``).
The names below load their modules on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark_kafka_txn._lazy import lazy_exports

if TYPE_CHECKING:
    from pyspark_kafka_txn.embedded.cluster import TopicError
    from pyspark_kafka_txn.embedded.config import ClusterConfig
    from pyspark_kafka_txn.embedded.kafka import EmbeddedKafka
    from pyspark_kafka_txn.embedded.security import ListenerSecurity

__all__ = ["ClusterConfig", "EmbeddedKafka", "ListenerSecurity", "TopicError"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ClusterConfig": "pyspark_kafka_txn.embedded.config",
        "EmbeddedKafka": "pyspark_kafka_txn.embedded.kafka",
        "ListenerSecurity": "pyspark_kafka_txn.embedded.security",
        "TopicError": "pyspark_kafka_txn.embedded.cluster",
    },
)
