"""Commit time of one query with 0, 1, 4 and 16 other queries writing beside it.

Issue 32, item 3: the driver's ``commit()`` of one query must not slow down as other
queries and their transactions on the cluster grow. No Spark: the script plays queries
with the writer's own code, as ``writer_commit.py`` does. Every query is a fresh query id
under the **default** ``transactionalIdPrefix``, shared by all of them as users run it.

* **The measured query** (this process) writes batches one after the other: it prepares
  ``--tasks`` transactions with the executor's
  :func:`~pyspark_kafka_txn.writer.task.write_task` (``--rows`` records of ``--size``
  bytes each, a :class:`TaskIdentity` per Spark partition with a run id, as a streaming
  query's tasks have), then times :func:`~pyspark_kafka_txn.writer.commit.commit_batch`
  with the tasks' messages, as Spark's driver calls it (decision record, EndTxns, the
  lease renewal, waiting for the markers, its leftovers, other queries' lingering
  transactions: ``end_abandoned``).
* **Neighbours**: up to the largest ``--neighbours`` count of queries, each in a process
  of its own (as queries have their own drivers and executors), each a query id of its
  own writing its own batches in a loop into a topic of their own: ``--neighbour-tasks``
  transactions prepared with ``write_task``, kept open for ``--hold-ms`` (the rest of a
  micro-batch: Spark's scheduling, the other tasks), then ``commit_batch``. So while a
  neighbour is active the cluster holds its open transactions, its lease (renewed by its
  tasks and commits) and its decision record, exactly as a running query's.

The counts interleave: every round (``--rounds``) runs each count once, in an order that
rotates from round to round; a *phase* activates that many neighbours, waits until each
has committed a batch since (steady state), then times ``--batches`` batches of the
measured query, then stops them (each finishes the batch it is in). The report gives, per
count, the median and p95 of the measured query's ``commit_batch`` time and of its whole
batch (prepare + commit), the ratio of each median to the one without neighbours in the
same run, the median of the per-round ratios with their range, the requests the commit
sent and the bytes it received (this process's main thread: what grows with the
neighbours if anything does, whatever the machine's load), and the load average. A JSON
report keeps every batch (``--json``).

What is **not** measured: the first batch of a run (and every batch of a write without a
run id, ``df.write``) looks for the query under other prefixes, listing every group and
open transaction of the cluster; ``--no-run`` measures that case. The neighbours' clients
and the broker run on the same machine as the measured query, so on few cores their CPU
competes with it: compare the requests and bytes columns, and run it on a quiet machine.

    .venv/bin/python bench/neighbours.py                                 # embedded broker
    .venv/bin/python bench/neighbours.py --kafka apache --json neighbours.json
    .venv/bin/python bench/neighbours.py --neighbours 0,1 --rounds 1 --batches 2 --tasks 2

This is a benchmark, not a test: it checks only that a read_committed consumer finds every
record the measured query committed, and that no neighbour failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import statistics
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from _common import broker_process
from _run_info import describe
from _verify import committed_count
from pyspark_kafka_txn.client.connection import Connection
from pyspark_kafka_txn.options import WriterOptions, parse_writer_options
from pyspark_kafka_txn.writer.commit import commit_batch
from pyspark_kafka_txn.writer.messages import TaskMessage
from pyspark_kafka_txn.writer.task import TaskIdentity, write_task

TIMEOUT_MS = 120_000
#: How long a phase waits for its neighbours to commit a batch each (or to go idle).
STEADY_TIMEOUT_S = 300.0
REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- queries


def writer_options(bootstrap: str, topic: str, lingering_ms: int | None) -> WriterOptions:
    """The options a user gives: bootstrap and topic; the default prefix, shared by all."""
    opts = {"kafka.bootstrap.servers": bootstrap, "topic": topic}
    if lingering_ms is not None:
        opts["lingeringTransactionTimeout"] = f"{lingering_ms}ms"
    return parse_writer_options(opts)


def values(rows: int, size: int) -> pa.RecordBatch:
    """``rows`` values of ``size`` random bytes, no key."""
    return pa.RecordBatch.from_arrays(
        [pa.array([os.urandom(size) for _ in range(rows)], pa.binary())], names=["value"]
    )


@dataclass
class Query:
    """One streaming query played without Spark: its id, run id and next batch."""

    options: WriterOptions
    tasks: int
    rows: pa.RecordBatch
    run: str | None
    query_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    batch: int = 0

    def prepare(self) -> list[TaskMessage]:
        """The executor side of one batch: one prepared transaction per task."""
        return [
            write_task(
                self.options,
                TaskIdentity(self.query_id, self.batch, p, 0, self.run),
                iter([self.rows]),
                TIMEOUT_MS,
            )
            for p in range(self.tasks)
        ]

    def commit(self, messages: list[TaskMessage]) -> None:
        """The driver's commit of the batch; the next batch follows."""
        commit_batch(self.options, messages, self.batch)
        self.batch += 1


# --------------------------------------------------------------------------- neighbours


@dataclass(frozen=True)
class NeighbourPlan:
    """What every neighbour process does."""

    bootstrap: str
    topic: str
    tasks: int
    rows: int
    size: int
    hold_s: float
    run: bool


def neighbour_main(
    plan: NeighbourPlan,
    active: Any,
    stop: Any,
    batches: Any,
    busy: Any,
    errors: Any,
) -> None:
    """A neighbour query's loop (in its own process): while ``active`` is set, write and
    commit batches, counting them in ``batches``; ``busy`` is 1 while a batch is open."""
    query = Query(
        writer_options(plan.bootstrap, plan.topic, None),
        plan.tasks,
        values(plan.rows, plan.size),
        str(uuid.uuid4()) if plan.run else None,
    )
    try:
        while not stop.is_set():
            if not active.wait(0.2):
                continue
            busy.value = 1
            if not active.is_set():  # stopped meanwhile (see Neighbours.deactivate)
                busy.value = 0
                continue
            messages = query.prepare()
            time.sleep(plan.hold_s)  # the transactions stay open: the rest of a micro-batch
            query.commit(messages)
            with batches.get_lock():
                batches.value += 1
            busy.value = 0
    except BaseException as exc:  # reported to the main process, which fails the run
        errors.put(f"neighbour {query.query_id}: {exc!r}")
        raise
    finally:
        busy.value = 0


class Neighbours:
    """``count`` neighbour processes, idle until :meth:`activate`."""

    def __init__(self, plan: NeighbourPlan, count: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._stop = ctx.Event()
        self._errors = ctx.Queue()
        self._active = [ctx.Event() for _ in range(count)]
        self.batches = [ctx.Value("i", 0) for _ in range(count)]
        self._busy = [ctx.Value("i", 0, lock=False) for _ in range(count)]
        self._procs = [
            ctx.Process(
                target=neighbour_main,
                args=(plan, self._active[i], self._stop, self.batches[i], self._busy[i]),
                kwargs={"errors": self._errors},
                name=f"neighbour-{i}",
                daemon=True,
            )
            for i in range(count)
        ]

    def __enter__(self) -> Neighbours:
        for proc in self._procs:
            proc.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for event in self._active:
            event.clear()
        for proc in self._procs:
            proc.join(30)
            if proc.is_alive():
                proc.terminate()
                proc.join(10)

    def counts(self, n: int) -> list[int]:
        """Batches committed so far by each of the first ``n`` neighbours."""
        return [self.batches[i].value for i in range(n)]

    def activate(self, n: int) -> None:
        """Start the first ``n`` neighbours; return once each has committed a batch since
        (each then holds a lease, a decision record and, most of the time, open
        transactions)."""
        before = self.counts(n)
        for event in self._active[:n]:
            event.set()
        self._wait(
            lambda: all(a > b for a, b in zip(self.counts(n), before, strict=True)),
            f"{n} neighbours to commit a batch each",
        )

    def deactivate(self) -> None:
        """Stop every neighbour once its batch in progress is committed; wait for that."""
        for event in self._active:
            event.clear()
        self._wait(lambda: not any(b.value for b in self._busy), "the neighbours to go idle")

    def check(self) -> None:
        """Raise if a neighbour failed."""
        failures = []
        while not self._errors.empty():
            failures.append(self._errors.get())
        dead = [p.name for p in self._procs if not p.is_alive() and not self._stop.is_set()]
        if failures or dead:
            raise RuntimeError(f"neighbours failed: {failures or dead}")

    def _wait(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + STEADY_TIMEOUT_S
        while not done():
            self.check()
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {what}")
            time.sleep(0.02)


# --------------------------------------------------------------------------- measuring


class RequestCounter:
    """Requests sent, by API, and response bytes received, by this process's main thread
    while armed (the neighbours run in other processes; lease renewals in threads)."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.received = 0
        self._armed = False
        self._main = threading.get_ident()

    @contextlib.contextmanager
    def armed(self) -> Iterator[None]:
        """Count during the block only, from zero."""
        self.requests.clear()
        self.received = 0
        self._armed = True
        try:
            yield
        finally:
            self._armed = False

    def install(self) -> None:
        """Wrap :class:`Connection`'s raw send and frame read (the source is not changed)."""
        send, read = Connection._send_raw, Connection._read_frame
        counter = self

        def counted_send(
            self: Connection, api_key: int, version: int, req_cls: type[Any], body: Any
        ) -> int:
            if counter._armed and threading.get_ident() == counter._main:
                counter.requests[req_cls.__name__.removesuffix("Request")] += 1
            return send(self, api_key, version, req_cls, body)

        def counted_read(self: Connection) -> bytes:
            frame = read(self)
            if counter._armed and threading.get_ident() == counter._main:
                counter.received += len(frame) + 4
            return frame

        Connection._send_raw = counted_send  # type: ignore[method-assign]
        Connection._read_frame = counted_read  # type: ignore[method-assign]


@dataclass
class Batch:
    """One measured batch of the measured query."""

    round: int
    neighbours: int
    batch: int
    prepare_s: float
    commit_s: float
    commit_cpu_s: float
    requests: dict[str, int]
    received_bytes: int

    @property
    def total_s(self) -> float:
        return self.prepare_s + self.commit_s


@dataclass
class Phase:
    """One phase: a neighbour count in a round."""

    round: int
    neighbours: int
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    neighbour_batches: int
    seconds: float


def measure_batch(query: Query, counter: RequestCounter, r: int, n: int) -> Batch:
    """Prepare and commit one batch of the measured query; time both."""
    started = time.perf_counter()
    messages = query.prepare()
    prepared = time.perf_counter()
    cpu = time.process_time()
    with counter.armed():
        query.commit(messages)
    done = time.perf_counter()
    return Batch(
        r,
        n,
        query.batch - 1,
        prepared - started,
        done - prepared,
        time.process_time() - cpu,
        dict(counter.requests),
        counter.received,
    )


def run(bootstrap: str, args: argparse.Namespace) -> tuple[list[Batch], list[Phase], int]:
    """Warm up, then the rounds; return the batches, the phases and the expected count."""
    counts: list[int] = args.neighbour_counts
    plan = NeighbourPlan(
        bootstrap,
        args.neighbour_topic,
        args.neighbour_tasks,
        args.rows,
        args.size,
        args.hold_ms / 1000,
        not args.no_run,
    )
    rows = values(args.rows, args.size)
    options = writer_options(bootstrap, args.topic, args.lingering_ms)
    query = Query(options, args.tasks, rows, None if args.no_run else str(uuid.uuid4()))
    counter = RequestCounter()
    counter.install()
    batches: list[Batch] = []
    phases: list[Phase] = []
    say(f"measured query {query.query_id}, prefix '{options.transactional_id_prefix}'")
    with Neighbours(plan, max(counts)) as neighbours:
        # Warm-up, not measured: the first batch of the run (its prefix check), the first
        # request of each API version (kio schemas), every neighbour process started.
        for _ in range(2):
            query.commit(query.prepare())
        if max(counts):
            neighbours.activate(max(counts))
            neighbours.deactivate()
        for r in range(args.rounds):
            shift = r % len(counts)
            for n in [*counts[shift:], *counts[:shift]]:
                load = os.getloadavg()
                started = time.monotonic()
                if n:
                    neighbours.activate(n)
                before = sum(neighbours.counts(n))
                for _ in range(args.batches):
                    batches.append(measure_batch(query, counter, r, n))
                neighbours.check()
                during = sum(neighbours.counts(n)) - before
                neighbours.deactivate()
                phases.append(
                    Phase(r, n, load, os.getloadavg(), during, time.monotonic() - started)
                )
                mine = [b for b in batches if b.round == r and b.neighbours == n]
                say(
                    f"round {r + 1}, {n:>2} neighbours: commit ms "
                    + ", ".join(f"{b.commit_s * 1000:.1f}" for b in mine)
                    + f" (neighbours committed {during} batches meanwhile; load "
                    + f"{load[0]:.1f} -> {os.getloadavg()[0]:.1f})"
                )
    expected = query.batch * args.tasks * args.rows
    return batches, phases, expected


# --------------------------------------------------------------------------- report


def say(line: str = "") -> None:
    """One line on standard output, at once."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def p95(xs: list[float]) -> float:
    """The 95th percentile (nearest rank)."""
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, max(0, -(-95 * len(ordered) // 100) - 1))]


def commit_time(b: Batch) -> float:
    """Seconds in ``commit_batch``."""
    return b.commit_s


def batch_time(b: Batch) -> float:
    """Seconds of the whole batch: prepare + commit."""
    return b.total_s


def round_ratios(batches: list[Batch], n: int, key: Callable[[Batch], float]) -> list[float]:
    """Per round: median of ``key`` with ``n`` neighbours over the one without."""
    out = []
    for r in sorted({b.round for b in batches}):
        mine = [key(b) for b in batches if b.round == r and b.neighbours == n]
        alone = [key(b) for b in batches if b.round == r and b.neighbours == 0]
        if mine and alone:
            out.append(statistics.median(mine) / statistics.median(alone))
    return out


def report(batches: list[Batch], phases: list[Phase], header: list[str]) -> str:
    """The markdown tables: per neighbour count, commit and batch times, ratios, requests."""
    counts = sorted({b.neighbours for b in batches})
    by: dict[int, list[Batch]] = defaultdict(list)
    for b in batches:
        by[b.neighbours].append(b)
    alone = by.get(0)
    lines = [
        *header,
        "",
        "| neighbours | commit ms p50 | p95 | ratio p50 to alone (rounds) "
        "| batch ms p50 | p95 | ratio p50 to alone (rounds) | commit CPU ms p50 "
        "| requests per commit | KiB received per commit | load avg |",
        "|---:|---:|---:|---|---:|---:|---|---:|---:|---:|---|",
    ]
    for n in counts:
        mine = by[n]
        cells = []
        for key in (commit_time, batch_time):
            xs = [key(b) for b in mine]
            cells += [f"{statistics.median(xs) * 1000:.1f}", f"{p95(xs) * 1000:.1f}"]
            if alone is None:
                cells.append("")
                continue
            ratio = statistics.median(xs) / statistics.median([key(b) for b in alone])
            spread = ""
            if per_round := round_ratios(batches, n, key):
                mid, low, high = statistics.median(per_round), min(per_round), max(per_round)
                spread = f" ({mid:.2f}: {low:.2f}-{high:.2f})"
            cells.append(f"{ratio:.2f}{spread}")
        cpu = statistics.median(b.commit_cpu_s for b in mine) * 1000
        reqs = statistics.median(sum(b.requests.values()) for b in mine)
        kib = statistics.median(b.received_bytes for b in mine) / 1024
        loads = [
            x for p in phases if p.neighbours == n for x in (p.load_before[0], p.load_after[0])
        ]
        load = f"{min(loads):.1f}-{max(loads):.1f}"
        cells += [f"{cpu:.1f}", f"{reqs:.0f}", f"{kib:.1f}", load]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    apis = sorted({a for b in batches for a in b.requests})
    lines += [
        "",
        "Requests of one commit (median), by API:",
        "",
        "| neighbours | " + " | ".join(apis) + " |",
        "|---:|" + "---:|" * len(apis),
    ]
    for n in counts:
        cells = [f"{statistics.median(b.requests.get(a, 0) for b in by[n]):.0f}" for a in apis]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    most = counts[-1]
    if alone is not None and most:
        ratio = statistics.median(b.commit_s for b in by[most]) / statistics.median(
            b.commit_s for b in alone
        )
        verdict = "met" if ratio <= 1.10 else "missed"
        lines += [
            "",
            f"Goal (median commit time with {most} neighbours within 10 % of alone): "
            f"{ratio:.2f}x, {verdict}.",
        ]
    return "\n".join(lines) + "\n"


def describe_run(args: argparse.Namespace, kafka: str) -> dict[str, Any]:
    """Commit, versions and machine (:func:`_run_info.describe`) and the settings, for the
    report's header and the JSON."""
    return {
        **describe(kafka, sys.argv[1:]),
        "settings": {k: v for k, v in vars(args).items() if k != "neighbour_counts"},
    }


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--kafka", choices=("embedded", "apache"), default="embedded")
    p.add_argument("--kafka-version", help="Apache Kafka release (default: the tests' default)")
    p.add_argument("--neighbours", default="0,1,4,16", help="comma-separated neighbour counts")
    p.add_argument("--rounds", type=int, default=5, help="rounds of every neighbour count")
    p.add_argument("--batches", type=int, default=5, help="measured batches per phase")
    p.add_argument("--tasks", type=int, default=4, help="tasks per batch of the measured query")
    p.add_argument("--neighbour-tasks", type=int, help="tasks per neighbour batch (--tasks)")
    p.add_argument("--rows", type=int, default=100, help="records per task")
    p.add_argument("--size", type=int, default=100, help="value bytes per record")
    p.add_argument("--partitions", type=int, default=8, help="partitions of each topic")
    p.add_argument(
        "--hold-ms",
        type=float,
        default=250,
        help="how long a neighbour keeps its batch's transactions open before its commit",
    )
    p.add_argument(
        "--lingering-ms",
        type=int,
        help="lingeringTransactionTimeout of the measured query (default: the option's, "
        "60 s); below --hold-ms its commits read the leases of the neighbours, whose "
        "transactions are then open longer (they keep the default lease: they stay live)",
    )
    p.add_argument(
        "--no-run",
        action="store_true",
        help="no run id (a batch write): every new decision looks for other prefixes",
    )
    p.add_argument("--json", help="write the raw report (every batch, every phase) here")
    p.add_argument("--report", help="also write the markdown report here")
    args = p.parse_args(argv)
    args.neighbour_counts = sorted({int(n) for n in args.neighbours.split(",")})
    if args.neighbour_tasks is None:
        args.neighbour_tasks = args.tasks
    return args


@contextlib.contextmanager
def cluster(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """The cluster with the two topics; yield (bootstrap, description)."""
    topics = (args.topic, args.neighbour_topic)
    if args.kafka == "embedded":
        spec = [a for t in topics for a in ("--topic", f"{t}:{args.partitions}")]
        with broker_process(*spec) as (bootstrap, _):
            import pyspark_kafka_txn

            yield bootstrap, f"embedded broker {pyspark_kafka_txn.__version__} (own process)"
        return
    sys.path.insert(0, str(REPO))  # tests.support
    from tests.support.apache_kafka.cluster import ApacheKafka

    with ApacheKafka(1, version=args.kafka_version) as kafka:
        for topic in topics:
            kafka.create_topic(topic, args.partitions)
        yield kafka.bootstrap_servers, f"Apache Kafka {kafka.version} (1 node)"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the report, write the JSON."""
    args = parse_args(argv)
    tag = uuid.uuid4().hex[:8]
    args.topic, args.neighbour_topic = f"bench-nb-{tag}", f"bench-nb-{tag}-neighbours"
    with cluster(args) as (bootstrap, kafka):
        info = describe_run(args, kafka)
        say(f"{kafka}, commit {info['commit'][:12]}{' (dirty)' if info['dirty'] else ''}")
        batches, phases, expected = run(bootstrap, args)
        got = committed_count(bootstrap, args.topic, args.partitions)
    if got != expected:
        raise RuntimeError(f"{got} committed records in {args.topic}, expected {expected}")
    say(f"read_committed count of the measured topic: {got} records, as expected\n")
    header = [
        f"`bench/neighbours.py {' '.join(sys.argv[1:] if argv is None else argv)}`, "
        f"{info['date']}, {kafka}, {os.cpu_count()} cores, commit {info['commit'][:12]}"
        f"{' (dirty)' if info['dirty'] else ''}; {args.tasks} tasks per measured batch, "
        f"{args.neighbour_tasks} per neighbour batch (held open {args.hold_ms:.0f} ms), "
        f"{args.rows} x {args.size} B per task; {args.rounds} rounds x {args.batches} "
        "batches per count.",
    ]
    text = report(batches, phases, header)
    say(text)
    if args.report:
        Path(args.report).write_text(text)
    if args.json:
        raw = {
            **info,
            "batches": [asdict(b) | {"total_s": b.total_s} for b in batches],
            "phases": [asdict(p) for p in phases],
        }
        Path(args.json).write_text(json.dumps(raw, indent=1) + "\n")
        say(f"raw report written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
