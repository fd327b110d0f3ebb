"""Option parsing and driver-side planning, without a SparkSession (fast)."""

from __future__ import annotations

import pickle
import time

import pytest
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from pyspark_kafka_txn.errors import ConfigError, DataLossError
from pyspark_kafka_txn.offsets import ORIGIN, OffsetRange, rate_limit, split_ranges
from pyspark_kafka_txn.options import (
    Assign,
    GlobalTimestamp,
    OffsetBound,
    SpecificOffsets,
    SpecificTimestamps,
    SubscribePattern,
    parse_reader_options,
)
from pyspark_kafka_txn.reader.common import KafkaInputPartition, KafkaInputPartitions
from pyspark_kafka_txn.reader.executor import read_range
from pyspark_kafka_txn.reader.stream import KafkaStreamReader
from pyspark_kafka_txn.source import KafkaTxnDataSource
from pyspark_kafka_txn.wire import TopicPartition
from tests.support.bad_options import CASES, SECRET
from tests.support.lso import wait_lso_at_hwm
from tests.support.target import KafkaTarget
from tests.support.txns import committed_batches, interleaved

BASE = {"kafka.bootstrap.servers": "localhost:9092", "subscribe": "t"}


def tp(topic: str, p: int) -> TopicPartition:
    return TopicPartition(topic, p)


@pytest.mark.parametrize("case", CASES)
def test_every_bad_option_is_named(kafka: KafkaTarget, case: str) -> None:
    options, named = CASES[case]
    topic = kafka.create_topic(partitions=1)
    given = {
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "subscribe": topic,
        **{k: v.replace("TOPIC", topic) if v else v for k, v in options.items()},
    }
    source = KafkaTxnDataSource({k: v for k, v in given.items() if v is not None})
    with pytest.raises(ConfigError) as info:
        reader = source.streamReader(source.schema())
        reader.initialOffset()
    assert named in str(info.value)
    assert SECRET not in str(info.value)


def test_defaults() -> None:
    stream = parse_reader_options(BASE, streaming=True)
    assert stream.isolation_level == "read_committed"  # the one difference from Spark
    assert stream.starting is OffsetBound.LATEST
    assert stream.ending is None
    assert stream.fail_on_data_loss is True
    assert stream.include_headers is False
    assert stream.poll_timeout_ms == 120_000
    assert stream.fetch_offset_num_retries == 3
    assert stream.fetch_offset_retry_interval_ms == 1000
    assert stream.max_trigger_delay_ms == 15 * 60 * 1000
    assert stream.group_id_prefix == "spark-kafka-source"
    batch = parse_reader_options(BASE, streaming=False)
    assert batch.starting is OffsetBound.EARLIEST
    assert batch.ending is OffsetBound.LATEST


def test_names_are_case_insensitive_and_values_parsed() -> None:
    opts = parse_reader_options(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "h:1",
            "SubscribePattern": "t-.*",
            "STARTINGOFFSETS": '{"a":{"0":-2,"1":17}}',
            "maxoffsetspertrigger": "100",
            "MinOffsetsPerTrigger": "10",
            "maxTriggerDelay": "5s",
            "minPartitions": "3",
            "maxRecordsPerPartition": "1000",
            "failOnDataLoss": "FALSE",
            "includeHeaders": "true",
            "kafkaConsumer.pollTimeoutMs": "500",
            "fetchOffset.numRetries": "0",
            "fetchOffset.retryIntervalMs": "10",
            "groupIdPrefix": "mine",
            "kafka.group.id": "fixed",
            "kafka.isolation.level": "READ_UNCOMMITTED",
            "kafka.fetch.max.bytes": "1000000",
            "kafka.receive.buffer.bytes": "65536",
            "kafka.max.poll.records": "5",
        },
        streaming=True,
    )
    assert isinstance(opts.subscription, SubscribePattern)
    assert opts.subscription.matches("t-1") and not opts.subscription.matches("xt-1")
    assert opts.starting == SpecificOffsets({tp("a", 0): -2, tp("a", 1): 17})
    assert (opts.max_offsets_per_trigger, opts.min_offsets_per_trigger) == (100, 10)
    assert opts.max_trigger_delay_ms == 5000
    assert (opts.min_partitions, opts.max_records_per_partition) == (3, 1000)
    assert opts.fail_on_data_loss is False and opts.include_headers is True
    assert opts.poll_timeout_ms == 500
    assert (opts.fetch_offset_num_retries, opts.fetch_offset_retry_interval_ms) == (0, 10)
    assert (opts.group_id_prefix, opts.group_id) == ("mine", "fixed")
    assert opts.isolation_level == "read_uncommitted"
    # Java names translated, Java-only ones dropped, reader-owned ones kept out.
    assert opts.kafka_params == {
        "fetch.max.bytes": "1000000",
        "socket.receive.buffer.bytes": "65536",
    }
    config = opts.consumer_config("g")
    assert config["group.id"] == "fixed"
    assert config["isolation.level"] == "read_uncommitted"
    assert config["enable.auto.commit"] is False


def test_assign_and_timestamps() -> None:
    opts = parse_reader_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "assign": '{"a":[0,1],"b":[2]}',
            "startingOffsetsByTimestamp": '{"a":{"0":1000,"1":2000},"b":{"2":3000}}',
            "startingOffsets": "earliest",  # lower precedence
            "endingTimestamp": "5000",
            "startingOffsetsByTimestampStrategy": "latest",
        },
        streaming=False,
    )
    assert opts.subscription == Assign((tp("a", 0), tp("a", 1), tp("b", 2)))
    assert opts.starting == SpecificTimestamps(
        {tp("a", 0): 1000, tp("a", 1): 2000, tp("b", 2): 3000}
    )
    assert opts.ending == GlobalTimestamp(5000)
    assert opts.timestamp_strategy_latest is True
    both = parse_reader_options(
        {**BASE, "startingTimestamp": "7", "startingOffsetsByTimestamp": '{"t":{"0":1}}'},
        streaming=True,
    )
    assert both.starting == GlobalTimestamp(7)  # startingTimestamp wins


@pytest.mark.parametrize(
    ("options", "streaming", "named"),
    [
        ({"startingOffsets": "latest"}, False, "startingOffsets"),
        ({"endingOffsets": "earliest"}, False, "endingOffsets"),
        ({"endingOffsets": '{"t":{"0":-2}}'}, False, "endingOffsets"),
        ({"endingTimestamp": "1"}, True, "endingTimestamp"),
        ({"endingOffsetsByTimestamp": '{"t":{"0":1}}'}, True, "endingOffsetsByTimestamp"),
        ({"startingTimestamp": "yesterday"}, True, "startingTimestamp"),
        ({"startingOffsetsByTimestamp": "[1]"}, True, "startingOffsetsByTimestamp"),
        (
            {"startingOffsetsByTimestampStrategy": "closest"},
            True,
            "startingOffsetsByTimestampStrategy",
        ),
        ({"assign": "[0]", "subscribe": None}, True, "assign"),
        ({"subscribePattern": "(", "subscribe": None}, True, "subscribePattern"),
        ({"kafkaConsumer.pollTimeoutMs": "-5"}, True, "kafkaConsumer.pollTimeoutMs"),
        ({"fetchOffset.numRetries": "x"}, True, "fetchOffset.numRetries"),
        ({"fetchOffset.retryIntervalMs": "-1"}, True, "fetchOffset.retryIntervalMs"),
        ({"maxRecordsPerPartition": "0"}, True, "maxRecordsPerPartition"),
        ({"kafka.value.deserializer": "x"}, True, "value.deserializer"),
        (
            {"kafka.ssl.truststore.location": "/x.jks", "kafka.ssl.truststore.type": "JKS"},
            True,
            "kafka.ssl.truststore.location",
        ),
    ],
)
def test_more_bad_options(options: dict[str, str | None], streaming: bool, named: str) -> None:
    given = {**BASE, **options}
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        parse_reader_options({k: v for k, v in given.items() if v is not None}, streaming=streaming)


def test_jaas_is_translated_and_never_shown() -> None:
    secret = 'p@ss "quoted"'
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="p@ss \\"quoted\\"";'
    )
    opts = parse_reader_options(
        {
            **BASE,
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": jaas,
            "kafka.ssl.truststore.location": "/ca.pem",
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.keystore.password": "kspw",
        },
        streaming=True,
    )
    assert opts.kafka_params["sasl.username"] == "alice"
    assert opts.kafka_params["sasl.password"] == secret
    assert opts.kafka_params["ssl.ca.location"] == "/ca.pem"
    assert opts.admin_config()["sasl.mechanism"] == "SCRAM-SHA-512"
    for text in (repr(opts), str(opts)):
        assert "alice" not in text and "p@ss" not in text and "kspw" not in text
        assert "SCRAM-SHA-512" in text and "bootstrap" in text
    with pytest.raises(ConfigError, match=r"kafka\.sasl\.mechanism"):
        parse_reader_options(
            {**BASE, "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.jaas.config": jaas},
            streaming=True,
        )


def test_pem_keystore_is_librdkafkas_certificate_and_key() -> None:
    """Kafka's PEM key store (key and certificate chain in one file) is what the writer
    reads; librdkafka's own ``ssl.keystore.location`` is PKCS#12, so the reader passes the
    file as its certificate and key instead (explicit librdkafka names win)."""
    pem = {"kafka.ssl.keystore.type": "PEM", "kafka.ssl.keystore.location": "/app.pem"}
    params = parse_reader_options(
        {**BASE, **pem, "kafka.ssl.keystore.password": "kspw"}, streaming=True
    ).kafka_params
    assert "ssl.keystore.location" not in params and "ssl.keystore.password" not in params
    assert params["ssl.certificate.location"] == params["ssl.key.location"] == "/app.pem"
    assert params["ssl.key.password"] == "kspw"
    explicit = {
        "kafka.ssl.certificate.location": "/cert.pem",
        "kafka.ssl.key.password": "kpw",
        "kafka.ssl.keystore.password": "kspw",
    }
    for options in ({**pem, **explicit}, {**explicit, **pem}):
        params = parse_reader_options({**BASE, **options}, streaming=True).kafka_params
        assert params["ssl.certificate.location"] == "/cert.pem"
        assert params["ssl.key.location"] == "/app.pem"
        assert params["ssl.key.password"] == "kpw"


def test_rate_limit_is_proportional_and_never_starves() -> None:
    a, b, c = tp("t", 0), tp("t", 1), tp("t", 2)
    start = {a: 0, b: 0, c: 10}
    assert rate_limit(10, start, {a: 100, b: 1, c: 10}) == {a: 9, b: 1, c: 10}
    assert rate_limit(1000, start, {a: 100, b: 1, c: 10}) == {a: 100, b: 1, c: 10}
    assert rate_limit(4, {a: 0, b: 0}, {a: 7, b: 7}) == {a: 2, b: 2}


def test_split_ranges_like_spark() -> None:
    a, b = tp("t", 0), tp("t", 1)
    ranges = [OffsetRange(a, 0, 100), OffsetRange(b, 0, 10), OffsetRange(tp("t", 2), 5, 5)]
    assert split_ranges(ranges, min_partitions=None, max_records_per_partition=None) == ranges[:2]
    by_max = split_ranges(ranges, min_partitions=None, max_records_per_partition=30)
    assert [(r.tp.partition, r.start, r.end) for r in by_max] == [
        (0, 0, 25),
        (0, 25, 50),
        (0, 50, 75),
        (0, 75, 100),
        (1, 0, 10),
    ]
    by_min = split_ranges(ranges, min_partitions=4, max_records_per_partition=None)
    assert sum(r.size for r in by_min) == 110 and len(by_min) >= 4
    assert [(r.start, r.end) for r in by_min if r.tp == b] == [(0, 10)]  # small range unsplit


def test_stream_reader_admission_and_pickling(kafka: KafkaTarget) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2)
    committed_batches(bs, topic, [[(i % 2, b"x") for i in range(8)]])  # 0-3 data, 4 marker
    options = {"kafka.bootstrap.servers": bs, "subscribe": topic, "startingOffsets": "earliest"}
    source = KafkaTxnDataSource({**options, "maxOffsetsPerTrigger": "4"})
    reader = source.streamReader(source.schema())
    assert isinstance(reader, KafkaStreamReader)
    assert reader.getDefaultReadLimit() == ReadMaxRows(4)
    start = reader.initialOffset()
    assert start == {topic: {"0": 0, "1": 0}}
    # The first batch's end also records its start (ORIGIN).
    assert reader.latestOffset(start, ReadMaxRows(4)) == {topic: {"0": 2, "1": 2}, ORIGIN: start}
    assert reader.reportLatestOffset() == {topic: {"0": 5, "1": 5}}
    # ReadAllAvailable (e.g. Trigger.Once) ignores maxOffsetsPerTrigger.
    assert reader.latestOffset(start, ReadAllAvailable()) == {
        topic: {"0": 5, "1": 5},
        ORIGIN: start,
    }
    parts = reader.partitions(start, {topic: {"0": 5, "1": 5}})
    # A small micro-batch is one task reading both ranges (minRecordsPerPartition's default).
    ranges = (KafkaInputPartition(topic, 0, 0, 5), KafkaInputPartition(topic, 1, 0, 5))
    assert parts == [KafkaInputPartitions(ranges)]
    clone = pickle.loads(pickle.dumps(reader))
    assert clone._client is None and clone.options == reader.options
    rows = sum(b.num_rows for p in parts for b in clone.read(p))
    assert rows == 8

    # minOffsetsPerTrigger: the batch waits for enough offsets until maxTriggerDelay.
    source = KafkaTxnDataSource({**options, "minOffsetsPerTrigger": "20", "maxTriggerDelay": "1s"})
    reader = source.streamReader(source.schema())
    assert reader.getDefaultReadLimit() == ReadMinRows(20)
    start = reader.initialOffset()
    assert reader.latestOffset(start, ReadMinRows(20)) == {  # first
        topic: {"0": 5, "1": 5},
        ORIGIN: start,
    }
    later = {topic: {"0": 5, "1": 5}}
    committed_batches(bs, topic, [[(0, b"y")]])
    assert reader.latestOffset(later, ReadMinRows(20)) == later  # 2 new offsets < 20
    time.sleep(1.1)
    assert reader.latestOffset(later, ReadMinRows(20)) == {topic: {"0": 7, "1": 5}}


def test_starting_by_timestamp(kafka: KafkaTarget) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=1)
    committed_batches(bs, topic, [[(0, b"old")]])
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    committed_batches(bs, topic, [[(0, b"new")]])
    source = KafkaTxnDataSource(
        {"kafka.bootstrap.servers": bs, "subscribe": topic, "startingTimestamp": str(cut)}
    )
    reader = source.streamReader(source.schema())
    assert reader.initialOffset() == {topic: {"0": 2}}  # 0 old, 1 marker, 2 new
    future = str(cut + 3_600_000)
    source = KafkaTxnDataSource(
        {"kafka.bootstrap.servers": bs, "subscribe": topic, "startingTimestamp": future}
    )
    with pytest.raises(ConfigError, match="startingTimestamp"):
        source.streamReader(source.schema()).initialOffset()
    source = KafkaTxnDataSource(
        {
            "kafka.bootstrap.servers": bs,
            "subscribe": topic,
            "startingOffsetsByTimestamp": f'{{"{topic}":{{"0":{future}}}}}',
            "startingOffsetsByTimestampStrategy": "latest",
        }
    )
    assert source.streamReader(source.schema()).initialOffset() == {topic: {"0": 4}}


@pytest.mark.parametrize("fail", [True, False], ids=["failOnDataLoss", "skip"])
def test_deleted_offsets_are_data_loss_but_transaction_gaps_are_not(
    kafka: KafkaTarget, fail: bool
) -> None:
    bs = kafka.bootstrap_servers
    layout = interleaved(bs, kafka.create_topic(partitions=2))
    options = parse_reader_options(
        {
            "kafka.bootstrap.servers": bs,
            "subscribe": layout.topic,
            "failOnDataLoss": str(fail).lower(),
            "kafkaConsumer.pollTimeoutMs": "10000",
        },
        streaming=True,
    )
    # Gaps (markers, aborted records) are never data loss, whatever failOnDataLoss says.
    gaps = list(read_range(options, KafkaInputPartition(layout.topic, 0, 1, 6), group_id="g"))
    assert [bytes(v) for b in gaps for v in b.column("value").to_pylist()] == [b"c1-2"]
    # Deleting records below offset 3 makes [1, 6) start below the log start offset.
    admin = AdminClient({"bootstrap.servers": bs})
    futures = admin.delete_records([CkTopicPartition(layout.topic, 0, 3)])
    for future in futures.values():
        future.result(10)
    partition = KafkaInputPartition(layout.topic, 0, 1, 6)
    if fail:
        with pytest.raises(DataLossError, match=f"{layout.topic}-0"):
            list(read_range(options, partition, group_id="g"))
    else:
        assert list(read_range(options, partition, group_id="g")) == []  # 3-5: aborted
    layout.open_producer.abort_transaction(10)


@pytest.mark.parametrize("fail", [True, False], ids=["failOnDataLoss", "skip"])
def test_new_topics_start_at_earliest_and_deleted_ones_are_data_loss(
    kafka: KafkaTarget, fail: bool
) -> None:
    bs = kafka.bootstrap_servers
    prefix = f"disc{int(fail)}-{time.time_ns()}"
    first = kafka.create_topic(partitions=1, prefix=prefix)
    committed_batches(bs, first, [[(0, b"a")]])
    wait_lso_at_hwm(bs, first, 1)  # the commit returns before the markers are written
    source = KafkaTxnDataSource(
        {
            "kafka.bootstrap.servers": bs,
            "subscribePattern": f"{prefix}-.*",
            "failOnDataLoss": str(fail).lower(),
        }
    )
    reader = source.streamReader(source.schema())
    start = reader.initialOffset()  # latest
    assert start == {first: {"0": 2}}
    second = kafka.create_topic(partitions=2, prefix=prefix)
    committed_batches(bs, second, [[(0, b"b"), (1, b"c")]])
    wait_lso_at_hwm(bs, second, 2)
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {
        first: {"0": 2},
        second: {"0": 2, "1": 2},
        ORIGIN: {first: {"0": 2}, second: {"0": 0, "1": 0}},
    }
    # The new topic's partitions are read from the beginning.
    parts = reader.partitions(start, end)
    ranges = (KafkaInputPartition(second, 0, 0, 2), KafkaInputPartition(second, 1, 0, 2))
    assert parts == [KafkaInputPartitions(ranges)]  # one task: a small micro-batch
    kafka.delete_topic(first)
    if fail:
        with pytest.raises(DataLossError, match=f"{first}-0"):
            reader.latestOffset(end, ReadAllAvailable())
    else:
        assert reader.latestOffset(end, ReadAllAvailable()) == {second: {"0": 2, "1": 2}}
