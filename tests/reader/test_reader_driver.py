"""The stream reader's driver side against the embedded cluster, without a SparkSession.

* the first micro-batch's end records its start (``"@origin"``) and ``partitions`` plans
  from it, whatever start Spark passes when it re-runs the batch;
* ``lsoStallWarnMs``: a transaction left open pins the LSO; the planner warns once per
  stall.
"""

from __future__ import annotations

import gc
import itertools
import logging
import time
import weakref
from collections.abc import Sequence

import pytest
from confluent_kafka import Consumer
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from pyspark_kafka_txn.errors import (
    AuthenticationError,
    ConfigError,
    KafkaTxnError,
    StallTimeoutError,
)
from pyspark_kafka_txn.offsets import (
    ORIGIN,
    PartitionOffsets,
    from_json_dict,
    origin_of,
    to_json_dict,
)
from pyspark_kafka_txn.options import parse_reader_options
from pyspark_kafka_txn.reader import executor
from pyspark_kafka_txn.reader.batch import KafkaBatchReader
from pyspark_kafka_txn.reader.common import KafkaInputPartition
from pyspark_kafka_txn.reader.executor import _consumer_config, read_range
from pyspark_kafka_txn.reader.planning import OffsetClient
from pyspark_kafka_txn.reader.stream import KafkaStreamReader
from pyspark_kafka_txn.schema import spark_schema
from pyspark_kafka_txn.source import KafkaTxnDataSource
from pyspark_kafka_txn.wire import TopicPartition
from tests.support.clients import txn_producer, watermarks
from tests.support.clusters import CheckedKafka
from tests.support.hang import wait_until
from tests.support.lso import wait_lso_at_hwm
from tests.support.target import KafkaTarget
from tests.support.txns import committed_batches, tid

HANG_S = 60.0  # hang detector, never a timing assertion


def stream_reader(bootstrap: str, topic: str | None, **options: str) -> KafkaStreamReader:
    subscribe = {} if topic is None else {"subscribe": topic}
    source = KafkaTxnDataSource({"kafka.bootstrap.servers": bootstrap, **subscribe, **options})
    reader = source.streamReader(source.schema())
    assert isinstance(reader, KafkaStreamReader)
    return reader


# --------------------------------------------------------------------------- origin


def test_offset_json_with_and_without_origin() -> None:
    a0, a1 = TopicPartition("a", 0), TopicPartition("a", 1)
    plain = {"a": {"0": 5, "1": 7}}
    assert from_json_dict(plain) == {a0: 5, a1: 7}  # offsets written before the origin key
    assert origin_of(plain) is None
    first = {"a": {"0": 5, "1": 7}, ORIGIN: {"a": {"0": 1, "1": 2}}}
    assert from_json_dict(first) == {a0: 5, a1: 7}
    assert origin_of(first) == {a0: 1, a1: 2}
    assert to_json_dict(from_json_dict(first)) == plain


def test_first_batch_is_planned_from_its_recorded_start(kafka: KafkaTarget) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2)
    committed_batches(bs, topic, [[(0, b"a"), (1, b"b")]])  # per partition: 0 data, 1 marker
    reader = stream_reader(bs, topic, startingOffsets="latest")
    start = reader.initialOffset()
    assert start == {topic: {"0": 2, "1": 2}}
    committed_batches(bs, topic, [[(0, b"c"), (0, b"d")]])  # p0: 2, 3 data, 4 marker
    assert reader.initialOffset() == start  # resolved once per reader
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {topic: {"0": 5, "1": 2}, ORIGIN: start}

    # A restarted query's reader resolves "latest" afresh (5); the recorded start wins.
    restarted = stream_reader(bs, topic, startingOffsets="latest")
    fresh = restarted.initialOffset()
    assert fresh == {topic: {"0": 5, "1": 2}}
    assert restarted.partitions(fresh, end) == [KafkaInputPartition(topic, 0, 2, 5)]
    assert restarted.partitions(end, end) == []  # Spark's probe on restart

    # Only the first batch's end carries the origin; no new data keeps the offset as is
    # (so Spark plans no empty batch); new data drops the origin.
    assert restarted.latestOffset(end, ReadAllAvailable()) == end
    committed_batches(bs, topic, [[(1, b"e")]])  # p1: 2 data, 3 marker
    after = restarted.latestOffset(end, ReadAllAvailable())
    assert after == {topic: {"0": 5, "1": 4}}
    assert restarted.partitions(end, after) == [KafkaInputPartition(topic, 1, 2, 4)]


def test_first_batch_origin_covers_delays_new_partitions_and_available_now(
    kafka: KafkaTarget,
) -> None:
    bs = kafka.bootstrap_servers
    prefix = f"origin-{time.time_ns()}"
    first = kafka.create_topic(partitions=1, prefix=prefix)
    committed_batches(bs, first, [[(0, b"a")]])
    pattern = {"subscribePattern": f"{prefix}-.*", "startingOffsets": "latest"}

    # A first batch delayed by minOffsetsPerTrigger still records its (empty) range.
    delayed = stream_reader(bs, None, **pattern, minOffsetsPerTrigger="100")
    start = delayed.initialOffset()
    assert delayed.latestOffset(start, ReadMaxRows(100)) == {**start, ORIGIN: start}

    # A partition discovered by the first latestOffset starts at its earliest offset, and
    # that start is recorded too.
    reader = stream_reader(bs, None, **pattern)
    start = reader.initialOffset()
    second = kafka.create_topic(partitions=1, prefix=prefix)
    committed_batches(bs, second, [[(0, b"b")]])
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {first: {"0": 2}, second: {"0": 2}, ORIGIN: {first: {"0": 2}, second: {"0": 0}}}
    assert reader.partitions(start, end) == [KafkaInputPartition(second, 0, 0, 2)]

    # AvailableNow: a target fixed before a "latest" start was resolved never ends a
    # batch before its start.
    now = stream_reader(bs, None, **pattern)
    now.prepareForTriggerAvailableNow()  # target: first 2, second 2
    committed_batches(bs, first, [[(0, b"c")]])  # first: 2 data, 3 marker
    start = now.initialOffset()
    assert start == {first: {"0": 4}, second: {"0": 2}}
    end = now.latestOffset(start, ReadAllAvailable())
    assert end == {**start, ORIGIN: start}
    assert now.partitions(start, end) == []


# --------------------------------------------------------------------------- LSO stalls


def _stall_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "last stable offset" in r.getMessage()
    ]


def test_pinned_lso_is_warned_once_per_stall(
    kafka: KafkaTarget, caplog: pytest.LogCaptureFixture
) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2)
    committed_batches(bs, topic, [[(0, b"a"), (1, b"b")]])  # per partition: 0 data, 1 marker
    holder = txn_producer(bs, tid(), **{"transaction.timeout.ms": 600_000})
    holder.begin_transaction()
    holder.produce(topic, value=b"open", partition=0)  # p0: offset 2, open
    holder.flush(10)
    committed_batches(bs, topic, [[(0, b"late")]])  # p0: 3 data, 4 marker (held back)
    assert watermarks(bs, topic, 0, "read_committed")[1] == 2
    assert watermarks(bs, topic, 0, "read_uncommitted")[1] == 5

    reader = stream_reader(bs, topic, startingOffsets="earliest", lsoStallWarnMs="300")
    start = reader.initialOffset()
    caplog.set_level(logging.WARNING, logger="pyspark_kafka_txn.reader")
    before_first_look = time.monotonic()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end[topic] == {"0": 2, "1": 2}
    assert _stall_warnings(caplog) == []  # the LSO was only seen once
    time.sleep(0.4)
    assert reader.latestOffset(end, ReadAllAvailable()) == end
    around_both_looks_s = time.monotonic() - before_first_look
    [warning] = _stall_warnings(caplog)
    assert f"Partition {topic}-0:" in warning
    assert "offset (LSO) 2 has not advanced for" in warning
    assert "high watermark is 5" in warning
    assert "lsoStallWarnMs=300" in warning
    stalled_s = float(warning.split("for ")[1].split(" s")[0])
    # The stall reported is the time between the planner's two looks at the LSO: at least
    # the threshold, at most what this test measured around both looks (%.1f rounding).
    assert 0.3 <= stalled_s <= around_both_looks_s + 0.05, (stalled_s, around_both_looks_s)
    time.sleep(0.4)
    reader.latestOffset(end, ReadAllAvailable())
    assert len(_stall_warnings(caplog)) == 1  # once per stall; partition 1 never

    # The transaction commits: the LSO moves and the stall is over.
    holder.commit_transaction(10)
    wait_lso_at_hwm(bs, topic, 2)
    later = reader.latestOffset(end, ReadAllAvailable())
    assert later == {topic: {"0": 6, "1": 2}}
    # A new open transaction is a new stall, warned about again.
    holder.begin_transaction()
    holder.produce(topic, value=b"open-again", partition=0)  # p0: 6
    holder.flush(10)
    assert reader.latestOffset(later, ReadAllAvailable()) == later
    time.sleep(0.4)
    reader.latestOffset(later, ReadAllAvailable())
    assert len(_stall_warnings(caplog)) == 2
    assert "offset (LSO) 6 has not advanced" in _stall_warnings(caplog)[1]
    holder.abort_transaction(10)


@pytest.mark.parametrize(
    "options",
    [{"kafka.isolation.level": "read_uncommitted", "lsoStallWarnMs": "1"}, {"lsoStallWarnMs": "0"}],
    ids=["read_uncommitted", "disabled"],
)
def test_no_stall_check(
    kafka: KafkaTarget,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    options: dict[str, str],
) -> None:
    """No high-watermark look-up and no warning, on a partition whose LSO is pinned; the
    same partition read with the check on (the control) is looked up and warned about."""
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=1)
    holder = txn_producer(bs, tid())
    holder.begin_transaction()
    holder.produce(topic, value=b"open", partition=0)
    holder.flush(10)
    lookups: list[object] = []
    real = OffsetClient.high_watermarks

    def counted(self: OffsetClient, tps: Sequence[TopicPartition]) -> PartitionOffsets:
        lookups.append(tps)
        return real(self, tps)

    monkeypatch.setattr(OffsetClient, "high_watermarks", counted)
    caplog.set_level(logging.WARNING, logger="pyspark_kafka_txn.reader")

    def two_triggers(reader: KafkaStreamReader) -> None:
        end = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
        time.sleep(0.1)
        reader.latestOffset(end, ReadAllAvailable())

    try:
        reader = stream_reader(bs, topic, startingOffsets="earliest", **options)
        assert reader._stalls is None
        two_triggers(reader)
        assert (lookups, _stall_warnings(caplog)) == ([], [])
        two_triggers(stream_reader(bs, topic, startingOffsets="earliest", lsoStallWarnMs="1"))
        assert lookups and len(_stall_warnings(caplog)) == 1
    finally:
        holder.abort_transaction(10)


def test_lso_stall_option_is_validated() -> None:
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    assert parse_reader_options(base, streaming=True).lso_stall_warn_ms == 60_000
    assert (
        parse_reader_options({**base, "LSOSTALLWARNMS": "5"}, streaming=True).lso_stall_warn_ms == 5
    )
    # 0 turns the check off: it is kept as 0 (not replaced by the default).
    assert (
        parse_reader_options({**base, "lsoStallWarnMs": "0"}, streaming=True).lso_stall_warn_ms == 0
    )
    for bad in ("-1", "1m", ""):
        with pytest.raises(ConfigError, match="lsoStallWarnMs"):
            parse_reader_options({**base, "lsoStallWarnMs": bad}, streaming=True)


# --------------------------------------------------------------------------- option effects


def batch_partitions(bootstrap: str, **options: str) -> list[tuple[int, int, int]]:
    """The planned ranges of a batch read, one task each (``minRecordsPerPartition=1``:
    these tests check the ranges; packing them is tests/reader/test_pack_ranges.py's)."""
    options = {"minRecordsPerPartition": "1", **options}
    source = KafkaTxnDataSource({"kafka.bootstrap.servers": bootstrap, **options})
    reader = source.reader(source.schema())
    assert isinstance(reader, KafkaBatchReader)
    parts = reader.partitions()
    assert all(isinstance(p, KafkaInputPartition) for p in parts)
    return [(p.partition, p.start, p.end) for p in parts if isinstance(p, KafkaInputPartition)]


@pytest.fixture(scope="module")
def five_per_partition(kafka: KafkaTarget) -> tuple[str, int]:
    """A 2-partition topic: per partition offsets 0-3 data, 4 commit marker.

    Returns the topic and a timestamp (ms) between the records of offsets 1 and 2.
    """
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2)
    producer = txn_producer(bs, tid())
    producer.begin_transaction()
    cut = 0
    for i in range(4):
        if i == 2:
            time.sleep(0.05)
            cut = int(time.time() * 1000)
            time.sleep(0.05)
        for p in (0, 1):
            producer.produce(topic, value=f"v{p}-{i}".encode(), partition=p)
    producer.commit_transaction(10)
    wait_lso_at_hwm(bs, topic, 2)
    return topic, cut


def test_assign_plans_only_the_assigned_partitions(
    kafka: KafkaTarget, five_per_partition: tuple[str, int]
) -> None:
    topic, _ = five_per_partition
    assigned = batch_partitions(kafka.bootstrap_servers, assign=f'{{"{topic}":[1]}}')
    assert assigned == [(1, 0, 5)]
    assert batch_partitions(kafka.bootstrap_servers, subscribe=topic) == [(0, 0, 5), (1, 0, 5)]


def test_max_records_per_partition_and_min_partitions_split_tasks(
    kafka: KafkaTarget, five_per_partition: tuple[str, int]
) -> None:
    topic, _ = five_per_partition
    bs = kafka.bootstrap_servers
    assert batch_partitions(bs, subscribe=topic, maxRecordsPerPartition="2") == [
        (0, 0, 1),
        (0, 1, 3),
        (0, 3, 5),
        (1, 0, 1),
        (1, 1, 3),
        (1, 3, 5),
    ]
    split = batch_partitions(bs, subscribe=topic, minPartitions="4")
    assert len(split) == 4
    for p in (0, 1):  # each partition's pieces still cover [0, 5) exactly
        pieces = sorted((s, e) for q, s, e in split if q == p)
        assert pieces[0][0] == 0 and pieces[-1][1] == 5
        assert all(a[1] == b[0] for a, b in itertools.pairwise(pieces))
    assert batch_partitions(bs, subscribe=topic, minPartitions="2") == [(0, 0, 5), (1, 0, 5)]


def test_timestamp_bounds(kafka: KafkaTarget, five_per_partition: tuple[str, int]) -> None:
    topic, cut = five_per_partition
    bs = kafka.bootstrap_servers
    # endingTimestamp: each partition ends at its first offset with a timestamp >= cut.
    assert batch_partitions(bs, subscribe=topic, endingTimestamp=str(cut)) == [
        (0, 0, 2),
        (1, 0, 2),
    ]
    by_partition = f'{{"{topic}":{{"0":{cut},"1":{cut + 3_600_000}}}}}'
    # A timestamp no record reaches means latest for an end bound.
    assert batch_partitions(bs, subscribe=topic, endingOffsetsByTimestamp=by_partition) == [
        (0, 0, 2),
        (1, 0, 5),
    ]
    # startingOffsetsByTimestamp resolves per partition; with strategy=latest a timestamp
    # no record reaches starts at the end (nothing to read); with the default it fails.
    assert batch_partitions(
        bs,
        subscribe=topic,
        startingOffsetsByTimestamp=by_partition,
        startingOffsetsByTimestampStrategy="latest",
    ) == [(0, 2, 5)]
    with pytest.raises(ConfigError, match="startingOffsetsByTimestamp"):
        batch_partitions(bs, subscribe=topic, startingOffsetsByTimestamp=by_partition)


@pytest.mark.parametrize("fail", [True, False], ids=["failOnDataLoss", "skip"])
def test_poll_timeout_bounds_a_range_that_cannot_finish(
    kafka: KafkaTarget, five_per_partition: tuple[str, int], fail: bool
) -> None:
    topic, _ = five_per_partition
    options = parse_reader_options(
        {
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "subscribe": topic,
            "kafkaConsumer.pollTimeoutMs": "500",
            "failOnDataLoss": str(fail).lower(),
        },
        streaming=False,
    )
    began = time.monotonic()
    beyond = KafkaInputPartition(topic, 0, 3, 9)  # the log ends at 5
    if fail:
        with pytest.raises(TimeoutError, match=r"kafkaConsumer\.pollTimeoutMs") as raised:
            list(read_range(options, beyond, group_id="g"))
        # The package's own class, still caught by ``except TimeoutError``.
        assert type(raised.value) is StallTimeoutError
        assert isinstance(raised.value, KafkaTxnError)
        assert str(raised.value) == (
            f"Cannot fetch records of {beyond.tp} beyond offset 5 (reading [3, 9)) in 500 "
            "milliseconds (kafkaConsumer.pollTimeoutMs)"
        )
    else:
        batches = list(read_range(options, beyond, group_id="g"))
        assert [v for b in batches for v in b.column("value").to_pylist()] == [b"v0-3"]
    assert 0.5 <= time.monotonic() - began < HANG_S


@pytest.mark.embedded_only("fails chosen ListOffsets requests with a chosen error code")
def test_fetch_offset_retries(kafka: KafkaTarget, five_per_partition: tuple[str, int]) -> None:
    topic, _ = five_per_partition
    bs = kafka.bootstrap_servers
    embedded = kafka.require_embedded()
    retry = {"subscribe": topic, "fetchOffset.retryIntervalMs": "300"}
    try:
        # Two failed ListOffsets rounds, three attempts allowed: success after 2 pauses.
        embedded.fail_requests("ListOffsets", "TOPIC_AUTHORIZATION_FAILED", count=2)
        began = time.monotonic()
        assert batch_partitions(bs, **retry, **{"fetchOffset.numRetries": "2"}) == [
            (0, 0, 5),
            (1, 0, 5),
        ]
        assert time.monotonic() - began >= 0.6
        # One retry is not enough for two failures.
        embedded.fail_requests("ListOffsets", "TOPIC_AUTHORIZATION_FAILED", count=2)
        with pytest.raises(
            KafkaTxnError, match=r"after 2 attempt\(s\) \(fetchOffset\.numRetries=1\)"
        ):
            batch_partitions(bs, **retry, **{"fetchOffset.numRetries": "1"})
    finally:
        embedded.clear_faults()


def test_a_refused_driver_client_is_released_when_dropped(kafka: KafkaTarget) -> None:
    """A client the cluster refused (TLS to a PLAINTEXT listener) must not linger.

    librdkafka goes on reconnecting for as long as its AdminClient lives; an error
    callback bound to its owner made a cycle that only the garbage collector broke, so a
    failed read kept knocking at the cluster (seen in CI as another test's warnings).
    """
    topic = kafka.create_topic(partitions=1)
    options = parse_reader_options(
        {
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "subscribe": topic,
            "kafka.security.protocol": "SSL",
        },
        streaming=False,
    )
    gc.disable()  # freed by reference counting alone, as soon as it is dropped
    try:
        client = OffsetClient(options)
        with pytest.raises(AuthenticationError, match="SSL handshake failed"):
            client.topic_partitions(at_start=True)
        gone = weakref.ref(client)
        del client
        assert gone() is None
    finally:
        gc.enable()


@pytest.mark.embedded_only(
    "closes a chosen ListOffsets request's connection (on Apache Kafka a node kill of the "
    "chaos harness did the same)"
)
def test_a_lost_list_offsets_answer_is_retried_never_taken_for_an_offset(
    kafka: KafkaTarget, five_per_partition: tuple[str, int]
) -> None:
    """librdkafka answers -1001 without an error when a ListOffsets request's connection
    drops (a leader killed: ``make chaos KAFKA=apache SEED=3`` ended a micro-batch at -1001
    in Spark's offset log, and every restart failed as data loss)."""
    topic, _ = five_per_partition
    bs = kafka.bootstrap_servers
    embedded = kafka.require_embedded()
    retry = {"startingOffsets": "earliest", "fetchOffset.retryIntervalMs": "100"}
    reader = stream_reader(bs, topic, **retry)
    start = reader.initialOffset()
    try:
        dropped = embedded.drop_requests("ListOffsets")
        end = reader.latestOffset(start, ReadAllAvailable())
        assert dropped.hits == 1  # the fault happened
        assert from_json_dict(end) == {TopicPartition(topic, 0): 5, TopicPartition(topic, 1): 5}
        # With no retry left, the read fails naming what is missing, never ends at -1001.
        once = stream_reader(bs, topic, **retry, **{"fetchOffset.numRetries": "0"})
        embedded.drop_requests("ListOffsets")
        lost = rf"ListOffsets gave no offset for {topic}-0: -1001, {topic}-1: -1001"
        with pytest.raises(KafkaTxnError, match=lost):
            once.latestOffset(once.initialOffset(), ReadAllAvailable())
    finally:
        embedded.clear_faults()


@pytest.mark.embedded_only("loses chosen Metadata and ListOffsets requests with their connections")
def test_leaders_not_known_after_a_lost_connection_are_waited_for_not_retried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """After a dropped connection librdkafka answers ListOffsets "No leaders found" until
    its leader look-up succeeds: that is waited for within the admin timeout (as Kafka's
    Java admin client waits), never one of the user's ``fetchOffset.numRetries`` (a CI run
    under load failed a read that way, with retries 100 ms apart)."""
    caplog.set_level(logging.INFO, logger="pyspark_kafka_txn.reader.planning")
    with CheckedKafka() as cluster:
        cluster.create_topic("led", partitions=2)
        tps = [TopicPartition("led", 0), TopicPartition("led", 1)]
        options = parse_reader_options(
            {
                "kafka.bootstrap.servers": cluster.bootstrap_servers,
                "subscribe": "led",
                "fetchOffset.numRetries": "1",  # spent by the lost ListOffsets answer
                "fetchOffset.retryIntervalMs": "10",  # Spark's default
            },
            streaming=True,
        )
        client = OffsetClient(options)
        assert client.latest(tps) == dict.fromkeys(tps, 0)  # the cluster has answered once
        dropped = cluster.drop_requests("ListOffsets")
        lookups = cluster.drop_requests("Metadata", count=3)
        assert client.latest(tps) == dict.fromkeys(tps, 0)
        assert (dropped.hits, lookups.hits) == (1, 3)  # the faults happened
        waited = [r.getMessage() for r in caplog.records if "asking again" in r.getMessage()]
        assert any("No leaders found" in m for m in waited), waited


@pytest.mark.embedded_only("answers chosen Metadata requests with LEADER_NOT_AVAILABLE")
def test_a_topic_listed_without_partitions_is_not_taken_for_deleted() -> None:
    """Kafka lists a topic whose partitions it cannot tell at this moment with a
    topic-level error (LEADER_NOT_AVAILABLE) and no partitions; read as "the topic is
    gone", a micro-batch would fail as data loss (it did, before this was waited for)."""
    with CheckedKafka() as cluster:
        cluster.create_topic("unsettled", partitions=2)
        reader = stream_reader(
            cluster.bootstrap_servers,
            "unsettled",
            startingOffsets="earliest",
            **{"fetchOffset.numRetries": "0"},
        )
        start = reader.initialOffset()
        unsettled = cluster.fail_requests("Metadata", "LEADER_NOT_AVAILABLE", count=3)
        end = reader.latestOffset(start, ReadAllAvailable())
        assert unsettled.hits == 3  # the fault happened
        tp0, tp1 = TopicPartition("unsettled", 0), TopicPartition("unsettled", 1)
        assert from_json_dict(end) == {tp0: 0, tp1: 0}


def test_group_id_and_kafka_settings_reach_the_consumer(kafka: KafkaTarget) -> None:
    topic = kafka.create_topic(partitions=1)
    partition = KafkaInputPartition(topic, 0, 0, 10)
    base = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic}

    def executor_config(**options: str) -> dict[str, str | int | float | bool]:
        reader = KafkaTxnDataSource({**base, **options}).streamReader(spark_schema(False))
        assert isinstance(reader, KafkaStreamReader)
        return _consumer_config(reader.options, partition, reader.executor_group_id)

    generated = executor_config(groupIdPrefix="my-prefix")["group.id"]
    assert isinstance(generated, str) and generated.startswith("my-prefix-")
    assert generated.endswith("-executor")
    default = executor_config()["group.id"]
    assert isinstance(default, str) and default.startswith("spark-kafka-source-")
    assert default != executor_config()["group.id"]  # one id per query
    assert executor_config(**{"kafka.group.id": "fixed"})["group.id"] == "fixed"

    config = executor_config(
        **{
            "kafka.fetch.max.bytes": "1048576",
            "kafka.receive.buffer.bytes": "65536",
            "kafka.queued.min.messages": "7",
            "kafka.client.id": "mine",
        }
    )
    assert config["fetch.max.bytes"] == "1048576"
    assert config["socket.receive.buffer.bytes"] == "65536"  # Java name translated
    assert config["queued.min.messages"] == "7"  # wins over the reader's own default
    assert config["client.id"] == "mine"
    assert config["isolation.level"] == "read_committed"
    # The driver's admin client gets connection settings, not consumer tuning.
    admin = parse_reader_options(
        {**base, "kafka.fetch.max.bytes": "1048576", "kafka.client.id": "mine"}, streaming=True
    ).admin_config()
    assert "fetch.max.bytes" not in admin and admin["client.id"] == "mine"
    # And a consumer built from it reads: librdkafka accepted every setting.
    committed_batches(kafka.bootstrap_servers, topic, [[(0, b"x")]])
    options = parse_reader_options(
        {**base, "kafka.fetch.max.bytes": "1048576", "kafka.group.id": "fixed"}, streaming=False
    )
    rows = list(read_range(options, KafkaInputPartition(topic, 0, 0, 2), group_id="g"))
    assert [v for b in rows for v in b.column("value").to_pylist()] == [b"x"]


def test_large_records_are_read_in_batches_of_bounded_bytes(
    kafka: KafkaTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A range of large records yields batches of at most ``ARROW_BATCH_BYTES`` of values
    (the worker never collects ``ARROW_BATCH_ROWS`` of them), every record once, in order."""
    topic = kafka.create_topic(partitions=1)
    values = [bytes([65 + i]) * 40_000 for i in range(12)]
    committed_batches(kafka.bootstrap_servers, topic, [[(0, v) for v in values[:7]]])
    committed_batches(kafka.bootstrap_servers, topic, [[(0, v) for v in values[7:]]])
    monkeypatch.setattr(executor, "ARROW_BATCH_BYTES", 100_000)
    options = parse_reader_options(
        {"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic},
        streaming=False,
    )
    batches = list(read_range(options, KafkaInputPartition(topic, 0, 0, 14), group_id="g"))
    assert max(b.num_rows for b in batches) <= 2  # 2 x 40,000 B fit, 3 do not
    assert [v for b in batches for v in b.column("value").to_pylist()] == values
    assert [o for b in batches for o in b.column("offset").to_pylist()] == [
        *range(7),
        *range(8, 13),
    ]


# --------------------------------------------------------------------------- commitOffsetsToGroup


def test_commit_to_a_group_with_live_members_is_a_warning_and_the_query_goes_on(
    kafka: KafkaTarget, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka refuses offsets from outside a group that has members: the reader logs it,
    names the group, and goes on planning (the offsets are for lag tools only)."""
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=1)
    committed_batches(bs, topic, [[(0, b"a"), (0, b"b")]])
    group = f"busy-{topic}"
    member = Consumer({"bootstrap.servers": bs, "group.id": group, "session.timeout.ms": 60000})
    try:
        member.subscribe([topic])
        wait_until("the consumer joins its group", lambda: member.poll(0.2) or member.assignment())
        reader = stream_reader(bs, topic, startingOffsets="earliest", commitOffsetsToGroup=group)
        caplog.set_level(logging.WARNING, logger="pyspark_kafka_txn.reader")
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadAllAvailable())
        reader.commit(end)
        assert from_json_dict(end) == {TopicPartition(topic, 0): 3}
        warnings = [
            r.getMessage()
            for r in caplog.records
            if r.levelno == logging.WARNING and r.name.startswith("pyspark_kafka_txn.reader")
        ]
        assert warnings[-1] == (
            f"committing offsets to group '{group}' was refused (UNKNOWN_MEMBER_ID): consumers "
            "are members of that group: name a group no consumer uses (commitOffsetsToGroup; "
            "the query goes on, lag tools see older offsets)"
        )
    finally:
        member.close()


def test_commit_offsets_to_group_is_refused_in_batch_reads() -> None:
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "commitOffsetsToGroup": "g"}
    assert parse_reader_options(base, streaming=True).offsets_group == "g"
    with pytest.raises(ConfigError, match="'commitOffsetsToGroup' applies to streaming"):
        parse_reader_options(base, streaming=False)


@pytest.mark.parametrize(
    ("setting", "value", "reason"),
    [
        ("no.such.property", "1", "No such configuration property"),
        ("socket.timeout.ms", "soon", "Invalid value"),
    ],
)
def test_a_setting_librdkafka_refuses_is_named_as_the_option(
    setting: str, value: str, reason: str
) -> None:
    """librdkafka refuses the configuration when the driver's client is made (before any
    connection): the error names the option as the user gave it, with librdkafka's
    reason."""
    options = parse_reader_options(
        {"kafka.bootstrap.servers": "localhost:9", "subscribe": "t", f"kafka.{setting}": value},
        streaming=False,
    )
    with pytest.raises(ConfigError, match=rf"Option 'kafka\.{setting}' .*{reason}"):
        OffsetClient(options)
