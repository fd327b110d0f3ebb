"""What the writer needs of the brokers' protocol, checked once when a write starts.

The writer's two-phase commit rests on requests that Kafka added release by release. A
broker that lacks one would fail a batch late, inside the driver's commit (ListTransactions,
when the driver waits for the markers), or, worse, answer an older version without the
field the guarantee rests on: the client asks each broker for the highest version both
sides know, and an older version silently drops the fields it lacks (OffsetFetch below v7
has no ``RequireStable``, so a pending transactional offset would read as committed;
InitProducerId below v3 ignores the producer id and epoch the producer expects).

:func:`check_brokers` compares every broker's ApiVersions answer (exchanged when each
connection opened) with :data:`NEEDS` and refuses the cluster at the start with a
:class:`~pyspark_kafka_txn.errors.ProtocolError` naming the broker, what it lacks, the
Kafka release that added it and the oldest release the package supports. Every one of
them is in Apache Kafka 3.0 (docs/dev/minimum-broker.md has the sources).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark_kafka_txn._version import MINIMUM_KAFKA
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.errors import KafkaConnectionError, ProtocolError
from pyspark_kafka_txn.wire import (
    DESCRIBE_TRANSACTIONS,
    INIT_PRODUCER_ID,
    LIST_TRANSACTIONS,
    OFFSET_FETCH,
)

__all__ = ["NEEDS", "Need", "check_brokers", "missing"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Need:
    """One request version the writer cannot do without.

    Attributes
    ----------
    api_key
        The request's API key.
    name
        Its name in Kafka's protocol.
    min_version
        The oldest version that carries what the writer needs.
    since
        The first Apache Kafka release that serves that version.
    why
        What the writer uses it for.
    """

    api_key: int
    name: str
    min_version: int
    since: str
    why: str


#: What the writer needs, oldest first. Everything else it sends (Produce v3+,
#: AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, FindCoordinator v1+,
#: Metadata v1+, CreateTopics v2+, DescribeConfigs v1+, OffsetCommit v5+) is older.
NEEDS: tuple[Need, ...] = (
    Need(
        INIT_PRODUCER_ID,
        "InitProducerId",
        3,
        "2.5",
        "bumping its own producer's epoch (KIP-360)",
    ),
    Need(
        OFFSET_FETCH,
        "OffsetFetch",
        7,
        "2.5",
        "reading batch markers and commit decisions only once their transaction ended "
        "(RequireStable, KIP-447)",
    ),
    Need(
        DESCRIBE_TRANSACTIONS,
        "DescribeTransactions",
        0,
        "3.0",
        "describing open transactions (KIP-664)",
    ),
    Need(
        LIST_TRANSACTIONS,
        "ListTransactions",
        0,
        "3.0",
        "finding transactions left open and waiting for a commit's markers (KIP-664)",
    ),
)


def missing(api_ranges: dict[int, tuple[int, int]]) -> list[Need]:
    """The needs a broker advertising ``api_ranges`` (key -> (lowest, highest)) lacks."""
    return [
        need
        for need in NEEDS
        if need.api_key not in api_ranges or api_ranges[need.api_key][1] < need.min_version
    ]


def check_brokers(cluster: ClusterClient, servers: str) -> None:
    """Refuse a cluster whose brokers lack a request version the writer needs.

    Parameters
    ----------
    cluster
        Connections to the cluster (each broker's is opened here if needed; the pooled
        client keeps them for the writer).
    servers
        The ``kafka.bootstrap.servers`` option, for the message.

    Raises
    ------
    ProtocolError
        Naming each broker that lacks something, what it lacks and since which Kafka
        release it exists.
    KafkaConnectionError
        If the cluster's metadata cannot be read (after the client's retries); a broker
        that does not answer is left unchecked.
    """
    refusals: list[str] = []
    for node, (host, port) in sorted(cluster.brokers().items()):
        try:
            conn = cluster.connection(node)
        except KafkaConnectionError as exc:
            # A broker that is down now (a restart) is not waited for: the brokers of one
            # cluster run one release, and the ones that answer tell which.
            logger.info("broker %d (%s:%d) not checked: %s", node, host, port, exc)
            continue
        lacks = missing(conn.api_ranges)
        if lacks:
            what = "; ".join(
                f"{n.name} v{n.min_version}+ (Kafka {n.since}), for {n.why}" for n in lacks
            )
            refusals.append(f"broker {node} ({host}:{port}) lacks {what}")
    if refusals:
        raise ProtocolError(
            f"The kafka_txn writer cannot use the cluster at '{servers}' (option "
            f"'kafka.bootstrap.servers'): {'. '.join(refusals)}. The writer supports Apache "
            f"Kafka {MINIMUM_KAFKA} and newer releases (brokers that speak its protocol)."
        )
    logger.debug("brokers of %s serve every request the writer needs", servers)
