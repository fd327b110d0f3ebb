"""The registry of ``kafka_txn`` options: name, default, who reads it, what it does.

It is the list the parsers check names against (:func:`check_names`: a misspelt option
fails with a suggestion) and the source of the option tables in ``docs/reader.md`` and
``docs/writer.md`` (``python -m pyspark_kafka_txn.options.registry reader|writer`` prints
a table; a test keeps the docs equal to it).
"""

from __future__ import annotations

import difflib
import logging
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from pyspark_kafka_txn.client.security import SECURITY_OPTIONS
from pyspark_kafka_txn.errors import ConfigError

__all__ = [
    "OPTIONS",
    "SPARK_OPTIONS",
    "OptionDoc",
    "check_names",
    "closest",
    "known_names",
    "markdown_table",
    "misspelt_hint",
]

logger = logging.getLogger(__name__)

Scope = Literal["reader", "writer", "both"]

#: Names Spark itself adds to a data source's options (lower-cased): ``load(path)`` /
#: ``save(path)`` / ``start(path)``, and ``checkpointLocation`` / ``queryName`` of
#: ``writeStream`` (seen in PySpark 4.3). Accepted without a word.
SPARK_OPTIONS = frozenset({"path", "paths", "checkpointlocation", "queryname"})

#: How similar (difflib ratio, lower-cased) an unknown name must be to a known one to be
#: taken for a misspelling of it.
_SIMILAR = 0.8


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
        "minRecordsPerPartition",
        "",
        "reader",
        "Pack smaller ranges into one task that reads them one after the other "
        "(fewer tasks for small micro-batches: lower latency). Not in Spark's source.",
    ),
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
        "kafka.max.block.ms",
        "`60000`",
        "writer",
        "Longest wait for an unreachable broker, a coordinator or a missing topic's metadata "
        "(retries included) before failing.",
    ),
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


def check_names(names: Iterable[str], scope: Literal["reader", "writer"]) -> None:
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
    other: Literal["reader", "writer"] = "writer" if scope == "reader" else "reader"
    known = known_names(scope)
    candidates = {o.name for o in OPTIONS if o.scope in (scope, "both") and "\\*" not in o.name}
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
