"""An embedded, Kafka-wire-compatible cluster with real transaction semantics.

Used by the tests, the demo and the notebooks; users point the connector at their own
Kafka. See :class:`EmbeddedKafka`.
"""

from __future__ import annotations

from pyspark_kafka_txn.embedded.cluster import TopicError
from pyspark_kafka_txn.embedded.config import ClusterConfig
from pyspark_kafka_txn.embedded.kafka import EmbeddedKafka
from pyspark_kafka_txn.embedded.security import ListenerSecurity

__all__ = ["ClusterConfig", "EmbeddedKafka", "ListenerSecurity", "TopicError"]
