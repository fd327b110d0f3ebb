"""Bad reader options given to ``format("kafka")`` and to ``format("kafka_txn")``: which of
the two rejects them, and why they differ where they do.

:data:`CASES` is the table that ``tests/spark/test_parity_reader.py`` checks against both
connectors (every row is run through both). The difference table of ``docs/migration.md``,
between the marker lines ``<!-- parity:bad-options:begin -->`` and
``<!-- parity:bad-options:end -->``, is :func:`markdown_table` (the rows where the two
differ); ``tests/unit/test_parity_docs.py`` keeps it equal. Regenerate it with
``python -m tests.support.parity_bad_options``.
"""

from __future__ import annotations

import sys
from typing import Literal, NamedTuple

#: Stands for the test's topic in an option value.
TOPIC = "TOPIC"


class BadOption(NamedTuple):
    """One bad option (or combination), as a user would give it."""

    #: Options added to (or, with ``None``, removed from) a valid read of one topic
    #: (``subscribe`` = the topic, ``kafka.bootstrap.servers`` = the cluster).
    options: dict[str, str | None]
    #: A batch read (``spark.read``) or a stream (``spark.readStream``, ``availableNow``).
    mode: Literal["batch", "stream"]
    #: Whether the built-in ``format("kafka")`` rejects it (fails before returning data).
    builtin_rejects: bool
    #: Whether ``format("kafka_txn")`` rejects it.
    we_reject: bool
    #: Why the two differ (empty where they agree).
    why: str = ""

    @property
    def differs(self) -> bool:
        return self.builtin_rejects != self.we_reject

    @property
    def option(self) -> str:
        """The option ``kafka_txn``'s error must name: the last one the case sets or
        removes (``subscribePattern`` for an empty pattern given without ``subscribe``)."""
        return next(reversed(self.options))


#: Every bad option checked against both connectors, by a name of its own (the test ids).
CASES: dict[str, BadOption] = {
    "no-bootstrap-servers": BadOption({"kafka.bootstrap.servers": None}, "batch", True, True),
    "no-subscription": BadOption({"subscribe": None}, "batch", True, True),
    "subscribe-and-assign": BadOption({"assign": '{"TOPIC":[0]}'}, "batch", True, True),
    "empty-subscribePattern": BadOption(
        {"subscribe": None, "subscribePattern": ""}, "batch", True, True
    ),
    "startingOffsets-bogus": BadOption({"startingOffsets": "bogus"}, "batch", True, True),
    "startingOffsets-latest-in-a-batch": BadOption(
        {"startingOffsets": "latest"}, "batch", True, True
    ),
    "endingOffsets-earliest-in-a-batch": BadOption(
        {"endingOffsets": "earliest"}, "batch", True, True
    ),
    "endingOffsets-in-a-stream": BadOption({"endingOffsets": "latest"}, "stream", True, True),
    "startingOffsets-unknown-partition": BadOption(
        {"startingOffsets": '{"TOPIC":{"0":0,"7":0}}'}, "batch", True, True
    ),
    "startingOffsetsByTimestampStrategy-bogus": BadOption(
        {"startingTimestamp": "0", "startingOffsetsByTimestampStrategy": "bogus"},
        "batch",
        True,
        True,
    ),
    "maxOffsetsPerTrigger-zero": BadOption(
        {"maxOffsetsPerTrigger": "0"},
        "stream",
        False,
        True,
        "The built-in takes 0 and its query runs; `kafka_txn` asks for a positive limit, "
        "as a limit of no record is a mistake.",
    ),
    "maxOffsetsPerTrigger-not-a-number": BadOption(
        {"maxOffsetsPerTrigger": "many"}, "stream", True, True
    ),
    "minOffsetsPerTrigger-above-max": BadOption(
        {"minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"}, "stream", True, True
    ),
    "maxTriggerDelay-not-a-duration": BadOption({"maxTriggerDelay": "soon"}, "stream", True, True),
    "minPartitions-zero": BadOption({"minPartitions": "0"}, "batch", True, True),
    "minPartitions-negative": BadOption({"minPartitions": "-1"}, "batch", True, True),
    "maxRecordsPerPartition-zero": BadOption({"maxRecordsPerPartition": "0"}, "batch", True, True),
    "failOnDataLoss-not-a-boolean": BadOption({"failOnDataLoss": "maybe"}, "stream", True, True),
    "includeHeaders-not-a-boolean": BadOption({"includeHeaders": "yes"}, "batch", True, True),
    "isolation-level-unknown": BadOption(
        {"kafka.isolation.level": "serializable"}, "batch", True, True
    ),
    "kafka.auto.offset.reset": BadOption(
        {"kafka.auto.offset.reset": "earliest"}, "batch", True, True
    ),
    "kafka.enable.auto.commit": BadOption(
        {"kafka.enable.auto.commit": "true"}, "batch", True, True
    ),
    "kafka.key.deserializer": BadOption({"kafka.key.deserializer": "x.Y"}, "batch", True, True),
    "kafka.interceptor.classes": BadOption(
        {"kafka.interceptor.classes": "x.Y"}, "batch", True, True
    ),
    "unknown-kafka-property": BadOption(
        {"kafka.no.such.property": "1"},
        "batch",
        False,
        True,
        "The Java client logs an unknown setting and ignores it; librdkafka, which reads "
        "for `kafka_txn`, refuses settings it does not know, so a misspelt one fails at "
        "the start instead of being silently without effect.",
    ),
    "lsoStallWarnMs-negative": BadOption(
        {"lsoStallWarnMs": "-5"},
        "stream",
        False,
        True,
        "An option of `kafka_txn` only: the built-in ignores options it does not know.",
    ),
}


def _cell(options: dict[str, str | None]) -> str:
    parts = [
        f"no `{k}`" if v is None else f"`{k}={v.replace(TOPIC, 't')}`" for k, v in options.items()
    ]
    return ", ".join(parts).replace("|", "\\|")


def markdown_table() -> str:
    """The rows of :data:`CASES` where the two connectors differ, as a Markdown table."""
    yes_no = {True: "rejected", False: "accepted"}
    lines = [
        "| option | `kafka` | `kafka_txn` | why |",
        "|---|---|---|---|",
    ]
    for case in CASES.values():
        if case.differs:
            lines.append(
                f"| {_cell(case.options)} | {yes_no[case.builtin_rejects]} | "
                f"{yes_no[case.we_reject]} | {case.why} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown_table())
