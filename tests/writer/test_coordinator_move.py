"""The driver's ``commit()`` while the transaction coordinator of the batch moves: it
returns only once every row of the batch is visible to read_committed consumers.

``commit()`` waits for the commit markers by listing the transactions (ListTransactions on
every broker) until none of the batch is still in PrepareCommit. While a
``__transaction_state`` partition changes leader, Apache Kafka lists its transactions
nowhere for a moment, without an error: the old leader has resigned, the new one has not
begun loading it (``TransactionStateManager.listTransactionStates`` lists only the
partitions a broker holds, and answers COORDINATOR_LOAD_IN_PROGRESS only while it loads
one). A batch whose markers are still pending must not be taken for done then. Here the
markers are held back, the coordinator moves in that state, and ``commit()`` must return
only after the markers could land; right after it returns an independent read_committed
consumer (librdkafka) sees every row, and nothing is left open.

The executor side (``write_task``) and the driver side (``commit_batch``) are called as
Spark calls them; one task writes one output partition. On each target:

* embedded cluster (three brokers of the test's own): the markers are delayed
  (``set_marker_delay``), and the coordinator moves as a handover
  (``move_coordinator(..., unowned_s, loading_s)``: no broker owns the partition, then the
  new one loads it; the markers of a moving partition are written once it has loaded, as
  Kafka's new coordinator completes them). An independent ListTransactions on every broker
  sees the gap. The output partition's leader moves too, during the commit.
* Apache Kafka (three nodes of the test session's own, whose brokers talk to each other
  through the proxies): the coordinators' WriteTxnMarkers are held at the proxies, so the
  batch stays in PrepareCommit. The driver connects through the proxies too; a hold on
  ListTransactions at the old coordinator's node makes the driver's listing ask the new
  coordinator before the move and the old one after it (the driver lists the brokers in
  node id order: the new coordinator is chosen with a lower id). The move itself is
  Kafka's own: ``kafka-reassign-partitions`` puts the new node first in the partition's
  replicas, a preferred leader election during the commit makes it the leader (the output
  partition's leader is moved the same way). Before the listing is released the test
  checks that the new coordinator has loaded the transaction (still PrepareCommit) and
  that the old one no longer lists it. The markers are released only after ``commit()``
  had time to return early: one that returned while they were held returned before the
  batch was visible.

On both, ``kafka-transactions describe`` (Kafka's own tool, a Java client) names the
coordinator of the transactional id before and after: it really changed.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import Counter
from pathlib import Path

import pyarrow as pa
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, PartitionMetadata

from pyspark_kafka_txn.client.admin import describe_transactions
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.embedded import EmbeddedKafka
from pyspark_kafka_txn.embedded.groups import coordinator_partition
from pyspark_kafka_txn.options.writer import WriterOptions
from pyspark_kafka_txn.wire import COORDINATOR_TXN, LIST_TRANSACTIONS, WRITE_TXN_MARKERS
from pyspark_kafka_txn.writer.commit import commit_batch
from pyspark_kafka_txn.writer.ids import transactional_id
from pyspark_kafka_txn.writer.messages import FRESH, TaskMessage
from pyspark_kafka_txn.writer.task import TaskIdentity, write_task
from tests.support.apache_kafka import ApacheKafka, wait_partitions_ready
from tests.support.apache_kafka.tools import kafka_tool
from tests.support.hang import HANG_S, wait_until
from tests.support.lso import assert_nothing_open
from tests.support.protocol import raw_request, request_module
from tests.support.readback import read_records
from tests.support.target import KafkaTarget
from tests.support.txns import open_transactions
from tests.support.writer_options import fresh_prefix, writer_options

#: Long enough for the whole test (Kafka's tools run in it): the broker must not abort the
#: batch's transaction at its timeout meanwhile.
TIMEOUT_MS = 240_000
ROWS = 20
#: Embedded cluster: markers written this long after EndTxn, and the handover's two phases.
MARKER_DELAY_S = 1.0
UNOWNED_S = 3.0
LOADING_S = 0.5
#: Apache Kafka: how long ``commit()`` gets to return early once the move is over, before
#: the batch's markers are released.
EARLY_S = 3.0
STATE_TOPIC = "__transaction_state"


#: The driver's bound on waiting for the markers (and on its retries): above the test's
#: waits, so that only an early return can end the commit early.
OPTIONS = {"kafka.transaction.timeout.ms": str(TIMEOUT_MS), "kafka.max.block.ms": "180000"}


def _values(tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(ROWS)]


def _write(options: WriterOptions, query: str, values: list[bytes]) -> TaskMessage:
    """One task of batch 0 writing ``values`` to output partition 0 (left prepared)."""
    rows = pa.RecordBatch.from_pydict(
        {"value": pa.array(values, pa.binary()), "partition": pa.array([0] * len(values))}
    )
    message = write_task(options, TaskIdentity(query, 0, 0, 0), iter([rows]), TIMEOUT_MS)
    assert message.kind == FRESH
    return message


class _Commit(threading.Thread):
    """The driver's ``commit()`` of batch 0, in a thread: when it returned, or what it
    raised."""

    def __init__(self, options: WriterOptions, message: TaskMessage) -> None:
        super().__init__(name="driver-commit", daemon=True)
        self.options, self.message = options, message
        self.error: BaseException | None = None
        self.returned = threading.Event()

    def run(self) -> None:
        try:
            commit_batch(self.options, [self.message], 0)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            self.returned.set()

    def outcome(self) -> None:
        """Re-raise what ``commit()`` raised."""
        if self.error is not None:
            raise self.error


def _visible(bootstrap: str, topic: str) -> Counter[bytes]:
    """What an independent read_committed consumer (librdkafka) sees now."""
    records = read_records(bootstrap, topic, 1, isolation="read_committed")
    return Counter(value or b"" for _, _, value, _ in records)


def _described_state(bootstrap: str, tid: str) -> str | None:
    """The state ``tid``'s coordinator describes now (found anew; None if unknown)."""
    with ClusterClient(bootstrap) as cluster:
        described = describe_transactions(cluster, [tid])[tid]
    return None if described is None else described.state


def _kafka_describe(bootstrap: str, tid: str) -> dict[str, str]:
    """``kafka-transactions describe`` of ``tid`` (Kafka's tool, its own FindCoordinator
    and DescribeTransactions): its one row, by column."""
    done = kafka_tool("kafka-transactions", bootstrap, "describe", "--transactional-id", tid)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert len(lines) == 2, done.stdout
    header, row = ([cell.strip() for cell in line.split("\t")] for line in lines)
    return dict(zip(header, row, strict=False))


def _listed_by(address: tuple[str, int], tid: str) -> str | None:
    """ListTransactions on one broker (a raw request, no filter): ``tid``'s state as that
    broker lists it, or None; a broker loading a partition answers with an error."""
    mod = request_module(LIST_TRANSACTIONS, 0)
    body = raw_request(
        address,
        LIST_TRANSACTIONS,
        0,
        mod.ListTransactionsRequest(state_filters=(), producer_id_filters=()),
    )
    assert body.error_code.value == 0, (address, body.error_code)
    return next(
        (str(t.transaction_state) for t in body.transaction_states if t.transactional_id == tid),
        None,
    )


def _check_outcome(bootstrap: str, topic: str, prefix: str, values: list[bytes]) -> None:
    """Right after ``commit()`` returned: every row visible, nothing left open."""
    seen = _visible(bootstrap, topic)
    assert seen == Counter(values), (
        f"commit() returned, but read_committed sees {sum(seen.values())} of {len(values)} "
        "rows: it returned before the batch's markers had landed"
    )
    assert_nothing_open(bootstrap, topic, 1)
    assert open_transactions(bootstrap, prefix) == {}


def test_commit_returns_once_visible_across_a_coordinator_move(
    kafka3: KafkaTarget, tmp_path: Path
) -> None:
    if kafka3.apache is not None:
        _apache_move(kafka3.apache, tmp_path)
    else:
        assert kafka3.embedded is not None
        _embedded_move(kafka3.embedded)


# --- the embedded cluster -----------------------------------------------------------------


def _embedded_move(kafka: EmbeddedKafka) -> None:
    bs = kafka.bootstrap_servers
    topic = f"cmove-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, 1)
    prefix, query = fresh_prefix("cm"), str(uuid.uuid4())
    tid = transactional_id(prefix, query, 0)
    options, values = writer_options(bs, topic, prefix, OPTIONS), _values("e")
    message = _write(options, query, values)
    old = kafka.call(lambda c: c.coordinator(COORDINATOR_TXN, tid))
    new = (old + 1) % 3
    before = _kafka_describe(bs, tid)
    assert (before["CoordinatorId"], before["TransactionState"]) == (str(old), "Ongoing")
    addresses = kafka.call(lambda c: dict(c.addresses))
    leader = kafka.call(lambda c: c.leader(topic, 0))

    kafka.set_marker_delay(MARKER_DELAY_S)
    try:
        commit = _Commit(options, message)
        commit.start()
        wait_until(
            "the batch in PrepareCommit", lambda: _described_state(bs, tid) == "PrepareCommit"
        )
        kafka.move_coordinator("transaction", tid, new, unowned_s=UNOWNED_S, loading_s=LOADING_S)
        kafka.move_leader(topic, 0, (leader + 1) % 3)  # the output partition moves too
        # The gap, as an independent client sees it: no broker lists the transaction.
        assert {n: _listed_by(a, tid) for n, a in addresses.items()} == dict.fromkeys(addresses)
        refused = kafka.call(lambda c: c.unowned_refused(COORDINATOR_TXN, tid))
        assert commit.returned.wait(HANG_S), "commit() did not return"
        # commit()'s own polls met the gap (it polls at least every 0.5 s): else the test
        # proved nothing about a transaction listed nowhere.
        met = kafka.call(lambda c: c.unowned_refused(COORDINATOR_TXN, tid))
        assert met > refused, "commit() never met the coordinator's gap"
        seen_at_return = _visible(bs, topic)
    finally:
        kafka.set_marker_delay(0.0)
    commit.outcome()
    assert seen_at_return == Counter(values), (
        f"commit() returned while read_committed saw {sum(seen_at_return.values())} of "
        f"{len(values)} rows: the transaction was not listed while its coordinator moved, "
        "and commit() took that for done"
    )
    _check_outcome(bs, topic, prefix, values)
    after = _kafka_describe(bs, tid)
    assert (after["CoordinatorId"], after["TransactionState"]) == (str(new), "CompleteCommit")
    assert kafka.call(lambda c: c.leader(topic, 0)) != leader


# --- Apache Kafka -------------------------------------------------------------------------


def _apache_move(apache: ApacheKafka, workdir: Path) -> None:
    ids = sorted(n.node_id for n in apache.nodes)
    bs = apache.bootstrap_servers
    # A transactional id whose coordinator has a node of lower id: the driver lists the
    # brokers in id order, so it asks the new coordinator before the old one.
    query, new = str(uuid.uuid4()), ids[0]
    for _ in range(100):
        prefix = fresh_prefix("cm")
        tid = transactional_id(prefix, query, 0)
        old = _coordinator(bs, tid)
        if old != new:
            break
    state_partition = TopicPartition(STATE_TOPIC, coordinator_partition(tid))
    topic = f"cmove-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs, "log_level": 0})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(HANG_S)
    wait_partitions_ready({"bootstrap.servers": bs, "log_level": 0}, topic, 1, HANG_S)
    output = TopicPartition(topic, 0)
    leader = _leader(admin, output)
    values = _values("a")
    message = _write(writer_options(bs, topic, prefix, OPTIONS), query, values)
    before = _kafka_describe(bs, tid)
    assert (before["CoordinatorId"], before["TransactionState"]) == (str(old), "Ongoing")
    # The preferred leaders after the move: the new coordinator, and another node for the
    # output partition (they are elected during the commit).
    moves = {state_partition: new, output: next(n for n in ids if n != leader)}
    _make_preferred(admin, bs, moves, workdir)

    old_proxy = apache.node(old).proxy
    assert old_proxy is not None
    # The coordinators' WriteTxnMarkers (sent through the proxies) are held: the batch
    # stays in PrepareCommit, its rows invisible, until they are released.
    markers = apache.hold(WRITE_TXN_MARKERS)
    try:
        commit = _Commit(
            writer_options(apache.proxied_bootstrap_servers, topic, prefix, OPTIONS), message
        )
        commit.start()
        wait_until(
            "the batch in PrepareCommit (EndTxn answered)",
            lambda: commit.returned.is_set() or _described_state(bs, tid) == "PrepareCommit",
        )
        # From now on the driver's listings are held at the old coordinator's node (its
        # listing before EndTxn, of other prefixes' transactions, was not). The listing
        # held there has asked the new coordinator's node first (node id order), before
        # the move, which starts only once the hold caught it.
        listing = old_proxy.hold(LIST_TRANSACTIONS)
        try:
            wait_until(
                "the driver's listing held at the old coordinator's node",
                lambda: listing.hits > 0 or commit.returned.is_set(),
            )
            commit.outcome()
            assert not commit.returned.is_set(), "commit() returned with its markers held"
            _elect_preferred(admin, moves)
            wait_until(
                "the new coordinator loaded the transaction",
                lambda: (
                    _coordinator(bs, tid) == new and _described_state(bs, tid) == "PrepareCommit"
                ),
            )
            # The old coordinator resigned: the held listing, answered now, lists the
            # transaction on neither of the nodes it asked so far.
            old_address = ("127.0.0.1", apache.node(old).port)
            wait_until("the old coordinator resigned", lambda: _listed_by(old_address, tid) is None)
        finally:
            old_proxy.release(listing)
        returned_early = commit.returned.wait(EARLY_S)
        seen_early = _visible(bs, topic) if returned_early else None
        held = sum(rule.hits for rule in markers)
    finally:
        apache.clear()  # the markers go out again
    assert seen_early is None, (
        f"commit() returned while the batch's markers were held (read_committed saw "
        f"{sum(seen_early.values())} of {len(values)} rows): it took the transaction, "
        "listed by no broker while its coordinator moved, for done"
    )
    assert held > 0, "no WriteTxnMarkers was held"
    assert commit.returned.wait(HANG_S), "commit() did not return"
    commit.outcome()
    _check_outcome(bs, topic, prefix, values)
    after = _kafka_describe(bs, tid)
    assert (after["CoordinatorId"], after["TransactionState"]) == (str(new), "CompleteCommit")
    assert _leader(admin, output) == moves[output]


def _coordinator(bootstrap: str, tid: str) -> int:
    """``tid``'s transaction coordinator, found anew."""
    with ClusterClient(bootstrap) as cluster:
        return cluster.coordinator(COORDINATOR_TXN, tid).node_id


def _partition(admin: AdminClient, tp: TopicPartition) -> PartitionMetadata:
    """``tp`` as Metadata describes it (asked again while the broker asked does not know
    it yet: a topic just created)."""

    def described() -> PartitionMetadata | None:
        topic = admin.list_topics(tp.topic, timeout=10).topics.get(tp.topic)
        return None if topic is None else topic.partitions.get(tp.partition)

    return wait_until(f"{tp.topic}-{tp.partition} in Metadata", described)


def _leader(admin: AdminClient, tp: TopicPartition) -> int:
    """The leader of ``tp`` (Metadata; asked again while it has none)."""

    def known() -> tuple[int] | None:
        leader = int(_partition(admin, tp).leader)
        return (leader,) if leader >= 0 else None

    return wait_until(f"a leader of {tp.topic}-{tp.partition}", known)[0]


def _replicas(admin: AdminClient, tp: TopicPartition) -> list[int]:
    return list(_partition(admin, tp).replicas)


def _make_preferred(
    admin: AdminClient, bootstrap: str, leaders: dict[TopicPartition, int], workdir: Path
) -> None:
    """Put each partition's node of ``leaders`` first in its replicas
    (``kafka-reassign-partitions``; the same replicas, so nothing is copied): its
    preferred leader from now on, not yet its leader. (Kafka's automatic rebalance, every
    5 minutes, moves no leader for one partition of a broker's many.)"""
    wanted = {
        tp: [node, *(r for r in _replicas(admin, tp) if r != node)] for tp, node in leaders.items()
    }
    plan = {
        "version": 1,
        "partitions": [
            {"topic": tp.topic, "partition": tp.partition, "replicas": replicas}
            for tp, replicas in wanted.items()
        ],
    }
    path = workdir / "reassignment.json"
    path.write_text(json.dumps(plan))
    done = kafka_tool(
        "kafka-reassign-partitions", bootstrap, "--reassignment-json-file", str(path), "--execute"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    wait_until(
        "the new replica orders",
        lambda: all(_replicas(admin, tp) == replicas for tp, replicas in wanted.items()),
    )


def _elect_preferred(admin: AdminClient, leaders: dict[TopicPartition, int]) -> None:
    """A preferred leader election of the partitions of ``leaders``: each one's node (see
    :func:`_make_preferred`) becomes its leader."""
    result = admin.elect_leaders(ElectionType.PREFERRED, list(leaders)).result(HANG_S)
    assert all(error is None for error in result.values()), result
    wait_until("the new leaders", lambda: all(_leader(admin, tp) == n for tp, n in leaders.items()))
