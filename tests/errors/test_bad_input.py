"""Bad input gets a clear error, in bounded time, and leaves nothing visible (issue 10).

Every case below is a test asserting that the error names the culprit (the option as
written, the column, the topic, the topic-partition, the record's partition) and never a
secret, and that it arrives: the call raises, or the query terminates, before a hang
detector of :data:`HANG_S` (no wall-clock assertion). For a writer case, the sink is then
read by an independent read_committed librdkafka consumer, which must see nothing, and no
open transaction may pin its Last Stable Offset (:func:`assert_nothing_open`).

Most cases are checked below Spark, through the very code Spark runs: the data source's
``streamReader()`` and ``initialOffset()`` (driver, reader), its ``streamWriter()`` (driver,
writer: options, input columns, start checks against the cluster) and the task's
``write_task()`` (executor, writer). One case per place a failure can arise also runs
through a real Spark query (``test_*_query_*`` below); ``test_bad_options.py`` does the same
for the reader's other option checks and ``test_writer.py`` for the input columns.

=== ======================================================= ================================
 #  bad input                                               the error names
=== ======================================================= ================================
    **Reader, at the query start** (``READER_CASES``)
 1  misspelt option ``subscibe``                            ``did you mean 'subscribe'?``
 2  misspelt option ``startingOffset``                      ``did you mean 'startingOffsets'?``
 3  ``bootstrap.servers`` without ``kafka.``                ``did you mean 'kafka.bootstrap…``
 4  invalid offsets JSON in ``startingOffsets``             ``startingOffsets``
 5  both ``subscribe`` and ``assign``                       ``assign, subscribe``
 6  no bootstrap servers                                    ``kafka.bootstrap.servers``
 7  unreachable bootstrap servers                           the servers, "Connection refused"
 8  ``subscribe`` to a topic that does not exist            the topic
 9  ``assign`` a partition that does not exist              the topic-partition
10  wrong SASL password                                     the servers, "Authentication fail…
11  TLS to a plaintext port                                 the servers, "SSL handshake failed"
12  misspelt ``kafka.bootstrap.server``                     both spellings
13  ``sasl.jaas.config`` without ``kafka.`` (a secret)      ``did you mean 'kafka.sasl.jaas…``
    **Writer, at the query start** (``WRITER_CASES``)
14  misspelt option ``topc``                                ``did you mean 'topic'?``
15  misspelt option ``deliveryGuarante``                    ``did you mean 'deliveryGuarantee'?``
16  misspelt ``kafka.linger.m``                             ``did you mean 'kafka.linger.ms'?``
17  no bootstrap servers                                    ``kafka.bootstrap.servers``
18  invalid ``deliveryGuarantee``                           ``deliveryGuarantee``
19  ``kafka.acks=1`` (exactly once needs ``all``)           ``kafka.acks``
20  ``kafka.enable.idempotence=false``                      ``kafka.enable.idempotence``
21  ``kafka.transactional.id`` (the writer derives them)    ``kafka.transactional.id``
22  ``kafka.max.in.flight.requests.per.connection=6``       that option
23  transactional id prefix too long                        ``transactionalIdPrefix``
24  transaction timeout above the broker's maximum          both settings
25  unreachable bootstrap servers                           the servers
26  wrong SASL password                                     the servers, "Authentication fail…
27  TLS to a plaintext port                                 the servers, "TLS handshake"
28  ``topic`` option: the topic does not exist (no          the topic
    auto-creation)
    **Writer input columns, at the query start** (``COLUMN_CASES``, then one test)
29  no ``value`` column                                     ``value``
30  ``value`` of a wrong type (int)                         ``value``, the type
31  ``key`` of a wrong type (int)                           ``key``, the type
32  ``topic`` of a wrong type (int)                         ``topic``, the type
33  ``partition`` of a wrong type (string)                  ``partition``, the type
34  ``headers`` of a wrong type (array<string>)             ``headers``, the type
35  no ``topic`` column and no ``topic`` option             ``topic``
    **Writer rows, in the task** (``ROW_CASES``; earlier rows of the task were sent)
36  null topic in a row (no ``topic`` option)               ``topic`` (the column)
37  negative partition in a row                             the partition, the topic
38  partition beyond the topic's partitions                 the partition, the topic
39  record over the topic's ``max.message.bytes``           the topic-partition, the limit
40  record over ``kafka.max.request.size``                  the topic-partition, the limit
41  ``topic`` column names a topic that does not exist      the topic
=== ======================================================= ================================
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, TopicPartition
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from pyspark_kafka_txn.embedded import EmbeddedKafka, ListenerSecurity
from pyspark_kafka_txn.errors import (
    AuthenticationError,
    BrokerError,
    ConfigError,
    KafkaConnectionError,
    KafkaTxnError,
    RecordTooLargeError,
)
from pyspark_kafka_txn.source import KafkaTxnDataSource
from pyspark_kafka_txn.writer.sink import KafkaStreamWriter
from tests.support.clients import consume_all, consume_messages, free_port
from tests.support.clusters import CheckedKafka
from tests.support.lso import assert_nothing_open
from tests.support.readback import read_records
from tests.support.target import KafkaTarget
from tests.support.txns import open_transactions
from tests.support.writer_kit import held_until, wait_until
from tests.support.writer_options import fresh_prefix

# In the Spark legs (tests/README.md), though not every test uses the session: its tests without a
# session start the reader and writer as Spark does.
pytestmark = pytest.mark.spark

#: A hang detector for every case (not a timing assertion).
HANG_S = 120.0
#: Part of every password the cases give; it must never appear in an error.
SECRET = "b4d-1nput-s3cret"
USER, PASSWORD = "alice", f"{SECRET}-right"
SINK_PARTITIONS = 2


def _jaas(password: str) -> str:
    return (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{USER}" password="{password}";'
    )


WRONG_SASL = {
    "kafka.security.protocol": "SASL_PLAINTEXT",
    "kafka.sasl.mechanism": "PLAIN",
    "kafka.sasl.jaas.config": _jaas(f"{SECRET}-wrong"),
}


@pytest.fixture(scope="module")
def sasl_kafka() -> Iterator[EmbeddedKafka]:
    security = ListenerSecurity(protocol="SASL_PLAINTEXT", users={USER: PASSWORD})
    with CheckedKafka(security=security) as cluster:
        yield cluster


@dataclass(frozen=True)
class Where:
    """The bootstrap servers of each kind of cluster a case talks to."""

    plain: str
    sasl: str
    closed: str

    def servers(self, cluster: str) -> str:
        return {"plain": self.plain, "sasl": self.sasl, "closed": self.closed}[cluster]


@pytest.fixture
def where(kafka: KafkaTarget, sasl_kafka: EmbeddedKafka) -> Where:
    return Where(kafka.bootstrap_servers, sasl_kafka.bootstrap_servers, f"127.0.0.1:{free_port()}")


def error_of(call: Callable[[], object]) -> BaseException:
    """What ``call`` raised; fails when it returned or hung for :data:`HANG_S`."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="bad-input")
    future = pool.submit(call)
    try:
        result = future.result(timeout=HANG_S)
    except FutureTimeout:
        pytest.fail(f"no error within {HANG_S:g} s (hung)")
    except Exception as exc:  # noqa: BLE001 - the error under test
        return exc
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    pytest.fail(f"no error: returned {result!r}")


def assert_names(error: BaseException, culprit: tuple[str, ...], kind: type[BaseException]) -> None:
    """``error`` is a ``kind`` naming every string of ``culprit`` and no secret."""
    message = str(error)
    assert isinstance(error, kind), f"{type(error).__name__}: {message}"
    for part in culprit:
        assert part in message, f"{part!r} not in: {message}"
    assert SECRET not in message


@dataclass(frozen=True)
class Case:
    """One bad input: options on top of a valid base, what the error must name.

    ``TOPIC`` in a value or a culprit stands for the case's topic, ``SERVERS`` for the
    bootstrap servers; ``None`` removes a base option.
    """

    id: str
    options: dict[str, str | None]
    culprit: tuple[str, ...]
    error: type[BaseException] = ConfigError
    cluster: str = "plain"

    def given(self, base: dict[str, str], topic: str, servers: str) -> dict[str, str]:
        merged = {"kafka.bootstrap.servers": "SERVERS", **base, **self.options}
        return {
            k: v.replace("TOPIC", topic).replace("SERVERS", servers)
            for k, v in merged.items()
            if v is not None
        }

    def named(self, topic: str, servers: str) -> tuple[str, ...]:
        return tuple(c.replace("TOPIC", topic).replace("SERVERS", servers) for c in self.culprit)


# --------------------------------------------------------------------------- reader

READER_CASES = [
    Case("misspelt", {"subscribe": None, "subscibe": "TOPIC"}, ("did you mean 'subscribe'?",)),
    Case(
        "misspelt-offsets",
        {"startingOffset": "earliest"},
        ("'startingOffset'", "did you mean 'startingOffsets'?"),
    ),
    Case(
        "no-prefix",
        {"kafka.bootstrap.servers": None, "bootstrap.servers": "SERVERS"},
        ("'bootstrap.servers'", "did you mean 'kafka.bootstrap.servers'?"),
    ),
    Case("offsets-json", {"startingOffsets": '{"TOPIC":{"0":1'}, ("startingOffsets",)),
    Case("subscribe-and-assign", {"assign": '{"TOPIC":[0]}'}, ("assign, subscribe",)),
    Case("no-bootstrap", {"kafka.bootstrap.servers": None}, ("kafka.bootstrap.servers",)),
    Case(
        "unreachable",
        {},
        ("SERVERS", "kafka.bootstrap.servers", "Connection refused"),
        KafkaTxnError,
        "closed",
    ),
    Case("missing-topic", {"subscribe": "TOPIC-missing"}, ("subscribe", "'TOPIC-missing'")),
    Case(
        "missing-partition",
        {"subscribe": None, "assign": '{"TOPIC":[0,5]}'},
        ("assign", "TOPIC-5"),
    ),
    Case(
        "wrong-password",
        WRONG_SASL,
        ("SERVERS", "Authentication failed"),
        AuthenticationError,
        "sasl",
    ),
    Case(
        "tls-to-plaintext",
        {"kafka.security.protocol": "SSL"},
        ("SERVERS", "SSL handshake failed"),
        AuthenticationError,
    ),
    Case(
        "misspelt-bootstrap",
        {"kafka.bootstrap.servers": None, "kafka.bootstrap.server": "SERVERS"},
        ("kafka.bootstrap.servers", "'kafka.bootstrap.server' a misspelling"),
    ),
    Case(
        "no-prefix-secret",
        {"sasl.jaas.config": WRONG_SASL["kafka.sasl.jaas.config"]},
        ("'sasl.jaas.config'", "did you mean 'kafka.sasl.jaas.config'?"),
    ),
]


def _start_reader(options: dict[str, str]) -> None:
    """What Spark does on the driver when a ``readStream`` query starts."""
    source = KafkaTxnDataSource(options)
    reader = source.streamReader(source.schema())
    try:
        reader.initialOffset()
    finally:
        reader.stop()


@pytest.mark.parametrize("case", READER_CASES, ids=[c.id for c in READER_CASES])
def test_reader_start(kafka: KafkaTarget, where: Where, case: Case) -> None:
    topic = kafka.create_topic(partitions=2)
    servers = where.servers(case.cluster)
    base = {"subscribe": topic, "startingOffsets": "earliest"}
    error = error_of(lambda: _start_reader(case.given(base, topic, servers)))
    assert_names(error, case.named(topic, servers), case.error)


# --------------------------------------------------------------------------- writer

WRITER_CASES = [
    Case("misspelt", {"topic": None, "topc": "TOPIC"}, ("did you mean 'topic'?",)),
    Case(
        "misspelt-guarantee",
        {"deliveryGuarante": "at_least_once"},
        ("'deliveryGuarante'", "did you mean 'deliveryGuarantee'?"),
    ),
    Case("misspelt-kafka", {"kafka.linger.m": "5"}, ("did you mean 'kafka.linger.ms'?",)),
    Case("no-bootstrap", {"kafka.bootstrap.servers": None}, ("kafka.bootstrap.servers",)),
    Case("delivery-guarantee", {"deliveryGuarantee": "exactly_twice"}, ("deliveryGuarantee",)),
    Case("acks", {"kafka.acks": "1"}, ("kafka.acks", "all")),
    Case("idempotence", {"kafka.enable.idempotence": "false"}, ("kafka.enable.idempotence",)),
    Case("transactional-id", {"kafka.transactional.id": "mine"}, ("kafka.transactional.id",)),
    Case(
        "in-flight",
        {"kafka.max.in.flight.requests.per.connection": "6"},
        ("kafka.max.in.flight.requests.per.connection", "6"),
    ),
    Case("prefix-too-long", {"transactionalIdPrefix": "p" * 40_000}, ("transactionalIdPrefix",)),
    Case(
        "timeout-above-max",
        {"kafka.transaction.timeout.ms": "3600000"},
        ("kafka.transaction.timeout.ms", "transaction.max.timeout.ms"),
    ),
    Case(
        "unreachable",
        {"kafka.max.block.ms": "1500"},
        ("SERVERS", "kafka.bootstrap.servers", "Connection refused"),
        KafkaConnectionError,
        "closed",
    ),
    Case(
        "wrong-password",
        WRONG_SASL,
        ("SERVERS", "Authentication failed"),
        AuthenticationError,
        "sasl",
    ),
    Case(
        "tls-to-plaintext",
        {"kafka.security.protocol": "SSL"},
        ("SERVERS", "TLS handshake", "security.protocol"),
        AuthenticationError,
    ),
    Case("missing-topic", {"topic": "TOPIC-missing"}, ("'TOPIC-missing'", "option 'topic'")),
]

VALUE = StructField("value", BinaryType())


def _start_writer(options: dict[str, str], schema: StructType) -> KafkaStreamWriter:
    """What Spark does on the driver when a ``writeStream`` query starts."""
    writer = KafkaTxnDataSource(options).streamWriter(schema, False)
    assert isinstance(writer, KafkaStreamWriter)
    return writer


def _untouched(servers: str, topic: str, *, sasl: bool = False) -> None:
    """A read_committed consumer sees nothing of ``topic``; no open transaction pins it."""
    if not sasl:
        assert consume_all(servers, topic, SINK_PARTITIONS) == []
        assert_nothing_open(servers, topic, SINK_PARTITIONS)
        return
    extra = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": USER,
        "sasl.password": PASSWORD,
    }
    assert consume_messages(servers, topic, SINK_PARTITIONS, **extra) == []
    marks: dict[str, list[tuple[int, int]]] = {}
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = Consumer(
            {**extra, "bootstrap.servers": servers, "group.id": "wm", "isolation.level": isolation}
        )
        try:
            marks[isolation] = [
                consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
                for p in range(SINK_PARTITIONS)
            ]
        finally:
            consumer.close()
    assert marks["read_committed"] == marks["read_uncommitted"]


def _sink(kafka: KafkaTarget, sasl_kafka: EmbeddedKafka, cluster: str, **config: str) -> str:
    if cluster == "sasl":
        name = f"sink-{uuid.uuid4().hex[:10]}"
        sasl_kafka.create_topic(name, SINK_PARTITIONS, config or None)
        return name
    return kafka.create_topic(partitions=SINK_PARTITIONS, prefix="sink", **config)


@pytest.mark.parametrize("case", WRITER_CASES, ids=[c.id for c in WRITER_CASES])
def test_writer_start(
    kafka: KafkaTarget, sasl_kafka: EmbeddedKafka, where: Where, case: Case
) -> None:
    sink = _sink(kafka, sasl_kafka, case.cluster)
    servers = where.servers(case.cluster)
    options = case.given({"topic": sink}, sink, servers)
    error = error_of(lambda: _start_writer(options, StructType([VALUE])))
    assert_names(error, case.named(sink, servers), case.error)
    if case.cluster == "sasl":
        _untouched(where.sasl, sink, sasl=True)
    else:
        _untouched(where.plain, sink)


COLUMN_CASES = [
    ("no-value", [StructField("key", StringType())], ("'value'",)),
    ("value-int", [StructField("value", IntegerType())], ("value attribute", "int")),
    ("key-int", [VALUE, StructField("key", IntegerType())], ("key attribute", "int")),
    ("topic-int", [VALUE, StructField("topic", IntegerType())], ("topic attribute", "int")),
    (
        "partition-string",
        [VALUE, StructField("partition", StringType())],
        ("partition attribute", "string"),
    ),
    (
        "headers-array-of-strings",
        [VALUE, StructField("headers", ArrayType(StringType()))],
        ("headers attribute", "array<string>"),
    ),
]


@pytest.mark.parametrize(
    ("fields", "culprit"), [c[1:] for c in COLUMN_CASES], ids=[c[0] for c in COLUMN_CASES]
)
def test_writer_columns(
    kafka: KafkaTarget, fields: list[StructField], culprit: tuple[str, ...]
) -> None:
    sink = kafka.create_topic(partitions=SINK_PARTITIONS, prefix="sink")
    options = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "topic": sink}
    error = error_of(lambda: _start_writer(options, StructType(fields)))
    assert_names(error, culprit, ConfigError)
    _untouched(kafka.bootstrap_servers, sink)


def test_writer_without_topic(kafka: KafkaTarget) -> None:
    """No ``topic`` column and no ``topic`` option."""
    sink = kafka.create_topic(partitions=SINK_PARTITIONS, prefix="sink")
    options = {"kafka.bootstrap.servers": kafka.bootstrap_servers}
    error = error_of(lambda: _start_writer(options, StructType([VALUE])))
    assert_names(error, ("topic option required", "'topic'"), ConfigError)
    _untouched(kafka.bootstrap_servers, sink)


# --------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class RowCase:
    """A task whose first Arrow batch is fine (sent) and whose second one is bad."""

    id: str
    bad: Callable[[str], pa.RecordBatch]
    culprit: tuple[str, ...]
    error: type[BaseException]
    options: dict[str, str] = field(default_factory=dict)
    topic_option: bool = True
    sink_config: dict[str, str] = field(default_factory=dict)


def _rows(values: list[bytes], **columns: pa.Array) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"value": pa.array(values, pa.binary()), **columns})


ROW_CASES = [
    RowCase(
        "null-topic",
        lambda sink: _rows([b"x"], topic=pa.array([None], pa.string())),
        ("Null topic", "'topic'"),
        ConfigError,
        topic_option=False,
    ),
    RowCase(
        "negative-partition",
        lambda sink: _rows([b"x"], partition=pa.array([-1], pa.int32())),
        ("partition -1", "'TOPIC'"),
        ConfigError,
    ),
    RowCase(
        "partition-out-of-range",
        lambda sink: _rows([b"x"], partition=pa.array([7], pa.int32())),
        ("partition 7", "'TOPIC'", f"{SINK_PARTITIONS} partitions"),
        ConfigError,
    ),
    RowCase(
        "over-max-message-bytes",
        lambda sink: _rows([b"x" * 50_000], partition=pa.array([0], pa.int32())),
        ("TOPIC-0", "max.message.bytes"),
        BrokerError,
        sink_config={"max.message.bytes": "20000"},
    ),
    RowCase(
        "over-max-request-size",
        lambda sink: _rows([b"x" * 50_000], partition=pa.array([0], pa.int32())),
        ("TOPIC-0", "max.request.size", "20000"),
        RecordTooLargeError,
        options={"kafka.max.request.size": "20000"},
    ),
    RowCase(
        "missing-topic",
        lambda sink: _rows([b"x"], topic=pa.array([f"{sink}-missing"])),
        ("'TOPIC-missing'",),
        BrokerError,
        options={"kafka.max.block.ms": "1500"},
        topic_option=False,
    ),
]


def _good(sink: str, topic_option: bool) -> pa.RecordBatch:
    rows = [f"good-{i}".encode() for i in range(6)]
    return _rows(rows) if topic_option else _rows(rows, topic=pa.array([sink] * len(rows)))


@pytest.mark.parametrize("case", ROW_CASES, ids=[c.id for c in ROW_CASES])
def test_writer_task(kafka: KafkaTarget, case: RowCase) -> None:
    from pyspark_kafka_txn.writer.task import TaskIdentity, write_task

    bs = kafka.bootstrap_servers
    sink = kafka.create_topic(partitions=SINK_PARTITIONS, prefix="sink", **case.sink_config)
    options = {"kafka.bootstrap.servers": bs, **case.options}
    if case.topic_option:
        options["topic"] = sink
    batches = [_good(sink, case.topic_option), case.bad(sink)]
    schema = StructType([_spark_field(f) for f in batches[1].schema])
    writer = _start_writer(options, schema)
    who = TaskIdentity(str(uuid.uuid4()), 0, 0, 0)

    def write() -> Any:
        return write_task(writer.options, who, iter(batches), writer.timeout_ms)

    error = error_of(write)
    assert_names(error, tuple(c.replace("TOPIC", sink) for c in case.culprit), case.error)
    _untouched(bs, sink)


def _spark_field(f: pa.Field) -> StructField:
    kinds = {pa.binary(): BinaryType(), pa.string(): StringType(), pa.int32(): IntegerType()}
    return StructField(f.name, kinds[f.type])


# --------------------------------------------------------------------------- through Spark


def _ended_with(start: Callable[[], StreamingQuery]) -> str:
    """The error of a query that fails at its start (raised by ``start()`` or ended with)."""
    try:
        query = start()
    except PySparkException as exc:  # Spark raises some start failures at once
        return str(exc)
    try:
        ended = query.awaitTermination(HANG_S)
    except PySparkException as exc:  # how awaitTermination reports the query's error
        return str(exc)
    finally:
        query.stop()
    assert ended, f"the query did not end within {HANG_S:g} s"
    pytest.fail("the query ended without an error")


@pytest.mark.parametrize(
    ("options", "culprit"),
    [
        ({"subscibe": "TOPIC"}, "did you mean 'subscribe'?"),
        ({"subscribe": "TOPIC-missing"}, "'TOPIC-missing' do not exist"),
    ],
    ids=["misspelt", "missing-topic"],
)
def test_reader_query_fails_at_start(
    spark: SparkSession, kafka: KafkaTarget, options: dict[str, str], culprit: str
) -> None:
    topic = kafka.create_topic(partitions=1)
    reader = spark.readStream.format("kafka_txn").option(
        "kafka.bootstrap.servers", kafka.bootstrap_servers
    )
    for key, value in options.items():
        reader = reader.option(key, value.replace("TOPIC", topic))
    message = _ended_with(lambda: reader.load().writeStream.format("noop").start())
    assert culprit.replace("TOPIC", topic) in message, message


@pytest.mark.parametrize(
    ("options", "culprit"),
    [
        ({"topc": "TOPIC"}, "did you mean 'topic'?"),
        ({"topic": "TOPIC-missing"}, "'TOPIC-missing' of option 'topic' does not exist"),
    ],
    ids=["misspelt", "missing-topic"],
)
def test_writer_query_fails_at_start(
    spark: SparkSession,
    kafka: KafkaTarget,
    tmp_path: Path,
    options: dict[str, str],
    culprit: str,
) -> None:
    sink = kafka.create_topic(partitions=SINK_PARTITIONS, prefix="sink")
    rows = spark.readStream.format("rate").option("rowsPerSecond", "5").load()
    writer = (
        rows.select(F.col("value").cast("string").alias("value"))
        .writeStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
    )
    for key, value in options.items():
        writer = writer.option(key, value.replace("TOPIC", sink))
    message = _ended_with(writer.start)
    assert culprit.replace("TOPIC", sink) in message, message
    _untouched(kafka.bootstrap_servers, sink)


def _write_with_bad_row(spark: SparkSession, kafka: KafkaTarget, bad_id: int, gate: Path) -> str:
    """Write ids 0-19 in two Spark partitions (0-9, 10-19), each id to Kafka partition
    id % 2 of a new topic except ``bad_id``, which asks for partition -1: the job must
    fail naming it. Returns the topic.

    Task 1's rows wait (``gate``) until task 0 has prepared its transaction: on a loaded
    machine task 0 could otherwise still be writing when task 1's failures abort the job,
    prepare after the driver's ``abort()`` and keep its transaction open (a task Spark gave
    up on is not waited for; see the known limits in docs/design.md)."""
    bs = kafka.bootstrap_servers
    sink = kafka.create_topic(partitions=SINK_PARTITIONS, prefix="sink")
    prefix = fresh_prefix("bad")
    df = spark.range(0, 20, 1, 2).select(
        held_until(gate, F.col("id").cast("string").cast("binary")).alias("value"),
        F.when(F.col("id") == bad_id, -1).otherwise(F.col("id") % 2).cast("int").alias("partition"),
    )
    write = (
        df.write.format("kafka_txn")
        .option("kafka.bootstrap.servers", bs)
        .option("topic", sink)
        .option("transactionalIdPrefix", prefix)
        .mode("append")
    )

    def open_gate_once_task_0_prepared() -> None:
        try:
            wait_until(
                "task 0 prepared",
                lambda: any(
                    t.transactional_id.endswith("-0")
                    and any(topic == "__consumer_offsets" for topic, _ in t.partitions)
                    for t in open_transactions(bs, prefix).values()
                ),
            )
        finally:
            gate.touch()

    opener = threading.Thread(target=open_gate_once_task_0_prepared, daemon=True)
    opener.start()
    # On the test's own thread (Spark resolves the data source there); pytest-timeout is
    # the hang detector of this call.
    try:
        with pytest.raises(PySparkException) as info:
            write.save()
    finally:
        gate.touch()
        opener.join(HANG_S)
    assert "partition -1" in str(info.value) and f"'{sink}'" in str(info.value), str(info.value)
    return sink


def test_bad_row_fails_the_job_and_leaves_nothing_visible(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    """Task 0 prepares its rows; task 1 meets a negative partition: the job fails and the
    driver aborts task 0's transaction."""
    sink = _write_with_bad_row(spark, kafka, 15, tmp_path / "gate")
    _untouched(kafka.bootstrap_servers, sink)


def test_bad_row_after_written_rows_aborts_them(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    """Task 1 writes a first Arrow batch of 5 rows, then meets a negative partition in its
    second: the writer itself fails and aborts its transaction. Its first rows reached the
    log (the fault happened after a write) and never become visible."""
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, "5")
    try:
        sink = _write_with_bad_row(spark, kafka, 17, tmp_path / "gate")
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)
    bs = kafka.bootstrap_servers
    in_log = read_records(bs, sink, SINK_PARTITIONS, isolation="read_uncommitted")
    assert {b"10", b"11", b"12", b"13", b"14"} <= {v for _, _, v, _ in in_log}, in_log
    _untouched(bs, sink)
