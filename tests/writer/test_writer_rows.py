"""Rows (what a PySpark without an Arrow writer hands ``write()``) become the record
batches the task takes, typed as Spark's Arrow conversion types the same columns."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import Row

from pyspark_kafka_txn.writer import rows as rows_module
from pyspark_kafka_txn.writer.rows import arrow_batches, rows_to_batch


def test_rows_become_a_batch_of_the_columns_the_task_reads() -> None:
    rows = [
        Row(
            key=bytearray(b"k1"),
            value="v1",
            topic="t",
            partition=1,
            headers=[Row(key="h", value=bytearray(b"x")), Row(key="n", value=None)],
            other=3.5,
        ),
        Row(key=None, value=None, topic="u", partition=None, headers=None, other=None),
    ]
    batch = rows_to_batch(rows)
    assert batch.schema.names == ["key", "value", "topic", "partition", "headers"]
    assert batch.schema.field("key").type == pa.binary()
    assert batch.schema.field("value").type == pa.string()
    assert batch.schema.field("partition").type == pa.int32()
    assert batch.to_pylist() == [
        {
            "key": b"k1",
            "value": "v1",
            "topic": "t",
            "partition": 1,
            "headers": [{"key": "h", "value": b"x"}, {"key": "n", "value": None}],
        },
        {"key": None, "value": None, "topic": "u", "partition": None, "headers": None},
    ]


def test_a_column_of_nulls_is_binary() -> None:
    batch = rows_to_batch([Row(value=None), Row(value=None)])
    assert batch.schema.field("value").type == pa.binary()
    assert batch.column(0).null_count == 2


def test_record_batches_pass_through_and_rows_are_chunked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    given = pa.RecordBatch.from_pydict({"value": pa.array([b"a"])})
    assert list(arrow_batches(iter([given]))) == [given]
    monkeypatch.setattr(rows_module, "ROWS_PER_BATCH", 2)
    out = list(arrow_batches(Row(value=str(i)) for i in range(5)))
    assert [b.num_rows for b in out] == [2, 2, 1]
    assert [v for b in out for v in b.column(0).to_pylist()] == [str(i) for i in range(5)]
