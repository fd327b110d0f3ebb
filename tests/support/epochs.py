"""Producer epochs driven up by hand, to reach epoch exhaustion on any broker.

Apache Kafka has no setting to start producer ids near exhaustion (the embedded cluster's
``initial_producer_epoch``); but each InitProducerId of a transactional id whose last
transaction is complete bumps its epoch by one, and a loopback broker answers well over a
thousand a second, so the 32,767 epochs of an id are a matter of seconds.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark_kafka_txn.client.connection import Connection
from pyspark_kafka_txn.client.error_codes import check
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.wire import COORDINATOR_TXN, INIT_PRODUCER_ID

#: The last epoch before exhaustion: an InitProducerId or TV2 EndTxn from here rotates
#: the producer id (Kafka's ``Short.MAX_VALUE - 1``).
EXHAUSTED_EPOCH = 32766


def bump_epoch(bootstrap: str, transactional_id: str, to_epoch: int) -> tuple[int, int]:
    """InitProducerId on ``transactional_id`` until its epoch is ``to_epoch`` (below
    :data:`EXHAUSTED_EPOCH`); its transaction must not be open. Returns the producer id
    and epoch. Any producer of the id is fenced, as by a new instance."""
    assert to_epoch < EXHAUSTED_EPOCH, to_epoch

    def init(conn: Connection) -> tuple[int, int]:
        body = conn.request(
            INIT_PRODUCER_ID,
            conn.version(INIT_PRODUCER_ID, 0, 4),
            transactional_id=transactional_id,
            transaction_timeout=timedelta(seconds=60),
            producer_id=-1,
            producer_epoch=-1,
        )
        check(body.error_code, f"InitProducerId({transactional_id!r})")
        return int(body.producer_id), int(body.producer_epoch)

    with ClusterClient(bootstrap) as cluster:
        producer = init_once = cluster.coordinator_call(
            COORDINATOR_TXN, transactional_id, "InitProducerId", init
        )
        while producer[1] < to_epoch:
            producer = cluster.coordinator_call(
                COORDINATOR_TXN, transactional_id, "InitProducerId", init
            )
        assert producer[0] == init_once[0], "the producer id rotated before the target epoch"
    return producer
