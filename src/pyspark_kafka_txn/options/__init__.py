"""Options of the ``kafka_txn`` source and sink, parsed once on the driver.

Modules: ``common`` (the case-insensitive :class:`OptionView`, secrets), ``values`` (the
value parsers), ``kafka`` (the ONE translation of ``kafka.*`` options, shared by reader and
writer), ``registry`` (one row per option: parser, default, scope, attribute, doc; drives
parsing, defaults and the docs tables), ``reader`` and ``writer`` (their frozen option
dataclasses and the checks that span several options). Nothing here imports pyspark
or kio, so parsing is cheap and unit-testable.
"""

from __future__ import annotations

from pyspark_kafka_txn.options import reader
from pyspark_kafka_txn.options.common import OptionView, is_secret, redact
from pyspark_kafka_txn.options.reader import *  # noqa: F403 (the names of reader.__all__)
from pyspark_kafka_txn.options.registry import parse_option
from pyspark_kafka_txn.options.writer import WriterOptions, parse_writer_options

__all__ = [
    "OptionView",
    "WriterOptions",
    "is_secret",
    "parse_option",
    "parse_writer_options",
    "redact",
]
__all__ += reader.__all__
