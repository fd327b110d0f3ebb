"""The writer's clients kept between tasks and commits (``writer/common.py``'s ``CLIENTS``),
driven without Spark, in this process as a reused Python worker runs them.

What reuse must not change: every batch still claims its transactional id with its own
InitProducerId (a producer id and epoch of its own, which the roll-forward of a gone
query's decision relies on), writes exactly once, and survives the brokers closing every
connection of the pooled clients between two batches (as a broker restart or Kafka's
``connections.max.idle.ms`` does). Outcomes are read back with librdkafka at
read_committed and with Kafka's DescribeTransactions.
"""

from __future__ import annotations

import uuid
from collections import Counter

import pyarrow as pa
import pytest

from pyspark_kafka_txn.options import WriterOptions, parse_writer_options
from pyspark_kafka_txn.writer.commit import commit_batch
from pyspark_kafka_txn.writer.common import CLIENTS, pooled
from pyspark_kafka_txn.writer.messages import FRESH, TaskMessage
from pyspark_kafka_txn.writer.task import TaskIdentity, write_task
from tests.support.readback import read_records
from tests.support.target import KafkaTarget
from tests.support.txns import open_transactions
from tests.support.writer_options import fresh_prefix, writer_options

TIMEOUT_MS = 120_000
PARTITIONS = 2


def _rows(partition: int, tag: str, n: int = 5) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "value": pa.array([f"{tag}-{i}".encode() for i in range(n)], pa.binary()),
            "partition": pa.array([partition] * n, pa.int32()),
        }
    )


def _batch(options: WriterOptions, query: str, batch: int) -> list[TaskMessage]:
    """One micro-batch: a task per partition, then the driver's commit, in this process."""
    messages = [
        write_task(
            options,
            TaskIdentity(query, batch, p, 0),
            iter([_rows(p, f"b{batch}")]),
            TIMEOUT_MS,
        )
        for p in range(PARTITIONS)
    ]
    commit_batch(options, messages, batch)
    return messages


def _visible(bootstrap: str, topic: str) -> Counter[str]:
    records = read_records(bootstrap, topic, PARTITIONS, isolation="read_committed")
    return Counter((value or b"").decode().split("-")[0] for _, _, value, _ in records)


def test_batches_reuse_the_clients_and_each_claims_its_id_anew(kafka: KafkaTarget) -> None:
    """Three batches of one query: after the first, no client is made again (the idle
    clients stay the same objects), and every batch's transactions have a producer id and
    epoch of their own; each batch is visible exactly once and nothing is left open."""
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=PARTITIONS, prefix="pooled")
    prefix = fresh_prefix("pool")
    options = writer_options(bs, topic, prefix)
    query = str(uuid.uuid4())
    CLIENTS.close_all()
    first = _batch(options, query, 0)
    kept = _idle_clients()
    assert kept, "no client was kept after a batch"
    handles = {(0, m.partition): m.handle for m in first}
    for batch in (1, 2):
        messages = _batch(options, query, batch)
        assert _idle_clients() == kept, "a batch made new clients instead of reusing them"
        handles |= {(batch, m.partition): m.handle for m in messages}
    assert all(m is not None for m in handles.values())
    identities = [
        (h.transaction.producer_id, h.transaction.producer_epoch)
        for h in handles.values()
        if h is not None
    ]
    assert len(set(identities)) == len(identities), identities
    assert _visible(bs, topic) == {"b0": 10, "b1": 10, "b2": 10}
    assert open_transactions(bs, prefix) == {}


def test_a_batch_after_the_brokers_closed_every_connection(kafka: KafkaTarget) -> None:
    """Between two batches the brokers close every client connection (the pooled clients
    still hold theirs): the next batch reconnects and commits exactly once."""
    bs = kafka.fault_bootstrap_servers
    topic = kafka.create_topic(partitions=PARTITIONS, prefix="pooled-drop")
    prefix = fresh_prefix("pooldrop")
    options = writer_options(bs, topic, prefix)
    query = str(uuid.uuid4())
    CLIENTS.close_all()
    _batch(options, query, 0)
    kept = _idle_clients()
    assert kept
    dropped = kafka.drop_connections()
    assert dropped > 0, "the fault did not happen: no connection was closed"
    messages = _batch(options, query, 1)
    assert all(m.kind == FRESH for m in messages)
    assert _visible(kafka.bootstrap_servers, topic) == {"b0": 10, "b1": 10}
    assert open_transactions(kafka.bootstrap_servers, prefix) == {}


def test_a_client_is_never_lent_across_credentials() -> None:
    """The pool's key holds the security settings: options that differ only in the
    password never get each other's client (clients connect lazily: no broker needed)."""
    base = {"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t"}
    sasl = {
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
    }

    def options(password: str) -> WriterOptions:
        jaas = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="alice" password="{password}";'
        )
        return parse_writer_options({**base, **sasl, "kafka.sasl.jaas.config": jaas})

    CLIENTS.close_all()
    with pooled(options("one")) as first:
        pass
    with pooled(options("two")) as second:
        assert second is not first
    with pooled(options("one")) as again:
        assert again is first
    with pytest.raises(RuntimeError), pooled(options("one")):
        raise RuntimeError("a failed use")
    with pooled(options("one")) as fresh:
        assert fresh is not first, "a client whose use raised was lent again"
    CLIENTS.close_all()


def _idle_clients() -> set[int]:
    """The ids of the clients the pool keeps idle now."""
    return {id(client) for client in CLIENTS.kept()}
