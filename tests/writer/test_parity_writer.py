"""Writer parity with Spark's built-in connector, and moving a query's checkpoint between
the two: the same DataFrame written by ``format("kafka")`` and by ``format("kafka_txn")``
gives the same records, read back by an independent consumer (confluent-kafka,
read_committed), each expected record exactly once.

Compared: key, value and headers; the topic (column, option, and the option winning over
the column); the partition (keyed records land where the built-in's Java producer puts
them; an explicit ``partition`` column); the record timestamp (neither takes a
``timestamp`` column). Where the two differ, the test asserts the difference, which
``docs/migration.md`` documents: the save modes (Spark refuses ``ErrorIfExists`` and
``Ignore`` for any Python data source before its code runs), a write from a Python thread
other than the main one, and a streaming query's checkpoint taken from one to the other.

The built-in connector's jars come from Maven Central (:mod:`tests.support.spark_kafka`).
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
from confluent_kafka import Message
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

import pyspark_kafka_txn
from tests.support.clients import consume_messages, txn_producer
from tests.support.lso import wait_lso_at_hwm
from tests.support.spark_kafka import Connector, connector
from tests.support.target import KafkaTarget
from tests.support.txns import tid

pytestmark = pytest.mark.local_spark_only(
    "the built-in connector comes through spark.jars, which a Spark Connect client cannot "
    "set; one run per make test is enough for a comparison"
)

Format = Literal["kafka", "kafka_txn"]
FORMATS: tuple[Format, Format] = ("kafka", "kafka_txn")
HANG_S = 120  # hang detector, never a timing assertion
PARTITIONS = 4

#: The input columns of the sink, with every optional one.
SCHEMA = (
    "key string, value binary, headers array<struct<key:string,value:binary>>, "
    "topic string, partition int, timestamp timestamp"
)

#: A record as read back: (topic, partition, key, value, headers).
Record = tuple[str, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


@pytest.fixture(scope="session")
def builtin_kafka() -> Connector:
    """Spark's built-in connector (the ``spark`` fixture loads its jars when a collected
    test asks for this fixture)."""
    return connector()


def _record(msg: Message) -> Record:
    return (
        str(msg.topic()),
        int(msg.partition() or 0),
        msg.key(),
        msg.value(),
        tuple(msg.headers() or ()),
    )


def read_back(bs: str, topic: str, partitions: int = PARTITIONS) -> list[Record]:
    """Every committed record of ``topic``, read by librdkafka (read_committed)."""
    return [_record(m) for m in consume_messages(bs, topic, partitions, timeout_s=60)]


def write(df: DataFrame, fmt: Format, bs: str, mode: str | None = "append", **opts: str) -> None:
    """``df.write.format(fmt)...save()``, with ``mode`` unless it is None."""
    writer = df.write.format(fmt).option("kafka.bootstrap.servers", bs).options(**opts)
    if mode is not None:
        writer = writer.mode(mode)
    writer.save()


def rows(n: int, prefix: str, **extra: Any) -> list[dict[str, Any]]:
    """``n`` rows with distinct keys and values, headers on every other (one with a null
    value); ``extra`` columns are the same in every row."""
    out = []
    for i in range(n):
        headers = [("h", f"{i}".encode()), ("n", None)] if i % 2 else []
        out.append(
            {
                "key": f"{prefix}-key-{i}",
                "value": f"{prefix}-value-{i}".encode(),
                "headers": headers,
                "topic": None,
                "partition": None,
                "timestamp": None,
                **extra,
            }
        )
    return out


def frame(spark: SparkSession, data: list[dict[str, Any]], *columns: str) -> DataFrame:
    df = spark.createDataFrame(data, SCHEMA)
    return df.select(*columns) if columns else df


def _expected(data: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    """The (key, value, headers) of each row, as a consumer gets them."""
    return Counter(
        (
            None if r["key"] is None else r["key"].encode(),
            r["value"],
            tuple((h, v) for h, v in r["headers"]),
        )
        for r in data
    )


def _content(records: list[Record]) -> Counter[tuple[Any, ...]]:
    return Counter((key, value, headers) for _, _, key, value, headers in records)


def _topics(kafka: KafkaTarget, prefix: str, n: int = 1) -> dict[Format, list[str]]:
    return {
        fmt: [kafka.create_topic(PARTITIONS, prefix=f"{prefix}-{fmt}") for _ in range(n)]
        for fmt in FORMATS
    }


# -- the records --------------------------------------------------------------------------


def test_same_records_in_the_same_partitions(
    spark: SparkSession, kafka: KafkaTarget, builtin_kafka: Connector
) -> None:
    """Keyed rows, null keys, headers (one with a null value): each row once, with the same
    key, value and headers; each keyed row in the partition where the built-in's Java
    producer (its default partitioner: murmur2 of the key) put it. Rows without a key go
    where each one's sticky choice puts them, which is not compared."""
    bs = kafka.bootstrap_servers
    data = rows(300, "same")
    for r in data[::10]:
        r["key"] = None
    df = frame(spark, data, "key", "value", "headers").repartition(3)
    topics = _topics(kafka, "wparity")
    got = {}
    for fmt in FORMATS:
        write(df, fmt, bs, topic=topics[fmt][0])
        got[fmt] = read_back(bs, topics[fmt][0])
    for fmt in FORMATS:
        assert _content(got[fmt]) == _expected(data), fmt
    placed = {
        fmt: {(key, p) for _, p, key, _, _ in records if key is not None}
        for fmt, records in got.items()
    }
    assert placed["kafka"] == placed["kafka_txn"]
    assert len({p for _, p in placed["kafka"]}) == PARTITIONS  # the keys spread: compared


def test_string_and_binary_columns(
    spark: SparkSession, kafka: KafkaTarget, builtin_kafka: Connector
) -> None:
    """A binary key and a string value give the same bytes as the other way round."""
    bs = kafka.bootstrap_servers
    df = spark.createDataFrame(
        [(b"\x00\xffkey", "välue"), (b"", ""), (None, None)], "key binary, value string"
    )
    topics = _topics(kafka, "wparity-types")
    got = {}
    for fmt in FORMATS:
        write(df, fmt, bs, topic=topics[fmt][0])
        got[fmt] = Counter((r[2], r[3]) for r in read_back(bs, topics[fmt][0]))
    assert (
        got["kafka"]
        == got["kafka_txn"]
        == Counter({(b"\x00\xffkey", "välue".encode()): 1, (b"", b""): 1, (None, None): 1})
    )


def test_topic_column_and_option(
    spark: SparkSession, kafka: KafkaTarget, builtin_kafka: Connector
) -> None:
    """Without the ``topic`` option each row goes to its ``topic`` column's topic; with it,
    every row goes to the option's topic and the column is ignored: in both."""
    bs = kafka.bootstrap_servers
    topics = _topics(kafka, "wparity-topic", 3)
    for fmt in FORMATS:
        first, second, option = topics[fmt]
        data = rows(20, f"{fmt}-col", topic=first) + rows(10, f"{fmt}-col2", topic=second)
        df = frame(spark, data, "topic", "key", "value", "headers")
        write(df, fmt, bs)
        assert _content(read_back(bs, first)) == _expected(data[:20]), fmt
        assert _content(read_back(bs, second)) == _expected(data[20:]), fmt
        over = rows(15, f"{fmt}-opt", topic=first)
        write(frame(spark, over, "topic", "key", "value", "headers"), fmt, bs, topic=option)
        assert _content(read_back(bs, option)) == _expected(over), fmt
        assert len(read_back(bs, first)) == 20, f"{fmt}: the topic column won over the option"


def test_partition_column(
    spark: SparkSession, kafka: KafkaTarget, builtin_kafka: Connector
) -> None:
    """An explicit ``partition`` column puts each row there, whatever its key; a null in it
    leaves the row to the key's partition: the same placement in both."""
    bs = kafka.bootstrap_servers
    data = rows(40, "part")
    for i, r in enumerate(data):
        r["partition"] = None if i % 4 == 3 else i % PARTITIONS
    df = frame(spark, data, "key", "value", "headers", "partition")
    topics = _topics(kafka, "wparity-part")
    got = {}
    for fmt in FORMATS:
        write(df, fmt, bs, topic=topics[fmt][0])
        got[fmt] = read_back(bs, topics[fmt][0])
        assert _content(got[fmt]) == _expected(data), fmt
        placed = {key: p for _, p, key, _, _ in got[fmt]}
        for r in data:
            if r["partition"] is not None:
                assert placed[r["key"].encode()] == r["partition"], (fmt, r["key"])
    assert sorted((k, p) for _, p, k, _, _ in got["kafka"]) == sorted(
        (k, p) for _, p, k, _, _ in got["kafka_txn"]
    )


def test_timestamp_column_is_not_written(
    spark: SparkSession, kafka: KafkaTarget, builtin_kafka: Connector
) -> None:
    """Neither sink writes a ``timestamp`` column (Spark's Kafka sink takes only ``topic``,
    ``key``, ``value``, ``headers`` and ``partition``): the records carry the producer's
    CreateTime of the write, in both."""
    bs = kafka.bootstrap_servers
    stamp = dt.datetime(2001, 2, 3, 4, 5, 6, tzinfo=dt.UTC)
    data = rows(10, "ts", timestamp=stamp)
    df = frame(spark, data, "key", "value", "timestamp")
    topics = _topics(kafka, "wparity-ts")
    for fmt in FORMATS:
        before = int(time.time() * 1000) - 1000
        write(df, fmt, bs, topic=topics[fmt][0])
        after = int(time.time() * 1000) + 1000
        msgs = consume_messages(bs, topics[fmt][0], PARTITIONS, timeout_s=60)
        assert len(msgs) == len(data), fmt
        for msg in msgs:
            kind, ts = msg.timestamp()
            assert kind == 1, (fmt, kind)  # TIMESTAMP_CREATE_TIME
            assert before <= ts <= after, (fmt, ts, int(stamp.timestamp() * 1000))


# -- save modes -------------------------------------------------------------------------------

#: What each save mode does: True when the write runs, else a piece of its error. The
#: built-in refuses Overwrite and Ignore itself and takes ErrorIfExists (Spark's default)
#: as Append; for a Python data source Spark refuses ErrorIfExists and Ignore before the
#: source's code runs, and kafka_txn refuses Overwrite itself.
SAVE_MODES: dict[str | None, dict[Format, bool | str]] = {
    None: {"kafka": True, "kafka_txn": "UNSUPPORTED_DATA_SOURCE_SAVE_MODE"},
    "append": {"kafka": True, "kafka_txn": True},
    "errorifexists": {"kafka": True, "kafka_txn": "UNSUPPORTED_DATA_SOURCE_SAVE_MODE"},
    "ignore": {
        "kafka": "Save mode Ignore not allowed",
        "kafka_txn": "UNSUPPORTED_DATA_SOURCE_SAVE_MODE",
    },
    "overwrite": {
        "kafka": "Save mode Overwrite not allowed",
        "kafka_txn": 'Save mode Overwrite is not allowed for kafka_txn (format("kafka")',
    },
}


@pytest.mark.parametrize("mode", list(SAVE_MODES), ids=lambda m: str(m or "no-mode"))
def test_save_mode(
    spark: SparkSession, kafka: KafkaTarget, builtin_kafka: Connector, mode: str | None
) -> None:
    bs = kafka.bootstrap_servers
    topics = _topics(kafka, "wparity-mode")
    data = rows(5, f"mode-{mode}")
    df = frame(spark, data, "key", "value", "headers")
    for fmt in FORMATS:
        expected = SAVE_MODES[mode][fmt]
        try:
            write(df, fmt, bs, mode, topic=topics[fmt][0])
        except Exception as exc:  # noqa: BLE001 - the refusal is what is checked
            assert expected is not True, f"{fmt} refused mode {mode}: {exc}"
            assert isinstance(expected, str) and expected in str(exc), (fmt, str(exc))
            assert read_back(bs, topics[fmt][0]) == [], f"{fmt} refused but wrote"
        else:
            assert expected is True, f"{fmt} took mode {mode}"
            assert _content(read_back(bs, topics[fmt][0])) == _expected(data), fmt


# -- threads ----------------------------------------------------------------------------------


def in_thread(action: Callable[[], None]) -> BaseException | None:
    """Run ``action`` in a new Python thread; its exception, if any."""
    caught: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            caught.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(HANG_S)
    assert not thread.is_alive(), "the thread's write hung"
    return caught[0] if caught else None


def test_write_from_a_thread(
    spark: SparkSession, kafka: KafkaTarget, builtin_kafka: Connector, tmp_path: Path
) -> None:
    """From a Python thread other than the main one, the built-in writes; ``kafka_txn``
    is not found (Spark looks a Python data source up in the JVM thread's active session,
    which such a thread lacks) until ``pyspark_kafka_txn.register(spark)`` runs in that
    thread; then batch and streaming writes work, each record once."""
    bs = kafka.bootstrap_servers
    topics = _topics(kafka, "wparity-thread")
    data = rows(8, "thread")
    df = frame(spark, data, "key", "value", "headers")

    assert in_thread(lambda: write(df, "kafka", bs, topic=topics["kafka"][0])) is None
    assert _content(read_back(bs, topics["kafka"][0])) == _expected(data)

    ours = topics["kafka_txn"][0]
    failed = in_thread(lambda: write(df, "kafka_txn", bs, topic=ours))
    assert failed is not None and "DATA_SOURCE_NOT_FOUND" in str(failed), failed
    assert read_back(bs, ours) == []

    def registered_then_write() -> None:
        pyspark_kafka_txn.register(spark)
        write(df, "kafka_txn", bs, topic=ours)
        query = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", "1000")
            .load()
            .where("value < 5")
            .selectExpr(
                "CAST(value AS STRING) AS key", "CAST(CAST(value AS STRING) AS BINARY) AS value"
            )
            .writeStream.format("kafka_txn")
            .option("kafka.bootstrap.servers", bs)
            .option("topic", ours)
            .option("checkpointLocation", str(tmp_path / "thread-ckpt"))
            .start()
        )
        try:
            deadline = time.monotonic() + HANG_S
            while sum(p["numInputRows"] for p in query.recentProgress) < 5:
                assert time.monotonic() < deadline, "the stream from the thread wrote nothing"
                assert query.exception() is None, query.exception()
                time.sleep(0.2)
        finally:
            query.stop()

    assert in_thread(registered_then_write) is None
    streamed = Counter((str(i).encode(), str(i).encode(), ()) for i in range(5))
    got = _content(read_back(bs, ours))
    assert got == _expected(data) + streamed, got


# -- checkpoint migration ---------------------------------------------------------------------


def _commit(bs: str, topic: str, values: list[str]) -> None:
    producer = txn_producer(bs, tid())
    producer.begin_transaction()
    for i, value in enumerate(values):
        producer.produce(topic, partition=i % 2, key=value.encode(), value=value.encode())
    producer.commit_transaction(10)
    wait_lso_at_hwm(bs, topic, 2)


def _stream(
    spark: SparkSession, fmt: Format, bs: str, topic: str, out: Path, ckpt: Path, **opts: str
) -> StreamingQuery:
    """An availableNow stream of ``topic`` into a Parquet directory (``batch`` column added)."""
    path = str(out)

    def sink(df: DataFrame, batch_id: int) -> None:
        from pyspark.sql.functions import lit

        df.selectExpr("CAST(value AS STRING) AS value").withColumn(
            "batch", lit(batch_id)
        ).write.mode("append").parquet(path)

    reader = (
        spark.readStream.format(fmt)
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .options(**opts)
    )
    if fmt == "kafka":
        reader = reader.option("kafka.isolation.level", "read_committed")
    return (
        reader.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )


def strip_origin(ckpt: Path) -> None:
    """What ``docs/migration.md`` tells a user to do before the built-in takes over a
    checkpoint whose last micro-batch is ``kafka_txn``'s first: remove the ``"@origin"``
    entry from the newest file of ``offsets/`` (and the checksum file beside it)."""
    newest = max(
        (f for f in (ckpt / "offsets").iterdir() if f.name.isdigit()), key=lambda f: int(f.name)
    )
    lines = newest.read_text().splitlines()
    for i, line in enumerate(lines[2:], start=2):
        offsets = json.loads(line)
        offsets.pop("@origin", None)
        lines[i] = json.dumps(offsets)
    newest.write_text("\n".join(lines))
    (newest.parent / f".{newest.name}.crc").unlink(missing_ok=True)


def _run(query: StreamingQuery) -> BaseException | None:
    try:
        assert query.awaitTermination(HANG_S), "the availableNow query did not finish"
    except AssertionError:
        query.stop()
        raise
    except Exception as exc:  # noqa: BLE001 - handed back to the test
        return exc
    return query.exception()


@pytest.mark.parametrize(
    ("first", "then", "batches_first"),
    [
        ("kafka", "kafka_txn", 1),
        ("kafka", "kafka_txn", 3),
        ("kafka_txn", "kafka", 1),
        ("kafka_txn", "kafka", 3),
    ],
    ids=["kafka-to-kafka_txn-one-batch", "kafka-to-kafka_txn", "kafka_txn-to-kafka-one-batch",
         "kafka_txn-to-kafka"],
)  # fmt: skip
def test_checkpoint_migration(
    spark: SparkSession,
    kafka: KafkaTarget,
    builtin_kafka: Connector,
    tmp_path: Path,
    first: Format,
    then: Format,
    batches_first: int,
) -> None:
    """A query runs on ``first`` (in one micro-batch, or in three), more records are
    committed, and the query is started again with the same checkpoint on ``then``: it
    continues exactly where it stopped, each record once. One exception, both ways round
    the same: the built-in cannot take over a checkpoint whose last micro-batch was
    ``kafka_txn``'s first (it fails at start, and runs once ``"@origin"`` is removed)."""
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2, prefix="wparity-ckpt")
    before = [f"before-{i}" for i in range(12)]
    after = [f"after-{i}" for i in range(7)]
    _commit(bs, topic, before)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    limit = {"maxOffsetsPerTrigger": "5"} if batches_first > 1 else {}
    assert _run(_stream(spark, first, bs, topic, out, ckpt, **limit)) is None
    ran = spark.read.parquet(str(out))
    assert ran.select("batch").distinct().count() == batches_first
    assert sorted(r.value for r in ran.collect()) == sorted(before)
    _commit(bs, topic, after)
    failed = _run(_stream(spark, then, bs, topic, out, ckpt))
    if then == "kafka" and batches_first == 1:
        # The documented exception: the end offset of kafka_txn's first micro-batch holds
        # "@origin", which the built-in cannot parse; it fails at start, having read nothing,
        # and runs on once the entry is removed as docs/migration.md says.
        assert failed is not None and '"@origin"' in str(failed), failed
        assert spark.read.parquet(str(out)).count() == len(before)
        strip_origin(ckpt)
        failed = _run(_stream(spark, then, bs, topic, out, ckpt))
    assert failed is None, failed
    got = Counter(r.value for r in spark.read.parquet(str(out)).collect())
    assert got == Counter(before + after), got
