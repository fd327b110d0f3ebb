"""Apache Kafka itself, for the tests and benchmarks: its jars from Maven Central
(:mod:`.jars`) and a KRaft cluster of one or three nodes started from them (:mod:`.cluster`).

Not part of the installed package. ``python -m tests.support.apache_kafka`` fetches a
release or runs a cluster in the foreground (see ``--help``).
"""

from tests.support.apache_kafka.cluster import (
    ApacheKafka,
    KafkaLaunchError,
    Node,
    Security,
    cert_principal,
    free_port,
    wait_partitions_ready,
)
from tests.support.apache_kafka.jars import (
    DEFAULT_VERSION,
    KafkaFetchError,
    classpath,
    default_version,
    kafka_lib,
)

__all__ = [
    "DEFAULT_VERSION",
    "ApacheKafka",
    "KafkaFetchError",
    "KafkaLaunchError",
    "Node",
    "Security",
    "cert_principal",
    "classpath",
    "default_version",
    "free_port",
    "kafka_lib",
    "wait_partitions_ready",
]
