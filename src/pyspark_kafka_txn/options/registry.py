"""The registry of ``kafka_txn`` options: one row per option drives everything about it.

A row (:class:`Option`) gives the option's name, who reads it (reader, writer or both), its
value parser, its default as a user would write it (and a batch read's, where it differs),
whether it is required, the attribute of
:class:`~pyspark_kafka_txn.options.reader.ReaderOptions` /
:class:`~pyspark_kafka_txn.options.writer.WriterOptions` it fills, and one sentence of doc.
Options that fill one attribute together (the subscription, the starting and the ending
offsets) form a :class:`Group`, whose rule says which of them is read. The ``kafka.*``
settings no row parses are passed to the Kafka client as the side's :class:`PassThrough`
declares. From the rows come

* the parsing and validation of every option's value (:func:`parse_fields`), with the
  one error format ``Invalid value 'x' for option 'y', must be …`` (the subscription and
  offsets options keep Spark's messages), and the check of the required ones;
* the defaults (the default text goes through the same parser: there is no second copy);
* the check of the names a user gave (:func:`check_names`: a misspelt option fails with a
  suggestion);
* the option tables of ``docs/reader.md`` and ``docs/writer.md``
  (``python -m pyspark_kafka_txn.options.registry reader|writer`` prints one; a test keeps
  the docs equal to it).

Rows without a parser are ``kafka.*`` settings read by the Kafka client they are passed to.
The rules that span several options of different attributes (``minOffsetsPerTrigger`` at
most ``maxOffsetsPerTrigger``, ``txnAppId`` with ``txnVersion``) stay in
:mod:`~pyspark_kafka_txn.options.reader` and :mod:`~pyspark_kafka_txn.options.writer`. No
I/O, no pyspark, no kio.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pyspark_kafka_txn.client.config import OPTION_NAMES, ProducerConfig
from pyspark_kafka_txn.client.security import SECURITY_OPTIONS
from pyspark_kafka_txn.errors import ConfigError
from pyspark_kafka_txn.options.common import OptionView
from pyspark_kafka_txn.options.specs import (
    AssignedPartitions,
    Offsets,
    PartitionTimestamps,
    Timestamp,
    TopicList,
    TopicPattern,
)
from pyspark_kafka_txn.options.values import (
    BOOLEAN,
    DURATION,
    NON_NEGATIVE,
    POSITIVE,
    TEXT,
    Choice,
    Parser,
    Text,
    choice,
)

__all__ = [
    "DEFAULT_TRANSACTION_TIMEOUT_MS",
    "GROUPS",
    "MAX_PREFIX_LENGTH",
    "OPTIONS",
    "PASS_THROUGH",
    "SPARK_OPTIONS",
    "UNCHECKED_TRANSACTION_TIMEOUT_MS",
    "Group",
    "Option",
    "PassThrough",
    "check_names",
    "client_defaults",
    "closest",
    "default",
    "kafka_rows",
    "known_names",
    "markdown_table",
    "misspelt_hint",
    "option",
    "parse_fields",
    "parse_option",
    "required_value",
]

logger = logging.getLogger(__name__)

Scope = Literal["reader", "writer", "both"]
Side = Literal["reader", "writer"]

#: Names Spark itself adds to a data source's options (lower-cased): ``load(path)`` /
#: ``save(path)`` / ``start(path)``, and ``checkpointLocation`` / ``queryName`` of
#: ``writeStream`` (seen in PySpark 4.3). Accepted without a word.
SPARK_OPTIONS = frozenset({"path", "paths", "checkpointlocation", "queryname"})

#: How similar (difflib ratio, lower-cased) an unknown name must be to a known one to be
#: taken for a misspelling of it.
_SIMILAR = 0.8

#: Kafka's longest string field (transactional and group ids), in bytes.
MAX_ID_BYTES = 32_767
#: What the writer appends to the prefix at most: a batch job's query id and the
#: decision record's chunk groups (``job-{uuid}-decision-{slot}-{chunk}``). An idempotent
#: write's ``app-{uuid}`` (derived from ``txnAppId``, whatever its length) is as long, and
#: its claim group (``…-writer``) shorter.
_LONGEST_SUFFIX = len("job-00000000-0000-0000-0000-000000000000-decision-1-") + 10
#: The longest ``transactionalIdPrefix``.
MAX_PREFIX_LENGTH = MAX_ID_BYTES - _LONGEST_SUFFIX
#: The writer's transaction timeout when none is given: Kafka's default
#: ``transaction.max.timeout.ms`` (capped by the broker's value at the start of a write).
DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000
#: The writer's transaction timeout when none is given and the broker's
#: ``transaction.max.timeout.ms`` cannot be read (no DescribeConfigs ACL): the Java
#: producer's default, below any broker's maximum.
UNCHECKED_TRANSACTION_TIMEOUT_MS = 60_000


@dataclass(frozen=True, slots=True)
class Option:
    """One option of the data source.

    Attributes
    ----------
    name
        The name as documented (matched case-insensitively).
    scope
        ``reader``, ``writer`` or ``both``.
    doc
        One sentence (Markdown) on what it does.
    parser
        Parses the text of the option (:mod:`~pyspark_kafka_txn.options.values`); None when
        a check spanning several options, or the Kafka client, reads it.
    default
        The default as a user would write it (parsed by ``parser``), or None.
    field
        The attribute of the options dataclass this option fills, or None (the rows of a
        :class:`Group` fill the group's).
    shown
        The default as the docs show it when it is not simply ``default``.
    required
        The option must be given, not blank (:func:`required_value`); the docs show
        ``(required)``.
    batch_default
        The default of a batch read, where it is not ``default`` (a streaming read's).
    batch_parser
        The parser of a batch read, where it refuses more than ``parser``.
    """

    name: str
    scope: Scope
    doc: str
    parser: Parser | None = None
    default: str | None = None
    field: str | None = None
    shown: str | None = None
    required: bool = False
    batch_default: str | None = None
    batch_parser: Parser | None = None

    def shown_default(self) -> str:
        """The default as the docs table shows it (``""``: none)."""
        if self.shown is not None:
            return self.shown
        if self.required:
            return "(required)"
        if self.batch_default is not None:
            return f"`{self.default}` (streaming), `{self.batch_default}` (batch)"
        return f"`{self.default}`" if self.default is not None else ""

    def parser_for(self, *, streaming: bool) -> Parser | None:
        """The parser of a streaming (or a batch) read."""
        return self.parser if streaming or self.batch_parser is None else self.batch_parser

    def default_for(self, *, streaming: bool) -> str | None:
        """The default text of a streaming (or a batch) read."""
        return self.default if streaming or self.batch_default is None else self.batch_default

    def applies_to(self, side: Side) -> bool:
        """Whether the reader (or the writer) reads this option."""
        return self.scope in (side, "both")


def _producer_default(name: str) -> str:
    """The protocol client's default of the producer setting ``name`` (its one copy)."""
    value = next(
        f.default for f in dataclasses.fields(ProducerConfig) if f.name == OPTION_NAMES[name]
    )
    return value.name.lower() if hasattr(value, "name") else str(value)


_PREFIX = Text(
    pattern=r"[A-Za-z0-9._\-]+",
    pattern_must="must contain only ASCII letters, digits, '.', '_' and '-'",
    max_length=MAX_PREFIX_LENGTH,
    why_max=(
        f": the transactional and group ids derived from it (prefix, query id, suffix) must "
        f"fit Kafka's {MAX_ID_BYTES}-byte limit of ids"
    ),
)

OPTIONS: tuple[Option, ...] = (
    Option(
        "kafka.bootstrap.servers",
        "both",
        "`host:port` list of brokers.",
        TEXT,
        field="bootstrap_servers",
        required=True,
    ),
    # -- reader ------------------------------------------------------------------------
    Option("assign", "reader", 'Fixed partitions, JSON `{"t":[0,1]}`.', AssignedPartitions()),
    Option("subscribe", "reader", "Comma-separated topic list.", TopicList()),
    Option(
        "subscribePattern",
        "reader",
        "Java regex matched against whole topic names.",
        TopicPattern(),
    ),
    Option(
        "startingOffsets",
        "reader",
        '`earliest`, `latest` or JSON `{"t":{"0":23,"1":-2}}` (-2 earliest, -1 latest).',
        Offsets(ending=False),
        "latest",
        batch_default="earliest",
        batch_parser=Offsets(ending=False, batch=True),
    ),
    Option(
        "startingOffsetsByTimestamp",
        "reader",
        'JSON `{"t":{"0":1700000000000}}` (ms).',
        PartitionTimestamps(),
    ),
    Option("startingTimestamp", "reader", "One timestamp (ms) for every partition.", Timestamp()),
    Option(
        "startingOffsetsByTimestampStrategy",
        "reader",
        "`latest`: a timestamp no record reaches resolves to latest instead of failing.",
        Choice({"error": False, "latest": True}),
        "error",
        "timestamp_strategy_latest",
    ),
    Option(
        "endingOffsets",
        "reader",
        "Batch only: `latest` or JSON as startingOffsets.",
        Offsets(ending=True, batch=True),
        "latest",
    ),
    Option(
        "endingOffsetsByTimestamp",
        "reader",
        "Batch only: JSON of timestamps.",
        PartitionTimestamps(),
    ),
    Option(
        "endingTimestamp",
        "reader",
        "Batch only: one timestamp for every partition.",
        Timestamp(),
    ),
    Option(
        "maxOffsetsPerTrigger",
        "reader",
        "Upper bound of records per micro-batch.",
        POSITIVE,
        field="max_offsets_per_trigger",
    ),
    Option(
        "minOffsetsPerTrigger",
        "reader",
        "Wait for this many records (up to maxTriggerDelay).",
        POSITIVE,
        field="min_offsets_per_trigger",
    ),
    Option(
        "maxTriggerDelay",
        "reader",
        "Longest wait for minOffsetsPerTrigger.",
        DURATION,
        "15m",
        "max_trigger_delay_ms",
    ),
    Option(
        "minPartitions",
        "reader",
        "Split topic-partitions into at least this many tasks.",
        POSITIVE,
        field="min_partitions",
    ),
    Option(
        "maxRecordsPerPartition",
        "reader",
        "Split ranges larger than this.",
        POSITIVE,
        field="max_records_per_partition",
    ),
    Option(
        "minRecordsPerPartition",
        "reader",
        "Pack smaller ranges into one task that reads them one after the other "
        "(fewer tasks for small micro-batches: lower latency; `1` keeps one task per "
        "topic-partition, as Spark's source plans). Not in Spark's source.",
        POSITIVE,
        "20000",
        "min_records_per_partition",
    ),
    Option(
        "failOnDataLoss",
        "reader",
        "Fail when offsets were deleted or a partition vanished (never for transaction gaps).",
        BOOLEAN,
        "true",
        "fail_on_data_loss",
    ),
    Option(
        "includeHeaders",
        "both",
        "Reader: add the `headers` column. Writer: no effect (a `headers` column is "
        "always written).",
        BOOLEAN,
        "false",
        "include_headers",
    ),
    Option(
        "kafkaConsumer.pollTimeoutMs",
        "reader",
        "Executor wait without progress.",
        NON_NEGATIVE,
        "120000",
        "poll_timeout_ms",
    ),
    Option(
        "fetchOffset.numRetries",
        "reader",
        "Retries of driver offset look-ups.",
        NON_NEGATIVE,
        "3",
        "fetch_offset_num_retries",
    ),
    Option(
        "fetchOffset.retryIntervalMs",
        "reader",
        "Pause between those retries.",
        NON_NEGATIVE,
        "1000",
        "fetch_offset_retry_interval_ms",
    ),
    Option(
        "groupIdPrefix",
        "reader",
        "Prefix of the generated group id.",
        Text(strip=False),
        "spark-kafka-source",
        "group_id_prefix",
    ),
    Option(
        "commitOffsetsToGroup",
        "reader",
        "Streaming only: after each completed micro-batch, commit its end offsets to this "
        "consumer group, so that `kafka-consumer-groups --describe` and lag exporters see the "
        "query (off when unset; the query never reads them back).",
        TEXT,
        field="offsets_group",
    ),
    Option(
        "kafka.isolation.level",
        "reader",
        "`read_committed` (aborted and open transactions hidden, LSO-bounded) or "
        "`read_uncommitted`.",
        choice("read_committed", "read_uncommitted"),
        "read_committed",
        "isolation_level",
    ),
    Option(
        "lsoStallWarnMs",
        "reader",
        "Warn when an open transaction pins a partition's LSO this long (0 = off).",
        NON_NEGATIVE,
        "60000",
        "lso_stall_warn_ms",
    ),
    # -- writer ------------------------------------------------------------------------
    Option(
        "topic",
        "writer",
        "Topic of every row; wins over a `topic` column (one of the two is required).",
        TEXT,
        field="topic",
    ),
    Option(
        "transactionalIdPrefix",
        "writer",
        "Transactional ids are `{prefix}{queryId}-{partition}`; grant Write on this PREFIXED "
        "TransactionalId.",
        _PREFIX,
        "spark-kafka-txn-",
        "transactional_id_prefix",
    ),
    Option(
        "deliveryGuarantee",
        "writer",
        "`exactly_once` (two-phase commit over Kafka transactions) or `at_least_once` "
        "(each task commits its own transaction).",
        Choice({"exactly_once": True, "at_least_once": False}),
        "exactly_once",
        "exactly_once",
    ),
    Option(
        "kafka.transaction.timeout.ms",
        "writer",
        "How long a prepared transaction may wait for the driver's commit.",
        POSITIVE,
        field="transaction_timeout_ms",
        shown=f"`{DEFAULT_TRANSACTION_TIMEOUT_MS}`, capped at the broker's "
        f"`transaction.max.timeout.ms` (`{UNCHECKED_TRANSACTION_TIMEOUT_MS}` where that "
        "cannot be read)",
    ),
    Option(
        "kafka.transaction.two.phase.commit.enable",
        "writer",
        "KIP-939: `auto` (where the cluster offers it), `true` (required) or `false`.",
        choice("auto", "true", "false"),
        "auto",
        "two_phase_commit",
    ),
    Option(
        "lingeringTransactionTimeout",
        "writer",
        "The query's liveness lease: its tasks and commits renew it while it writes; once "
        "this long passes without a renewal, the query counts as gone and another query's "
        "commit ends its open transactions. Also how long another query's transaction is "
        "open before this query's commit looks at that query's lease.",
        DURATION,
        "60s",
        "lingering_timeout_ms",
    ),
    Option(
        "txnAppId",
        "writer",
        "`df.write` only (e.g. inside `foreachBatch`): the application id of an idempotent "
        "write, as Delta Lake's option; with `txnVersion`, each (id, `topic` option, version) "
        "is written at most once.",
        TEXT,
        field="app_id",
    ),
    Option(
        "txnVersion",
        "writer",
        "With `txnAppId`: the write's version (`batch_id` in `foreachBatch`); a version at or "
        "below the last one committed for the id writes nothing.",
        NON_NEGATIVE,
        field="app_version",
    ),
    Option(
        "kafka.compression.type",
        "writer",
        "`none`, `gzip`, `snappy`, `lz4`, `zstd`.",
        default=_producer_default("compression.type"),
    ),
    Option(
        "kafka.batch.size",
        "writer",
        "Bytes of one record batch.",
        default=_producer_default("batch.size"),
    ),
    Option(
        "kafka.linger.ms",
        "writer",
        "Accumulate rows of a partition this long.",
        default=_producer_default("linger.ms"),
    ),
    Option(
        "kafka.max.request.size",
        "writer",
        "Largest batch or record.",
        default=_producer_default("max.request.size"),
    ),
    Option(
        "kafka.request.timeout.ms",
        "writer",
        "Per request.",
        default=_producer_default("request.timeout.ms"),
    ),
    Option(
        "kafka.delivery.timeout.ms",
        "writer",
        "Per batch, retries included.",
        default=_producer_default("delivery.timeout.ms"),
    ),
    Option(
        "kafka.max.block.ms",
        "writer",
        "Longest wait for an unreachable broker, a coordinator or a missing topic's metadata "
        "(retries included) before failing.",
        POSITIVE,
        "60000",  # the Java producer's default
        "max_block_ms",
    ),
    Option(
        "kafka.max.in.flight.requests.per.connection",
        "writer",
        "Produce requests in flight per connection (1..5).",
        default=_producer_default("max.in.flight.requests.per.connection"),
    ),
    Option(
        "kafka.transaction.version",
        "writer",
        "0 follows the cluster's finalized `transaction.version`; 1 forces version 1; 2 "
        "is refused where the cluster finalized less.",
        default="0",
    ),
    Option(
        "kafka.security.protocol, kafka.ssl.\\*, kafka.sasl.\\*",
        "both",
        "TLS and SASL (PLAIN, SCRAM, OAUTHBEARER; GSSAPI for the writer only) as for Spark's "
        "connector; key and trust stores JKS, PKCS12 or PEM "
        "([Java key stores](sign-in.md#java-key-stores-jks-pkcs12)); OAUTHBEARER takes a "
        "token provider or OIDC client credentials, GSSAPI (Kerberos) a `Krb5LoginModule` "
        "keytab or ticket cache "
        "([Signing in](sign-in.md)).",
        shown="`PLAINTEXT`",
    ),
)


@dataclass(frozen=True, slots=True)
class Group:
    """Options of the reader that fill one attribute together; its rule says which is read.

    When several of ``names`` are given, the last one in ``names`` is read (the others are
    not parsed); when none is, the first row's default. ``names`` is the order of the
    rows in :data:`OPTIONS` (and in messages).

    Attributes
    ----------
    field
        The attribute of :class:`~pyspark_kafka_txn.options.reader.ReaderOptions` filled.
    names
        The options of the group.
    one_of
        When set, exactly one of ``names`` must be given; the names as Spark's messages
        list them.
    batch_only
        When set, the options are refused in a streaming read (with this reason) and the
        attribute is None there.
    """

    field: str
    names: tuple[str, ...]
    one_of: str | None = None
    batch_only: str | None = None


#: The reader's groups, parsed in this order (after the single options and the required).
GROUPS: tuple[Group, ...] = (
    Group(
        "subscription",
        ("assign", "subscribe", "subscribePattern"),
        one_of="subscribe, subscribePattern, assign",
    ),
    Group("starting", ("startingOffsets", "startingOffsetsByTimestamp", "startingTimestamp")),
    Group(
        "ending",
        ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"),
        batch_only="ending offset not valid in streaming queries",
    ),
)


@dataclass(frozen=True, slots=True)
class PassThrough:
    """What a side does with the ``kafka.*`` settings: the Kafka client's own names.

    The security settings (``kafka.security.protocol``, ``kafka.ssl.*``, ``kafka.sasl.*``)
    pass on both sides; the ``kafka.*`` rows with a parser are read by the side itself.

    Attributes
    ----------
    rejected
        Names refused (without the prefix), with the message.
    fixed
        Names accepted only with one of these values (the first is the one to name), which
        transactions require; not passed on.
    read
        Names the side reads itself besides its ``kafka.*`` rows; not passed on.
    passed
        The other names passed to the client; None: every name (librdkafka validates).
    integers
        Those of ``passed`` whose value must be a non-negative integer.
    ignored
        Names accepted with a warning and not used (tuning of other clients).
    """

    rejected: Mapping[str, str]
    fixed: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    read: frozenset[str] = frozenset()
    passed: frozenset[str] | None = None
    integers: frozenset[str] = frozenset()
    ignored: frozenset[str] = frozenset()


#: ``kafka.*`` producer settings the writer passes to our client (names as ProducerConfig
#: takes them); compression.type and client.id are text.
_PRODUCER_SETTINGS = frozenset(
    {
        "compression.type",
        "batch.size",
        "linger.ms",
        "max.request.size",
        "request.timeout.ms",
        "delivery.timeout.ms",
        "max.in.flight.requests.per.connection",
        "retry.backoff.ms",
        "retry.backoff.max.ms",
        "client.id",
        "transaction.version",
        "transaction.timeout.ms",
        "transaction.two.phase.commit.enable",
    }
)

#: Each side's ``kafka.*`` pass-through.
PASS_THROUGH: Mapping[Side, PassThrough] = {
    "reader": PassThrough(
        rejected={  # as Spark's built-in source refuses them
            "auto.offset.reset": (
                "Kafka option 'kafka.auto.offset.reset' is not supported. Instead set the "
                "source option 'startingOffsets' to 'earliest' or 'latest' to specify where "
                "to start. The source manages which offsets are consumed itself, rather than "
                "relying on the Kafka consumer to do it."
            ),
            "key.deserializer": (
                "Kafka option 'kafka.key.deserializer' is not supported as keys are "
                "deserialized as byte arrays. Use DataFrame operations to explicitly "
                "deserialize the keys."
            ),
            "value.deserializer": (
                "Kafka option 'kafka.value.deserializer' is not supported as values are "
                "deserialized as byte arrays. Use DataFrame operations to explicitly "
                "deserialize the values."
            ),
            "enable.auto.commit": (
                "Kafka option 'kafka.enable.auto.commit' is not supported: the source never "
                "commits offsets to Kafka; Spark's checkpoint tracks them."
            ),
            "interceptor.classes": (
                "Kafka option 'kafka.interceptor.classes' is not supported. Reading from "
                "Kafka with consumer interceptors is not supported."
            ),
        },
        read=frozenset({"group.id"}),  # ReaderOptions.group_id
    ),
    "writer": PassThrough(
        rejected={
            "key.serializer": (
                "Kafka option 'kafka.key.serializer' is not supported, as keys are serialized "
                "with ByteArraySerializer. Use DataFrame operations to explicitly serialize "
                "the keys into either strings or byte arrays."
            ),
            "value.serializer": (
                "Kafka option 'kafka.value.serializer' is not supported, as values are "
                "serialized with ByteArraySerializer. Use DataFrame operations to explicitly "
                "serialize the values into either strings or byte arrays."
            ),
            "transactional.id": (
                "Kafka option 'kafka.transactional.id' is not supported: the writer derives "
                "one transactional id per Spark partition from the option "
                "'transactionalIdPrefix' and the query id"
            ),
            "interceptor.classes": (
                "Kafka option 'kafka.interceptor.classes' is not supported. Writing to Kafka "
                "with producer interceptors is not supported."
            ),
        },
        fixed={"enable.idempotence": ("true",), "acks": ("all", "-1")},
        passed=_PRODUCER_SETTINGS,
        integers=_PRODUCER_SETTINGS - {"compression.type", "client.id"},
        ignored=frozenset(
            {
                "buffer.memory",
                "metadata.max.age.ms",
                "reconnect.backoff.ms",
                "reconnect.backoff.max.ms",
                "connections.max.idle.ms",
                "receive.buffer.bytes",
                "send.buffer.bytes",
                "partitioner.class",
                "partitioner.ignore.keys",
            }
        ),
    ),
}

_BY_NAME = {o.name.lower(): o for o in OPTIONS}
_GROUPED = frozenset(name.lower() for group in GROUPS for name in group.names)
#: The client each side configures, as the message of a missing required option says it.
_CLIENT_OF = {"reader": "consumer", "writer": "producer"}


def option(name: str) -> Option:
    """The registry row of ``name`` (any case)."""
    return _BY_NAME[name.lower()]


def default(name: str) -> Any:
    """The parsed default of the option ``name`` (None when it has none)."""
    row = option(name)
    if row.default is None or row.parser is None:
        return row.default
    return row.parser(row.default)


def client_defaults() -> dict[str, str]:
    """The writer's defaults of the ``kafka.*`` settings passed to the protocol client.

    Returns
    -------
    dict
        Kafka name (prefix removed) → default text, for the writer rows without a parser.
    """
    return {
        row.name.removeprefix("kafka."): row.default
        for row in OPTIONS
        if row.applies_to("writer")
        and row.parser is None
        and row.default is not None
        and row.name.startswith("kafka.")
    }


def kafka_rows(side: Side) -> frozenset[str]:
    """The ``kafka.*`` settings ``side`` parses into its own attributes (prefix removed).

    Kept out of what :data:`PASS_THROUGH` passes to the Kafka client.
    """
    return frozenset(
        row.name.removeprefix("kafka.")
        for row in OPTIONS
        if row.applies_to(side) and row.parser is not None and row.name.startswith("kafka.")
    )


def parse_option(options: Mapping[str, str], name: str) -> Any:
    """One option's value (or default), parsed by its row, from the options Spark passes.

    For what is needed before the whole set is parsed (the schema needs ``includeHeaders``).

    Raises
    ------
    ConfigError
        As :func:`parse_fields`.
    """
    row = option(name)
    if row.parser is None:
        raise KeyError(f"option {name!r} has no value parser of its own")
    return OptionView(options).parse(row.name, row.parser, row.default)


def required_value(view: OptionView, name: str, side: Side) -> Any:
    """The parsed value of the required option ``name``; refused when missing or blank.

    Parameters
    ----------
    view
        The options as the user gave them.
    name
        A required option (its row's ``required``).
    side
        ``reader`` or ``writer``: the message names the client it configures.

    Raises
    ------
    ConfigError
        ``Option 'kafka.bootstrap.servers' must be specified for configuring Kafka
        consumer`` (or ``producer``), with a hint when another given name misspells it
        (given blank, it is not taken for a misspelling of itself); or the row parser's
        refusal.
    """
    row = option(name)
    if not view.get(row.name, "").strip():
        others = [view.spelled(key) for key in view if key != row.name.lower()]
        raise ConfigError(
            f"Option '{row.name}' must be specified for configuring Kafka {_CLIENT_OF[side]}"
            + misspelt_hint(others, row.name)
        )
    return view.parse(row.name, row.parser) if row.parser is not None else view[row.name]


def _parse_group(view: OptionView, group: Group, *, streaming: bool) -> Any:
    """The value of ``group``'s attribute, by its rule (see :class:`Group`)."""
    given = [name for name in group.names if name in view]
    if group.one_of is not None and not given:
        raise ConfigError(
            f"One of the following options must be specified for Kafka source: "
            f"{group.one_of}. See the docs for more details."
        )
    if group.one_of is not None and len(given) > 1:
        raise ConfigError(
            f"Only one of the following options can be specified for Kafka source: "
            f"{group.one_of} (got {', '.join(given)}). See the docs for more details."
        )
    if group.batch_only is not None and streaming:
        if given:
            raise ConfigError(f"Option '{given[0]}': {group.batch_only}")
        return None
    row = option(given[-1] if given else group.names[0])
    parser = row.parser_for(streaming=streaming)
    assert parser is not None  # every row of a group has one
    return view.parse(row.name, parser, row.default_for(streaming=streaming))


def parse_fields(
    view: OptionView, side: Side, fields: Iterable[str], *, streaming: bool = True
) -> dict[str, Any]:
    """Parse every option of ``side`` that has a parser; return the values by attribute.

    In this order: every single option (validated whether or not its attribute is among
    ``fields``: the writer validates ``includeHeaders`` and ignores it; a missing option
    takes its default), the required ones (:func:`required_value`), then the reader's
    groups (:data:`GROUPS`: the subscription, the starting and the ending offsets).

    Parameters
    ----------
    view
        The options as the user gave them.
    side
        ``reader`` or ``writer``.
    fields
        The attributes of the options dataclass being built.
    streaming
        A streaming read (True) or a batch read: chooses the defaults and parsers of
        :meth:`Option.default_for` and :meth:`Option.parser_for`, and the groups' rules.

    Returns
    -------
    dict
        Attribute name → parsed value, for the rows (and groups) whose ``field`` is in
        ``fields``.

    Raises
    ------
    ConfigError
        ``Invalid value 'x' for option 'y', must be …`` (a secret's value is not shown);
        a missing required option; a group's rule broken.
    """
    wanted = set(fields)
    out: dict[str, Any] = {}
    rows = [
        row
        for row in OPTIONS
        if row.parser is not None and row.applies_to(side) and row.name.lower() not in _GROUPED
    ]
    for row in rows:
        if row.required:
            continue
        parser = row.parser_for(streaming=streaming)
        assert parser is not None  # rows has the rows with a parser
        value = view.parse(row.name, parser, row.default_for(streaming=streaming))
        if row.field in wanted:
            out[row.field] = value
    for row in rows:
        if row.required:
            value = required_value(view, row.name, side)
            if row.field in wanted:
                out[row.field] = value
    for group in GROUPS if side == "reader" else ():
        value = _parse_group(view, group, streaming=streaming)
        if group.field in wanted:
            out[group.field] = value
    return out


def known_names(scope: Side) -> frozenset[str]:
    """Lower-cased names of the non-``kafka.*`` options of ``scope``."""
    return frozenset(
        o.name.lower() for o in OPTIONS if o.applies_to(scope) and not o.name.startswith("kafka.")
    )


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``name`` most likely misspells (compared lower-cased), or None.

    Parameters
    ----------
    name
        A name as the user wrote it.
    candidates
        Names as documented.

    Returns
    -------
    str or None
        The documented spelling of the closest candidate at least 80 % similar.
    """
    by_lower = {c.lower(): c for c in candidates}
    match = difflib.get_close_matches(name.lower(), by_lower, n=1, cutoff=_SIMILAR)
    return by_lower[match[0]] if match else None


def misspelt_hint(names: Iterable[str], required: str) -> str:
    """`` (is 'X' a misspelling of it?)`` when a given name is close to a missing option.

    Parameters
    ----------
    names
        The option names as the user wrote them.
    required
        The documented name of a required option that was not given.

    Returns
    -------
    str
        The hint to append to the error, or ``""``.
    """
    given = closest(required, names)
    return f" (is '{given}' a misspelling of it?)" if given is not None else ""


def check_names(names: Iterable[str], scope: Side) -> None:
    """Reject a misspelt option; accept (with a warning) other unknown names.

    ``kafka.*`` names are left to the Kafka translation (librdkafka or our client reject
    settings they do not know). Any other name is

    * accepted silently when it is an option of ``scope`` or one Spark adds itself
      (:data:`SPARK_OPTIONS`);
    * accepted with a warning when it is an option of the other scope (one dict of
      options shared by a read and a write is common);
    * rejected when it is close to an option of ``scope``, naming the likely one; the
      documented ``kafka.*`` options and the security settings count, so a setting
      without its prefix (``bootstrap.servers``, ``sasl.jaas.config``) is caught;
    * otherwise accepted with a warning, as Spark's built-in source ignores unknown names.

    Parameters
    ----------
    names
        The option names as the user wrote them.
    scope
        ``reader`` or ``writer``.

    Raises
    ------
    ConfigError
        ``Unknown option 'subscibe' of the kafka_txn reader: did you mean 'subscribe'?``
    """
    other: Side = "writer" if scope == "reader" else "reader"
    known = known_names(scope)
    candidates = {o.name for o in OPTIONS if o.applies_to(scope) and "\\*" not in o.name}
    candidates.update(f"kafka.{name}" for name in SECURITY_OPTIONS)  # one row of the docs
    for name in names:
        lowered = name.lower()
        if lowered.startswith("kafka.") or lowered in known or lowered in SPARK_OPTIONS:
            continue
        if lowered in known_names(other):
            logger.warning(
                "Option '%s' is a kafka_txn %s option; the %s ignores it", name, other, scope
            )
            continue
        likely = closest(name, candidates)
        if likely is not None:
            raise ConfigError(
                f"Unknown option '{name}' of the kafka_txn {scope}: did you mean '{likely}'?"
            )
        logger.warning("Ignoring option '%s', unknown to the kafka_txn %s", name, scope)


def markdown_table(scope: Side) -> str:
    """The option table of ``scope`` as Markdown (what the docs embed).

    Returns
    -------
    str
        A table with the columns option, default, meaning.
    """
    rows = ["| option | default | meaning |", "|---|---|---|"]
    rows += [
        f"| `{o.name}` | {o.shown_default() or '—'} | {o.doc} |"
        if "\\*" not in o.name
        else f"| {o.name} | {o.shown_default() or '—'} | {o.doc} |"
        for o in OPTIONS
        if o.applies_to(scope)
    ]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # pragma: no cover - a docs helper
    sys.stdout.write(markdown_table("writer" if sys.argv[1:] == ["writer"] else "reader"))
