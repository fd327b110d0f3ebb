"""The fixed schema of a ``kafka_txn`` read, as Spark and as Arrow types.

Identical to the built-in Kafka source: ``key, value, topic, partition, offset, timestamp,
timestampType`` plus ``headers`` when ``includeHeaders`` is true.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = ["arrow_schema", "spark_schema"]


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
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema of the record batches ``read()`` yields.

    It equals ``pyspark.sql.pandas.types.to_arrow_schema(spark_schema(...), timezone="UTC")``,
    which is what Spark checks the batches against.

    Parameters
    ----------
    include_headers
        Whether the ``headers`` column is present.

    Returns
    -------
    pyarrow.Schema
        The schema.
    """
    import pyarrow as pa

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
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
