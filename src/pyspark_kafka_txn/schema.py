"""The fixed schema of a ``kafka_txn`` read, as Spark and as Arrow types.

Identical to the built-in Kafka source: ``key, value, topic, partition, offset, timestamp,
timestampType`` plus ``headers`` when ``includeHeaders`` is true. The columns are listed
once, in :data:`COLUMNS`; both schemas are built from that list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = ["COLUMNS", "arrow_schema", "spark_schema"]

#: The columns of every read, in order, with their type: ``binary``, ``string``, ``int``
#: (32-bit), ``long`` (64-bit) or ``timestamp`` (microseconds, UTC). ``headers``
#: (an array of ``key: string, value: binary`` structs) follows when ``includeHeaders``.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("key", "binary"),
    ("value", "binary"),
    ("topic", "string"),
    ("partition", "int"),
    ("offset", "long"),
    ("timestamp", "timestamp"),
    ("timestampType", "int"),
)


def spark_schema(include_headers: bool) -> StructType:
    """The Spark schema of the rows the reader produces.

    Parameters
    ----------
    include_headers
        Whether the ``headers`` column is present.

    Returns
    -------
    StructType
        The built-in Kafka source's schema.
    """
    from pyspark.sql import types as t

    spark_type = {
        "binary": t.BinaryType(),
        "string": t.StringType(),
        "int": t.IntegerType(),
        "long": t.LongType(),
        "timestamp": t.TimestampType(),
    }
    fields = [t.StructField(name, spark_type[kind]) for name, kind in COLUMNS]
    if include_headers:
        header = t.StructType(
            [t.StructField("key", t.StringType()), t.StructField("value", t.BinaryType())]
        )
        fields.append(t.StructField("headers", t.ArrayType(header)))
    return t.StructType(fields)


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow form of :func:`spark_schema`: the schema of the batches ``read()`` yields.

    It equals ``pyspark.sql.pandas.types.to_arrow_schema(spark_schema(include_headers),
    timezone="UTC")``, which is what Spark checks the batches against (a unit test compares
    the two); it is built here without pyspark, whose Arrow conversion imports pandas.
    """
    import pyarrow as pa

    arrow_type = {
        "binary": pa.binary(),
        "string": pa.string(),
        "int": pa.int32(),
        "long": pa.int64(),
        "timestamp": pa.timestamp("us", tz="UTC"),
    }
    fields = [pa.field(name, arrow_type[kind]) for name, kind in COLUMNS]
    if include_headers:
        fields.append(pa.field("headers", headers_type()))
    return pa.schema(fields)


def headers_type() -> pa.DataType:
    """Arrow type of the ``headers`` column: ``list<struct<key: string, value: binary>>``."""
    import pyarrow as pa

    return pa.list_(
        pa.field(
            "element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        )
    )
