"""The reader's Arrow conversion (``reader.executor._to_batch``) against pyarrow's own.

The executor builds each column from numpy buffers so that a fresh Spark Python worker
does not import pandas (``pyarrow.array`` does on first use); here every column is checked
against the straightforward ``pyarrow.array`` construction, the batch against the schema
Spark expects; batches hold at most ``ARROW_BATCH_BYTES`` of values, and one too large for
a binary column is split, never truncated.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any, cast

import pyarrow as pa
import pytest
from confluent_kafka import Message
from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_kafka_txn.errors import KafkaTxnError
from pyspark_kafka_txn.reader import executor
from pyspark_kafka_txn.schema import arrow_schema, spark_schema
from pyspark_kafka_txn.wire import TopicPartition

TP = TopicPartition("tëst-topic", 3)

_blobs = st.none() | st.binary(max_size=40)
_headers = st.none() | st.lists(st.tuples(st.text(max_size=8), _blobs), max_size=3)
_records = st.lists(
    st.tuples(_blobs, _blobs, _headers, st.sampled_from([0, 1, 2, 7]), st.integers(-1, 2**41)),
    min_size=1,
    max_size=60,
)


def _messages(records: list[tuple[Any, ...]]) -> list[Message]:
    return [
        Message(
            topic=TP.topic,
            partition=TP.partition,
            offset=100 + i,
            key=key,
            value=value,
            headers=headers,
            timestamp=(ts_type, stamp),
        )
        for i, (key, value, headers, ts_type, stamp) in enumerate(records)
    ]


def _expected_schema(include_headers: bool) -> pa.Schema:
    """The batches' schema, written out (Spark's Kafka schema, timestamps in UTC)."""
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
        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        fields.append(pa.field("headers", pa.list_(pa.field("element", header))))
    return pa.schema(fields)


def _reference(msgs: list[Message], include_headers: bool) -> pa.RecordBatch:
    """What the rows must be, built with pyarrow.array from Python values."""
    schema = _expected_schema(include_headers)
    stamps = [m.timestamp() for m in msgs]
    columns: list[Any] = [
        pa.array([m.key() for m in msgs], pa.binary()),
        pa.array([m.value() for m in msgs], pa.binary()),
        pa.array([TP.topic] * len(msgs), pa.string()),
        pa.array([TP.partition] * len(msgs), pa.int32()),
        pa.array([m.offset() for m in msgs], pa.int64()),
        pa.array([s * 1000 for _, s in stamps], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.array([t - 1 if t in (0, 1, 2) else -1 for t, _ in stamps], pa.int32()),
    ]
    if include_headers:
        headers = [
            [{"key": k, "value": v} for k, v in h] if h else None
            for h in (cast("list[tuple[str, bytes | None]] | None", m.headers()) for m in msgs)
        ]
        columns.append(pa.array(headers, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


@settings(max_examples=150, deadline=None)
@given(records=_records, include_headers=st.booleans())
def test_batch_equals_pyarrow_construction(
    records: list[tuple[Any, ...]], include_headers: bool
) -> None:
    msgs = _messages(records)
    batch = executor._to_batch(msgs, TP, include_headers)
    batch.validate(full=True)
    assert batch.schema == _expected_schema(include_headers)
    assert batch.equals(_reference(msgs, include_headers))


def test_batches_hold_at_most_arrow_batch_bytes_of_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    msgs = _messages([(b"k", b"v" * (i % 4) * 100, None, 1, 5) for i in range(25)])
    monkeypatch.setattr(executor, "ARROW_BATCH_BYTES", 500)
    batches = executor._to_batches(msgs, TP, include_headers=False)
    sizes = [sum(map(len, b.column("value").to_pylist())) for b in batches]
    assert len(batches) > 1 and max(sizes) <= 500, sizes
    whole = pa.Table.from_batches(batches).combine_chunks()
    assert whole.equals(pa.Table.from_batches([_reference(msgs, include_headers=False)]))


def test_a_record_over_arrow_batch_bytes_gets_a_batch_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    msgs = _messages([(None, b"a" * 10, None, 1, 5), (None, b"b" * 900, None, 1, 5)] * 2)
    monkeypatch.setattr(executor, "ARROW_BATCH_BYTES", 500)
    batches = executor._to_batches(msgs, TP, include_headers=False)
    assert [b.column("value").to_pylist() for b in batches] == [
        [b"a" * 10],
        [b"b" * 900],
        [b"a" * 10],
        [b"b" * 900],
    ]


def test_batches_halve_where_a_binary_column_would_overflow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Keys count against Arrow's column limit too (values alone stay under the byte cap)."""
    msgs = _messages([(b"k" * 4, b"v", None, 1, 5)] * 9)
    monkeypatch.setattr(executor, "_COLUMN_BYTES_MAX", 10)
    batches = executor._to_batches(msgs, TP, include_headers=False)
    assert all(sum(map(len, b.column("key").to_pylist())) <= 10 for b in batches)
    whole = pa.Table.from_batches(batches).combine_chunks()
    assert whole.equals(pa.Table.from_batches([_reference(msgs, include_headers=False)]))


def test_a_record_larger_than_a_column_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor, "_COLUMN_BYTES_MAX", 10)
    msgs = _messages([(b"k" * 11, b"v", None, 1, 5)])
    with pytest.raises(KafkaTxnError, match=r"tëst-topic.*offset 100"):
        executor._to_batches(msgs, TP, include_headers=False)


def test_conversion_does_not_import_pandas() -> None:
    """A fresh worker's first batch must not pay for importing pandas."""
    code = (
        "import sys\n"
        "from confluent_kafka import Message\n"
        "from pyspark_kafka_txn.wire import TopicPartition\n"
        "from pyspark_kafka_txn.reader.executor import _to_batch\n"
        "m = Message(topic='t', partition=0, offset=1, key=None, value=b'v',"
        " headers=[('h', b'x')], timestamp=(1, 5))\n"
        "batch = _to_batch([m], TopicPartition('t', 0), True)\n"
        "assert batch.num_rows == 1, batch\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize("include_headers", [False, True])
def test_arrow_schema_is_what_spark_derives_from_the_spark_schema(include_headers: bool) -> None:
    """The batches' schema is what Spark derives from the source's schema, and both are
    the written-out Kafka schema."""
    from pyspark.sql.pandas.types import to_arrow_schema

    derived = to_arrow_schema(spark_schema(include_headers), timezone="UTC")
    assert arrow_schema(include_headers) == derived == _expected_schema(include_headers)
    assert arrow_schema(include_headers).names == derived.names
