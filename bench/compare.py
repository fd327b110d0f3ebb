"""``kafka_txn`` side by side with Spark's built-in ``format("kafka")``, on Apache Kafka.

One command (``make bench-compare``), one run, one ``local[2]`` SparkSession holding both
connectors (the built-in one's jars come from Maven Central through
``tests/support/spark_kafka.py``), one single-node Apache Kafka cluster started from its
jars (``tests/support/apache_kafka``). Every comparison is a set of interleaved rounds
(the order of the contenders rotates each round); a ratio is taken within a round and
the report gives the median over the rounds with the range.

**Reader.** Two topics of 4 partitions written in committed transactions (1M x 100 B and
100k x 10 KiB values, 8-byte distinct keys) are read, batch (``spark.read`` → ``noop``)
and streaming (``trigger(availableNow=True)`` → ``noop``), by

* ``kafka_txn`` with its defaults (read_committed),
* ``format("kafka")`` with ``kafka.isolation.level=read_committed``,
* the **floor**: a Python data source that yields the same rows from memory in Arrow
  batches (what Spark itself costs for any Python source to deliver them).

**Writer.** The 1M x 100 B topic is copied to a fresh topic by a streaming query
(``format("kafka")`` reader, read_committed, ``maxOffsetsPerTrigger`` 250,000: four
micro-batches, ``availableNow``) into ``kafka_txn`` exactly_once, ``kafka_txn``
at_least_once, ``format("kafka")`` (at least once), a Python sink that drops the Arrow
batches it is handed (the floor: what Spark costs for any Python sink) and ``noop`` (the
reading alone). The input side is the same for all, so the differences are the writers'.
Wall time and CPU seconds per million records of everything on the Spark side (driver,
executors, Python workers) are reported, beside the broker's CPU. The exactly-once overhead is
exactly_once over at_least_once in CPU time within a round.

**End to end.** A feeder produces 1,000 and 20,000 records/s of 100 B into a topic; a
query copies it to another (``trigger(processingTime="0 seconds")``, defaults
otherwise); a read_committed consumer measures produce → visible, p50/p95/p99
(``bench/latency.py`` does the measuring): ``kafka_txn`` → ``kafka_txn`` exactly_once
against ``format("kafka")`` → ``format("kafka")`` (at least once). Beside them, at the same
rate, the floor of any Python pipeline: a Python source of rows from memory into the null
Python sink, with 4 Spark partitions per micro-batch and with 1 (its micro-batch phases:
it writes nothing a consumer could see).

Every run is checked: the streaming reads count their rows, the writes are read back by
a read_committed librdkafka consumer (exactly the input count), the latency runs check
every record arrived exactly once.

Every section runs 5 rounds by default. The report leads with the end-to-end p50, p95 and
p99 of both connectors at each rate and each percentile's ratio within a round; the raw
report (``--json``, by default beside ``--report``) holds the commit, the versions, the
machine, the load average before and after every measured phase, the share of the CPU
other work took during it, and every run. A run in which, during any measured phase,
processes outside the benchmark took more than ``--max-other-cpu`` of the machine's CPU
(default 10 %; without ``/proc``, a 1-minute load average above ``--max-load``) is marked
"not for publishing" at the top of the report and the script exits with status 3, unless
``--allow-loaded`` is given (``bench/README.md``, "The load rule"). Example::

    make bench-compare
    .venv/bin/python bench/compare.py --quick --allow-loaded   # small sizes, 1 round: a try-out
    .venv/bin/python bench/compare.py --sections reader --rounds 5 --report out.md
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support

from tests.support.apache_kafka.cluster import ApacheKafka
from tests.support.spark_kafka import connector

import latency
import reader_throughput
from _common import floor_options, floor_source, memory_batches, pickle_by_value
from _run_info import DEFAULT_MAX_OTHER_CPU, LoadLog, default_max_load, describe, load_check
from _run_info import header as run_info_header
from _verify import committed_count
from writer_overhead import CpuMeter, null_sink

TXN = "kafka_txn"
BUILTIN = 'format("kafka")'
FLOOR = "floor"
EXACTLY_ONCE = "kafka_txn exactly_once"
AT_LEAST_ONCE = "kafka_txn at_least_once"
BUILTIN_WRITER = 'format("kafka") (at least once)'
READING_ONLY = "noop (reading only)"
NULL_SINK = "null Python sink (floor)"
#: The end-to-end floors: a Python source of rows from memory into the null Python sink.
PYTHON_FLOOR = "floor: Python source -> null Python sink"
PARTITIONS = 4
KEY_SIZE = 8
ARROW_ROWS = 10_000


@dataclass(frozen=True)
class Dataset:
    """A topic of ``records`` values of ``size`` bytes."""

    records: int
    size: int
    topic: str = ""

    @property
    def label(self) -> str:
        size = f"{self.size // 1024} KiB" if self.size >= 1024 else f"{self.size} B"
        return f"{self.records:,} x {size}"


@dataclass
class Measure:
    """One timed run."""

    section: str
    case: str
    contender: str
    round: int
    records: int
    wall_s: float
    spark_cpu_s: float = 0.0
    broker_cpu_s: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)


def say(line: str = "") -> None:
    """One line of the report on standard output, at once."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def rotated(items: Sequence[str], by: int) -> list[str]:
    """``items`` rotated left by ``by``: each round starts with another contender."""
    k = by % len(items)
    return [*items[k:], *items[:k]]


# --------------------------------------------------------------------------- setup


def spark_session(jars: str) -> Any:
    """One ``local[2]`` SparkSession with both connectors and the floors' data sources."""
    spark = latency.spark_session("kafka_txn-vs-builtin", jars)
    pickle_by_value()  # the ticker's rows come from bench/_common.py
    spark.dataSource.register(floor_source())
    spark.dataSource.register(null_sink())
    spark.dataSource.register(ticker_source())
    return spark


def create_topic(bootstrap: str, prefix: str) -> str:
    """A fresh topic of :data:`PARTITIONS` partitions."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(60)
    return name


def fill(bootstrap: str, data: Dataset) -> Dataset:
    """Write ``data`` to a fresh topic in committed transactions of 50,000 records
    (``bench/reader_throughput.py``'s producer: distinct 8-byte keys, partitions in turn)."""
    topic = create_topic(bootstrap, f"cmp-{data.records}x{data.size}")
    opts = reader_throughput.Options(
        records=data.records,
        size=data.size,
        key_size=KEY_SIZE,
        partitions=PARTITIONS,
        processes=1,
        txn_records=50_000,
        spark_runs=0,
        skip_spark=True,
        plot=None,
    )
    reader_throughput.produce(bootstrap, topic, opts)
    return Dataset(data.records, data.size, topic)


def ticker_source() -> Any:
    """A Python streaming source of ``rate`` rows per second built in memory, in
    ``partitions`` Spark partitions per micro-batch: with the null Python sink, the
    micro-batch time of a pipeline that reads and writes nothing but Spark's own hand-overs
    to and from Python, and the sink's ``commit()``."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    from pyspark_kafka_txn.schema import spark_schema

    class TickerReader(DataSourceStreamReader):
        def __init__(self, options: dict[str, str]) -> None:
            self.rate = int(options["rate"])
            self.parts = int(options["partitions"])
            self.started = time.time()

        def initialOffset(self) -> dict[str, int]:  # noqa: N802 - Spark's API
            return {"offset": 0}

        def latestOffset(self, start: Any = None, limit: Any = None) -> dict[str, int]:  # noqa: N802 - Spark's API
            return {"offset": int((time.time() - self.started) * self.rate)}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            first, last = start["offset"], end["offset"]
            step = max(1, -(-(last - first) // self.parts))
            return [
                InputPartition((p, lo, min(last, lo + step)))
                for p, lo in enumerate(range(first, last, step))
            ]

        def read(self, partition: Any) -> Iterator[Any]:
            p, lo, hi = partition.value
            return memory_batches(p, hi - lo, 100, KEY_SIZE, ARROW_ROWS)

    class Ticker(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_ticker"

        def schema(self) -> Any:
            return spark_schema(False)

        def streamReader(self, schema: Any) -> TickerReader:  # noqa: N802 - Spark's API
            return TickerReader(dict(self.options))

    return Ticker


def python_floor(
    spark: Any, rate: int, partitions: int, args: argparse.Namespace
) -> dict[str, float]:
    """Run the ticker → null Python sink at ``rate`` for warm-up + duration; return the
    medians of the micro-batch phases measured (ms)."""
    with tempfile.TemporaryDirectory(prefix="bench-cmp-floor-") as ckpt:
        query = (
            spark.readStream.format("bench_ticker")
            .option("rate", str(rate))
            .option("partitions", str(partitions))
            .load()
            .writeStream.format("bench_null_sink")
            .option("checkpointLocation", ckpt)
            .trigger(processingTime="0 seconds")
            .start()
        )
        measure_from = time.time() + args.warmup
        time.sleep(args.warmup + args.duration)
        progress = query.recentProgress
        query.stop()
        if query.exception() is not None:
            raise RuntimeError(f"the floor pipeline failed: {query.exception()}")
    phases: dict[str, list[float]] = {}
    for prog in progress:
        if prog["numInputRows"] and latency._epoch_s(prog["timestamp"]) >= measure_from:
            for phase, ms in prog["durationMs"].items():
                phases.setdefault(phase, []).append(ms)
    return {k: statistics.median(v) for k, v in phases.items()}


# --------------------------------------------------------------------------- reader


def reader(spark: Any, bootstrap: str, data: Dataset, contender: str, stream: bool) -> Any:
    """The DataFrame ``contender`` reads ``data`` with, batch or streaming."""
    r = spark.readStream if stream else spark.read
    if contender == FLOOR:
        share = data.records // PARTITIONS
        counts = {p: share + (1 if p < data.records % PARTITIONS else 0) for p in range(PARTITIONS)}
        return r.format("bench_floor").options(**floor_options(counts, data.size, KEY_SIZE)).load()
    r = (
        r.format("kafka_txn" if contender == TXN else "kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", data.topic)
        .option("startingOffsets", "earliest")
    )
    if contender == BUILTIN:
        r = r.option("kafka.isolation.level", "read_committed")
    return r.load()


def timed(
    cpu: CpuMeter, broker_pid: int, run: Callable[[], int]
) -> tuple[int, float, float, float]:
    """Run ``run`` (returning its record count); (records, wall s, Spark CPU s, broker CPU s)."""
    cpu.start()
    started = time.monotonic()
    records = run()
    wall = time.monotonic() - started
    total = cpu.stop()
    broker = cpu.used_by(broker_pid)
    return records, wall, total - broker, broker


def stream_to(df: Any, writer: Callable[[Any], Any]) -> Any:
    """Start ``writer(df.writeStream)`` with ``availableNow`` and a fresh checkpoint; wait."""
    with tempfile.TemporaryDirectory(prefix="bench-cmp-ckpt-") as ckpt:
        query = (
            writer(df.writeStream).option("checkpointLocation", ckpt).trigger(availableNow=True)
        ).start()
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"the query failed: {query.exception()}")
        return query


def rows_of(query: Any) -> int:
    """The rows a finished streaming query read, from its progress."""
    return sum(int(p["numInputRows"]) for p in query.recentProgress)


def read_once(spark: Any, bootstrap: str, data: Dataset, contender: str, stream: bool) -> int:
    """One read of ``data`` into ``noop``; returns the rows read (batch: the input size)."""
    df = reader(spark, bootstrap, data, contender, stream)
    if stream:
        got = rows_of(stream_to(df, lambda w: w.format("noop")))
        if got != data.records:
            raise RuntimeError(f"{contender} read {got} of {data.records} records of {data.label}")
        return got
    df.write.format("noop").mode("overwrite").save()
    return data.records


def reader_section(
    spark: Any,
    bootstrap: str,
    broker_pid: int,
    cpu: CpuMeter,
    sets: list[Dataset],
    rounds: int,
    load: LoadLog,
) -> list[Measure]:
    """Every dataset, batch and streaming, by the three contenders, ``rounds`` rounds."""
    found: list[Measure] = []
    for r in range(rounds):
        for data in sets:
            for stream in (False, True):
                case = f"{data.label}, {'availableNow' if stream else 'batch'}"
                for who in rotated((TXN, BUILTIN, FLOOR), r):

                    def run(d: Dataset = data, w: str = who, s: bool = stream) -> int:
                        return read_once(spark, bootstrap, d, w, s)

                    with load.phase(f"reader round {r + 1}: {case}: {who}"):
                        n, wall, scpu, bcpu = timed(cpu, broker_pid, run)
                    found.append(Measure("reader", case, who, r, n, wall, scpu, bcpu))
                    say(f"  reader round {r + 1}: {case}: {who}: {wall:.1f} s, {scpu:.1f} CPU s")
    return found


# --------------------------------------------------------------------------- writer


def write_once(spark: Any, bootstrap: str, data: Dataset, contender: str, sink: str) -> int:
    """Copy ``data`` to the empty topic ``sink`` with ``contender``; return the rows read."""
    df = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.isolation.level", "read_committed")
        .option("subscribe", data.topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max(1, data.records // 4)))
        .load()
        .select("key", "value")
    )

    def writer(w: Any) -> Any:
        if contender == READING_ONLY:
            return w.format("noop")
        if contender == NULL_SINK:
            return w.format("bench_null_sink")
        if contender == BUILTIN_WRITER:
            return (
                w.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
            )
        guarantee = "exactly_once" if contender == EXACTLY_ONCE else "at_least_once"
        return (
            w.format("kafka_txn")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink)
            .option("deliveryGuarantee", guarantee)
            .option("transactionalIdPrefix", f"bench-cmp-{uuid.uuid4().hex[:8]}-")
        )

    got = rows_of(stream_to(df, writer))
    if got != data.records:
        raise RuntimeError(f"{contender} read {got} of {data.records} input records")
    return got


def writer_section(
    spark: Any,
    bootstrap: str,
    broker_pid: int,
    cpu: CpuMeter,
    data: Dataset,
    rounds: int,
    load: LoadLog,
) -> list[Measure]:
    """The four writers on ``data``, ``rounds`` rounds; every output read back."""
    found: list[Measure] = []
    contenders = (EXACTLY_ONCE, AT_LEAST_ONCE, BUILTIN_WRITER, NULL_SINK, READING_ONLY)
    for r in range(rounds):
        for who in rotated(contenders, r):
            sink = create_topic(bootstrap, "cmp-out")

            def run(w: str = who, t: str = sink) -> int:
                return write_once(spark, bootstrap, data, w, t)

            with load.phase(f"writer round {r + 1}: {who}"):
                n, wall, scpu, bcpu = timed(cpu, broker_pid, run)
            if who not in (READING_ONLY, NULL_SINK):
                _check_written(bootstrap, sink, data.records)
            found.append(Measure("writer", data.label, who, r, n, wall, scpu, bcpu))
            say(f"  writer round {r + 1}: {who}: {wall:.1f} s, {scpu:.1f} CPU s")
    return found


def _check_written(bootstrap: str, sink: str, expected: int) -> None:
    got = committed_count(bootstrap, sink, PARTITIONS)
    if got != expected:
        raise RuntimeError(f"{sink}: {got} records for read_committed, {expected} expected")


# --------------------------------------------------------------------------- end to end


def latency_section(
    spark: Any,
    bootstrap: str,
    rates: list[int],
    rounds: int,
    args: argparse.Namespace,
    load: LoadLog,
) -> list[Measure]:
    """Both pipelines at every rate, ``rounds`` interleaved rounds."""
    found: list[Measure] = []
    lat_args = argparse.Namespace(
        partitions=PARTITIONS,
        trigger="0 seconds",
        warmup=args.warmup,
        duration=args.duration,
        loop_commit_ms=100,
    )
    plans: dict[str, tuple[str, dict[str, str]]] = {
        EXACTLY_ONCE: ("exactly_once", args.reader_options),
        BUILTIN_WRITER: (BUILTIN_WRITER, {}),
    }
    if args.also_options:
        also = " ".join(f"{k}={v}" for k, v in args.also_options.items())
        plans[f"{EXACTLY_ONCE}, {also}"] = (
            "exactly_once",
            {**args.reader_options, **args.also_options},
        )
    for r in range(rounds):
        for rate in rates:
            for who in rotated(list(plans), r):
                mode, options = plans[who]
                fmt = "kafka" if who == BUILTIN_WRITER else "kafka_txn"
                start = functools.partial(latency.start_query, fmt=fmt)
                with load.phase(f"latency round {r + 1}: {rate}/s: {who}"):
                    run = latency.measure(
                        spark, bootstrap, mode, rate, options, lat_args, start=start
                    )
                pct = {f"p{q}": run.pct(q / 100) for q in (50, 95, 99)}
                for phase, values in run.phases.items():
                    pct[phase] = statistics.median(values) if values else 0.0
                found.append(
                    Measure("latency", f"{rate:,} records/s", who, r, run.produced, 0.0, extra=pct)
                )
                say(
                    f"  latency round {r + 1}: {rate}/s: {who}: p50 {pct['p50']:.0f} ms, "
                    f"p95 {pct['p95']:.0f} ms, p99 {pct['p99']:.0f} ms; micro-batch "
                    f"{pct.get('triggerExecution', 0):.0f} ms, addBatch "
                    f"{pct.get('addBatch', 0):.0f} ms"
                )
            for parts in (PARTITIONS, 1):
                who = f"{PYTHON_FLOOR}, {parts} Spark partition{'s' if parts > 1 else ''}"
                with load.phase(f"latency round {r + 1}: {rate}/s: {who}"):
                    phases = python_floor(spark, rate, parts, args)
                found.append(
                    Measure("latency", f"{rate:,} records/s", who, r, 0, 0.0, extra=phases)
                )
                say(
                    f"  latency round {r + 1}: {rate}/s: {who}: micro-batch "
                    f"{phases.get('triggerExecution', 0):.0f} ms, addBatch "
                    f"{phases.get('addBatch', 0):.0f} ms"
                )
    return found


# --------------------------------------------------------------------------- report


def _median_range(values: list[float], fmt: str = "{:.2f}") -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    if len(values) == 1:
        return fmt.format(med)
    return f"{fmt.format(med)} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def _per_round(found: list[Measure], section: str, case: str) -> dict[int, dict[str, Measure]]:
    rounds: dict[int, dict[str, Measure]] = {}
    for m in found:
        if m.section == section and m.case == case:
            rounds.setdefault(m.round, {})[m.contender] = m
    return rounds


def _ratios(
    rounds: dict[int, dict[str, Measure]], num: str, den: str, value: Callable[[Measure], float]
) -> list[float]:
    return [
        value(by[num]) / value(by[den])
        for by in rounds.values()
        if num in by and den in by and value(by[den]) > 0
    ]


def _cases(found: list[Measure], section: str) -> list[str]:
    return list(dict.fromkeys(m.case for m in found if m.section == section))


def reader_table(found: list[Measure]) -> list[str]:
    """Records/s of each contender and the two ratios, per case."""

    def rate(m: Measure) -> float:
        return m.records / m.wall_s

    lines = [
        '| read | kafka_txn, k rows/s | format("kafka"), k rows/s | floor, k rows/s | '
        "kafka_txn ÷ built-in | kafka_txn ÷ floor |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for case in _cases(found, "reader"):
        rounds = _per_round(found, "reader", case)
        cells = [
            _median_range([rate(by[c]) / 1e3 for by in rounds.values() if c in by], "{:.0f}")
            for c in (TXN, BUILTIN, FLOOR)
        ]
        vs_builtin = _median_range(_ratios(rounds, TXN, BUILTIN, rate))
        vs_floor = _median_range(_ratios(rounds, TXN, FLOOR, rate))
        lines.append(f"| {case} | {' | '.join(cells)} | {vs_builtin} | {vs_floor} |")
    return lines


def writer_table(found: list[Measure]) -> list[str]:
    """Wall time, records/s, CPU s per M records; ratios to the built-in writer."""
    lines = [
        "| writer | k rows/s | Spark CPU s per M records | broker CPU s per M | "
        "records/s ÷ built-in |",
        "|---|---:|---:|---:|---:|",
    ]
    for case in _cases(found, "writer"):
        rounds = _per_round(found, "writer", case)
        for who in (EXACTLY_ONCE, AT_LEAST_ONCE, BUILTIN_WRITER, NULL_SINK, READING_ONLY):
            ms = [by[who] for by in rounds.values() if who in by]
            rate = _median_range([m.records / m.wall_s / 1e3 for m in ms], "{:.0f}")
            cpu = _median_range([m.spark_cpu_s * 1e6 / m.records for m in ms], "{:.1f}")
            bcpu = _median_range([m.broker_cpu_s * 1e6 / m.records for m in ms], "{:.1f}")
            ratio = _median_range(
                _ratios(rounds, who, BUILTIN_WRITER, lambda m: m.records / m.wall_s)
            )
            lines.append(f"| {who} | {rate} | {cpu} | {bcpu} | {ratio} |")
    return lines


PERCENTILES = ("p50", "p95", "p99")


def _latency_contenders(found: list[Measure]) -> list[str]:
    """The Kafka → Kafka pipelines of the latency section: the built-in first, then
    kafka_txn with its defaults, then with ``--also-option`` (not the floors)."""
    seen = dict.fromkeys(m.contender for m in found if m.section == "latency" and "p50" in m.extra)
    first = [c for c in (BUILTIN_WRITER, EXACTLY_ONCE) if c in seen]
    return first + [c for c in seen if c not in first]


def headline_table(found: list[Measure]) -> list[str]:
    """p50, p95 and p99 of every pipeline at every rate (median of the rounds, range), and
    each percentile's ratio to the built-in's taken within a round (median, range)."""
    lines = [
        "| rate | pipeline | p50 ms | p95 ms | p99 ms | p50 ÷ built-in | p95 ÷ built-in "
        "| p99 ÷ built-in |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for case in _cases(found, "latency"):
        rounds = _per_round(found, "latency", case)
        for who in _latency_contenders(found):
            ms = [by[who] for by in rounds.values() if who in by]
            cells = [_median_range([m.extra[q] for m in ms], "{:.0f}") for q in PERCENTILES]
            for q in PERCENTILES:
                if who == BUILTIN_WRITER:
                    cells.append("1")
                    continue

                def pct(m: Measure, q: str = q) -> float:
                    return m.extra[q]

                cells.append(_median_range(_ratios(rounds, who, BUILTIN_WRITER, pct)))
            lines.append(f"| {case} | {who} | {' | '.join(cells)} |")
    return lines


def latency_table(found: list[Measure]) -> list[str]:
    """The micro-batch phases per rate and pipeline, floors included (medians over the
    rounds of each run's median)."""
    lines = [
        "| rate | pipeline | micro-batch ms | addBatch ms | walCommit + commitOffsets ms "
        "| latestOffset + queryPlanning ms |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for case in _cases(found, "latency"):
        rounds = _per_round(found, "latency", case)
        everyone = dict.fromkeys(m.contender for m in found if m.section == "latency")
        pipelines = _latency_contenders(found)
        for who in [*pipelines, *(c for c in everyone if c not in pipelines)]:
            ms = [by[who] for by in rounds.values() if who in by]
            cells = [
                _median_range([m.extra[q] for m in ms if q in m.extra], "{:.0f}")
                for q in ("triggerExecution", "addBatch")
            ]
            for pair in (("walCommit", "commitOffsets"), ("latestOffset", "queryPlanning")):
                cells.append(
                    _median_range([sum(m.extra.get(k, 0.0) for k in pair) for m in ms], "{:.0f}")
                )
            lines.append(f"| {case} | {who} | {' | '.join(cells)} |")
    return lines


def goals(found: list[Measure]) -> list[str]:
    """Each goal of the comparison (issue 33's) with the median measured and whether it
    is met."""

    def rate(m: Measure) -> float:
        return m.records / m.wall_s

    out: list[str] = ["| goal | measured (median, range) | met |", "|---|---|---|"]

    def row(goal: str, values: list[float], ok: Callable[[float], bool]) -> None:
        if values:
            med = statistics.median(values)
            out.append(f"| {goal} | {_median_range(values)} | {'yes' if ok(med) else '**no**'} |")

    for case in _cases(found, "reader"):
        rounds = _per_round(found, "reader", case)
        ratios = _ratios(rounds, TXN, BUILTIN, rate)
        if "availableNow" in case and "KiB" in case:
            row(f"streaming read ≥ 1.0x built-in ({case})", ratios, lambda v: v >= 1.0)
        if "availableNow" in case and "KiB" not in case:
            row(f"streaming read ≥ 1.0x built-in ({case})", ratios, lambda v: v >= 1.0)
            row(
                f"streaming read ≥ 0.9x floor ({case})",
                _ratios(rounds, TXN, FLOOR, rate),
                lambda v: v >= 0.9,
            )
        if "batch" in case and "KiB" not in case:
            row(f"batch read ≥ 1.7x built-in ({case})", ratios, lambda v: v >= 1.7)
    for case in _cases(found, "writer"):
        rounds = _per_round(found, "writer", case)
        row(
            "exactly-once writer ≥ 0.85x built-in writer (records/s)",
            _ratios(rounds, EXACTLY_ONCE, BUILTIN_WRITER, rate),
            lambda v: v >= 0.85,
        )
        overhead = [
            v - 1
            for v in _ratios(
                rounds, EXACTLY_ONCE, AT_LEAST_ONCE, lambda m: m.spark_cpu_s + m.broker_cpu_s
            )
        ]
        row("exactly-once CPU overhead over at_least_once ≤ 0.03", overhead, lambda v: v <= 0.03)
    for case in _cases(found, "latency"):
        rounds = _per_round(found, "latency", case)
        for who in _latency_contenders(found):
            if who == BUILTIN_WRITER:
                continue
            note = "" if who == EXACTLY_ONCE else "; not the defaults"
            for q in ("p50", "p99"):

                def pct(m: Measure, q: str = q) -> float:
                    return m.extra[q]

                row(
                    f"{who}: {q} ÷ built-in {q} ≤ 2.0 ({case}{note})",
                    _ratios(rounds, who, BUILTIN_WRITER, pct),
                    lambda v: v <= 2.0,
                )
    return out


def load_table(load: LoadLog) -> list[str]:
    """Other work's share of the CPU and the 1-minute load average around the phases of
    each section's rounds (every phase, with the 5- and 15-minute averages, is in the JSON
    report)."""
    lines = [
        "| section, round | phases | other work, highest % of the CPU in a phase | 1-min "
        "load before the first | highest before/after any | after the last |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    groups: dict[str, list[Any]] = {}
    for p in load.phases:
        groups.setdefault(p.phase.split(":", 1)[0], []).append(p)
    for name, phases in groups.items():
        shares = [p.other_cpu for p in phases if p.other_cpu is not None]
        other = f"{max(shares):.1%}" if shares else "not measured"
        lines.append(
            f"| {name} | {len(phases)} | {other} | {phases[0].before[0]:.1f} | "
            f"{max(p.peak for p in phases):.1f} | {phases[-1].after[0]:.1f} |"
        )
    return lines


def _rounds(found: list[Measure], section: str) -> str:
    n = len({m.round for m in found if m.section == section})
    return f"{n} round{'s' if n != 1 else ''}"


def report(found: list[Measure], header: list[str], load: LoadLog) -> str:
    """The whole report in Markdown."""
    parts = [*header, ""]
    if any(m.section == "latency" for m in found):
        parts += [
            "### End to end, produce → visible (ms; median of the "
            f"{_rounds(found, 'latency')}, range; ratios taken within a round)",
            "",
            *headline_table(found),
            "",
        ]
    if any(m.section == "reader" for m in found):
        parts += [
            f"### Reader (records/s, median of the {_rounds(found, 'reader')}, range)",
            "",
            *reader_table(found),
            "",
        ]
    if any(m.section == "writer" for m in found):
        parts += [
            f"### Writer (median of the {_rounds(found, 'writer')}, range)",
            "",
            *writer_table(found),
            "",
        ]
    if any(m.section == "latency" for m in found):
        parts += [
            "### End to end: micro-batch phases (ms, median per run, then of the rounds)",
            "",
            *latency_table(found),
            "",
        ]
    parts += ["### Goals", "", *goals(found), ""]
    parts += ["### Load average", "", *load_table(load), ""]
    return "\n".join(parts)


# --------------------------------------------------------------------------- main

#: Fewer rounds than this make a try-out: the report says so at its top.
MIN_ROUNDS = 5


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    p.add_argument("--sections", default="reader,writer,latency", help="of reader, writer, latency")
    p.add_argument("--rounds", type=int, default=MIN_ROUNDS, help="reader rounds (≥ 5)")
    p.add_argument("--writer-rounds", type=int, default=MIN_ROUNDS, help="writer rounds (≥ 5)")
    p.add_argument("--latency-rounds", type=int, default=MIN_ROUNDS, help="end-to-end rounds (≥ 5)")
    p.add_argument("--rates", default="1000,20000", help="end-to-end records/s, comma-separated")
    p.add_argument("--warmup", type=float, default=15.0, help="latency: seconds before measuring")
    p.add_argument("--duration", type=float, default=25.0, help="latency: seconds measured")
    p.add_argument("--kafka-version", help="Apache Kafka release (default: the tests' default)")
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a kafka_txn reader option for the end-to-end pipeline (repeatable)",
    )
    p.add_argument(
        "--also-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="end to end: also run kafka_txn exactly_once with these reader options",
    )
    p.add_argument("--quick", action="store_true", help="small topics, one round each: a try-out")
    p.add_argument(
        "--max-other-cpu",
        type=float,
        default=DEFAULT_MAX_OTHER_CPU,
        help="refuse the run (exit status 3) when, during any measured phase, processes "
        "outside the benchmark took more than this share of the machine's CPU (default "
        "%(default)g)",
    )
    p.add_argument(
        "--max-load",
        type=float,
        default=default_max_load(),
        help="where other work's CPU cannot be measured (no /proc): refuse the run when the "
        "1-minute load average before or after any measured phase is above this (default: "
        "twice the cores, %(default)g here)",
    )
    p.add_argument(
        "--allow-loaded",
        action="store_true",
        help="report a run that broke the load rule (marked at the top) and exit 0",
    )
    p.add_argument("--report", help="also write the Markdown report here")
    p.add_argument(
        "--plot", help="also draw the chart of latencies and ratios here (PNG, compare_plot.py)"
    )
    p.add_argument(
        "--json",
        help="write the raw report here (commit, versions, machine, load of every phase, "
        "every measured run; default: beside --report, with the suffix .json)",
    )
    args = p.parse_args(argv)
    args.reader_options = dict(o.split("=", 1) for o in args.option)
    args.also_options = dict(o.split("=", 1) for o in args.also_option)
    if args.quick:
        args.rounds = args.writer_rounds = args.latency_rounds = 1
        args.warmup, args.duration = 10.0, 10.0
    if args.json is None and args.report:
        args.json = str(Path(args.report).with_suffix(".json"))
    return args


def rounds_note(args: argparse.Namespace, sections: set[str]) -> list[str]:
    """A line for the top of the report when a section ran fewer than 5 rounds."""
    rounds = {
        "reader": args.rounds,
        "writer": args.writer_rounds,
        "latency": args.latency_rounds,
    }
    few = {s: n for s, n in rounds.items() if s in sections and n < MIN_ROUNDS}
    if not few:
        return []
    which = ", ".join(f"{s} {n}" for s, n in few.items())
    return [f"**Rounds: {which}; fewer than {MIN_ROUNDS}: a try-out, not for publishing.**"]


def main(argv: list[str] | None = None) -> int:
    """Start Apache Kafka and Spark, run the sections, print the report; exit status 3
    when the load check failed (unless ``--allow-loaded``)."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    sections = set(args.sections.split(","))
    scale = 10 if args.quick else 1
    plan = [Dataset(1_000_000 // scale, 100), Dataset(100_000 // scale, 10 * 1024)]
    found: list[Measure] = []
    load = LoadLog()
    conn = connector()

    with load.running(), ApacheKafka(1, version=args.kafka_version) as kafka:
        bootstrap = kafka.bootstrap_servers
        node = kafka.nodes[0]
        assert node.process is not None
        broker_pid = node.process.pid
        info = describe(f"Apache Kafka {kafka.version} (1 node)", argv)
        info["versions"]["spark_kafka_connector"] = conn.note
        title = (
            f"`bench/compare.py {' '.join(argv)}`, {info['date']}, commit "
            f"{info['commit'][:12]}{' (dirty)' if info['dirty'] else ''}; {os.cpu_count()} "
            f"cores; PySpark {info['versions']['pyspark']}, Apache Kafka {kafka.version} "
            f"(1 node), {conn.note}."
        )
        say(title)
        now = os.getloadavg()
        say(f"load average at the start: {', '.join(f'{x:.1f}' for x in now)}")
        if now[0] > args.max_load and not args.allow_loaded:
            say(f"  already above --max-load {args.max_load:g}: this run will likely be refused")
        sets = [fill(bootstrap, d) for d in plan] if sections & {"reader", "writer"} else []
        spark = spark_session(conn.spark_jars)
        cpu = CpuMeter(broker_pid)
        warm = fill(bootstrap, Dataset(1000, 100))
        # The end-to-end runs warm up on their own (--warmup seconds before measuring).
        say("warming up (every contender once on a small topic, not measured)")
        for who in (TXN, BUILTIN, FLOOR) if "reader" in sections else ():
            for stream in (False, True):
                read_once(spark, bootstrap, warm, who, stream)
        for who in (EXACTLY_ONCE, AT_LEAST_ONCE, BUILTIN_WRITER) if "writer" in sections else ():
            sink = create_topic(bootstrap, "cmp-out")
            write_once(spark, bootstrap, warm, who, sink)
            _check_written(bootstrap, sink, warm.records)
        if "reader" in sections:
            found += reader_section(spark, bootstrap, broker_pid, cpu, sets, args.rounds, load)
        if "writer" in sections:
            found += writer_section(
                spark, bootstrap, broker_pid, cpu, sets[0], args.writer_rounds, load
            )
        if "latency" in sections:
            rates = [int(r) for r in args.rates.split(",")]
            found += latency_section(spark, bootstrap, rates, args.latency_rounds, args, load)
        spark.stop()
    refused = bool(load.over(args.max_other_cpu, args.max_load))
    header = [
        f"## `bench/compare.py {' '.join(argv)}`",
        "",
        *load_check(load, args.max_other_cpu, args.max_load, args.allow_loaded),
        *rounds_note(args, sections),
        "",
        *run_info_header(info),
    ]
    text = report(found, header, load)
    say("\n" + text)
    if args.report:
        Path(args.report).write_text(text + "\n")
    if args.json:
        raw = {
            "run": info,
            "settings": {k: v for k, v in vars(args).items() if k not in ("json", "report")},
            "load_check": {
                "max_other_cpu": args.max_other_cpu,
                "max_load": args.max_load,
                "passed": not refused,
                "allowed_anyway": refused and args.allow_loaded,
            },
            "phases": [asdict(p) for p in load.phases],
            "measures": [asdict(m) for m in found],
        }
        Path(args.json).write_text(json.dumps(raw, indent=1) + "\n")
        say(f"raw report written to {args.json}")
    if args.plot:
        import compare_plot

        compare_plot.plot(found, args.plot)
        say(f"chart written to {args.plot}")
    if refused and not args.allow_loaded:
        say("load check failed (other work competed for the CPU): exit status 3")
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
