"""Pieces the benchmark scripts share: the broker subprocess and tuned consumer settings."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from typing import Any

# A read_committed consumer tuned for throughput, as a user tuning librdkafka would set it.
FAST_CONSUMER_SETTINGS: dict[str, Any] = {
    "isolation.level": "read_committed",
    "enable.auto.commit": False,
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 4_194_304,
    "fetch.wait.max.ms": 100,
    # librdkafka pauses a partition for fetch.queue.backoff.ms once its prefetch queue
    # holds queued.min.messages; with the defaults (100k / 1000 ms) the read rate is set
    # by that pause, not by the broker.
    "queued.min.messages": 1_000_000,
    "queued.max.messages.kbytes": 1_048_576,
    "fetch.queue.backoff.ms": 0,
}


@contextlib.contextmanager
def broker_process(*args: str) -> Iterator[tuple[str, int]]:
    """Run ``python -m pyspark_kafka_txn broker --port 0 ARGS``; yield (bootstrap, pid)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pyspark_kafka_txn", "broker", "--port", "0", *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line.startswith("bootstrap.servers="):
            raise RuntimeError(f"broker did not start: {line!r}")
        yield line.split("=", 1)[1], proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def memory_batches(
    partition: int, rows: int, value_size: int, key_size: int, batch_rows: int
) -> Iterator[Any]:
    """Arrow record batches of the reader's schema built in memory (the floors' rows):
    ``rows`` rows of Spark partition ``partition``, values of ``value_size`` bytes, keys of
    ``key_size`` bytes (none when 0), ``batch_rows`` rows per batch."""
    import pyarrow as pa

    from pyspark_kafka_txn.schema import arrow_schema

    value, key = b"v" * value_size, (b"k" * key_size if key_size else None)
    for first in range(0, rows, batch_rows):
        n = min(batch_rows, rows - first)
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([key] * n, pa.binary()),
                pa.array([value] * n, pa.binary()),
                pa.array(["topic"] * n, pa.string()),
                pa.array([partition] * n, pa.int32()),
                pa.array(range(first, first + n), pa.int64()),
                pa.array([0] * n, pa.timestamp("us", tz="UTC")),
                pa.array([0] * n, pa.int32()),
            ],
            schema=arrow_schema(False),
        )


def pickle_by_value() -> None:
    """Make Spark send this module's functions to its Python workers by value: the workers
    do not have ``bench/`` on their path (a data source of a benchmark calls
    :func:`memory_batches` in them)."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]


def floor_options(counts: Mapping[int, int], value_size: int, key_size: int) -> dict[str, str]:
    """The options of :func:`floor_source` for ``counts[p]`` rows in Spark partition ``p``."""
    return {
        "counts": json.dumps({str(p): n for p, n in counts.items()}),
        "value_size": str(value_size),
        "key_size": str(key_size),
    }


def floor_source(defaults: Mapping[str, str] | None = None) -> Any:
    """The floor of a read: a Python data source ``bench_floor`` (batch and streaming) that
    yields rows of the reader's schema from memory (:func:`memory_batches`), one Spark
    partition per entry of its ``counts``, nothing fetched: what Spark itself costs for any
    Python source to deliver those rows. Its options are :func:`floor_options`, given to
    the query or, as ``defaults``, here."""
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceReader,
        DataSourceStreamReader,
        InputPartition,
    )

    from pyspark_kafka_txn.reader.executor import ARROW_BATCH_ROWS
    from pyspark_kafka_txn.schema import spark_schema

    pickle_by_value()  # its readers call memory_batches in Spark's workers
    preset = dict(defaults or {})

    class Floor:
        def __init__(self, options: dict[str, str]) -> None:
            self.counts = {int(p): n for p, n in json.loads(options["counts"]).items()}
            self.value_size = int(options["value_size"])
            self.key_size = int(options["key_size"])

        def partitions(self, *_: Any) -> list[InputPartition]:
            return [InputPartition((p, n)) for p, n in sorted(self.counts.items())]

        def read(self, partition: Any) -> Iterator[Any]:
            p, rows = partition.value
            return memory_batches(p, rows, self.value_size, self.key_size, ARROW_BATCH_ROWS)

    class FloorBatch(Floor, DataSourceReader):
        pass

    class FloorStream(Floor, DataSourceStreamReader):
        def initialOffset(self) -> dict[str, int]:  # noqa: N802 - Spark's API
            return {"offset": 0}

        def latestOffset(self, start: Any = None, limit: Any = None) -> dict[str, int]:  # noqa: N802 - Spark's API
            return {"offset": 1}

    class FloorSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_floor"

        def schema(self) -> Any:
            return spark_schema(False)

        def reader(self, schema: Any) -> FloorBatch:
            return FloorBatch({**preset, **self.options})

        def streamReader(self, schema: Any) -> FloorStream:  # noqa: N802 - Spark's API
            return FloorStream({**preset, **self.options})

    return FloorSource
