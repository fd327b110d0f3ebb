"""The input columns the writer accepts: those of Spark's built-in Kafka sink."""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from pyspark_kafka_txn.errors import ConfigError

__all__ = ["check_input_schema"]

_BYTES = (StringType, BinaryType)


def _is_headers(data_type: DataType) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    fields = {f.name: f.dataType for f in data_type.elementType.fields}
    return (
        set(fields) == {"key", "value"}
        and isinstance(fields["key"], StringType)
        and isinstance(fields["value"], BinaryType)
    )


def check_input_schema(schema: StructType, topic_option: str | None) -> None:
    """Check the columns at query start; the error names the column at fault.

    ``value`` (string or binary) is required; ``key`` (string or binary), ``topic``
    (string; required unless the ``topic`` option is set, which wins), ``partition`` (int)
    and ``headers`` (``array<struct<key: string, value: binary>>``) are optional; other
    columns are ignored, as by the built-in sink.

    Raises
    ------
    ConfigError
        For a missing or mistyped column.
    """
    types = {f.name.lower(): f.dataType for f in schema.fields}
    value = types.get("value")
    if value is None:
        raise ConfigError("Required attribute 'value' not found in the input columns")
    if not isinstance(value, _BYTES):
        raise ConfigError(
            f"value attribute type must be a string or binary, got {value.simpleString()}"
        )
    key = types.get("key")
    if key is not None and not isinstance(key, _BYTES):
        raise ConfigError(
            f"key attribute type must be a string or binary, got {key.simpleString()}"
        )
    topic = types.get("topic")
    if topic_option is None and topic is None:
        raise ConfigError(
            "topic option required when no 'topic' attribute is present. Use the option "
            "'topic' to set a topic."
        )
    if topic is not None and not isinstance(topic, StringType):
        raise ConfigError(f"topic attribute type must be a string, got {topic.simpleString()}")
    partition = types.get("partition")
    if partition is not None and not isinstance(partition, IntegerType):
        raise ConfigError(
            f"partition attribute type must be an int, got {partition.simpleString()}"
        )
    headers = types.get("headers")
    if headers is not None and not _is_headers(headers):
        raise ConfigError(
            "headers attribute type must be array<struct<key:string,value:binary>>, got "
            f"{headers.simpleString()}"
        )
