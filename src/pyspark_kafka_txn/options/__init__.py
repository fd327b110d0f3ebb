"""Options of the ``kafka_txn`` source and sink, parsed once on the driver.

Modules: ``common`` (the case-insensitive :class:`OptionView`, value parsers, secrets),
``kafka`` (the ONE translation of ``kafka.*`` options, shared by reader and writer),
``registry`` (every option with its default and doc; feeds the docs tables), ``reader``
and ``writer`` (their frozen option dataclasses and parsers). Nothing here imports pyspark
or kio, so parsing is cheap and unit-testable.
"""

from __future__ import annotations

from pyspark_kafka_txn.errors import ConfigError
from pyspark_kafka_txn.options.common import OptionView, TopicPartition, is_secret, redact
from pyspark_kafka_txn.options.reader import (
    EARLIEST,
    LATEST,
    Assign,
    GlobalTimestamp,
    OffsetBound,
    OffsetSpec,
    ReaderOptions,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
    Subscription,
    parse_reader_options,
)
from pyspark_kafka_txn.options.writer import WriterOptions, parse_writer_options

__all__ = [
    "EARLIEST",
    "LATEST",
    "Assign",
    "ConfigError",
    "GlobalTimestamp",
    "OffsetBound",
    "OffsetSpec",
    "OptionView",
    "ReaderOptions",
    "SpecificOffsets",
    "SpecificTimestamps",
    "Subscribe",
    "SubscribePattern",
    "Subscription",
    "TopicPartition",
    "WriterOptions",
    "is_secret",
    "parse_reader_options",
    "parse_writer_options",
    "redact",
]
