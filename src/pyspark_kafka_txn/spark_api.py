"""Which parts of PySpark's Python data source API the installed PySpark has.

The package runs on the Python data source API of PySpark 4.0 and uses the newer interfaces
where they exist. Each one is found by looking for it (an import or an attribute), never by
reading a version number: Databricks runtimes report Spark versions whose Python data
source API differs from Apache Spark's of the same number. What each PySpark release
has, with the sources, is in ``docs/dev/spark-versions.md``.

=====================================  ============  ======================================
interface                              Apache Spark  without it
=====================================  ============  ======================================
``DataSourceArrowWriter`` (batch)      4.0           ``DataSourceWriter``: rows
``DataSourceStreamArrowWriter``        4.1           ``DataSourceStreamWriter``: rows
``pyspark.sql.streaming.datasource``   4.2           the reader limits its own
(``ReadLimit``, admission control,                   ``latestOffset()``; ``Trigger.AvailableNow``
``SupportsTriggerAvailableNow``)                     is not offered to Spark
=====================================  ============  ======================================

Without an Arrow writer, Spark hands ``write()`` an iterator of rows instead of Arrow
record batches; :func:`pyspark_kafka_txn.writer.rows.arrow_batches` turns either into the
batches the one task implementation takes. Without admission control, the read-limit
classes here are stand-ins with the same names and fields, used only inside the reader
(Spark never sees them).
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING

import pyspark.sql.datasource as _datasource

__all__ = [
    "ADMISSION_CONTROL",
    "ARROW_BATCH_WRITER",
    "ARROW_STREAM_WRITER",
    "BatchWriterBase",
    "ReadAllAvailable",
    "ReadLimit",
    "ReadMaxRows",
    "ReadMinRows",
    "StreamWriterBase",
    "SupportsTriggerAvailableNow",
    "describe",
]

logger = logging.getLogger(__name__)


def _admission_control_module() -> object | None:
    try:
        return importlib.import_module("pyspark.sql.streaming.datasource")
    except ImportError:
        return None


#: ``DataSourceArrowWriter``: a batch writer whose ``write()`` takes Arrow record batches.
ARROW_BATCH_WRITER: bool = hasattr(_datasource, "DataSourceArrowWriter")
#: ``DataSourceStreamArrowWriter``: the same for streaming writers.
ARROW_STREAM_WRITER: bool = hasattr(_datasource, "DataSourceStreamArrowWriter")
#: ``pyspark.sql.streaming.datasource``: read limits and ``Trigger.AvailableNow`` for
#: Python streaming readers (``latestOffset(start, limit)``, ``getDefaultReadLimit()``).
ADMISSION_CONTROL: bool = _admission_control_module() is not None

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSourceArrowWriter as BatchWriterBase
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as StreamWriterBase
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        ReadMinRows,
        SupportsTriggerAvailableNow,
    )
else:
    BatchWriterBase = getattr(_datasource, "DataSourceArrowWriter", _datasource.DataSourceWriter)
    StreamWriterBase = getattr(
        _datasource, "DataSourceStreamArrowWriter", _datasource.DataSourceStreamWriter
    )
    if ADMISSION_CONTROL:
        from pyspark.sql.streaming.datasource import (
            ReadAllAvailable,
            ReadLimit,
            ReadMaxRows,
            ReadMinRows,
            SupportsTriggerAvailableNow,
        )
    else:
        from dataclasses import dataclass

        class ReadLimit:
            """Stand-in for PySpark's ``ReadLimit`` (absent from this PySpark)."""

        @dataclass
        class ReadAllAvailable(ReadLimit):
            """Stand-in: read everything available."""

        @dataclass
        class ReadMinRows(ReadLimit):
            """Stand-in: wait for at least ``min_rows`` offsets."""

            min_rows: int

        @dataclass
        class ReadMaxRows(ReadLimit):
            """Stand-in: read at most ``max_rows`` offsets."""

            max_rows: int

        class SupportsTriggerAvailableNow:
            """Stand-in: this PySpark cannot ask a Python source for ``Trigger.AvailableNow``."""


def describe() -> dict[str, bool]:
    """What this PySpark offers, by interface (for logs, tests and bug reports).

    Returns
    -------
    dict[str, bool]
        ``DataSourceArrowWriter``, ``DataSourceStreamArrowWriter`` and
        ``pyspark.sql.streaming.datasource`` mapped to whether they were found.
    """
    return {
        "DataSourceArrowWriter": ARROW_BATCH_WRITER,
        "DataSourceStreamArrowWriter": ARROW_STREAM_WRITER,
        "pyspark.sql.streaming.datasource": ADMISSION_CONTROL,
    }
