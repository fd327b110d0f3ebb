"""The reader's Arrow conversion against the straightforward ``pyarrow.array`` one.

No Kafka, no Spark: ``--rows`` librdkafka ``Message`` objects (built in memory, as the
consumer returns them) go through :func:`pyspark_kafka_txn.reader.executor._to_batch`
(columns assembled from numpy buffers) and through a baseline that builds the same batch
with ``pyarrow.array`` from Python lists and ``pyarrow.compute`` for the timestamps (how
the reader built it before). Both run alternately in one process, ``--rounds`` times
each; the table gives the median nanoseconds per record and their ratio, for records
without key or headers and for records with a key and two headers. Every batch of both
is checked equal first.

A separate fresh interpreter per path reports whether the first conversion imported
pandas and how long that first call took: what a new Spark Python worker pays on its
first batch::

    .venv/bin/python bench/arrow_conversion.py
    .venv/bin/python bench/arrow_conversion.py --rows 10000 --rounds 50
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from operator import itemgetter
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Message

from pyspark_kafka_txn.reader.executor import _to_batch
from pyspark_kafka_txn.schema import arrow_schema
from pyspark_kafka_txn.wire import TopicPartition

TP = TopicPartition("bench-topic", 0)


def baseline(msgs: list[Any], tp: TopicPartition, include_headers: bool) -> pa.RecordBatch:
    """The batch built with pyarrow.array / pyarrow.compute from Python lists."""
    schema = arrow_schema(include_headers)
    n = len(msgs)
    stamps = list(map(Message.timestamp, msgs))
    arrays = [
        pa.array(list(map(Message.key, msgs)), pa.binary()),
        pa.array(list(map(Message.value, msgs)), pa.binary()),
        pa.repeat(pa.scalar(tp.topic, pa.string()), n),
        pa.repeat(pa.scalar(tp.partition, pa.int32()), n),
        pa.array(list(map(Message.offset, msgs)), pa.int64()),
        pc.multiply(pa.array(list(map(itemgetter(1), stamps)), pa.int64()), 1000).cast(
            pa.timestamp("us", tz="UTC")
        ),
        pc.subtract(pa.array(list(map(itemgetter(0), stamps)), pa.int32()), 1),
    ]
    if include_headers:
        headers = [
            [{"key": k, "value": v} for k, v in cast("list[tuple[str, bytes | None]]", h)]
            if h
            else None
            for h in map(Message.headers, msgs)
        ]
        arrays.append(pa.array(headers, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def messages(rows: int, with_key_and_headers: bool) -> list[Message]:
    key = b"key-000123" if with_key_and_headers else None
    headers: list[tuple[str, str | bytes | None]] | None = (
        [("trace", b"0123456789"), ("empty", None)] if with_key_and_headers else None
    )
    return [
        Message(
            topic=TP.topic,
            partition=TP.partition,
            offset=i,
            key=key,
            value=b"x" * 100,
            headers=headers,
            timestamp=(1, 1_700_000_000_000 + i),
        )
        for i in range(rows)
    ]


def median_ns(fn: Any, msgs: list[Message], include_headers: bool, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        fn(msgs, TP, include_headers)
        times.append(time.perf_counter() - began)
    return statistics.median(times) / len(msgs) * 1e9


FIRST_CALL = """
import sys, time
from confluent_kafka import Message
sys.path.insert(0, {bench!r})
from arrow_conversion import TP, baseline, messages
from pyspark_kafka_txn.reader.executor import _to_batch
msgs = messages(1000, False)
began = time.perf_counter()
{fn}(msgs, TP, False)
print(round(time.perf_counter() - began, 3), "pandas" in sys.modules)
"""


def first_call(fn: str) -> str:
    code = FIRST_CALL.format(bench=sys.path[0], fn=fn)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds, pandas = out.stdout.split()
    return f"{float(seconds) * 1000:.0f} ms, pandas imported: {pandas}"


def say(line: str) -> None:
    """One line of the report on standard output."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000, help="records per batch")
    parser.add_argument("--rounds", type=int, default=30, help="conversions per path and case")
    args = parser.parse_args()
    say(f"{'records':<28} {'pyarrow.array ns/rec':>21} {'_to_batch ns/rec':>17} {'ratio':>6}")
    for label, rich in (("no key, no headers", False), ("key and two headers", True)):
        msgs = messages(args.rows, rich)
        assert _to_batch(msgs, TP, rich).equals(baseline(msgs, TP, rich))
        base = ours = float("inf")
        for _ in range(2):  # alternate, keep each path's better median
            base = min(base, median_ns(baseline, msgs, rich, args.rounds))
            ours = min(ours, median_ns(_to_batch, msgs, rich, args.rounds))
        say(f"{label:<28} {base:>21.0f} {ours:>17.0f} {ours / base:>6.2f}")
    say("first call in a fresh interpreter (1,000 records):")
    say(f"  pyarrow.array: {first_call('baseline')}")
    say(f"  _to_batch:     {first_call('_to_batch')}")


if __name__ == "__main__":
    main()
