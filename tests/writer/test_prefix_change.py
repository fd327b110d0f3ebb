"""A changed ``transactionalIdPrefix``, detected by the driver without Spark.

:func:`refuse_other_prefix` against the cluster (another prefix's decision, its open
transactions), and how often :func:`commit_batch` runs it: at the first new decision of
each streaming run (the run id the tasks send, recorded in the decision header as
``"r"``), at every new decision without a run id. The restarts of a real query under
another prefix are ``tests/writer/test_restart_changes.py``.
"""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.errors import ConfigError
from pyspark_kafka_txn.writer import commit
from pyspark_kafka_txn.writer.abort import abort_batch
from pyspark_kafka_txn.writer.commit import commit_batch
from pyspark_kafka_txn.writer.decision import read_decision, withdraw_decision, write_decision
from pyspark_kafka_txn.writer.prefix_change import refuse_other_prefix
from pyspark_kafka_txn.writer.task import TaskIdentity, write_task
from tests.support.hang import wait_until
from tests.support.lso import assert_nothing_open, lso
from tests.support.readback import read_records
from tests.support.target import KafkaTarget
from tests.support.txns import leave_open, open_transactions
from tests.support.writer_options import fresh_prefix, writer_options

TIMEOUT_MS = 60_000


def test_another_prefix_deciding_this_or_a_later_batch_is_refused(kafka: KafkaTarget) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=1)
    query = str(uuid.uuid4())
    old, new = fresh_prefix("old"), fresh_prefix("new")
    with ClusterClient(bs) as cluster:
        refuse_other_prefix(cluster, new, query, 0)  # nothing anywhere (e.g. a migration)
        decision = write_decision(cluster, old, query, 3, {}, (topic, 0), None)
        for batch in (3, 2):  # batch 3 decided under the old prefix, or a later one
            with pytest.raises(ConfigError) as refused:
                refuse_other_prefix(cluster, new, query, batch)
            text = str(refused.value)
            assert "transactionalIdPrefix" in text and f"'{old}'" in text, text
            assert f"restart the query once with transactionalIdPrefix '{old}'" in text, text
        refuse_other_prefix(cluster, new, query, 4)  # batch 3 finished: the next one is free
        refuse_other_prefix(cluster, old, query, 3)  # its own prefix is not "another"
        refuse_other_prefix(cluster, new, str(uuid.uuid4()), 3)  # another query id
        withdraw_decision(cluster, old, query, decision)
        refuse_other_prefix(cluster, new, query, 3)  # withdrawn: nothing of it is visible


def test_another_prefix_left_open_undecided_is_aborted(kafka: KafkaTarget) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=1)
    query = str(uuid.uuid4())
    old, new = fresh_prefix("old"), fresh_prefix("new")
    other_query = f"{old}{uuid.uuid4()}-0"
    leave_open(bs, f"{old}{query}-0", topic, 0, [b"undecided"], timeout_ms=600_000)
    leave_open(bs, other_query, topic, 0, [b"other query"], timeout_ms=600_000)
    assert lso(bs, topic, 0) == 0  # offset 0, this query's undecided record, pins the LSO
    with ClusterClient(bs) as cluster:
        refuse_other_prefix(cluster, new, query, 0)
    # This query's transaction under the old prefix is aborted; another query's is not.
    # Seen by librdkafka too (not only by the listing under test): the LSO moves to offset
    # 1, the other query's open record, once the abort's marker is written.
    wait_until("the undecided transaction's abort marker", lambda: lso(bs, topic, 0) == 1)
    assert list(open_transactions(bs, old)) == [other_query]
    assert read_records(bs, topic, 1, isolation="read_committed") == []  # none of it visible


# -- how often commit_batch looks ---------------------------------------------------------


def _batch(
    kafka: KafkaTarget, topic: str, prefix: str, query: str, batch: int, run: str | None
) -> None:
    """Write and commit ``batch`` of ``query`` (two Spark partitions) under ``prefix``, as
    tasks of the streaming run ``run`` would; when the commit fails, abort as Spark does."""
    options = writer_options(kafka.bootstrap_servers, topic, prefix)
    messages = []
    for partition in (0, 1):
        values = pa.array([f"{prefix}{batch}-{partition}".encode()], pa.binary())
        rows = pa.RecordBatch.from_pydict(
            {"value": values, "partition": pa.array([partition], pa.int32())}
        )
        who = TaskIdentity(query, batch, partition, 0, run)
        messages.append(write_task(options, who, iter([rows]), TIMEOUT_MS))
    try:
        commit_batch(options, messages, batch)
    except BaseException:
        abort_batch(options, messages, batch)
        raise


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The batches for which ``commit_batch`` looked for another prefix (the real look)."""
    looked: list[int] = []

    def counted(cluster: ClusterClient, prefix: str, query_id: str, batch: int) -> None:
        looked.append(batch)
        refuse_other_prefix(cluster, prefix, query_id, batch)

    monkeypatch.setattr(commit, "refuse_other_prefix", counted)
    return looked


def test_a_streaming_run_looks_for_another_prefix_at_its_first_decision_only(
    kafka: KafkaTarget, lookups: list[int]
) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2)
    query, first_run, second_run = (str(uuid.uuid4()) for _ in range(3))
    prefix, other = fresh_prefix("run"), fresh_prefix("other")
    for batch in (0, 1, 2):
        _batch(kafka, topic, prefix, query, batch, first_run)
    assert lookups == [0]
    with ClusterClient(bs) as cluster:
        last = read_decision(cluster, prefix, query)
    assert last is not None and (last.batch, last.checked_run) == (2, first_run), last

    # Another prefix of the same query decides batch 3 (a restart under it) ...
    _batch(kafka, topic, other, query, 3, str(uuid.uuid4()))
    # ... and a new run under the first prefix looks again: batch 3 is refused.
    lookups.clear()
    with pytest.raises(ConfigError, match=f"changed from '{other}' to '{prefix}'"):
        _batch(kafka, topic, prefix, query, 3, second_run)
    assert lookups == [3]
    # Nothing of the refused batch is visible, nothing is left open.
    values = [v for _, _, v, _ in read_records(bs, topic, 2, isolation="read_committed")]
    assert sorted(v for v in values if v is not None and v.startswith(b"run")) == sorted(
        f"{prefix}{b}-{p}".encode() for b in (0, 1, 2) for p in (0, 1)
    )
    assert open_transactions(bs, prefix) == {}
    assert_nothing_open(bs, topic, 2)


def test_without_a_run_id_every_new_decision_looks_for_another_prefix(
    kafka: KafkaTarget, lookups: list[int]
) -> None:
    topic = kafka.create_topic(partitions=2)
    query, prefix = str(uuid.uuid4()), fresh_prefix("norun")
    for batch in (0, 1, 2):
        _batch(kafka, topic, prefix, query, batch, None)
    assert lookups == [0, 1, 2]
    with ClusterClient(kafka.bootstrap_servers) as cluster:
        last = read_decision(cluster, prefix, query)
    assert last is not None and (last.batch, last.checked_run) == (2, None), last
