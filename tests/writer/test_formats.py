"""Durable formats through a real cluster: today's records read back, a newer one refused.

The records of :mod:`tests.support.durable_formats` (format 1, as the package committed
them) are committed again, byte for byte, to the groups the writer reads and read back by
the writer's own functions. Then a decision record of a newer format — what a newer
package leaves when a query is upgraded and then run again with this one — stops the
driver's ``commit()`` and a replayed task with :class:`FormatVersionError` before they
write anything, instead of being taken for "no decision" (which would decide the batch
afresh under a record the newer package may roll forward). The output is read by
librdkafka.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter

import pyarrow as pa
import pytest

from pyspark_kafka_txn.client.admin import commit_offsets, describe_transactions, fetch_offsets
from pyspark_kafka_txn.client.producer import PreparedTransaction, end_transactions
from pyspark_kafka_txn.errors import FormatVersionError
from pyspark_kafka_txn.wire import TopicPartition
from pyspark_kafka_txn.writer.commit import commit_batch
from pyspark_kafka_txn.writer.common import OPEN_STATES, connect, read_marker
from pyspark_kafka_txn.writer.decision import Decision, Handle, read_decision
from pyspark_kafka_txn.writer.idempotent import Claim, read_claim
from pyspark_kafka_txn.writer.ids import decision_group, transactional_id, writer_group
from pyspark_kafka_txn.writer.messages import FRESH, TaskMessage
from pyspark_kafka_txn.writer.task import TaskIdentity, write_task
from tests.support import durable_formats as v1
from tests.support.lso import assert_nothing_open
from tests.support.readback import read_records
from tests.support.target import KafkaTarget
from tests.support.writer_options import fresh_prefix, writer_options

ROWS = 20


def test_records_of_format_1_are_read_back_from_kafka(kafka: KafkaTarget) -> None:
    topic = kafka.create_topic(partitions=2, prefix="fmt1")
    options = writer_options(kafka.bootstrap_servers, topic, fresh_prefix("fmt"))
    prefix = options.transactional_id_prefix
    anchor = TopicPartition(topic, 0)
    header = decision_group(prefix, v1.QUERY)
    with connect(options) as cluster:
        commit_offsets(cluster, f"{header}-0-1", {anchor: (v1.BATCH, v1.DECISION_CHUNK)})
        commit_offsets(cluster, header, {anchor: (v1.BATCH, v1.DECISION_HEADER)})
        # Metadata that is no header of ours (another tool's, or none) stays ignored.
        commit_offsets(cluster, header, {TopicPartition(topic, 1): (3, "not a header")})
        for partition, marker in v1.MARKERS.items():
            tid = transactional_id(prefix, v1.QUERY, partition)
            commit_offsets(cluster, tid, {anchor: (v1.BATCH, marker)})
        commit_offsets(cluster, writer_group(prefix, v1.APP_QUERY), {anchor: (3, v1.CLAIM)})

        assert read_decision(cluster, prefix, v1.QUERY) == Decision(
            v1.BATCH,
            {
                p: Handle(p, PreparedTransaction(transactional_id(prefix, v1.QUERY, p), *h))
                for p, h in v1.DECISION_HANDLES.items()
            },
            slot=0,
            anchor=anchor,
            time_ms=1795733262525,
        )
        for partition in v1.MARKERS:
            assert read_marker(cluster, transactional_id(prefix, v1.QUERY, partition)) == 7
        assert read_claim(cluster, prefix, v1.APP_QUERY) == Claim(
            v1.CLAIM_RUN, 3, 1795733262538, anchor
        )

        commit_offsets(cluster, header, {anchor: (v1.BATCH, v1.WITHDRAWN_HEADER)})
        withdrawn = read_decision(cluster, prefix, v1.QUERY)
        assert withdrawn is not None and withdrawn.withdrawn and withdrawn.batch == v1.BATCH


def _visible(kafka: KafkaTarget, topic: str, isolation: str) -> Counter[str]:
    records = read_records(kafka.bootstrap_servers, topic, 2, isolation=isolation)
    return Counter((value or b"").decode() for _, _, value, _ in records)


def test_decision_record_of_a_newer_format_stops_the_write(kafka: KafkaTarget) -> None:
    topic = kafka.create_topic(partitions=2, prefix="fmtnew")
    options = writer_options(kafka.bootstrap_servers, topic, fresh_prefix("fmt"))
    prefix, query = options.transactional_id_prefix, str(uuid.uuid4())
    tids = [transactional_id(prefix, query, p) for p in range(2)]

    def task(partition: int, attempt: int) -> TaskMessage:
        rows = pa.RecordBatch.from_pydict(
            {
                "value": pa.array([f"{partition}:{n}".encode() for n in range(ROWS)]),
                "partition": pa.array([partition] * ROWS, pa.int32()),
            }
        )
        who = TaskIdentity(query, batch=0, partition=partition, attempt=attempt)
        return write_task(options, who, iter([rows]), 60_000)

    messages = [task(0, 0), task(1, 0)]
    handles = [m.handle for m in messages if m.kind == FRESH and m.handle is not None]
    assert len(handles) == 2
    written = Counter(f"{p}:{n}" for p in range(2) for n in range(ROWS))
    # Meanwhile a newer pyspark-kafka-txn recorded a decision for this query (format 2).
    newer = {"f": 2, "b": 0, "n": 1, "s": 0, "t": 1795733262525, "c": 0, "h": "0:9:9:2"}
    group = decision_group(prefix, query)
    with connect(options) as cluster:
        commit_offsets(cluster, group, {TopicPartition(topic, 0): (0, json.dumps(newer))})

    refused = (
        rf"The decision record of query {query} \(group {group}\) has format 2; this "
        r"package \(pyspark-kafka-txn .+\) reads decision record format 1\. A newer "
        "pyspark-kafka-txn wrote it: upgrade pyspark-kafka-txn"
    )
    # The driver's commit() refuses before deciding or ending anything...
    with pytest.raises(FormatVersionError, match=refused):
        commit_batch(options, messages, 0)
    # ... and a replayed task before its InitProducerId.
    with pytest.raises(FormatVersionError, match=refused):
        task(0, 1)

    with connect(options) as cluster:
        # No decision of this package's format was recorded: the newer one is all there is.
        entries = fetch_offsets(cluster, group, None, require_stable=False)
        assert {tp: c.metadata for tp, c in entries.items()} == {(topic, 0): json.dumps(newer)}
        for slot in (0, 1):
            assert not fetch_offsets(cluster, f"{group}-{slot}-1", None, require_stable=False)
        # The tasks' transactions are still open, with their own epochs: none was ended,
        # and the replayed task did not InitProducerId (which would have aborted one).
        described = describe_transactions(cluster, tids)
        for handle in handles:
            txn = described[handle.transaction.transactional_id]
            assert txn is not None and txn.state in OPEN_STATES
            assert (txn.producer_id, txn.producer_epoch) == (
                handle.transaction.producer_id,
                handle.transaction.producer_epoch,
            )
        # Nothing visible; in the log, only the first attempt's rows (the replay wrote none).
        assert _visible(kafka, topic, "read_committed") == Counter()
        assert _visible(kafka, topic, "read_uncommitted") == written
        results = end_transactions(cluster, [h.transaction for h in handles], commit=False)
        assert not [r for r in results.values() if isinstance(r, Exception)], results
    assert_nothing_open(kafka.bootstrap_servers, topic, 2)
    assert _visible(kafka, topic, "read_committed") == Counter()
