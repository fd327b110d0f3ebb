"""Apache Kafka itself, for the tests and benchmarks: its jars from Maven Central
(:mod:`.jars`) and a cluster of one or three nodes started from them (:mod:`.cluster`): KRaft,
or ZooKeeper mode for releases before 3.3 (:func:`.cluster.default_mode`).

Not part of the installed package. ``python -m tests.support.apache_kafka`` fetches a
release or runs a cluster in the foreground (see ``--help``).
"""

from tests.support.apache_kafka.cluster import (
    KRAFT,
    ZOOKEEPER,
    ApacheKafka,
    KafkaLaunchError,
    Node,
    Security,
    cert_principal,
    default_mode,
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
    "KRAFT",
    "ZOOKEEPER",
    "ApacheKafka",
    "KafkaFetchError",
    "KafkaLaunchError",
    "Node",
    "Security",
    "cert_principal",
    "classpath",
    "default_mode",
    "default_version",
    "free_port",
    "kafka_lib",
    "wait_partitions_ready",
]
