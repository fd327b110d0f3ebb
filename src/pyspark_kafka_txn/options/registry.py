"""The registry of ``kafka_txn`` options: one row per option drives everything about it.

A row (:class:`Option`) gives the option's name, who reads it (reader, writer or both), its
value parser, its default as a user would write it, the attribute of
:class:`~pyspark_kafka_txn.options.reader.ReaderOptions` /
:class:`~pyspark_kafka_txn.options.writer.WriterOptions` it fills, and one sentence of doc.
From the rows come

* the parsing and validation of every single-option value (:func:`parse_fields`), with the
  one error format ``Invalid value 'x' for option 'y', must be …``;
* the defaults (the default text goes through the same parser: there is no second copy);
* the check of the names a user gave (:func:`check_names`: a misspelt option fails with a
  suggestion);
* the option tables of ``docs/reader.md`` and ``docs/writer.md``
  (``python -m pyspark_kafka_txn.options.registry reader|writer`` prints one; a test keeps
  the docs equal to it).

Rows without a parser are read by the hand-written checks that span several options
(subscription, offsets, required servers) in :mod:`~pyspark_kafka_txn.options.reader` and
:mod:`~pyspark_kafka_txn.options.writer`, or by the Kafka client they are passed to. No
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
    "MAX_PREFIX_LENGTH",
    "OPTIONS",
    "SPARK_OPTIONS",
    "UNCHECKED_TRANSACTION_TIMEOUT_MS",
    "Option",
    "check_names",
    "client_defaults",
    "closest",
    "default",
    "known_names",
    "markdown_table",
    "misspelt_hint",
    "option",
    "parse_fields",
    "parse_option",
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
        The attribute of the options dataclass this option fills, or None.
    shown
        The default as the docs show it when it is not simply ``default``.
    """

    name: str
    scope: Scope
    doc: str
    parser: Parser | None = None
    default: str | None = None
    field: str | None = None
    shown: str | None = None

    def shown_default(self) -> str:
        """The default as the docs table shows it (``""``: none)."""
        if self.shown is not None:
            return self.shown
        return f"`{self.default}`" if self.default is not None else ""

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
        field="bootstrap_servers",
        shown="(required)",
    ),
    # -- reader ------------------------------------------------------------------------
    Option("assign", "reader", 'Fixed partitions, JSON `{"t":[0,1]}`.'),
    Option("subscribe", "reader", "Comma-separated topic list."),
    Option("subscribePattern", "reader", "Java regex matched against whole topic names."),
    Option(
        "startingOffsets",
        "reader",
        '`earliest`, `latest` or JSON `{"t":{"0":23,"1":-2}}` (-2 earliest, -1 latest).',
        shown="`latest` (streaming), `earliest` (batch)",
    ),
    Option("startingOffsetsByTimestamp", "reader", 'JSON `{"t":{"0":1700000000000}}` (ms).'),
    Option("startingTimestamp", "reader", "One timestamp (ms) for every partition."),
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
        shown="`latest`",
    ),
    Option("endingOffsetsByTimestamp", "reader", "Batch only: JSON of timestamps."),
    Option("endingTimestamp", "reader", "Batch only: one timestamp for every partition."),
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

_BY_NAME = {o.name.lower(): o for o in OPTIONS}


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


def parse_fields(view: OptionView, side: Side, fields: Iterable[str]) -> dict[str, Any]:
    """Parse every option of ``side`` that has a parser; return the values by attribute.

    Every such option is validated, whether or not its attribute is among ``fields`` (the
    writer validates ``includeHeaders`` and ignores it); a missing option takes its default.

    Parameters
    ----------
    view
        The options as the user gave them.
    side
        ``reader`` or ``writer``.
    fields
        The attributes of the options dataclass being built.

    Returns
    -------
    dict
        Attribute name → parsed value, for the rows whose ``field`` is in ``fields``.

    Raises
    ------
    ConfigError
        ``Invalid value 'x' for option 'y', must be …`` (a secret's value is not shown).
    """
    wanted = set(fields)
    out: dict[str, Any] = {}
    for row in OPTIONS:
        if row.parser is None or not row.applies_to(side):
            continue
        value = view.parse(row.name, row.parser, row.default)
        if row.field in wanted:
            out[row.field] = value
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
