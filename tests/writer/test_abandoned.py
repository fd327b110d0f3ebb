"""Other queries' transactions under the same prefix: ended when their query is gone,
never while it lives (``writer/liveness.py``, ``writer/abandoned.py``), driven without Spark.

Every query here shares one ``transactionalIdPrefix`` with the query that commits, as every
query with default options does. What tells a gone query from a live one is its liveness
lease; the tests write each neighbour's lease with the package's own ``renew_lease`` (a
renewal ten minutes ago stands for a query that stopped renewing) and check the outcome
with librdkafka at read_committed and with DescribeTransactions.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pyarrow as pa
import pytest

from pyspark_kafka_txn import cli
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.embedded.faults import FaultRule
from pyspark_kafka_txn.wire import LIST_TRANSACTIONS
from pyspark_kafka_txn.writer.abandoned import end_command
from pyspark_kafka_txn.writer.commit import commit_batch
from pyspark_kafka_txn.writer.decision import write_decision
from pyspark_kafka_txn.writer.ids import transactional_id
from pyspark_kafka_txn.writer.liveness import read_lease, renew_lease
from pyspark_kafka_txn.writer.messages import FRESH
from pyspark_kafka_txn.writer.open_transactions import (
    abort_open_transaction,
    find_open_transactions,
)
from pyspark_kafka_txn.writer.task import TaskIdentity, write_task
from tests.support.clusters import CheckedKafka
from tests.support.hang import wait_until
from tests.support.lso import wait_lso_at_hwm
from tests.support.readback import read_records
from tests.support.target import KafkaTarget
from tests.support.txns import leave_open, open_transactions
from tests.support.writer_options import fresh_prefix, writer_options

TIMEOUT_MS = 600_000  # no transaction here may end by the broker's timeout
#: How long a neighbour's transaction must be open before this query's commit looks at it.
LOOK_AFTER = "2s"
HANG_S = 120.0


def _rows(partition: int, tag: str, n: int = 5) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "value": pa.array([f"{tag}-{i}".encode() for i in range(n)], pa.binary()),
            "partition": pa.array([partition] * n, pa.int32()),
        }
    )


def _visible(bootstrap: str, topic: str) -> Counter[str]:
    records = read_records(bootstrap, topic, 2, isolation="read_committed")
    return Counter((value or b"").decode().split("-")[0] for _, _, value, _ in records)


def _long_ago_ms() -> int:
    return int(time.time() * 1000) - 600_000


def test_a_gone_query_is_ended_a_live_or_unknown_one_left_alone(
    kafka: KafkaTarget, caplog: pytest.LogCaptureFixture
) -> None:
    """Four neighbours, each with a transaction open under the shared prefix:

    * ``gone``: its lease lapsed, no decision → aborted;
    * ``decided``: its lease lapsed after it decided to commit its transaction → committed
      (as its own restart would), its rows visible;
    * ``live``: lease renewed just now → left open, however old its transaction;
    * ``unknown``: no lease (a writer without leases) → left open, with a warning that
      names the query and the command that ends it.
    """
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2, prefix="aband")
    prefix = fresh_prefix("a")
    gone, decided, live, unknown = (str(uuid.uuid4()) for _ in range(4))
    with ClusterClient(bs) as cluster:
        for query in (gone, decided):
            renew_lease(cluster, prefix, query, (topic, 0), 60_000, now_ms=_long_ago_ms())
        renew_lease(cluster, prefix, live, (topic, 0), 600_000)
    for query, partition in ((gone, 0), (live, 1), (unknown, 1)):
        leave_open(
            bs, transactional_id(prefix, query, 0), topic, partition, [query[:4].encode()],
            timeout_ms=TIMEOUT_MS,
        )  # fmt: skip
    options = writer_options(bs, topic, prefix, {"lingeringTransactionTimeout": LOOK_AFTER})
    message = write_task(
        options, TaskIdentity(decided, 0, 0, 0), iter([_rows(0, "dec")]), TIMEOUT_MS
    )
    assert message.kind == FRESH and message.handle is not None and message.anchor is not None
    with ClusterClient(bs) as cluster:
        # ``decided`` is the one of the four that wrote its lease itself (its task did,
        # before its transaction): make it lapse as the query's death would.
        renew_lease(cluster, prefix, decided, (topic, 0), 60_000, now_ms=_long_ago_ms())
        write_decision(cluster, prefix, decided, 0, {0: message.handle}, message.anchor, None)
    neighbours = {transactional_id(prefix, q, 0) for q in (gone, decided, live, unknown)}
    assert set(open_transactions(bs, prefix)) == neighbours
    wait_until(
        f"the neighbours' transactions open for {LOOK_AFTER}",
        lambda: all(t.age_ms() > 2_500 for t in open_transactions(bs, prefix).values()),
        HANG_S,
    )

    ours = str(uuid.uuid4())
    mine = write_task(options, TaskIdentity(ours, 0, 1, 0), iter([_rows(0, "own")]), TIMEOUT_MS)
    with caplog.at_level(logging.WARNING, logger="pyspark_kafka_txn"):
        commit_batch(options, [None, mine], 0)

    still = open_transactions(bs, prefix)
    assert set(still) == {transactional_id(prefix, q, 0) for q in (live, unknown)}
    # Partition 0 (gone, decided, ours) is readable to its end; 1 is pinned by live and unknown.
    assert _visible(bs, topic) == Counter({"own": 5, "dec": 5})  # gone's record aborted
    warned = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and unknown in r.getMessage()
    ]
    assert len(warned) == 1 and end_command(bs, prefix, unknown) in warned[0], warned
    with ClusterClient(bs) as cluster:  # leave nothing open on the shared cluster
        for txn in find_open_transactions(cluster, prefix):
            abort_open_transaction(cluster, txn)
    wait_lso_at_hwm(bs, topic, 2)


def _a_young_transaction_of_a_gone_query_stays(kafka: KafkaTarget) -> None:
    """A gone query's transaction that has been open for less than this query's
    ``lingeringTransactionTimeout`` is left alone by this query's commit."""
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=1, prefix="young")
    prefix = fresh_prefix("y")
    gone, ours = str(uuid.uuid4()), str(uuid.uuid4())
    with ClusterClient(bs) as cluster:
        renew_lease(cluster, prefix, gone, (topic, 0), 60_000, now_ms=_long_ago_ms())
    young = transactional_id(prefix, gone, 0)
    leave_open(bs, young, topic, 0, [b"gone"], timeout_ms=TIMEOUT_MS)
    options = writer_options(bs, topic, prefix, {"lingeringTransactionTimeout": "10min"})
    mine = write_task(options, TaskIdentity(ours, 0, 0, 0), iter([_rows(0, "own")]), TIMEOUT_MS)
    commit_batch(options, [mine], 0)
    assert set(open_transactions(bs, prefix)) == {young}
    with ClusterClient(bs) as cluster:  # leave nothing open on the shared cluster
        for txn in find_open_transactions(cluster, prefix):
            abort_open_transaction(cluster, txn)


def test_a_young_transaction_of_a_gone_query_stays(kafka: KafkaTarget) -> None:
    """On the session's cluster: Apache Kafka 3.8 and later (and the embedded cluster)
    leave it out of ListTransactions' answer by its duration filter (KIP-994); Kafka 3.0 to
    3.7 serve ListTransactions v0, which lists it, and the writer checks its age itself."""
    _a_young_transaction_of_a_gone_query_stays(kafka)


@pytest.fixture(scope="module")
def kafka_list_v0() -> Iterator[KafkaTarget]:
    """An embedded cluster that serves ListTransactions v0 only, as Kafka 3.0 to 3.7 do
    (no duration filter)."""
    with CheckedKafka(
        transaction_abort_interval_ms=200, api_max_versions=((LIST_TRANSACTIONS, 0),)
    ) as own:
        yield KafkaTarget(own.bootstrap_servers, own)


@pytest.mark.embedded_only(
    "caps the broker's ListTransactions; Apache Kafka 3.0-3.7 run the test above"
)
def test_without_a_duration_filter_the_writer_checks_the_age_itself(
    kafka_list_v0: KafkaTarget,
) -> None:
    """The same on a broker without ListTransactions v1: every open transaction is listed,
    and the writer ends none younger than ``lingeringTransactionTimeout``."""
    with ClusterClient(kafka_list_v0.bootstrap_servers) as cluster:
        assert cluster.any_connection().api_ranges[LIST_TRANSACTIONS] == (0, 0)
    _a_young_transaction_of_a_gone_query_stays(kafka_list_v0)


def test_a_task_renews_its_lease_while_it_waits_for_its_first_rows(kafka: KafkaTarget) -> None:
    """A task held upstream (no rows yet) keeps its query alive: its lease is renewed every
    quarter of ``lingeringTransactionTimeout`` until its rows come."""
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2, prefix="aband")
    prefix, query = fresh_prefix("a"), str(uuid.uuid4())
    options = writer_options(bs, topic, prefix, {"lingeringTransactionTimeout": "2s"})
    release = threading.Event()

    def held_rows() -> Iterator[pa.RecordBatch]:
        assert release.wait(HANG_S), "never released"
        yield _rows(0, "late")

    result: list[object] = []
    task = threading.Thread(
        target=lambda: result.append(
            write_task(options, TaskIdentity(query, 0, 0, 0), held_rows(), TIMEOUT_MS)
        ),
        daemon=True,
    )
    task.start()
    renewals: set[int] = set()

    def renewed_three_times() -> bool:
        with ClusterClient(bs) as cluster:
            lease = read_lease(cluster, prefix, query)
        if lease is not None:
            assert lease.lease_ms == 2_000 and not lease.lapsed()
            renewals.add(lease.renewed_ms)
        return len(renewals) >= 3

    try:
        wait_until("three renewals while the task waits", renewed_three_times, HANG_S)
    finally:
        release.set()
        task.join(HANG_S)
    assert len(result) == 1, result
    message = result[0]
    assert getattr(message, "kind", None) == FRESH
    txn = open_transactions(bs, prefix)[transactional_id(prefix, query, 0)]
    with ClusterClient(bs) as cluster:
        abort_open_transaction(cluster, txn)
    wait_lso_at_hwm(bs, topic, 2)


@pytest.mark.embedded_only("fails chosen requests")
def test_a_failed_clean_up_after_the_commit_is_a_warning(
    kafka: KafkaTarget, caplog: pytest.LogCaptureFixture
) -> None:
    """Every ListTransactions after the EndTxns refused: ``commit_batch`` returns (the batch
    is committed: an error would have a batch write retried and written twice) and warns
    that the batch is committed; its rows are visible once."""
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2, prefix="aband")
    prefix, job = fresh_prefix("a"), f"job-{uuid.uuid4()}"
    options = writer_options(bs, topic, prefix)
    messages = [
        write_task(options, TaskIdentity(job, 0, p, 0), iter([_rows(p, f"t{p}")]), TIMEOUT_MS)
        for p in (0, 1)
    ]
    embedded = kafka.require_embedded()
    # The EndTxns are held 3 s; once the first arrives (the decision is recorded), every
    # ListTransactions from then on (the clean-up's; the check for another prefix before
    # the decision lists too) is refused.
    held_end = embedded.delay_requests("EndTxn", 3.0, count=2)
    refusals: list[FaultRule] = []

    def refuse_listings_once_ending() -> None:
        wait_until("the first EndTxn", lambda: held_end.hits >= 1, HANG_S)
        refusals.append(
            embedded.fail_requests(
                "ListTransactions", "CLUSTER_AUTHORIZATION_FAILED", count=1_000, after=True
            )
        )

    arming = threading.Thread(target=refuse_listings_once_ending, daemon=True)
    arming.start()
    try:
        with caplog.at_level(logging.WARNING, logger="pyspark_kafka_txn"):
            commit_batch(options, messages, 0)
    finally:
        arming.join(HANG_S)
        embedded.clear_faults()
    (refused,) = refusals
    assert refused.hits >= 1  # the clean-up did fail
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("is committed (do not write it again)" in w for w in warned), warned
    wait_lso_at_hwm(bs, topic, 2)
    assert _visible(bs, topic) == Counter({"t0": 5, "t1": 5})


def test_the_operator_tool_names_each_query_and_spares_live_ones(
    kafka: KafkaTarget, capsys: pytest.CaptureFixture[str]
) -> None:
    """``kafka-txn transactions list`` names each transaction's query and its liveness;
    ``abort`` ends the gone query's (committing what it had decided) and the unknown one's,
    leaves the live query's alone, and ends it only with ``--include-live``."""
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2, prefix="aband")
    prefix = fresh_prefix("a")
    gone, live, unknown = (str(uuid.uuid4()) for _ in range(3))
    options = writer_options(bs, topic, prefix)
    decided = write_task(options, TaskIdentity(gone, 0, 0, 0), iter([_rows(0, "dec")]), TIMEOUT_MS)
    assert decided.handle is not None and decided.anchor is not None
    with ClusterClient(bs) as cluster:
        renew_lease(cluster, prefix, gone, (topic, 0), 60_000, now_ms=_long_ago_ms())
        write_decision(cluster, prefix, gone, 0, {0: decided.handle}, decided.anchor, None)
        renew_lease(cluster, prefix, live, (topic, 0), 600_000)
    for query in (gone, live, unknown):
        partition = 1 if query == gone else 0  # gone's partition 1 is not in its decision
        tid = transactional_id(prefix, query, partition)
        leave_open(bs, tid, topic, 1, [query[:4].encode()], timeout_ms=TIMEOUT_MS)

    def run(*argv: str) -> tuple[int, list[list[str]], str]:
        code = cli.main(["transactions", *argv, "--bootstrap-servers", bs, "--prefix", prefix])
        out = capsys.readouterr().out.splitlines()
        return code, [line.split("\t") for line in out[:-1]], out[-1]

    code, rows, _ = run("list")
    assert code == 0
    by_id = {r[0]: (r[7], r[8]) for r in rows[1:]}
    assert by_id == {
        transactional_id(prefix, gone, 0): (gone, "gone"),
        transactional_id(prefix, gone, 1): (gone, "gone"),
        transactional_id(prefix, live, 0): (live, "live"),
        transactional_id(prefix, unknown, 0): (unknown, "unknown"),
    }

    code, rows, summary = run("abort", "--dry-run")
    assert code == 0
    verbs = {r[1]: r[0] for r in rows}
    assert verbs == {
        transactional_id(prefix, gone, 0): "would commit",
        transactional_id(prefix, gone, 1): "would abort",
        transactional_id(prefix, unknown, 0): "would abort",
    }
    assert "1 transaction(s) of live queries left alone" in summary
    assert len(open_transactions(bs, prefix)) == 4  # a dry run ends nothing

    code, rows, summary = run("abort")
    assert code == 0 and summary.startswith("ended 3 of 3 open transaction(s)")
    assert set(open_transactions(bs, prefix)) == {transactional_id(prefix, live, 0)}
    code, rows, summary = run("abort", "--include-live")
    assert code == 0 and [r[:2] for r in rows] == [["aborted", transactional_id(prefix, live, 0)]]
    wait_lso_at_hwm(bs, topic, 2)
    # The gone query's decided transaction was committed, the others aborted.
    assert _visible(bs, topic) == Counter({"dec": 5})
