"""The registry of ``kafka_txn`` options: name, default, who reads it, what it does.

It is the list the parsers check names against and the source of the option tables in
``docs/reader.md`` and ``docs/writer.md`` (``python -m pyspark_kafka_txn.options.registry
reader|writer`` prints a table; a test keeps the docs equal to it).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Literal

__all__ = ["OPTIONS", "OptionDoc", "known_names", "markdown_table"]

Scope = Literal["reader", "writer", "both"]


@dataclass(frozen=True, slots=True)
class OptionDoc:
    """One option of the data source.

    Attributes
    ----------
    name
        The name as documented (matched case-insensitively).
    default
        The default as shown to users (``""`` when required or none).
    scope
        ``reader``, ``writer`` or ``both``.
    doc
        One sentence (Markdown) on what it does.
    """

    name: str
    default: str
    scope: Scope
    doc: str


OPTIONS: tuple[OptionDoc, ...] = (
    OptionDoc("kafka.bootstrap.servers", "(required)", "both", "`host:port` list of brokers."),
    # -- reader ------------------------------------------------------------------------
    OptionDoc("assign", "", "reader", 'Fixed partitions, JSON `{"t":[0,1]}`.'),
    OptionDoc("subscribe", "", "reader", "Comma-separated topic list."),
    OptionDoc("subscribePattern", "", "reader", "Java regex matched against whole topic names."),
    OptionDoc(
        "startingOffsets",
        "`latest` (streaming), `earliest` (batch)",
        "reader",
        '`earliest`, `latest` or JSON `{"t":{"0":23,"1":-2}}` (-2 earliest, -1 latest).',
    ),
    OptionDoc("startingOffsetsByTimestamp", "", "reader", 'JSON `{"t":{"0":1700000000000}}` (ms).'),
    OptionDoc("startingTimestamp", "", "reader", "One timestamp (ms) for every partition."),
    OptionDoc(
        "startingOffsetsByTimestampStrategy",
        "`error`",
        "reader",
        "`latest`: a timestamp no record reaches resolves to latest instead of failing.",
    ),
    OptionDoc(
        "endingOffsets", "`latest`", "reader", "Batch only: `latest` or JSON as startingOffsets."
    ),
    OptionDoc("endingOffsetsByTimestamp", "", "reader", "Batch only: JSON of timestamps."),
    OptionDoc("endingTimestamp", "", "reader", "Batch only: one timestamp for every partition."),
    OptionDoc("maxOffsetsPerTrigger", "", "reader", "Upper bound of records per micro-batch."),
    OptionDoc(
        "minOffsetsPerTrigger", "", "reader", "Wait for this many records (up to maxTriggerDelay)."
    ),
    OptionDoc("maxTriggerDelay", "`15m`", "reader", "Longest wait for minOffsetsPerTrigger."),
    OptionDoc(
        "minPartitions", "", "reader", "Split topic-partitions into at least this many tasks."
    ),
    OptionDoc("maxRecordsPerPartition", "", "reader", "Split ranges larger than this."),
    OptionDoc(
        "failOnDataLoss",
        "`true`",
        "reader",
        "Fail when offsets were deleted or a partition vanished (never for transaction gaps).",
    ),
    OptionDoc(
        "includeHeaders",
        "`false`",
        "both",
        "Reader: add the `headers` column. Writer: no effect (a `headers` column is "
        "always written).",
    ),
    OptionDoc(
        "kafkaConsumer.pollTimeoutMs", "`120000`", "reader", "Executor wait without progress."
    ),
    OptionDoc("fetchOffset.numRetries", "`3`", "reader", "Retries of driver offset look-ups."),
    OptionDoc("fetchOffset.retryIntervalMs", "`1000`", "reader", "Pause between those retries."),
    OptionDoc(
        "groupIdPrefix", "`spark-kafka-source`", "reader", "Prefix of the generated group id."
    ),
    OptionDoc(
        "kafka.isolation.level",
        "`read_committed`",
        "reader",
        "`read_committed` (aborted and open transactions hidden, LSO-bounded) or "
        "`read_uncommitted`.",
    ),
    OptionDoc(
        "lsoStallWarnMs",
        "`60000`",
        "reader",
        "Warn when an open transaction pins a partition's LSO this long (0 = off).",
    ),
    # -- writer ------------------------------------------------------------------------
    OptionDoc(
        "topic",
        "",
        "writer",
        "Topic of every row; wins over a `topic` column (one of the two is required).",
    ),
    OptionDoc(
        "transactionalIdPrefix",
        "`spark-kafka-txn-`",
        "writer",
        "Transactional ids are `{prefix}{queryId}-{partition}`; grant Write on this PREFIXED "
        "TransactionalId.",
    ),
    OptionDoc(
        "deliveryGuarantee",
        "`exactly_once`",
        "writer",
        "`exactly_once` (two-phase commit over Kafka transactions) or `at_least_once` "
        "(each task commits its own transaction).",
    ),
    OptionDoc(
        "kafka.transaction.timeout.ms",
        "`900000`, capped at the broker's `transaction.max.timeout.ms`",
        "writer",
        "How long a prepared transaction may wait for the driver's commit.",
    ),
    OptionDoc(
        "kafka.transaction.two.phase.commit.enable",
        "`auto`",
        "writer",
        "KIP-939: `auto` (where the cluster offers it), `true` (required) or `false`.",
    ),
    OptionDoc(
        "lingeringTransactionTimeout",
        "`60s`",
        "writer",
        "A transaction under the prefix left open this long by another query id is aborted "
        "at commit time.",
    ),
    OptionDoc(
        "kafka.compression.type", "`none`", "writer", "`none`, `gzip`, `snappy`, `lz4`, `zstd`."
    ),
    OptionDoc("kafka.batch.size", "`1000000`", "writer", "Bytes of one record batch."),
    OptionDoc("kafka.linger.ms", "`0`", "writer", "Accumulate rows of a partition this long."),
    OptionDoc("kafka.max.request.size", "`1048576`", "writer", "Largest batch or record."),
    OptionDoc("kafka.request.timeout.ms", "`30000`", "writer", "Per request."),
    OptionDoc("kafka.delivery.timeout.ms", "`120000`", "writer", "Per batch, retries included."),
    OptionDoc(
        "kafka.max.in.flight.requests.per.connection",
        "`5`",
        "writer",
        "Produce requests in flight per connection (1..5).",
    ),
    OptionDoc(
        "kafka.transaction.version",
        "`0`",
        "writer",
        "0 follows the cluster's finalized `transaction.version`; 1 or 2 force one.",
    ),
    OptionDoc(
        "kafka.security.protocol, kafka.ssl.\\*, kafka.sasl.\\*",
        "`PLAINTEXT`",
        "both",
        "TLS and SASL (PLAIN, SCRAM) as for Spark's connector; stores must be PEM.",
    ),
)


def known_names(scope: Literal["reader", "writer"]) -> frozenset[str]:
    """Lower-cased names of the non-``kafka.*`` options of ``scope``."""
    return frozenset(
        o.name.lower()
        for o in OPTIONS
        if o.scope in (scope, "both") and not o.name.startswith("kafka.")
    )


def markdown_table(scope: Literal["reader", "writer"]) -> str:
    """The option table of ``scope`` as Markdown (what the docs embed).

    Returns
    -------
    str
        A table with the columns option, default, meaning.
    """
    rows = ["| option | default | meaning |", "|---|---|---|"]
    rows += [
        f"| `{o.name}` | {o.default or '—'} | {o.doc} |"
        if "\\*" not in o.name
        else f"| {o.name} | {o.default or '—'} | {o.doc} |"
        for o in OPTIONS
        if o.scope in (scope, "both")
    ]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # pragma: no cover - a docs helper
    sys.stdout.write(markdown_table("writer" if sys.argv[1:] == ["writer"] else "reader"))
