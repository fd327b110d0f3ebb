"""The input of a task's ``write()`` as Arrow record batches, whatever Spark handed it.

A PySpark with an Arrow writer for the kind of write (``DataSourceStreamArrowWriter``,
``DataSourceArrowWriter``: :mod:`pyspark_kafka_txn.spark_api`) gives ``write()`` Arrow
record batches; one without gives it rows. :func:`arrow_batches` passes batches through
and turns rows into batches of the columns the task uses, typed as Spark's Arrow
conversion types them, so that one task implementation
(:func:`~pyspark_kafka_txn.writer.task.write_task`) serves both.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa

__all__ = ["ROWS_PER_BATCH", "arrow_batches", "rows_to_batch"]

logger = logging.getLogger(__name__)

#: Rows gathered into one record batch (Spark's default ``maxRecordsPerBatch`` for Arrow).
ROWS_PER_BATCH = 10_000

_HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
#: The columns the task reads and their Arrow types (``key`` and ``value``: by their values,
#: string or binary).
_FIXED = {
    "topic": pa.string(),
    "partition": pa.int32(),
    "headers": pa.list_(_HEADER),
}
_BYTES = ("key", "value")


def arrow_batches(items: Iterable[Any]) -> Iterator[pa.RecordBatch]:
    """Arrow record batches of ``items``: record batches as they are, rows converted.

    Parameters
    ----------
    items
        What Spark gave ``write()``: Arrow record batches, or ``pyspark.sql.Row`` objects.

    Yields
    ------
    pyarrow.RecordBatch
        The batches, or the rows by :data:`ROWS_PER_BATCH`.
    """
    rows: list[Any] = []
    for item in items:
        if isinstance(item, pa.RecordBatch):
            yield item
            continue
        rows.append(item)
        if len(rows) >= ROWS_PER_BATCH:
            yield rows_to_batch(rows)
            rows = []
    if rows:
        yield rows_to_batch(rows)


def rows_to_batch(rows: Sequence[Any]) -> pa.RecordBatch:
    """One record batch of the columns the task uses (the others are not read).

    ``key`` and ``value`` are binary when their values are bytes (Spark's ``BinaryType``
    rows hold ``bytearray``) and strings when they are ``str``; a column of nulls only is
    binary. ``topic`` is a string, ``partition`` an int32 and ``headers`` a list of
    ``struct<key: string, value: binary>``, as Spark's Arrow conversion gives them.

    Parameters
    ----------
    rows
        ``pyspark.sql.Row`` objects of one schema.
    """
    names: list[str] = list(rows[0].__fields__)
    arrays: list[pa.Array] = []
    fields: list[pa.Field] = []
    for index, name in enumerate(names):
        if name in _BYTES:
            values = [row[index] for row in rows]
            sample = next((v for v in values if v is not None), None)
            kind = pa.string() if isinstance(sample, str) else pa.binary()
            arrays.append(pa.array(values, type=kind))
        elif name == "headers":
            values = [_headers(row[index]) for row in rows]
            arrays.append(pa.array(values, type=_FIXED[name]))
        elif name in _FIXED:
            arrays.append(pa.array([row[index] for row in rows], type=_FIXED[name]))
        else:
            continue
        fields.append(pa.field(name, arrays[-1].type))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _headers(value: Sequence[Any] | None) -> list[dict[str, Any] | None] | None:
    if value is None:
        return None
    return [{"key": h[0], "value": h[1]} if h is not None else None for h in value]
