"""Reader parity with Spark's built-in connector: the same query through ``format("kafka")``
with ``kafka.isolation.level=read_committed`` and through ``format("kafka_txn")`` (its
default isolation, so the default is checked too) gives equal DataFrames.

The built-in connector's jars come from Maven Central (:mod:`tests.support.spark_kafka`;
the test summary names the release). Both sides run in the one shared SparkSession, against
the session's cluster (``kafka``: the embedded one, or Apache Kafka with
``KAFKA_TXN_TARGET=apache``). Data is written by independent clients (confluent-kafka).

Where the two differ by design, the test asserts the difference (``test_default_isolation``,
the bad-option table of :mod:`tests.support.parity_bad_options`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import pytest
from chispa import assert_df_equality
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from tests.support.clients import txn_producer, watermarks
from tests.support.compaction import data_offsets, gaps, quick_log_cleaner
from tests.support.hang import wait_until
from tests.support.lso import wait_lso_at_hwm
from tests.support.parity_bad_options import CASES, TOPIC
from tests.support.spark_kafka import Connector, connector
from tests.support.target import KafkaTarget
from tests.support.txns import tid

pytestmark = pytest.mark.local_spark_only(
    "the built-in connector comes through spark.jars, which a Spark Connect client cannot "
    "set; one run per make test is enough for a comparison"
)

Format = Literal["kafka", "kafka_txn"]
FORMATS: tuple[Format, Format] = ("kafka", "kafka_txn")
ORDER = ("topic", "partition", "offset")
HANG_S = 120  # hang detector, never a timing assertion


@pytest.fixture(scope="session")
def builtin_kafka() -> Connector:
    """Spark's built-in connector (the ``spark`` fixture loads its jars when a collected
    test asks for this fixture)."""
    return connector()


# -- the data ---------------------------------------------------------------------------------


@dataclass
class Rich:
    """Three partitions with plain records, committed, aborted and one still-open
    transaction, null keys and values, headers (one with a null value), and chosen
    timestamps (``T0 + 10 s * step``). Offsets per partition:

    * p0: 0 plain · 1-2 committed · 3 marker · 4-5 aborted · 6 marker · 7-9 committed ·
      10 marker · 11 committed · 12 marker
    * p1: 0 plain (null key) · 1-2 committed · 3 marker · 4-5 aborted · 6 marker ·
      7 committed tombstone · 8 marker
    * p2: 0 plain (null value) · 1-2 committed · 3 marker · 4-5 aborted · 6 marker · 7 plain ·
      8 open (the LSO) · 9 committed · 10 marker
    """

    topic: str
    t0: int
    open_producer: Producer

    def ts(self, step: int) -> int:
        return self.t0 + 10_000 * step


def _rich(bs: str, topic: str) -> Rich:
    t0 = (int(time.time() * 1000) - 3_600_000) // 1000 * 1000
    layout = Rich(topic, t0, txn_producer(bs, tid(), **{"transaction.timeout.ms": 900_000}))
    plain = Producer({"bootstrap.servers": bs})
    a = txn_producer(bs, tid())
    b = txn_producer(bs, tid())
    hdrs = [("h", b"1"), ("n", None)]

    def put(p: Producer, part: int, step: int, i: int, **kw: Any) -> None:
        kw.setdefault("key", f"k{part}-{step}-{i}".encode())
        kw.setdefault("value", f"v{part}-{step}-{i}".encode())
        p.produce(topic, partition=part, timestamp=layout.ts(step) + i, **kw)

    def settled(ends: dict[int, int]) -> None:
        """Wait until each partition's log ends at ``ends`` (its markers written): Apache
        Kafka writes them after EndTxn answers, and the next producer's records would
        otherwise take their offsets."""
        wait_until(
            f"{topic} ending at {ends}",
            lambda: all(
                watermarks(bs, topic, p, "read_uncommitted")[1] == e for p, e in ends.items()
            ),
        )

    # step 1: plain records
    put(plain, 0, 1, 0, headers=hdrs)
    put(plain, 1, 1, 0, key=None)
    put(plain, 2, 1, 0, value=None)
    plain.flush(10)
    settled({0: 1, 1: 1, 2: 1})
    # step 2: committed, every partition
    a.begin_transaction()
    for part in range(3):
        put(a, part, 2, 0, headers=[("x", b"y")])
        put(a, part, 2, 1, key=None)
    a.commit_transaction(10)
    settled({0: 4, 1: 4, 2: 4})
    # step 3: aborted, p0 and p1
    b.begin_transaction()
    for part in (0, 1):
        put(b, part, 3, 0)
        put(b, part, 3, 1)
    b.flush(10)
    b.abort_transaction(10)
    settled({0: 7, 1: 7})
    # step 4: a committed tombstone on p1
    a.begin_transaction()
    put(a, 1, 4, 0, value=None)
    a.commit_transaction(10)
    settled({1: 9})
    # step 5: aborted on p2; step 6: plain on p2
    b.begin_transaction()
    put(b, 2, 5, 0)
    put(b, 2, 5, 1)
    b.flush(10)
    b.abort_transaction(10)
    settled({2: 7})
    put(plain, 2, 6, 0)
    plain.flush(10)
    # step 7: committed on p0
    a.begin_transaction()
    for i in range(3):
        put(a, 0, 7, i)
    a.commit_transaction(10)
    settled({0: 11, 2: 8})
    # step 8: left open on p2, then committed behind it on p2 (held back) and on p0
    layout.open_producer.begin_transaction()
    put(layout.open_producer, 2, 8, 0)
    layout.open_producer.flush(10)
    a.begin_transaction()
    put(a, 2, 8, 1)
    put(a, 0, 8, 1)
    a.commit_transaction(10)
    wait_until("p0's commit markers", lambda: watermarks(bs, topic, 0, "read_committed")[1] == 13)
    ends = [watermarks(bs, topic, p, "read_uncommitted")[1] for p in range(3)]
    lsos = [watermarks(bs, topic, p, "read_committed")[1] for p in range(3)]
    assert ends == [13, 9, 11], ends
    assert lsos == [13, 9, 8], lsos
    return layout


@pytest.fixture(scope="module")
def rich(kafka: KafkaTarget) -> Iterator[Rich]:
    bs = kafka.bootstrap_servers
    layout = _rich(bs, kafka.create_topic(partitions=3, prefix="parity"))
    yield layout
    layout.open_producer.abort_transaction(10)


# -- running a query through both ------------------------------------------------------------


def _options(fmt: Format, bs: str, topic: str, options: dict[str, str | None]) -> dict[str, str]:
    base: dict[str, str | None] = {"kafka.bootstrap.servers": bs, "subscribe": topic}
    if fmt == "kafka":
        # The built-in's default is read_uncommitted; ours is read_committed and is left
        # to its default, so that the comparison also checks it.
        base["kafka.isolation.level"] = "read_committed"
    base.update(options)
    return {k: v.replace(TOPIC, topic) for k, v in base.items() if v is not None}


def read(spark: SparkSession, fmt: Format, bs: str, topic: str, **options: str | None) -> DataFrame:
    return spark.read.format(fmt).options(**_options(fmt, bs, topic, options)).load()


def assert_same(theirs: DataFrame, ours: DataFrame, *order: str) -> None:
    cols = order or ORDER
    assert_df_equality(theirs.orderBy(*cols), ours.orderBy(*cols))


def stream(
    spark: SparkSession,
    fmt: Format,
    bs: str,
    topic: str,
    out: Path,
    trigger: dict[str, Any],
    tasks: dict[int, int] | None = None,
    **options: str | None,
) -> StreamingQuery:
    """Start a stream of ``topic`` into a Parquet directory (one column ``batch_id`` more).

    With ``tasks``, each micro-batch's number of Spark partitions (its tasks, the empty
    ones too) is put there by batch id, and each row gets a column ``task`` more: the
    Spark partition that read it."""
    path = str(out / fmt)

    def sink(df: DataFrame, batch_id: int) -> None:
        from pyspark.sql.functions import lit, spark_partition_id

        if tasks is not None:
            tasks[batch_id] = df.rdd.getNumPartitions()
            df = df.withColumn("task", spark_partition_id())
        df.withColumn("batch_id", lit(batch_id)).write.mode("append").parquet(path)

    reader = spark.readStream.format(fmt).options(**_options(fmt, bs, topic, options))
    return (
        reader.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(out / f"{fmt}-ckpt"))
        .trigger(**trigger)
        .start()
    )


def batches(spark: SparkSession, out: Path, fmt: Format) -> DataFrame:
    """The rows a stream wrote, ``batch_id`` renumbered 0, 1, ... over the batches that
    had rows: whether a query runs an empty first batch (the built-in does when it starts
    on an empty topic, ``kafka_txn`` not when ``minOffsetsPerTrigger`` holds it back) is
    not compared, the rows of each batch with rows are."""
    from pyspark.sql import Window
    from pyspark.sql.functions import col, dense_rank

    rows = spark.read.parquet(str(out / fmt))
    order = Window.orderBy("batch_id")
    return rows.withColumn("batch_id", (dense_rank().over(order) - 1).cast("long")).select(
        *[c for c in rows.columns if c != "batch_id"], col("batch_id")
    )


def available_now_both(
    spark: SparkSession, bs: str, topic: str, out: Path, **options: str | None
) -> dict[Format, StreamingQuery]:
    """Run the same availableNow stream through both connectors and compare every
    micro-batch (same batch ids, same rows in each); return the finished queries."""
    queries: dict[Format, StreamingQuery] = {}
    for fmt in FORMATS:
        query = stream(spark, fmt, bs, topic, out, {"availableNow": True}, **options)
        assert query.awaitTermination(HANG_S), f"{fmt}: the availableNow query did not finish"
        assert query.exception() is None, query.exception()
        queries[fmt] = query
    assert_same(batches(spark, out, "kafka"), batches(spark, out, "kafka_txn"), "batch_id", *ORDER)
    return queries


def batch_ranges(query: StreamingQuery) -> dict[int, dict[int, tuple[int, int]]]:
    """Each micro-batch's offset ranges from the query's progress (one topic):
    batch id -> partition -> ``(start, end)``, partitions with an empty range left out.
    A partition without a start (the first batch's) starts at 0: no topic read with it
    has had its log start moved."""
    import json

    def offsets(value: Any) -> dict[int, int]:
        data = json.loads(value) if isinstance(value, str) else value
        if not data:
            return {}
        # kafka_txn's first batch also carries where it started ("@origin").
        (topic,) = [t for t in data if not t.startswith("@")]
        return {int(p): int(o) for p, o in data[topic].items()}

    out: dict[int, dict[int, tuple[int, int]]] = {}
    for progress in query.recentProgress:
        source = progress["sources"][0]
        start, end = offsets(source["startOffset"]), offsets(source["endOffset"])
        ranges = {p: (start.get(p, 0), e) for p, e in end.items() if start.get(p, 0) < e}
        if ranges:
            out[int(progress["batchId"])] = ranges
    return out


# -- batch reads ------------------------------------------------------------------------------

#: Batch read options over :class:`Rich` (``TOPIC`` is its topic), by case name.
BATCH_CASES: dict[str, dict[str, str | None]] = {
    "subscribe": {},
    "subscribe-headers": {"includeHeaders": "true"},
    "assign": {"subscribe": None, "assign": '{"TOPIC":[0,2]}'},
    "subscribePattern": {"subscribe": None, "subscribePattern": "TOPIC.*"},
    "earliest-latest-explicit": {"startingOffsets": "earliest", "endingOffsets": "latest"},
    "json-with-minus-two-and-minus-one": {
        "startingOffsets": '{"TOPIC":{"0":-2,"1":2,"2":-2}}',
        "endingOffsets": '{"TOPIC":{"0":9,"1":-1,"2":-1}}',
    },
    "ranges-holding-only-aborted-records-and-markers": {
        "startingOffsets": '{"TOPIC":{"0":4,"1":4,"2":4}}',
        "endingOffsets": '{"TOPIC":{"0":7,"1":7,"2":7}}',
    },
    "ranges-ending-on-a-marker": {"endingOffsets": '{"TOPIC":{"0":4,"1":4,"2":4}}'},
    "starting-at-a-marker": {"startingOffsets": '{"TOPIC":{"0":3,"1":6,"2":6}}'},
    "minPartitions": {"minPartitions": "7"},
    "maxRecordsPerPartition": {"maxRecordsPerPartition": "2"},
}


@pytest.mark.parametrize("case", list(BATCH_CASES))
def test_batch_read(
    spark: SparkSession, kafka: KafkaTarget, rich: Rich, builtin_kafka: Connector, case: str
) -> None:
    options = BATCH_CASES[case]
    bs = kafka.bootstrap_servers
    theirs = read(spark, "kafka", bs, rich.topic, **options)
    ours = read(spark, "kafka_txn", bs, rich.topic, **options)
    assert_same(theirs, ours)
    assert ours.count() > 0 or case.startswith("ranges-holding-only")


def test_the_rich_topic_is_what_a_read_committed_consumer_sees(
    spark: SparkSession, kafka: KafkaTarget, rich: Rich, builtin_kafka: Connector
) -> None:
    """The layout's visible records, spelled out: the comparisons above compare something."""
    rows = read(spark, "kafka_txn", kafka.bootstrap_servers, rich.topic, includeHeaders="true")
    got = sorted((r.partition, r.offset, r.key is None, r.value is None) for r in rows.collect())
    assert got == [
        (0, 0, False, False), (0, 1, False, False), (0, 2, True, False),
        (0, 7, False, False), (0, 8, False, False), (0, 9, False, False),
        (0, 11, False, False),
        (1, 0, True, False), (1, 1, False, False), (1, 2, True, False),
        (1, 7, False, True),
        (2, 0, False, True), (2, 1, False, False), (2, 2, True, False),
        (2, 7, False, False),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "options"),
    [
        ("global-start", {"startingTimestamp": "STEP4"}),
        (
            "per-partition-start",
            {"startingOffsetsByTimestamp": '{"TOPIC":{"0":STEP3,"1":STEP4,"2":STEP2}}'},
        ),
        ("global-start-and-end", {"startingTimestamp": "STEP2", "endingTimestamp": "STEP7"}),
        (
            "per-partition-end",
            {"endingOffsetsByTimestamp": '{"TOPIC":{"0":STEP7,"1":STEP4,"2":STEP6}}'},
        ),
        (
            "future-start-latest-strategy",
            {"startingTimestamp": "FUTURE", "startingOffsetsByTimestampStrategy": "latest"},
        ),
    ],
)
def test_batch_read_by_timestamp(
    spark: SparkSession,
    kafka: KafkaTarget,
    rich: Rich,
    builtin_kafka: Connector,
    case: str,
    options: dict[str, str],
) -> None:
    future = str(int(time.time() * 1000) + 3_600_000)

    def fill(value: str) -> str:
        for step in range(1, 9):
            value = value.replace(f"STEP{step}", str(rich.ts(step)))
        return value.replace("FUTURE", future)

    filled: dict[str, str | None] = {k: fill(v) for k, v in options.items()}
    bs = kafka.bootstrap_servers
    theirs = read(spark, "kafka", bs, rich.topic, **filled)
    ours = read(spark, "kafka_txn", bs, rich.topic, **filled)
    assert_same(theirs, ours)


def test_min_partitions_makes_as_many_tasks(
    spark: SparkSession, kafka: KafkaTarget, rich: Rich, builtin_kafka: Connector
) -> None:
    bs = kafka.bootstrap_servers
    # Each range's share of minPartitions is rounded half up, as Spark's
    # KafkaOffsetRangeCalculator.getPartCount does (with ceil: 9 tasks against Spark's 7).
    counts = {
        fmt: read(spark, fmt, bs, rich.topic, minPartitions="7").rdd.getNumPartitions()
        for fmt in FORMATS
    }
    assert counts["kafka"] == counts["kafka_txn"], counts


def test_max_records_per_partition_in_a_batch_read(
    spark: SparkSession, kafka: KafkaTarget, rich: Rich, builtin_kafka: Connector
) -> None:
    """A difference: the built-in honours ``maxRecordsPerPartition`` in streams only (a
    batch read still makes one task per Kafka partition); ``kafka_txn`` splits batch reads
    too, into tasks of at most that many offsets (the rows are the same:
    ``test_batch_read[maxRecordsPerPartition]``). By default the small pieces are then
    packed into as few tasks as that allows (``minRecordsPerPartition``, see the Reader
    page's differences); with ``minRecordsPerPartition=1`` each piece is a task."""
    bs = kafka.bootstrap_servers
    theirs = read(spark, "kafka", bs, rich.topic, maxRecordsPerPartition="2")
    ours = read(spark, "kafka_txn", bs, rich.topic, maxRecordsPerPartition="2")
    pieces = read(
        spark, "kafka_txn", bs, rich.topic, maxRecordsPerPartition="2", minRecordsPerPartition="1"
    )
    assert theirs.rdd.getNumPartitions() == 3
    # Offsets 13, 9 and 8 (up to the LSO) in pieces of at most 2 ...
    assert pieces.rdd.getNumPartitions() == 7 + 5 + 4
    # ... packed into tasks of at most 2 offsets: 30 offsets, 15 tasks.
    assert ours.rdd.getNumPartitions() == 15


# -- streams ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"startingOffsets": "earliest"},
        {"startingOffsets": "earliest", "maxOffsetsPerTrigger": "4", "includeHeaders": "true"},
        {"startingOffsets": '{"TOPIC":{"0":4,"1":-2,"2":6}}', "maxOffsetsPerTrigger": "5"},
        {"subscribe": None, "assign": '{"TOPIC":[1,2]}', "startingOffsets": "earliest"},
    ],
    ids=["earliest", "maxOffsetsPerTrigger", "json-start", "assign"],
)
def test_available_now(
    spark: SparkSession,
    kafka: KafkaTarget,
    rich: Rich,
    builtin_kafka: Connector,
    tmp_path: Path,
    options: dict[str, str | None],
) -> None:
    available_now_both(spark, kafka.bootstrap_servers, rich.topic, tmp_path, **options)
    n = batches(spark, tmp_path, "kafka_txn").select("batch_id").distinct().count()
    if "maxOffsetsPerTrigger" in options:
        assert n > 1, "the limit made no second micro-batch: nothing compared"


def test_max_records_per_partition_in_a_stream(
    spark: SparkSession, kafka: KafkaTarget, builtin_kafka: Connector, tmp_path: Path
) -> None:
    """In streams both honour ``maxRecordsPerPartition`` alike: each micro-batch's range
    of a topic-partition is cut into tasks of at most that many offsets, so every
    micro-batch has as many tasks in both (counted in ``foreachBatch`` with the
    DataFrame's ``getNumPartitions``, empty tasks too), each task reads the same offsets
    (through ``spark_partition_id``), and the rows are the same. (In batch reads they
    differ: ``test_max_records_per_partition_in_a_batch_read``.)"""
    from pyspark.sql import functions as sf

    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2, prefix="parity-maxrec")
    writer = txn_producer(bs, tid())
    for t in range(3):  # p0: 3 x (6 records + marker) = 21 offsets
        _commit(bs, topic, writer, [(0, f"p0-{t}-{i}".encode()) for i in range(6)])
    _commit(bs, topic, writer, [(1, f"p1-{i}".encode()) for i in range(5)])  # p1: 6 offsets
    wait_lso_at_hwm(bs, topic, 2)
    limit = 3
    tasks: dict[Format, dict[int, int]] = {fmt: {} for fmt in FORMATS}
    queries: dict[Format, StreamingQuery] = {}
    for fmt in FORMATS:
        query = stream(
            spark, fmt, bs, topic, tmp_path, {"availableNow": True}, tasks=tasks[fmt],
            startingOffsets="earliest", maxOffsetsPerTrigger="10",
            maxRecordsPerPartition=str(limit),
        )  # fmt: skip
        assert query.awaitTermination(HANG_S), f"{fmt}: the availableNow query did not finish"
        assert query.exception() is None, query.exception()
        queries[fmt] = query
    ranges = {fmt: batch_ranges(q) for fmt, q in queries.items()}
    assert ranges["kafka"] == ranges["kafka_txn"], ranges
    assert len(ranges["kafka"]) > 1, "the limit made no second micro-batch: nothing compared"
    # Each range in pieces of at most `limit` offsets (Spark's KafkaOffsetRangeCalculator).
    expected = {
        batch: sum(-(-(end - start) // limit) for start, end in by_partition.values())
        for batch, by_partition in ranges["kafka"].items()
    }
    counts = {fmt: {b: n for b, n in tasks[fmt].items() if n} for fmt in FORMATS}
    assert counts["kafka"] == counts["kafka_txn"] == expected, (counts, expected)
    assert any(n > len(ranges["kafka"][b]) for b, n in expected.items()), "nothing was split"

    def per_task(fmt: Format) -> list[tuple[int, int, int, int, int]]:
        rows = spark.read.parquet(str(tmp_path / fmt))
        grouped = rows.groupBy("batch_id", "task", "partition").agg(
            sf.min("offset"), sf.max("offset"), sf.count("*")
        )
        return sorted(tuple(r)[:1] + tuple(r)[2:] for r in grouped.collect())

    # Which Spark partition number a piece gets may differ; its offsets may not.
    assert per_task("kafka") == per_task("kafka_txn")
    rows = {fmt: batches(spark, tmp_path, fmt).drop("task") for fmt in FORMATS}
    assert_same(rows["kafka"], rows["kafka_txn"], "batch_id", *ORDER)
    assert rows["kafka_txn"].count() == 18 + 5


def _commit(bs: str, topic: str, producer: Producer, rows: list[tuple[int, bytes]]) -> None:
    producer.begin_transaction()
    for partition, value in rows:
        producer.produce(topic, partition=partition, key=value[:2], value=value)
    producer.commit_transaction(10)


def test_processing_time_batches_follow_the_commits(
    spark: SparkSession, kafka: KafkaTarget, builtin_kafka: Connector, tmp_path: Path
) -> None:
    """Both queries run side by side on a processingTime trigger while transactions are
    committed, aborted and left open; after each step both have processed everything, and
    their micro-batches hold the same rows: each commit is one batch, an aborted
    transaction none, and an open transaction holds back its partition (both end their
    batches at the LSO) until it commits."""
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2, prefix="parity-pt")
    writer = txn_producer(bs, tid())
    opener = txn_producer(bs, tid(), **{"transaction.timeout.ms": 600_000})
    queries = [
        stream(
            spark, fmt, bs, topic, tmp_path, {"processingTime": "200 milliseconds"},
            startingOffsets="earliest",
        )
        for fmt in FORMATS
    ]  # fmt: skip
    # Both queries have triggered once (on no data) before anything is written: a Python
    # source's first trigger comes later than the built-in's.
    wait_until("both queries' first trigger", lambda: all(q.recentProgress for q in queries))

    def settle() -> None:
        if not open_now:
            wait_lso_at_hwm(bs, topic, 2)
        for q in queries:
            q.processAllAvailable()

    try:
        open_now = False
        _commit(bs, topic, writer, [(0, b"a-0"), (1, b"a-1"), (0, b"a-2")])
        settle()
        writer.begin_transaction()
        writer.produce(topic, partition=1, value=b"aborted")
        writer.flush(10)
        writer.abort_transaction(10)
        _commit(bs, topic, writer, [(1, b"b-0")])
        settle()
        opener.begin_transaction()
        opener.produce(topic, partition=0, value=b"open-0")
        opener.flush(10)
        open_now = True
        _commit(bs, topic, writer, [(0, b"c-0"), (1, b"c-1")])
        wait_until("p1's commit marker", lambda: watermarks(bs, topic, 1, "read_committed")[1] == 8)
        settle()
        opener.commit_transaction(10)
        open_now = False
        settle()
        for q in queries:
            assert q.exception() is None, q.exception()
    finally:
        for q in queries:
            q.stop()
    theirs = batches(spark, tmp_path, "kafka")
    ours = batches(spark, tmp_path, "kafka_txn")
    assert_same(theirs, ours, "batch_id", *ORDER)
    # p0's c-0 waited behind open-0 in both, and came in the batch of open-0's commit.
    got = {bytes(r.value): r.batch_id for r in ours.collect() if bytes(r.value) in (b"c-0", b"c-1")}
    opened = next(r.batch_id for r in ours.collect() if bytes(r.value) == b"open-0")
    assert got[b"c-0"] == opened > got[b"c-1"], (got, opened)


def test_min_offsets_per_trigger_and_max_trigger_delay(
    spark: SparkSession, kafka: KafkaTarget, builtin_kafka: Connector, tmp_path: Path
) -> None:
    """Enough new offsets run at the next trigger; too few wait until ``maxTriggerDelay``
    has passed since the last batch: the same batches in both, the small one late in both.

    The times are each query's own trigger times (its progress ``timestamp``), so a query
    that a loaded machine slows down is measured from its own previous batch, not from
    when the test noticed the slowest one.
    """
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=1, prefix="parity-min")
    writer = txn_producer(bs, tid())
    delay_s = 8.0
    options: dict[str, str | None] = {
        "startingOffsets": "earliest",
        "minOffsetsPerTrigger": "5",
        "maxTriggerDelay": f"{int(delay_s)}s",
    }
    queries = [
        stream(spark, fmt, bs, topic, tmp_path, {"processingTime": "200 milliseconds"}, **options)
        for fmt in FORMATS
    ]

    def wait_rows(rows: int) -> None:
        """Wait until every query has read ``rows`` rows in all."""
        since = time.monotonic()
        while any(sum(p["numInputRows"] for p in q.recentProgress) < rows for q in queries):
            assert time.monotonic() < since + HANG_S, f"no batch reached {rows} rows"
            for q in queries:
                assert q.exception() is None, q.exception()
            time.sleep(0.05)

    try:
        _commit(bs, topic, writer, [(0, f"big-{i}".encode()) for i in range(6)])  # 7 offsets
        wait_rows(6)
        _commit(bs, topic, writer, [(0, b"small-0"), (0, b"small-1")])  # 3 offsets < 5
        wait_rows(8)
        _commit(bs, topic, writer, [(0, f"big2-{i}".encode()) for i in range(5)])
        wait_rows(13)
    finally:
        for q in queries:
            q.stop()
    for q in queries:
        started = [_epoch_s(p["timestamp"]) for p in q.recentProgress if p["numInputRows"]]
        rows = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
        assert rows == [6, 2, 5], rows
        # The small batch waited for maxTriggerDelay after the batch before it (1 s for the
        # trigger interval and the moment latestOffset runs within its trigger); the big
        # one after it did not wait (it ran well before another delay had passed).
        assert started[1] - started[0] >= delay_s - 1.0, started
        assert started[2] - started[1] < delay_s, started
    assert_same(
        batches(spark, tmp_path, "kafka"), batches(spark, tmp_path, "kafka_txn"), "batch_id", *ORDER
    )


def _epoch_s(timestamp: str) -> float:
    """A query progress ``timestamp`` (ISO 8601, UTC) in seconds since the epoch."""
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def test_fail_on_data_loss_after_deleted_records(
    spark: SparkSession, kafka: KafkaTarget, builtin_kafka: Connector, tmp_path: Path
) -> None:
    """Records a query has not read yet are deleted (the log start offset moves past its
    position, as retention does): with ``failOnDataLoss=true`` both fail, with ``false``
    both go on from the new log start with the same rows."""
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=1, prefix="parity-loss")
    writer = txn_producer(bs, tid())
    _commit(bs, topic, writer, [(0, f"first-{i}".encode()) for i in range(3)])
    wait_lso_at_hwm(bs, topic, 1)
    outs = {flag: tmp_path / flag for flag in ("true", "false")}
    for flag, out in outs.items():
        available_now_both(spark, bs, topic, out, startingOffsets="earliest", failOnDataLoss=flag)
    _commit(bs, topic, writer, [(0, f"second-{i}".encode()) for i in range(5)])  # offsets 4-8
    wait_lso_at_hwm(bs, topic, 1)
    admin = AdminClient({"bootstrap.servers": bs})
    for fut in admin.delete_records([TopicPartition(topic, 0, 6)]).values():
        fut.result(30)
    assert watermarks(bs, topic, 0, "read_committed")[0] == 6
    failures: dict[Format, str] = {}
    for fmt in FORMATS:
        query = stream(
            spark, fmt, bs, topic, outs["true"], {"availableNow": True},
            startingOffsets="earliest", failOnDataLoss="true",
        )  # fmt: skip
        try:
            query.awaitTermination(HANG_S)
        except Exception as exc:  # noqa: BLE001 - the failure is what is checked
            failures[fmt] = str(exc)
        else:
            failures[fmt] = f"no failure: {query.exception()}"
    assert "data" in failures["kafka"].lower() and "lost" in failures["kafka"].lower(), failures
    assert "lost" in failures["kafka_txn"].lower() or "loss" in failures["kafka_txn"].lower(), (
        failures
    )
    available_now_both(
        spark, bs, topic, outs["false"], startingOffsets="earliest", failOnDataLoss="false"
    )
    values = sorted(bytes(r.value) for r in batches(spark, outs["false"], "kafka_txn").collect())
    assert values == [b"first-0", b"first-1", b"first-2", b"second-2", b"second-3", b"second-4"]


#: ``segment.ms`` of the compacted topic: a segment rolls at the first append this long
#: after it was created, and only rolled segments are compacted.
SEGMENT_MS = 100


@dataclass
class Compacted:
    """A compacted topic of two partitions, written in rounds of keys ``key-0`` to
    ``key-3`` (even keys on p0, odd on p1) by one transactional producer, plus a key
    ``solo-<p>`` per partition written once in round 0:

    * round 0 committed · round 1 aborted (its records and markers really in the log) ·
      round 2 committed with tombstones for the odd keys · round 3 committed ·
      round 4 committed, ``key-3`` a tombstone, at least ``2 * SEGMENT_MS`` after round 3
      began: it starts the active segment, which the cleaner never touches.

    Compacted, the log keeps ``solo-<p>``, round 3 (the newest value of each key below the
    active segment) and round 4; rounds 0 to 2 leave gaps of offsets that held records.
    """

    topic: str
    #: Per partition, the offsets written with a record (markers aside).
    written: dict[int, list[int]]
    #: Per partition, the offsets a compaction keeps.
    kept: dict[int, list[int]]
    #: Per partition, the offsets of the aborted round.
    aborted: dict[int, list[int]]
    #: Per partition, the offsets that held a record and hold none now (empty on a
    #: cluster that does not compact).
    gaps: dict[int, list[int]]


def _write_compacted(bs: str, topic: str) -> list[dict[int, list[int]]]:
    """Write :class:`Compacted`'s rounds; return each round's offsets per partition."""
    writer = txn_producer(bs, tid())
    rounds: list[dict[int, list[int]]] = []

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        rounds[-1][msg.partition()].append(msg.offset())

    def write(rnd: int, *, commit: bool = True) -> None:
        rounds.append({0: [], 1: []})
        writer.begin_transaction()
        if rnd == 0:
            for part in (0, 1):
                writer.produce(
                    topic, partition=part, key=f"solo-{part}".encode(), value=b"solo",
                    on_delivery=delivered,
                )  # fmt: skip
        for k in range(4):
            tombstone = (rnd == 2 and k % 2 == 1) or (rnd == 4 and k == 3)
            value = None if tombstone else f"{k}@{rnd}".encode()
            writer.produce(
                topic, partition=k % 2, key=f"key-{k}".encode(), value=value,
                on_delivery=delivered,
            )  # fmt: skip
        # Flushed first, so that an aborted round's records are in the log too (an
        # abort drops what librdkafka has not sent yet).
        writer.flush(10)
        if commit:
            writer.commit_transaction(10)
        else:
            writer.abort_transaction(10)

    for rnd in range(4):
        write(rnd, commit=rnd != 1)
    began = time.monotonic()
    wait_lso_at_hwm(bs, topic, 2)
    # Not a wait for an event: the time that makes the segment of round 3 roll.
    time.sleep(max(0.0, 2 * SEGMENT_MS / 1000 - (time.monotonic() - began)))
    write(4)
    wait_lso_at_hwm(bs, topic, 2)
    return rounds


@pytest.fixture(scope="module")
def compacted(kafka: KafkaTarget) -> Compacted:
    """:class:`Compacted`, compacted for real on Apache Kafka: its log cleaner (made to
    look every 200 ms) has removed what the layout says, as an independent consumer
    reading uncommitted sees, before any test compares; the embedded cluster never
    compacts, and its log is checked to hold every record written."""
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(
        partitions=2,
        prefix="parity-compact",
        **{
            "cleanup.policy": "compact",
            "segment.ms": str(SEGMENT_MS),
            "min.cleanable.dirty.ratio": "0.001",
            "min.compaction.lag.ms": "0",
            "delete.retention.ms": "100",
        },
    )
    with quick_log_cleaner(kafka) as compacts:
        rounds = _write_compacted(bs, topic)
        written = {p: sorted(o for r in rounds for o in r[p]) for p in (0, 1)}
        kept = {p: sorted(rounds[0][p][:1] + rounds[3][p] + rounds[4][p]) for p in (0, 1)}
        if compacts:
            wait_until(
                f"{topic} compacted to {kept}",
                lambda: data_offsets(bs, topic, 2) == kept,
                timeout_s=HANG_S,
            )
    present = data_offsets(bs, topic, 2)
    holes = gaps(written, present)
    if compacts:
        assert all(holes.values()), f"no compaction gap in some partition: {holes}"
        assert present == kept, present
    elif kafka.embedded is not None:
        assert present == written, f"the embedded cluster compacted? {present} != {written}"
    return Compacted(topic, written, kept, rounds[1], holes)


#: Batch reads of :class:`Compacted`: with ``failOnDataLoss`` left to its default (true)
#: and explicitly false; ranges starting and ending inside the gaps (offsets 1-2, 4-5
#: and 7-8 of each partition hold nothing once compacted).
COMPACTED_BATCH_CASES: dict[str, dict[str, str | None]] = {
    "default": {},
    "failOnDataLoss-false": {"failOnDataLoss": "false"},
    "start-and-end-in-gaps": {
        "startingOffsets": '{"TOPIC":{"0":1,"1":4}}',
        "endingOffsets": '{"TOPIC":{"0":8,"1":11}}',
    },
}


@pytest.mark.parametrize("case", list(COMPACTED_BATCH_CASES))
def test_compacted_topic_batch(
    spark: SparkSession,
    kafka: KafkaTarget,
    compacted: Compacted,
    builtin_kafka: Connector,
    case: str,
) -> None:
    """A compacted topic with keys written over and over, tombstones and an aborted
    transaction: the same rows in both. On Apache Kafka the log really has compaction
    gaps (the fixture checked), which neither side takes for data loss; the embedded
    cluster never compacts, so there the same layout is read uncompacted."""
    bs = kafka.bootstrap_servers
    options = COMPACTED_BATCH_CASES[case]
    theirs = read(spark, "kafka", bs, compacted.topic, **options)
    ours = read(spark, "kafka_txn", bs, compacted.topic, **options)
    assert_same(theirs, ours)
    if case == "default":
        offsets = sorted((r.partition, r.offset) for r in ours.collect())
        live = compacted.kept if any(compacted.gaps.values()) else compacted.written
        # Read committed: an uncompacted log still holds the aborted round.
        want = [(p, o) for p in (0, 1) for o in live[p] if o not in compacted.aborted[p]]
        assert offsets == want, (offsets, compacted)


def _gap_boundaries(compacted: Compacted, query: StreamingQuery) -> list[tuple[int, int, int]]:
    """The micro-batches of ``query`` that end inside a gap: (batch id, partition, end)."""
    return [
        (batch, p, end)
        for batch, ranges in batch_ranges(query).items()
        for p, (_, end) in ranges.items()
        if end in compacted.gaps[p]
    ]


def test_compacted_topic_available_now(
    spark: SparkSession,
    kafka: KafkaTarget,
    compacted: Compacted,
    builtin_kafka: Connector,
    tmp_path: Path,
) -> None:
    """availableNow in micro-batches of at most 5 offsets over the compacted topic: the
    same batches with the same rows; on Apache Kafka some batch ends inside a gap."""
    queries = available_now_both(
        spark, kafka.bootstrap_servers, compacted.topic, tmp_path,
        startingOffsets="earliest", maxOffsetsPerTrigger="5",
    )  # fmt: skip
    assert len(batch_ranges(queries["kafka_txn"])) > 2, "too few micro-batches to compare"
    assert batch_ranges(queries["kafka"]) == batch_ranges(queries["kafka_txn"])
    if any(compacted.gaps.values()):
        assert _gap_boundaries(compacted, queries["kafka_txn"]), batch_ranges(queries["kafka"])


def test_compacted_topic_processing_time(
    spark: SparkSession,
    kafka: KafkaTarget,
    compacted: Compacted,
    builtin_kafka: Connector,
    tmp_path: Path,
) -> None:
    """A processingTime stream of at most 4 offsets per micro-batch over the compacted
    topic: the same micro-batches with the same rows, boundaries inside gaps included
    (on Apache Kafka)."""
    bs = kafka.bootstrap_servers
    queries = {
        fmt: stream(
            spark, fmt, bs, compacted.topic, tmp_path, {"processingTime": "100 milliseconds"},
            startingOffsets="earliest", maxOffsetsPerTrigger="4",
        )
        for fmt in FORMATS
    }  # fmt: skip
    try:
        for q in queries.values():
            q.processAllAvailable()
            assert q.exception() is None, q.exception()
    finally:
        for q in queries.values():
            q.stop()
    ranges = {fmt: batch_ranges(q) for fmt, q in queries.items()}
    assert len(ranges["kafka_txn"]) > 4, ranges
    assert ranges["kafka"] == ranges["kafka_txn"]
    # Both read to the end of the log (its last offset is a commit marker).
    read_to = {p: max(r[p][1] for r in ranges["kafka_txn"].values() if p in r) for p in (0, 1)}
    assert read_to == {p: offs[-1] + 2 for p, offs in compacted.written.items()}, read_to
    assert_same(
        batches(spark, tmp_path, "kafka"), batches(spark, tmp_path, "kafka_txn"), "batch_id", *ORDER
    )
    if any(compacted.gaps.values()):
        assert _gap_boundaries(compacted, queries["kafka_txn"]), ranges["kafka"]


# -- where the two differ by design -----------------------------------------------------------


def test_default_isolation(
    spark: SparkSession, kafka: KafkaTarget, rich: Rich, builtin_kafka: Connector
) -> None:
    """Without ``kafka.isolation.level`` the built-in reads uncommitted (aborted and open
    records, up to the high watermark) and ``kafka_txn`` committed; given
    ``read_uncommitted``, ``kafka_txn`` reads what the built-in reads by default."""
    bs = kafka.bootstrap_servers
    opts = {"kafka.bootstrap.servers": bs, "subscribe": rich.topic}
    builtin_default = spark.read.format("kafka").options(**opts).load()
    ours_default = spark.read.format("kafka_txn").options(**opts).load()
    assert builtin_default.count() == 23  # every record of the layout, markers aside
    assert ours_default.count() == 15
    uncommitted = {**opts, "kafka.isolation.level": "read_uncommitted"}
    assert_same(builtin_default, spark.read.format("kafka_txn").options(**uncommitted).load())
    assert_same(read(spark, "kafka", bs, rich.topic), ours_default)


# -- bad options ------------------------------------------------------------------------------


def _rejects(spark: SparkSession, fmt: Format, bs: str, topic: str, case: str, out: Path) -> str:
    """The error of the case's query through ``fmt``, or ``""`` when it ran."""
    bad = CASES[case]
    try:
        if bad.mode == "batch":
            read(spark, fmt, bs, topic, **bad.options).collect()
        else:
            query = stream(spark, fmt, bs, topic, out, {"availableNow": True}, **bad.options)
            query.awaitTermination(HANG_S)
            if query.isActive:
                query.stop()
                return "still running"
    except Exception as exc:  # noqa: BLE001 - a rejection, checked by the caller
        return str(exc) or type(exc).__name__
    return ""


@pytest.mark.parametrize("case", list(CASES))
def test_bad_option(
    spark: SparkSession,
    kafka: KafkaTarget,
    builtin_kafka: Connector,
    tmp_path: Path,
    case: str,
) -> None:
    """Each row of the table: the built-in and ``kafka_txn`` reject it as the table says
    (``docs/migration.md`` shows the rows where they differ)."""
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=1, prefix="parity-bad")
    plain = Producer({"bootstrap.servers": bs})
    plain.produce(topic, value=b"x", partition=0)
    plain.flush(10)
    got = {fmt: _rejects(spark, fmt, bs, topic, case, tmp_path / fmt) for fmt in FORMATS}
    expected = CASES[case]
    assert (bool(got["kafka"]), bool(got["kafka_txn"])) == (
        expected.builtin_rejects,
        expected.we_reject,
    ), got
    assert got["kafka_txn"] != "still running", "kafka_txn's query neither failed nor ended"
    if expected.we_reject:
        # A rejection, not a crash: the error names the option at fault (Spark may show
        # option names lower-cased).
        assert expected.option.lower() in got["kafka_txn"].lower(), got["kafka_txn"][:2000]
