"""The ``kafka_txn`` PySpark data source: a read_committed reader and an exactly-once writer.

Use it exactly like Spark's built-in Kafka source, with ``format("kafka_txn")``::

    spark.readStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", "host:9092")
        .option("subscribe", "events")
        .load()

    df.writeStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", "host:9092")
        .option("topic", "out")
        .option("checkpointLocation", "/chk")
        .start()

Options of both sides are parsed here, on the driver, before a reader or writer exists
(:mod:`pyspark_kafka_txn.options`). Installing the package registers the source (Spark
auto-registers modules named ``pyspark_*`` that expose ``DefaultSource``);
``spark.dataSource.register(KafkaTxnDataSource)`` works too.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from pyspark_kafka_txn.errors import ConfigError
from pyspark_kafka_txn.options import parse_option, parse_reader_options, parse_writer_options
from pyspark_kafka_txn.reader.batch import KafkaBatchReader
from pyspark_kafka_txn.reader.stream import KafkaStreamReader
from pyspark_kafka_txn.schema import spark_schema

__all__ = ["KafkaTxnDataSource"]


class KafkaTxnDataSource(DataSource):
    """Kafka source honouring transactions: read_committed by default, LSO-bounded.

    Name
    ----
    ``kafka_txn``

    Schema
    ------
    ``key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int`` and, with ``includeHeaders``,
    ``headers array<struct<key string, value binary>>`` — the built-in source's schema.

    Options
    -------
    The built-in Kafka source's options (see ``docs/reader.md``); ``kafka.isolation.level``
    defaults to ``read_committed``.

    Examples
    --------
    >>> df = (spark.read.format("kafka_txn")  # doctest: +SKIP
    ...       .option("kafka.bootstrap.servers", "localhost:9092")
    ...       .option("subscribe", "events").load())
    """

    @classmethod
    def name(cls) -> str:
        """The format name, ``kafka_txn``."""
        return "kafka_txn"

    def schema(self) -> StructType:
        """The fixed Kafka schema (with ``headers`` when ``includeHeaders`` is true)."""
        return spark_schema(self._include_headers())

    def _include_headers(self) -> bool:
        return bool(parse_option(self.options, "includeHeaders"))

    def _check_schema(self, schema: StructType) -> None:
        expected = spark_schema(self._include_headers())
        if schema.simpleString() != expected.simpleString():
            raise ConfigError(
                "Kafka source has a fixed schema and cannot be set with a custom one "
                f"(expected {expected.simpleString()}, got {schema.simpleString()})"
            )

    def reader(self, schema: StructType) -> DataSourceReader:
        """A batch reader (``spark.read``); options are validated here."""
        self._check_schema(schema)
        return KafkaBatchReader(parse_reader_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        """A micro-batch reader (``spark.readStream``); options are validated here."""
        self._check_schema(schema)
        return KafkaStreamReader(parse_reader_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """An exactly-once batch writer (``df.write``).

        Options are validated and the input columns checked here; then the cluster is asked
        (network I/O: see :meth:`~pyspark_kafka_txn.writer.sink.KafkaBatchWriter.start`).

        Raises
        ------
        ConfigError
            For ``mode("overwrite")``: a Kafka topic cannot be overwritten, and the built-in
            ``format("kafka")`` refuses that mode too (``mode("append")`` is the one mode
            Spark lets a Python data source take that fits a Kafka topic).
        """
        if overwrite:
            raise ConfigError(
                'Save mode Overwrite is not allowed for kafka_txn (format("kafka") refuses it '
                'too): records are only ever appended to a Kafka topic; use mode("append")'
            )
        from pyspark_kafka_txn.writer.sink import KafkaBatchWriter

        return KafkaBatchWriter.start(parse_writer_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802
        """An exactly-once micro-batch writer (``df.writeStream``), checked as :meth:`writer`."""
        from pyspark_kafka_txn.writer.sink import KafkaStreamWriter

        return KafkaStreamWriter.start(parse_writer_options(self.options), schema)
