"""Throughput of the ``kafka_txn`` reader against raw confluent-kafka consumers.

One run does the following against one topic on the embedded broker (started as a
separate process, so it does not share a GIL with the readers):

1. produces ``--records`` records of ``--size`` bytes over ``--partitions`` partitions
   with a transactional producer (committed transactions, so the log holds commit
   markers like any transactional topic);
2. **raw**: ``--processes`` N processes of plain confluent-kafka consumers, each
   ``assign()``ed a share of the partitions, ``read_committed``, reading to the end and
   summing key and value lengths;
3. **reader**: the connector's executor read path (:func:`read_range`) in N processes,
   one range per partition, without Spark, summing the key and value column lengths;
4. **spark**: ``spark.readStream.format("kafka_txn")`` with ``trigger(availableNow=True)``
   into ``format("noop")`` on ``local[N]``, timed from ``start()`` to termination. It
   runs ``--spark-runs`` times on the same SparkSession (fresh checkpoint each time): the
   first run pays for the JVM-side query start-up and the Python workers' imports.
   Each run also reads the same topic with ``spark.read.format("kafka_txn")`` into
   ``noop`` (a batch job: no source runner process, no checkpoint), which is issue 13's
   point of comparison for the streaming read, and the floor query below.

Example::

    .venv/bin/python bench/reader_throughput.py --records 1000000 --size 100 --partitions 4
    .venv/bin/python bench/reader_throughput.py --plot reader-throughput.png

This is a benchmark, not a test: it only checks that every record was read.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from _common import (
    FAST_CONSUMER_SETTINGS,
    broker_process,
    floor_options,
    floor_source,
)
from _plot import FIGSIZE, pyplot, save

_START_TIMEOUT_S = 60.0

PRODUCER_SETTINGS: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "batch.num.messages": 10_000,
    "queue.buffering.max.messages": 500_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "compression.type": "none",
}
# The raw consumers get the settings a user tuning for throughput would pick (the same
# as bench/broker_throughput.py), so the comparison is against a tuned librdkafka loop.
RAW_CONSUMER_SETTINGS: dict[str, Any] = {**FAST_CONSUMER_SETTINGS, "enable.partition.eof": True}


@dataclass(frozen=True, slots=True)
class Options:
    """Command-line options."""

    records: int
    size: int
    key_size: int
    partitions: int
    processes: int
    txn_records: int
    spark_runs: int
    skip_spark: bool
    plot: str | None


@dataclass(frozen=True, slots=True)
class Result:
    """One measured phase."""

    name: str
    records: int
    seconds: float
    note: str = ""

    @property
    def rate(self) -> float:
        """Records per second."""
        return self.records / self.seconds if self.seconds > 0 else float("inf")


# --------------------------------------------------------------------------- broker


@contextlib.contextmanager
def broker(topic: str, partitions: int) -> Iterator[str]:
    """Run ``python -m pyspark_kafka_txn broker --port 0 --topic`` and yield its address."""
    with broker_process("--topic", f"{topic}:{partitions}") as (address, _pid):
        yield address


# --------------------------------------------------------------------------- produce


def produce(bootstrap: str, topic: str, opts: Options) -> float:
    """Produce the records round-robin over the partitions; return the seconds taken."""
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"bench-reader-{uuid.uuid4().hex[:8]}",
            "on_delivery": on_delivery,
            **PRODUCER_SETTINGS,
        }
    )
    producer.init_transactions(30)
    value = os.urandom(opts.size)
    started = time.monotonic()
    left = opts.records
    n = 0
    send = producer.produce
    while left > 0:
        count = min(left, opts.txn_records)
        producer.begin_transaction()
        for _ in range(count):
            while True:
                try:
                    key = b"%0*d" % (opts.key_size, n) if opts.key_size else None
                    send(topic, value, key, n % opts.partitions)
                    break
                except BufferError:
                    producer.poll(0.005)
            n += 1
        producer.commit_transaction(120)
        left -= count
    elapsed = time.monotonic() - started
    if errors:
        raise RuntimeError(f"produce failed: {errors[0]}")
    return elapsed


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """High watermark of each partition (= LSO: every transaction is committed)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def shares(partitions: int, processes: int) -> list[list[int]]:
    """Partitions of each process, round-robin."""
    return [list(range(i, partitions, processes)) for i in range(processes)]


# --------------------------------------------------------------------------- raw


def _raw_worker(
    bootstrap: str, topic: str, ranges: list[tuple[int, int]], go: Any, out: Any
) -> None:
    """A plain consume loop over ``(partition, end)`` ranges from offset 0, all assigned."""
    out.put("ready")
    go.wait()
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-raw", **RAW_CONSUMER_SETTINGS}
    )
    ends = dict(ranges)
    following = dict.fromkeys(ends, 0)
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    pending = set(ends)
    count = 0
    total = 0
    while pending:
        # consume() waits for as many messages as asked for: ask for at most the
        # offsets left, so the last call returns with the end-of-partition events.
        left = sum(ends[p] - following[p] for p in pending)
        msgs: list[Any] = consumer.consume(max(1, min(10_000, left)), 1.0)
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                    continue
                raise KafkaException(err)
            following[msg.partition()] = msg.offset() + 1
            key = msg.key()
            total += len(msg.value()) + (len(key) if key is not None else 0)
            count += 1
    consumer.close()
    out.put((count, total))


def _reader_worker(
    bootstrap: str, topic: str, ranges: list[tuple[int, int]], go: Any, out: Any
) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    from pyspark_kafka_txn.options import parse_reader_options
    from pyspark_kafka_txn.reader.common import KafkaInputPartition
    from pyspark_kafka_txn.reader.executor import read_range

    options = parse_reader_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=True
    )
    pa.array([0])  # pyarrow imports pandas on first use (0.5 s): a Spark worker's fixed cost
    out.put("ready")
    go.wait()
    count = 0
    total = 0
    for p, end in ranges:
        partition = KafkaInputPartition(topic, p, 0, end)
        for batch in read_range(options, partition, group_id="bench-reader"):
            count += batch.num_rows
            for name in ("key", "value"):
                lengths = pc.binary_length(batch.column(name))
                total += pc.sum(lengths).as_py() or 0
    out.put((count, total))


def run_processes(name: str, target: Any, args_per_process: list[tuple[Any, ...]]) -> Result:
    """Start one process per argument tuple, release them together, time until all end."""
    ctx = mp.get_context("fork")
    go = ctx.Event()
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*a, go, out)) for a in args_per_process]
    for proc in procs:
        proc.start()
    for _ in procs:  # every child has done its imports: start the clock
        if out.get(timeout=120) != "ready":
            raise RuntimeError(f"{name}: a worker failed to start")
    started = time.monotonic()
    go.set()
    results = [out.get(timeout=600) for _ in procs]
    elapsed = time.monotonic() - started
    for proc in procs:
        proc.join()
        if proc.exitcode != 0:
            raise RuntimeError(f"{name}: a worker exited with {proc.exitcode}")
    count = sum(c for c, _ in results)
    total = sum(t for _, t in results)
    return Result(name, count, elapsed, f"{total} key+value bytes")


# --------------------------------------------------------------------------- spark


def _floor_source(counts: dict[int, int], value_size: int, key_size: int) -> Any:
    """A Python streaming source yielding the same rows as the topic, built in memory.

    One task per partition yields ``counts[p]`` rows of the reader's schema in Arrow batches
    of the reader's size, with nothing to fetch or decode. The same ``availableNow`` →
    ``noop`` query on it, in the same session, measures what Spark itself costs for a
    Python data source to deliver these rows: query start-up, planning, Python workers and
    the Arrow → JVM hand-over. It is the floor under the ``kafka_txn`` query's time.
    """
    return floor_source(floor_options(counts, value_size, key_size))


def _timed_query(spark: Any, df: Any) -> tuple[float, Any]:
    """Run ``df`` with ``availableNow`` into ``noop``; return (seconds, query)."""
    with tempfile.TemporaryDirectory(prefix="bench-ckpt-") as ckpt:
        started = time.monotonic()
        query = (
            df.writeStream.format("noop")
            .trigger(availableNow=True)
            .option("checkpointLocation", ckpt)
            .start()
        )
        query.awaitTermination()
        return time.monotonic() - started, query


def spark_runs(bootstrap: str, topic: str, opts: Options) -> list[Result]:
    """``availableNow`` into ``noop``, ``opts.spark_runs`` times on one SparkSession."""
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master(f"local[{opts.processes}]")
        .appName("kafka_txn-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(opts.processes))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    results: list[Result] = []
    # The records were produced round-robin: record n went to partition n % partitions.
    counts = {p: len(range(p, opts.records, opts.partitions)) for p in range(opts.partitions)}
    spark.dataSource.register(_floor_source(counts, opts.size, opts.key_size))
    try:
        for run in range(1, opts.spark_runs + 1):
            df = (
                spark.readStream.format("kafka_txn")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic)
                .option("startingOffsets", "earliest")
                .load()
            )
            elapsed, query = _timed_query(spark, df)
            progress = [p for p in query.recentProgress if p["numInputRows"]]
            rows = sum(p["numInputRows"] for p in progress)
            add_batch = sum(p["durationMs"].get("addBatch", 0) for p in progress) / 1000
            trigger = sum(p["durationMs"].get("triggerExecution", 0) for p in progress)
            results.append(
                Result(
                    f"spark run {run}",
                    rows,
                    elapsed,
                    f"{len(progress)} batch(es); addBatch {add_batch:.2f} s, "
                    f"triggerExecution {trigger / 1000:.2f} s",
                )
            )
            results.append(Result(f"spark run {run} addBatch", rows, add_batch))
            started = time.monotonic()
            (
                spark.read.format("kafka_txn")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic)
                .load()
                .write.format("noop")
                .mode("overwrite")
                .save()
            )
            results.append(
                Result(
                    f"spark run {run} batch read",
                    opts.records,  # noop counts nothing: checked by the streaming run
                    time.monotonic() - started,
                    "spark.read (no source runner, no checkpoint): the same rows",
                )
            )
            floor_s, floor = _timed_query(spark, spark.readStream.format("bench_floor").load())
            floor_rows = sum(p["numInputRows"] for p in floor.recentProgress)
            results.append(
                Result(
                    f"spark run {run} floor",
                    floor_rows,
                    floor_s,
                    "the same rows from memory: Spark's own cost for a Python source",
                )
            )
    finally:
        spark.stop()
    return results


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> Options:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records to produce")
    parser.add_argument("--size", type=int, default=100, help="value bytes per record")
    parser.add_argument("--key-size", type=int, default=0, help="key bytes (0: no key)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the topic")
    parser.add_argument(
        "--processes", type=int, default=2, help="raw consumer processes = Spark local[N]"
    )
    parser.add_argument("--txn-records", type=int, default=50_000, help="records per txn")
    parser.add_argument("--spark-runs", type=int, default=2, help="queries on one session")
    parser.add_argument("--skip-spark", action="store_true", help="raw and reader only")
    parser.add_argument(
        "--plot", metavar="FILE.png", help="draw records/s of every phase, with its ratio to raw"
    )
    args = parser.parse_args(argv)
    return Options(
        records=args.records,
        size=args.size,
        key_size=args.key_size,
        partitions=args.partitions,
        processes=args.processes,
        txn_records=args.txn_records,
        spark_runs=args.spark_runs,
        skip_spark=args.skip_spark,
        plot=args.plot,
    )


def _table(results: list[Result], baseline: float) -> str:
    lines = [
        f"| {'phase':<25} | {'records':>9} | {'seconds':>7} | {'records/s':>10} | "
        f"{'ratio':>5} | note",
        f"|{'-' * 27}|{'-' * 10}:|{'-' * 8}:|{'-' * 11}:|{'-' * 6}:|------",
    ]
    for r in results:
        lines.append(
            f"| {r.name:<25} | {r.records:>9} | {r.seconds:>7.2f} | {r.rate:>10,.0f} | "
            f"{r.rate / baseline:>5.2f} | {r.note}"
        )
    return "\n".join(lines) + "\n"


#: (legend label, colour) of each kind of phase, in the legend's order.
_KINDS: dict[str, tuple[str, str]] = {
    "raw": ("raw confluent-kafka", "tab:grey"),
    "reader": ("kafka_txn reader, no Spark", "tab:blue"),
    "query": ("Spark query, start to end", "tab:orange"),
    "addBatch": ("Spark query, addBatch only", "navajowhite"),
    "floor": ("Spark floor: rows from memory", "tab:green"),
    "batch": ("spark.read (batch), same rows", "tab:purple"),
}


def _kind(name: str) -> str:
    """The kind of phase a result's name denotes (a key of ``_KINDS``)."""
    if name.startswith(("raw", "reader")):
        return name.split()[0]
    if name.endswith("batch read"):
        return "batch"
    return name.rsplit(" ", 1)[1] if name.endswith(("addBatch", "floor")) else "query"


def plot(results: list[Result], baseline: float, opts: Options, path: str) -> None:
    """Horizontal bars: records/s of every phase, labelled with its ratio to raw."""
    plt = pyplot()
    from matplotlib.patches import Patch
    from matplotlib.ticker import EngFormatter

    height = max(FIGSIZE[1], 2.2 + 0.28 * len(results))
    fig, ax = plt.subplots(figsize=(FIGSIZE[0], height), layout="constrained")
    kinds = [_kind(r.name) for r in results]
    rows = range(len(results))
    bars = ax.barh(rows, [r.rate for r in results], color=[_KINDS[k][1] for k in kinds])
    ratios = [f"{r.rate / baseline:.2f}\N{MULTIPLICATION SIGN}" for r in results]
    ax.bar_label(bars, ratios, padding=3, fontsize=8)
    ax.set_yticks(rows, [r.name for r in results], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlim(0, max(r.rate for r in results) * 1.12)
    ax.xaxis.set_major_formatter(EngFormatter())
    ax.set_xlabel("records/s (bar labels: ratio to the faster raw run)")
    ax.set_title("kafka_txn reader against raw confluent-kafka consumers")
    shown = list(dict.fromkeys(k for k in _KINDS if k in kinds))
    fig.legend(
        [Patch(color=_KINDS[k][1]) for k in shown],
        [_KINDS[k][0] for k in shown],
        loc="outside lower center",
        ncol=3,
        fontsize=8,
        title=f"{opts.records:,} records of {opts.size} B, {opts.partitions} partitions, "
        f"{opts.processes} processes / local[{opts.processes}]",
        title_fontsize=8,
    )
    save(fig, path)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a table."""
    opts = parse_args(argv)
    topic = f"bench-reader-{uuid.uuid4().hex[:8]}"
    with broker(topic, opts.partitions) as bootstrap:
        AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=_START_TIMEOUT_S)
        produce_s = produce(bootstrap, topic, opts)
        ends = end_offsets(bootstrap, topic, opts.partitions)
        sys.stdout.write(
            f"produced {opts.records} x {opts.size} B (key {opts.key_size} B) over "
            f"{opts.partitions} partitions in {produce_s:.2f} s; end offsets {ends}\n"
        )
        groups = shares(opts.partitions, opts.processes)
        results = [
            run_processes(
                "raw confluent-kafka",
                _raw_worker,
                [(bootstrap, topic, [(p, ends[p]) for p in parts]) for parts in groups],
            ),
            run_processes(
                "reader (no Spark)",
                _reader_worker,
                [(bootstrap, topic, [(p, ends[p]) for p in parts]) for parts in groups],
            ),
        ]
        if not opts.skip_spark:
            results.extend(spark_runs(bootstrap, topic, opts))
        # Again at the end: the machine's load drifts during the run.
        results.append(
            run_processes(
                "raw confluent-kafka (end)",
                _raw_worker,
                [(bootstrap, topic, [(p, ends[p]) for p in parts]) for parts in groups],
            )
        )
    for r in results:
        if r.records != opts.records:
            raise RuntimeError(f"{r.name}: read {r.records} records, expected {opts.records}")
    # The baseline is the faster of the two raw runs (the stricter comparison).
    raw = max(r.rate for r in results if r.name.startswith("raw"))
    sys.stdout.write(
        f"local[{opts.processes}] / {opts.processes} raw processes, cpu_count={os.cpu_count()}, "
        f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}\n"
    )
    sys.stdout.write(_table(results, raw))
    reader = next(r.rate for r in results if r.name.startswith("reader"))
    sys.stdout.write(f"ratio reader (no Spark) / raw: {reader / raw:.2f}\n")
    spark = [r for r in results if r.name.startswith("spark")]
    queries = [r for r in spark if r.name.endswith(tuple("0123456789"))]
    batches = [r for r in spark if r.name.endswith("addBatch")]
    floors = [r for r in spark if r.name.endswith("floor")]
    batch_reads = [r for r in spark if r.name.endswith("batch read")]
    if queries:

        def summary(ratios: list[float]) -> str:
            later = f", best later run {max(ratios[1:]):.2f}" if len(ratios) > 1 else ""
            return f"first run {ratios[0]:.2f}{later}"

        def to_raw(rs: list[Result]) -> str:
            return summary([r.rate / raw for r in rs])

        sys.stdout.write(
            f"ratio Spark query (start to termination) / raw: {to_raw(queries)}\n"
            f"ratio Spark addBatch (the tasks) / raw: {to_raw(batches)}\n"
            f"ratio Spark batch read (spark.read, same rows) / raw: {to_raw(batch_reads)}\n"
            f"ceiling for any Python source (the floor query) / raw: {to_raw(floors)}\n"
            "ratio kafka_txn query / floor query (1.00 = nothing above Spark's own cost): "
            + summary([f.seconds / q.seconds for q, f in zip(queries, floors, strict=True)])
            + "\n"
        )
    if opts.plot:
        plot(results, raw, opts, opts.plot)
        sys.stdout.write(f"plot written to {opts.plot}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
