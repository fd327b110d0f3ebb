"""Wall time of the writer's driver ``commit()`` for 8, 64 and 256 prepared tasks.

No Spark: for every task count the script plays one streaming query (a fresh query id
and ``transactionalIdPrefix``) for ``--repeat`` batches. For each batch it prepares one
transaction per task with the executor's code,
:func:`~pyspark_kafka_txn.writer.task.write_task` (``--rows`` records of ``--size``
bytes, exactly once, a :class:`TaskIdentity` per Spark partition), and then times
:func:`~pyspark_kafka_txn.writer.commit.commit_batch` with the tasks' messages, as
Spark's driver calls it. That time holds everything the driver does for a batch:

* reading the last decision record and writing the new one (chunks, then the header);
* EndTxn(commit) for every handle, pipelined per coordinator, each after a
  FindCoordinator for its transactional id (every ``commit()`` starts with a new client);
* renewing the query's liveness lease (one OffsetCommit);
* listing the query's transactions still open (ListTransactions on every broker) and
  ``end_abandoned`` (other queries' long-open transactions: none here).

The phases are timed by wrapping those functions of ``writer/commit.py``,
``writer/open_transactions.py`` and ``writer/abandoned.py`` in this process (the source is not
changed), each without the phases called inside it, so they add up to about the total.
A second table ends the same number of prepared transactions by hand, looking up every
coordinator first and then calling ``end_transactions``: it separates the lookups from
the EndTxns, which in ``commit_batch`` share one connection (a lookup waits for the
EndTxns sent before it). The broker runs in a separate process
(``python -m pyspark_kafka_txn broker``); its CPU time during those EndTxns is shown::

    .venv/bin/python bench/writer_commit.py
    .venv/bin/python bench/writer_commit.py --tasks 8,64,256,1024 --repeat 7 --partitions 8

A third pair of tables gives the steps the writer times itself, as it logs them at DEBUG
(``pyspark_kafka_txn.steps``): the median of each step of a write task (loggers
``pyspark_kafka_txn.writer.task``) and of a ``commit_batch`` (``pyspark_kafka_txn.writer.commit``)
per task count, collected by a logging handler from the records' ``steps`` attribute.

This is a benchmark, not a test: it checks only that a read_committed consumer finds every
record that was committed.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import statistics
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from _common import broker_process
from _plot import FIGSIZE, pyplot, save
from _verify import committed_count
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import end_transactions
from pyspark_kafka_txn.options import WriterOptions, parse_writer_options
from pyspark_kafka_txn.wire import COORDINATOR_TXN
from pyspark_kafka_txn.writer import abandoned as abandoned_module
from pyspark_kafka_txn.writer import commit as commit_module
from pyspark_kafka_txn.writer import open_transactions as open_transactions_module
from pyspark_kafka_txn.writer.common import connect
from pyspark_kafka_txn.writer.messages import TaskMessage
from pyspark_kafka_txn.writer.task import TaskIdentity, write_task

# commit_batch's collaborators, looked up at call time in the globals of the module whose
# code calls them: writer/commit.py, writer/open_transactions.py (list_prefix inside
# wait_for_listing) or writer/abandoned.py (its read_decision); each is wrapped in every
# module, those a module does not have are skipped. ListTransactions +
# DescribeTransactions are list_prefix.
PHASES = (
    "connect",
    "read_decision",
    "write_decision",
    "end_transactions",
    "list_prefix",
    "end_abandoned",
)
FIND = "FindCoordinator"
TIMEOUT_MS = 120_000
#: The loggers whose DEBUG records carry the writer's step times, and what they time.
STEP_LOGGERS = {
    "pyspark_kafka_txn.writer.task": "task",
    "pyspark_kafka_txn.writer.commit": "commit",
}


class StepsCollector(logging.Handler):
    """The writer's step times (ms) from its DEBUG records' ``steps`` attribute, one dict per
    write task and per commit, kept under the task count being measured (:attr:`label`;
    ``None``: not kept, as in the warm-up and the EndTxn round by hand)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.label: int | None = None
        #: (task count, "task" or "commit") -> the steps of each record
        self.found: dict[tuple[int, str], list[dict[str, float]]] = defaultdict(list)

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the record's ``steps`` (records without them are not the step lines)."""
        steps = getattr(record, "steps", None)
        if self.label is not None and isinstance(steps, dict):
            self.found[(self.label, STEP_LOGGERS[record.name])].append(dict(steps))

    def install(self) -> None:
        """Attach to the writer's task and commit loggers and let their DEBUG records out."""
        for name in STEP_LOGGERS:
            log = logging.getLogger(name)
            log.setLevel(logging.DEBUG)
            log.addHandler(self)


class PhaseTimer:
    """Wall time spent in wrapped functions, per phase, exclusive of nested phases.

    A phase called inside another one (``read_decision`` inside ``end_abandoned``, a
    FindCoordinator inside ``end_transactions``) counts for
    itself only, so the phases add up to the time covered.
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._nested: list[float] = []

    def reset(self) -> None:
        """Forget what was measured."""
        self.seconds.clear()
        self.calls.clear()

    def wrap(self, name: str, func: Callable[..., Any]) -> Callable[..., Any]:
        """``func`` with its wall time (minus nested phases) added to phase ``name``."""

        def timed(*args: Any, **kwargs: Any) -> Any:
            self._nested.append(0.0)
            started = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                self.seconds[name] += elapsed - self._nested.pop()
                self.calls[name] += 1
                if self._nested:
                    self._nested[-1] += elapsed

        return timed


def instrument(timer: PhaseTimer) -> None:
    """Wrap commit_batch's collaborators (and FindCoordinator) with ``timer``."""
    for module in (commit_module, open_transactions_module, abandoned_module):
        for name in PHASES:
            func = getattr(module, name, None)
            if func is not None:
                setattr(module, name, timer.wrap(name, func))
    # A fresh client per commit() knows no coordinator yet: every group and transactional
    # id is looked up (end_transactions: one per handle, just before its EndTxn).
    find = ClusterClient._find_coordinator
    ClusterClient._find_coordinator = timer.wrap(FIND, find)  # type: ignore[method-assign]


def values(rows: int, size: int) -> pa.RecordBatch:
    """``rows`` values of ``size`` bytes, no key (the rows go to one sticky partition)."""
    return pa.RecordBatch.from_arrays(
        [pa.array([os.urandom(size) for _ in range(rows)], pa.binary())], names=["value"]
    )


def run_count(
    bootstrap: str, topic: str, tasks: int, args: argparse.Namespace, timer: PhaseTimer
) -> dict[str, list[float]]:
    """``args.repeat`` batches of ``tasks`` tasks; seconds per phase and batch."""
    options, query_id = query(bootstrap, topic)
    rows = values(args.rows, args.size)
    out: dict[str, list[float]] = defaultdict(list)
    for batch in range(args.repeat):
        started = time.perf_counter()
        messages = prepare(options, query_id, batch, tasks, rows)
        out["prepare"].append(time.perf_counter() - started)
        timer.reset()
        started = time.perf_counter()
        commit_module.commit_batch(options, messages, batch)
        out["commit"].append(time.perf_counter() - started)
        for name in (*PHASES, FIND):
            out[name].append(timer.seconds.get(name, 0.0))
        out["FindCoordinator calls"].append(timer.calls.get(FIND, 0))
    return out


def run_split(
    bootstrap: str, broker_pid: int, topic: str, tasks: int, args: argparse.Namespace
) -> dict[str, list[float]]:
    """EndTxn of ``tasks`` handles by hand: coordinator lookups first, then the EndTxns.

    ``end_transactions`` looks up each coordinator just before it sends that EndTxn, on
    the connection that carries the EndTxns sent before it, so its lookups also wait for
    the broker to work through those. Done in two steps, the two costs separate. (No
    decision record: this measures the EndTxn round, not a batch commit.)
    """
    options, query_id = query(bootstrap, topic)
    rows = values(args.rows, args.size)
    out: dict[str, list[float]] = defaultdict(list)
    for batch in range(args.repeat):
        messages = prepare(options, query_id, batch, tasks, rows)
        handles = [m.handle.transaction for m in messages if m.handle]
        with connect(options) as cluster:
            started = time.perf_counter()
            for handle in handles:
                cluster.coordinator(COORDINATOR_TXN, handle.transactional_id)
            looked_up = time.perf_counter()
            broker_cpu = process_cpu_s(broker_pid)
            results = end_transactions(cluster, handles, commit=True)
            out["end"].append(time.perf_counter() - looked_up)
            out["broker cpu"].append(process_cpu_s(broker_pid) - broker_cpu)
            out["lookups"].append(looked_up - started)
        failed = [tid for tid, result in results.items() if isinstance(result, Exception)]
        if failed:
            raise RuntimeError(f"EndTxn failed for {failed[:3]}")
    return out


def query(bootstrap: str, topic: str) -> tuple[WriterOptions, str]:
    """Writer options with a fresh prefix, and a fresh query id."""
    prefix = f"bench-commit-{uuid.uuid4().hex[:8]}-"
    options = parse_writer_options(
        {"kafka.bootstrap.servers": bootstrap, "topic": topic, "transactionalIdPrefix": prefix}
    )
    return options, str(uuid.uuid4())


def prepare(
    options: WriterOptions, query_id: str, batch: int, tasks: int, rows: pa.RecordBatch
) -> list[TaskMessage]:
    """Run the executor side of ``tasks`` Spark partitions: one prepared transaction each."""
    return [
        write_task(options, TaskIdentity(query_id, batch, p, 0), iter([rows]), TIMEOUT_MS)
        for p in range(tasks)
    ]


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ms(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1000:.1f}"


def _verdict(exponent: float) -> str:
    if exponent < 0.9:
        return "sub-linear"
    return "about linear" if exponent <= 1.1 else "super-linear"


def steps_tables(found: dict[tuple[int, str], list[dict[str, float]]]) -> list[str]:
    """Per task count, the median ms of each step of a write task and of a commit (over the
    records that have the step: ``n`` says how many records there were)."""
    lines: list[str] = []
    for kind, what in (("task", "a write task"), ("commit", "commit_batch")):
        counts = sorted(n for n, k in found if k == kind)
        if not counts:
            continue
        names = list(dict.fromkeys(s for n in counts for rec in found[(n, kind)] for s in rec))
        names = [s for s in names if s != "total"] + ["total"]
        lines += [
            "",
            f"Steps of {what} as the writer logs them at DEBUG, median ms (each step over "
            "the records that have it; the medians need not add up to the total's):",
            "",
            "| tasks | n | " + " | ".join(names) + " |",
            "|------:|--:|" + "---:|" * len(names),
        ]
        for n in counts:
            records = found[(n, kind)]
            cells = []
            for name in names:
                xs = [rec[name] for rec in records if name in rec]
                cells.append(f"{statistics.median(xs):.1f}" if xs else "-")
            lines.append(f"| {n} | {len(records)} | " + " | ".join(cells) + " |")
    return lines


def report(
    results: dict[int, dict[str, list[float]]],
    split: dict[int, dict[str, list[float]]],
    args: argparse.Namespace,
    steps: dict[tuple[int, str], list[dict[str, float]]],
) -> str:
    """The tables: commit time per task count and its growth, the phases, the EndTxn split."""
    counts = sorted(results)
    medians = {n: statistics.median(results[n]["commit"]) for n in counts}
    lines = [
        f"{args.rows} records of {args.size} B per task, {args.partitions} partitions, "
        f"{args.repeat} batches per task count, cpu_count={os.cpu_count()}, "
        f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}",
        "",
        "| tasks | commit ms (median) | min-max ms | ms per task | growth | tasks x | exponent |",
        "|------:|-------------------:|-----------:|------------:|-------:|--------:|---------:|",
    ]
    for previous, n in zip([None, *counts], counts, strict=False):
        commit = results[n]["commit"]
        growth = factor = exponent = ""
        if previous is not None:
            ratio, more = medians[n] / medians[previous], n / previous
            growth, factor = f"{ratio:.2f}", f"{more:.0f}"
            exponent = f"{math.log(ratio) / math.log(more):.2f}"
        range_ms = f"{min(commit) * 1000:.0f}-{max(commit) * 1000:.0f}"
        lines.append(
            f"| {n:>5} | {medians[n] * 1000:>18.1f} | {range_ms:>10} | "
            f"{medians[n] * 1000 / n:>11.2f} | {growth:>6} | {factor:>7} | {exponent:>8} |"
        )
    first, last = counts[0], counts[-1]
    if last > first:
        overall = medians[last] / medians[first]
        power = math.log(overall) / math.log(last / first)
        lines += [
            "",
            f"growth {first} -> {last} tasks: {overall:.2f}x for {last / first:.0f}x the tasks, "
            f"time ~ tasks^{power:.2f} ({_verdict(power)})",
        ]
    columns = tuple(c for c in (*PHASES, FIND) if any(results[n][c] for n in counts))
    lines += [
        "",
        "Phases of commit_batch, median ms, each without the phases inside it "
        "(FindCoordinator: every coordinator lookup, in any phase):",
        "",
        "| tasks | " + " | ".join(columns) + " | FindCoordinator calls |",
        "|------:|" + "|".join("-" * (len(c) + 1) + ":" for c in columns) + "|" + "-" * 22 + ":|",
    ]
    for n in counts:
        cells = [f"{_ms(results[n][c]):>{len(c)}}" for c in columns]
        calls = statistics.median(results[n]["FindCoordinator calls"])
        lines.append(f"| {n:>5} | " + " | ".join(cells) + f" | {calls:>21.0f} |")
    if split:
        lines += [
            "",
            "EndTxn round by hand, median ms: every coordinator looked up first, then "
            "end_transactions:",
            "",
            "| tasks | FindCoordinator x tasks | EndTxn x tasks (pipelined) | broker CPU ms |",
            "|------:|------------------------:|---------------------------:|--------------:|",
        ]
        for n in sorted(split):
            lines.append(
                f"| {n:>5} | {_ms(split[n]['lookups']):>23} | {_ms(split[n]['end']):>26} | "
                f"{_ms(split[n]['broker cpu']):>13} |"
            )
    lines += steps_tables(steps)
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="8,64,256", help="comma-separated task counts")
    parser.add_argument("--repeat", type=int, default=5, help="batches per task count")
    parser.add_argument("--rows", type=int, default=100, help="records per task")
    parser.add_argument("--size", type=int, default=100, help="value bytes per record")
    parser.add_argument("--partitions", type=int, default=8, help="partitions of the topic")
    parser.add_argument(
        "--no-split", action="store_true", help="skip the EndTxn round by hand (lookups apart)"
    )
    parser.add_argument(
        "--plot", metavar="FILE.png", help="draw commit() time against the task count"
    )
    return parser.parse_args(argv)


def plot(results: dict[int, dict[str, list[float]]], path: str) -> None:
    """commit() wall time (median and range) against tasks, log-log, with a linear line."""
    plt = pyplot()
    counts = sorted(results)
    ms = [[s * 1000 for s in results[n]["commit"]] for n in counts]
    medians = [statistics.median(m) for m in ms]
    fig, ax = plt.subplots(figsize=FIGSIZE)
    ax.errorbar(
        counts,
        medians,
        yerr=[
            [md - min(m) for md, m in zip(medians, ms, strict=True)],
            [max(m) - md for md, m in zip(medians, ms, strict=True)],
        ],
        fmt="o-",
        capsize=3,
        label="driver commit(), median and range",
    )
    ax.plot(
        counts,
        [medians[0] * n / counts[0] for n in counts],
        "--",
        color="grey",
        label="linear growth from the first point",
    )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("prepared transactions (Spark tasks) in the batch")
    ax.set_ylabel("ms")
    ax.set_title("kafka_txn writer: driver commit() time")
    ax.legend()
    save(fig, path)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the tables."""
    args = parse_args(argv)
    counts = sorted({int(n) for n in args.tasks.split(",")})
    topic = f"bench-commit-{uuid.uuid4().hex[:8]}"
    timer = PhaseTimer()
    instrument(timer)
    collector = StepsCollector()
    collector.install()
    results: dict[int, dict[str, list[float]]] = {}
    split: dict[int, dict[str, list[float]]] = {}
    with broker_process("--topic", f"{topic}:{args.partitions}") as (bootstrap, pid):
        # Warm-up: the first request of each API version imports its kio schema.
        warm = argparse.Namespace(**{**vars(args), "repeat": 2})
        run_count(bootstrap, topic, 2, warm, timer)
        expected = 2 * warm.repeat * args.rows
        for n in counts:
            collector.label = n
            results[n] = run_count(bootstrap, topic, n, args, timer)
            collector.label = None
            expected += n * args.repeat * args.rows
            runs = ", ".join(f"{s * 1000:.0f}" for s in results[n]["commit"])
            sys.stdout.write(f"{n} tasks: commit ms {runs}\n")
            if not args.no_split:
                split[n] = run_split(bootstrap, pid, topic, n, args)
                expected += n * args.repeat * args.rows
        got = committed_count(bootstrap, topic, args.partitions)
    if got != expected:
        raise RuntimeError(f"{got} committed records in {topic}, expected {expected}")
    sys.stdout.write(f"read_committed count: {got} records, as expected\n\n")
    sys.stdout.write(report(results, split, args, collector.found))
    if args.plot:
        plot(results, args.plot)
        sys.stdout.write(f"plot written to {args.plot}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
