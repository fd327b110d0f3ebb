"""Streaming throughput side by side in one run: the reader and the whole pipeline.

Issue 13's throughput benchmark. On one embedded broker (its own process) and one
``local[N]`` SparkSession, over a topic of ``--records`` records of ``--size`` bytes:

* **raw**: ``--processes`` plain confluent-kafka consumer processes (read_committed,
  tuned) read the topic, before Spark starts and again after it stopped (the machine's
  load drifts; the faster run is the baseline);
* **stream read**: ``spark.readStream.format("kafka_txn")`` with
  ``trigger(availableNow=True)`` into ``noop`` (the whole query, start to termination);
* **batch read**: ``spark.read.format("kafka_txn")`` into ``noop``;
* **floor**: the streaming query on a Python source that yields the same rows from memory,
  Spark's own cost for any Python source (no Kafka);
* **pipeline**: ``kafka_txn`` → ``kafka_txn`` exactly-once, ``availableNow``, one
  micro-batch per ``--batch-records`` records, into a fresh topic;
* **confluent loop**: what a Python user writes by hand: one process consuming
  read_committed and producing transactionally, committing every ``--batch-records``.

Every Spark phase runs ``--rounds`` times on the same session after an unmeasured warm-up
round (the first query of a session pays for starting Spark's Python workers). Read
phases are compared with the raw consumers, the pipeline with the confluent loop of the
same round. Every pipeline and loop output is checked to hold exactly ``--records``
committed records.

Example::

    .venv/bin/python bench/stream_throughput.py                 # about 3 minutes here
    .venv/bin/python bench/stream_throughput.py --records 2000000 --rounds 3
    .venv/bin/python bench/stream_throughput.py --plot docs/img/stream-throughput.png
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

from confluent_kafka.admin import AdminClient

from _common import broker_process
from _plot import FIGSIZE, pyplot, save
from reader_throughput import Result, _floor_source, _raw_worker, _timed_query, run_processes
from writer_overhead import (
    EXACTLY_ONCE,
    CpuMeter,
    check_count,
    confluent_run,
    create_topic,
    fill,
    spark_run,
    spark_session,
)

STREAM, BATCH, FLOOR, PIPELINE, LOOP = (
    "stream read",
    "batch read",
    "floor",
    "pipeline exactly_once",
    "confluent loop",
)


@dataclass(frozen=True, slots=True)
class Phase:
    """One measured phase of one round."""

    name: str
    round: int
    result: Result


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--size", type=int, default=100, help="value bytes per record")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--processes", type=int, default=2, help="raw processes and Spark local[N]")
    p.add_argument("--batch-records", type=int, default=250_000, help="records per micro-batch")
    p.add_argument("--rounds", type=int, default=2, help="measured rounds after the warm-up")
    p.add_argument("--plot", metavar="FILE.png", help="draw records/s of every measured phase")
    args = p.parse_args(argv)
    args.reader_options = {}  # what writer_overhead.spark_run reads
    return args


def raw(bootstrap: str, topic: str, ends: dict[int, int], processes: int, name: str) -> Result:
    """The raw consumer processes, each assigned a share of the partitions."""
    groups = [list(range(i, len(ends), processes)) for i in range(processes)]
    return run_processes(
        name, _raw_worker, [(bootstrap, topic, [(p, ends[p]) for p in g]) for g in groups]
    )


def spark_round(
    spark: Any, cpu: CpuMeter, bootstrap: str, source: str, args: Any, n: int
) -> list[Phase]:
    """One round of every Spark phase and the confluent loop."""
    phases: list[Phase] = []
    df = (
        spark.readStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
    )
    seconds, query = _timed_query(spark, df)
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    phases.append(Phase(STREAM, n, Result(STREAM, rows, seconds)))

    started = time.monotonic()
    (
        spark.read.format("kafka_txn")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .load()
        .write.format("noop")
        .mode("overwrite")
        .save()
    )
    phases.append(Phase(BATCH, n, Result(BATCH, args.records, time.monotonic() - started)))

    seconds, floor = _timed_query(spark, spark.readStream.format("bench_floor").load())
    rows = sum(p["numInputRows"] for p in floor.recentProgress)
    phases.append(Phase(FLOOR, n, Result(FLOOR, rows, seconds)))

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name in (PIPELINE, LOOP):
        sink = create_topic(admin, f"bench-sink-{uuid.uuid4().hex[:8]}", args.partitions)
        if name == PIPELINE:
            run = spark_run(spark, cpu, bootstrap, source, sink, EXACTLY_ONCE, args, n)
        else:
            run = confluent_run(cpu, bootstrap, source, sink, args, n)
        check_count(bootstrap, run, sink, args.partitions, args.records)
        phases.append(Phase(name, n, Result(name, run.records, run.seconds)))
    return phases


def report(phases: list[Phase], baseline: float) -> str:
    """The table of every phase, with each one's ratio to what it is compared with."""
    loops = {p.round: p.result.rate for p in phases if p.name == LOOP}
    lines = [
        "| phase | round | records | seconds | records/s | ratio | to |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for p in phases:
        if p.name in (PIPELINE, LOOP):
            ratio, to = p.result.rate / loops[p.round], "confluent loop"
        else:
            ratio, to = p.result.rate / baseline, "raw consumers"
        r = p.result
        lines.append(
            f"| {p.name} | {p.round or 'warm-up'} | {r.records} | {r.seconds:.2f} | "
            f"{r.rate:,.0f} | {ratio:.2f} | {to} |"
        )
    return "\n".join(lines) + "\n"


def summary(phases: list[Phase], baseline: float) -> str:
    """The ratios of the best measured round of each phase."""

    def best(name: str) -> float:
        return max(p.result.rate for p in phases if p.name == name and p.round > 0)

    stream, batch, floor = best(STREAM), best(BATCH), best(FLOOR)
    pipeline_ratio = max(
        p.result.rate / q.result.rate
        for p in phases
        for q in phases
        if p.name == PIPELINE and q.name == LOOP and p.round == q.round and p.round > 0
    )
    return (
        f"stream read / raw: {stream / baseline:.2f}  (goal 1.0)\n"
        f"batch read / raw: {batch / baseline:.2f}\n"
        f"floor (any Python source, rows from memory) / raw: {floor / baseline:.2f}\n"
        f"stream read / floor: {stream / floor:.2f}  (1.00 = nothing above Spark's own cost)\n"
        f"pipeline exactly_once / confluent loop (same round): {pipeline_ratio:.2f}\n"
    )


def plot(phases: list[Phase], baseline: float, path: str) -> None:
    """Records/s of the measured rounds' phases, each labelled with its ratio."""
    plt = pyplot()
    from matplotlib.ticker import EngFormatter

    loops = {p.round: p.result.rate for p in phases if p.name == LOOP}
    shown = [p for p in phases if p.round > 0]
    shown.sort(key=lambda p: (p.name not in (STREAM, BATCH, FLOOR), p.name, p.round))
    fig, ax = plt.subplots(figsize=(FIGSIZE[0], 1.6 + 0.32 * (len(shown) + 1)))
    names = ["raw consumers", *(f"{p.name}, round {p.round}" for p in shown)]
    rates = [baseline, *(p.result.rate for p in shown)]
    labels = ["1.00\N{MULTIPLICATION SIGN} raw"]
    for p in shown:
        if p.name in (PIPELINE, LOOP):
            labels.append(f"{p.result.rate / loops[p.round]:.2f}\N{MULTIPLICATION SIGN} loop")
        else:
            labels.append(f"{p.result.rate / baseline:.2f}\N{MULTIPLICATION SIGN} raw")
    colours = ["tab:grey"] + [
        "tab:orange" if p.name in (PIPELINE, LOOP) else "tab:blue" for p in shown
    ]
    bars = ax.barh(range(len(names)), rates, color=colours)
    ax.bar_label(bars, labels, padding=3, fontsize=8)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(rates) * 1.2)
    ax.xaxis.set_major_formatter(EngFormatter())
    ax.set_xlabel("records/s")
    ax.set_title("Streaming throughput, side by side in one run", fontsize=10)
    save(fig, path)


def main(argv: list[str] | None = None) -> int:
    """Run every phase side by side and print the table and the ratios."""
    args = parse_args(argv)
    source = f"bench-stream-{uuid.uuid4().hex[:8]}"
    with broker_process("--topic", f"{source}:{args.partitions}") as (bootstrap, broker_pid):
        fill(bootstrap, source, args.records, args.size, args.partitions)
        per_partition = {
            p: len(range(p, args.records, args.partitions)) for p in range(args.partitions)
        }
        raw_first = raw(bootstrap, source, per_partition, args.processes, "raw consumers")
        cpu = CpuMeter(broker_pid)
        spark = spark_session(args.processes)
        spark.dataSource.register(_floor_source(per_partition, args.size, 0))
        phases: list[Phase] = []
        try:
            for n in range(args.rounds + 1):  # round 0 warms the session up
                sys.stdout.write(f"round {n}{' (warm-up)' if n == 0 else ''} ...\n")
                sys.stdout.flush()
                phases.extend(spark_round(spark, cpu, bootstrap, source, args, n))
        finally:
            spark.stop()
        raw_last = raw(bootstrap, source, per_partition, args.processes, "raw consumers (end)")
    for r in (raw_first, raw_last):
        if r.records != args.records:
            raise RuntimeError(f"{r.name}: read {r.records} records, expected {args.records}")
    for p in phases:
        if p.result.records != args.records:
            raise RuntimeError(f"{p.name} round {p.round}: {p.result.records} records")
    baseline = max(raw_first.rate, raw_last.rate)
    sys.stdout.write(
        f"local[{args.processes}], {args.records} x {args.size} B over {args.partitions} "
        f"partitions, raw consumers {raw_first.rate:,.0f} then {raw_last.rate:,.0f} records/s, "
        f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}\n"
    )
    sys.stdout.write(report(phases, baseline))
    sys.stdout.write(summary(phases, baseline))
    if args.plot:
        plot(phases, baseline, args.plot)
        sys.stdout.write(f"plot written to {args.plot}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
