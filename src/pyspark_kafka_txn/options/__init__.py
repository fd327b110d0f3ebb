"""Options of the ``kafka_txn`` source and sink, parsed once on the driver.

Modules: ``common`` (the case-insensitive :class:`OptionView`, secrets), ``values`` (the
value parsers), ``specs`` (the subscription and offset specs and their parsers), ``kafka``
(the ONE translation of ``kafka.*`` options, shared by reader and writer), ``registry`` (one
row per option: parser, default, scope, required, attribute, doc; the groups of options
filling one attribute; each side's ``kafka.*`` pass-through; drives parsing, defaults and
the docs tables), ``reader`` and ``writer`` (their frozen option dataclasses and the checks
that span options of different attributes). Nothing here imports pyspark
or kio, so parsing is cheap and unit-testable. The names below load their modules on
first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark_kafka_txn._lazy import lazy_exports

if TYPE_CHECKING:
    from pyspark_kafka_txn.options.common import OptionView, is_secret, redact
    from pyspark_kafka_txn.options.reader import (
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
    from pyspark_kafka_txn.options.registry import parse_option
    from pyspark_kafka_txn.options.writer import WriterOptions, parse_writer_options

__all__ = [
    "Assign",
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
    "WriterOptions",
    "is_secret",
    "parse_option",
    "parse_reader_options",
    "parse_writer_options",
    "redact",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Assign": "pyspark_kafka_txn.options.reader",
        "GlobalTimestamp": "pyspark_kafka_txn.options.reader",
        "OffsetBound": "pyspark_kafka_txn.options.reader",
        "OffsetSpec": "pyspark_kafka_txn.options.reader",
        "OptionView": "pyspark_kafka_txn.options.common",
        "ReaderOptions": "pyspark_kafka_txn.options.reader",
        "SpecificOffsets": "pyspark_kafka_txn.options.reader",
        "SpecificTimestamps": "pyspark_kafka_txn.options.reader",
        "Subscribe": "pyspark_kafka_txn.options.reader",
        "SubscribePattern": "pyspark_kafka_txn.options.reader",
        "Subscription": "pyspark_kafka_txn.options.reader",
        "WriterOptions": "pyspark_kafka_txn.options.writer",
        "is_secret": "pyspark_kafka_txn.options.common",
        "parse_option": "pyspark_kafka_txn.options.registry",
        "parse_reader_options": "pyspark_kafka_txn.options.reader",
        "parse_writer_options": "pyspark_kafka_txn.options.writer",
        "redact": "pyspark_kafka_txn.options.common",
    },
)
