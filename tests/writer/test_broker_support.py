"""The writer refuses, when a write starts, a cluster whose brokers lack a request version
it needs (``writer/broker_support.py``): an embedded cluster capped as an older Kafka
release stands for one (Apache Kafka releases before 3.0 are not run by the tests)."""

from __future__ import annotations

import pytest

from pyspark_kafka_txn.errors import ProtocolError
from pyspark_kafka_txn.wire import (
    DESCRIBE_TRANSACTIONS,
    INIT_PRODUCER_ID,
    LIST_TRANSACTIONS,
    OFFSET_FETCH,
)
from pyspark_kafka_txn.writer.sink import resolve_timeout
from tests.support.clusters import CheckedKafka
from tests.support.target import KafkaTarget
from tests.support.writer_options import fresh_prefix, writer_options


@pytest.mark.parametrize(
    ("caps", "refused"),
    [
        pytest.param(
            ((LIST_TRANSACTIONS, -1), (DESCRIBE_TRANSACTIONS, -1)),
            ["DescribeTransactions v0+ (Kafka 3.0)", "ListTransactions v0+ (Kafka 3.0)"],
            id="kafka-2.8-no-KIP-664",
        ),
        pytest.param(
            ((OFFSET_FETCH, 6),),
            ["OffsetFetch v7+ (Kafka 2.5)"],
            id="no-require-stable",
        ),
        pytest.param(
            ((INIT_PRODUCER_ID, 2),),
            ["InitProducerId v3+ (Kafka 2.5)"],
            id="no-KIP-360",
        ),
    ],
)
def test_a_broker_without_a_needed_request_is_refused_at_the_start(
    caps: tuple[tuple[int, int], ...], refused: list[str]
) -> None:
    with CheckedKafka(api_max_versions=caps) as old:
        target = KafkaTarget(old.bootstrap_servers, old)
        topic = target.create_topic(prefix="old")
        options = writer_options(old.bootstrap_servers, topic, fresh_prefix("old"))
        with pytest.raises(ProtocolError) as info:
            resolve_timeout(options)
    message = str(info.value)
    assert "broker 0" in message and "'kafka.bootstrap.servers'" in message, message
    assert [r for r in refused if r in message] == refused, message
    named = {"InitProducerId", "OffsetFetch", "DescribeTransactions", "ListTransactions"}
    assert {n for n in named if f"{n} v" in message} == {r.split()[0] for r in refused}


def test_the_session_cluster_serves_what_the_writer_needs(kafka: KafkaTarget) -> None:
    """Apache Kafka from 3.0 on (and the embedded cluster) passes the check."""
    topic = kafka.create_topic(prefix="new")
    options = writer_options(kafka.bootstrap_servers, topic, fresh_prefix("new"))
    assert resolve_timeout(options) > 0
