"""Cost of the writer's exactly-once protocol, and the writer against a confluent-kafka loop.

The same job, side by side in one run, on the embedded broker (started as a separate
process): copy ``--records`` records of ``--size``-byte values from a source topic to a
fresh sink topic, ``--batch-records`` records per micro-batch or transaction.

* **exactly_once** / **at_least_once**: ``spark.readStream.format("kafka_txn")`` with
  ``maxOffsetsPerTrigger`` into ``df.writeStream.format("kafka_txn")`` with that
  ``deliveryGuarantee``, ``trigger(availableNow=True)``, on one ``local[N]`` SparkSession.
  Every run has a fresh checkpoint, sink topic and ``transactionalIdPrefix``.
* **..., no Spark**: the writer's own code for the same micro-batches in this process:
  per batch, one :func:`write_task` per partition (one after the other) with rows built
  in memory, then :func:`commit_batch`. The protocol without Spark's noise.
* **null Python sink** / **noop sink**: the same query into a Python sink that does
  nothing with the Arrow batches it is handed, and into ``format("noop")``: the floors
  under the writer runs (Spark's own cost for any Python sink; reading alone).
* **confluent-kafka**: what a Python user would write instead, in one process: a
  ``read_committed`` consumer and a transactional producer; every record consumed is
  produced to the sink; ``send_offsets_to_transaction`` + ``commit_transaction`` every
  ``--batch-records`` records.

Every run is timed from its start (``start()``; creating the clients) to its end
(``awaitTermination()`` returns; the last commit), and per micro-batch from the query
progress (``addBatch``: the Spark job that reads, writes and commits; ``triggerExecution``:
the whole trigger with the offset and commit logs) or per transaction. The *steady* rates
leave out the first micro-batch or transaction, which pays for the start. The CPU time of
everything involved (this process and its descendants: the Spark JVM and its Python
workers; and the broker) is measured over the same span.

The two writer modes alternate (their order swaps every round) for ``--repeat`` rounds;
each round goes on with the floors and the confluent-kafka loop. An unmeasured round on
a small topic first starts Spark's Python workers. The exactly-once overhead is
exactly_once over at_least_once in the same round, minus 1, as the median over the
rounds::

    .venv/bin/python bench/writer_overhead.py
    .venv/bin/python bench/writer_overhead.py --records 1000000 --repeat 7 --partitions 4
    .venv/bin/python bench/writer_overhead.py --plot writer-overhead.png

This is a benchmark, not a test: after every run that writes to Kafka it checks only that
a read_committed consumer finds exactly ``--records`` records in the sink topic.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from _common import FAST_CONSUMER_SETTINGS, broker_process
from _plot import FIGSIZE, pyplot, save
from _verify import committed_count
from pyspark_kafka_txn.options import parse_writer_options
from pyspark_kafka_txn.writer.commit import commit_batch
from pyspark_kafka_txn.writer.task import TaskIdentity, write_task

EXACTLY_ONCE = "exactly_once"
AT_LEAST_ONCE = "at_least_once"
NOOP = "noop sink"
NULL = "null Python sink"
CONFLUENT = "confluent-kafka"
WRITERS = (EXACTLY_ONCE, AT_LEAST_ONCE)
NO_SPARK = ", no Spark"
#: Rows per Arrow batch Spark hands a Python writer (spark.sql.execution.arrow.maxRecordsPerBatch).
ARROW_ROWS = 10_000
TIMEOUT_MS = 900_000

# What a user tuning librdkafka for throughput would set (as in bench/client_producer.py).
PRODUCER_SETTINGS: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "batch.num.messages": 10_000,
    "queue.buffering.max.messages": 500_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "compression.type": "none",
}


@dataclass(slots=True)
class Run:
    """One measured run: the whole job, and its micro-batches or transactions."""

    name: str
    round: int
    records: int
    seconds: float
    #: (records, addBatch s, triggerExecution s) per micro-batch; without Spark (records,
    #: tasks s, tasks + commit s); for the confluent-kafka loop (records, s, s) per
    #: transaction.
    batches: list[tuple[int, float, float]] = field(default_factory=list)
    #: CPU seconds of this process tree and the broker from start to end.
    cpu: float = float("nan")

    @property
    def rate(self) -> float:
        """Records per second, start to end."""
        return self.records / self.seconds

    def steady(self, column: int) -> float:
        """Records per second of the batches after the first (column 1: addBatch, 2: trigger)."""
        later = self.batches[1:] or self.batches
        seconds = sum(b[column] for b in later)
        return sum(b[0] for b in later) / seconds if seconds > 0 else float("nan")


# --------------------------------------------------------------------------- topics


def create_topic(admin: AdminClient, name: str, partitions: int) -> str:
    """Create ``name`` with ``partitions`` partitions; return the name."""
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def fill(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> None:
    """Produce ``records`` values of ``size`` bytes (no key) round-robin, idempotently.

    Not transactional: the source holds no commit markers, so every micro-batch of
    ``maxOffsetsPerTrigger`` offsets holds exactly that many records.
    """
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    producer = Producer(
        {"bootstrap.servers": bootstrap, **PRODUCER_SETTINGS, "on_delivery": on_delivery}
    )
    value = os.urandom(size)
    for n in range(records):
        while True:
            try:
                producer.produce(topic, value, None, n % partitions)
                break
            except BufferError:
                producer.poll(0.005)
    if producer.flush(120) or errors:
        raise RuntimeError(f"filling {topic} failed: {errors[:1] or 'not flushed'}")


def check_count(bootstrap: str, run: Run, topic: str, partitions: int, expected: int) -> None:
    """Fail unless the sink holds exactly ``expected`` committed records."""
    got = committed_count(bootstrap, topic, partitions)
    if got != expected:
        raise RuntimeError(
            f"{run.name} round {run.round}: {got} records in {topic}, want {expected}"
        )


# --------------------------------------------------------------------------- CPU


class CpuMeter:
    """CPU seconds used by this process, its descendants and the broker (Linux ``/proc``).

    Spark's Python workers come and go, and their parent ignores SIGCHLD, so what an
    ended worker used is found in no other process: a thread samples the user + system
    time of every process in the trees every ``interval_s`` while a run is measured, and
    a run's CPU time is what each process (pid and start time) used between its first and
    last sample. A process loses at most its last ``interval_s`` of CPU when it ends. The
    sampling itself (about 2 ms per sample) counts too, the same for every run.
    """

    def __init__(self, broker_pid: int, interval_s: float = 0.2) -> None:
        self.roots = {os.getpid(), broker_pid}
        self.interval_s = interval_s
        self.tick = os.sysconf("SC_CLK_TCK")
        self._first: dict[tuple[int, int], int] = {}
        self._last: dict[tuple[int, int], int] = {}
        #: The root each measured process descends from (a root is its own).
        self._root: dict[tuple[int, int], int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        parent: dict[int, int] = {}
        used: dict[tuple[int, int], int] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:  # the process ended meanwhile
                continue
            pid = int(entry)
            parent[pid] = int(fields[1])
            used[(pid, int(fields[19]))] = int(fields[11]) + int(fields[12])  # utime + stime
        for key, ticks in used.items():
            ancestor = key[0]
            while ancestor > 1 and ancestor not in self.roots:
                ancestor = parent.get(ancestor, 0)
            if ancestor in self.roots:
                self._first.setdefault(key, ticks if self._thread is None else 0)
                self._last[key] = ticks
                self._root[key] = ancestor

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def start(self) -> None:
        """Take the first sample and start sampling."""
        self._first.clear()
        self._last.clear()
        self._root.clear()
        self._stop.clear()
        self._thread = None
        self._sample()  # processes alive now count from here; later ones from 0
        self._thread = threading.Thread(target=self._run, name="cpu-meter", daemon=True)
        self._thread.start()

    def stop(self) -> float:
        """Take the last sample; return the CPU seconds used since :meth:`start`."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        self._thread = None
        return sum(self._last[k] - self._first[k] for k in self._last) / self.tick

    def used_by(self, root: int) -> float:
        """CPU seconds of the last measured span used by ``root`` and its descendants that
        are not below another root (e.g. the broker's, when it is a child of this process)."""
        return (
            sum(self._last[k] - self._first[k] for k in self._last if self._root[k] == root)
            / self.tick
        )


# --------------------------------------------------------------------------- spark


def spark_session(processes: int) -> Any:
    """One ``local[processes]`` SparkSession for every query of the run."""
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master(f"local[{processes}]")
        .appName("kafka_txn-writer-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(processes))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def null_sink() -> Any:
    """A Python streaming sink that takes the rows as Arrow batches and does nothing else.

    The same query into it measures what Spark itself costs for any Python data source
    writer: the rows handed from the JVM to a Python worker in Arrow batches, a message
    per task back to the driver, ``commit()`` in a Python worker on the driver. The
    ``kafka_txn`` writer cannot be faster than this floor.
    """
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceStreamArrowWriter,
        WriterCommitMessage,
    )

    class NullWriter(DataSourceStreamArrowWriter):
        def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
            for _batch in iterator:
                pass
            return WriterCommitMessage()

        def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 - Spark's API
            pass

        def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 - Spark's API
            pass

    class NullSink(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_null_sink"

        def streamWriter(self, schema: Any, overwrite: bool) -> NullWriter:  # noqa: N802 - Spark's API
            return NullWriter()

    return NullSink


def spark_run(
    spark: Any,
    cpu: CpuMeter,
    bootstrap: str,
    source: str,
    sink: str | None,
    mode: str,
    args: argparse.Namespace,
    round_: int,
) -> Run:
    """``source`` → ``format("kafka_txn")`` (or a floor sink) with ``availableNow``; timed."""
    with tempfile.TemporaryDirectory(prefix="bench-writer-ckpt-") as checkpoint:
        cpu.start()
        started = time.monotonic()
        df = (
            spark.readStream.format("kafka_txn")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(args.batch_records))
            .options(**args.reader_options)
            .load()
            .select("key", "value")
        )
        if mode == NOOP:
            writer = df.writeStream.format("noop")
        elif mode == NULL:
            writer = df.writeStream.format("bench_null_sink")
        else:
            writer = (
                df.writeStream.format("kafka_txn")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("topic", sink)
                .option("deliveryGuarantee", mode)
                .option("transactionalIdPrefix", f"bench-{uuid.uuid4().hex[:8]}-")
            )
        query = writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
        query.awaitTermination()
        elapsed = time.monotonic() - started
        used = cpu.stop()
        if query.exception() is not None:
            raise RuntimeError(f"{mode}: the query failed: {query.exception()}")
        batches = [
            (
                int(p["numInputRows"]),
                p["durationMs"].get("addBatch", 0) / 1000,
                p["durationMs"].get("triggerExecution", 0) / 1000,
            )
            for p in query.recentProgress
            if p["numInputRows"]
        ]
    return Run(mode, round_, sum(b[0] for b in batches), elapsed, batches, used)


# --------------------------------------------------------------------------- no Spark


def tasks_run(
    cpu: CpuMeter, bootstrap: str, sink: str, mode: str, args: argparse.Namespace, round_: int
) -> Run:
    """The writer's own code for each micro-batch, without Spark, in this process.

    Per micro-batch, ``--partitions`` tasks (one after the other) each write their share
    of ``--batch-records`` rows (null key, ``--size``-byte values, in Arrow batches of
    Spark's size) with :func:`write_task`, then the driver's :func:`commit_batch` runs.
    Only the writer's protocol and client: no reading, no Spark, no Python workers.
    """
    options = parse_writer_options(
        {
            "kafka.bootstrap.servers": bootstrap,
            "topic": sink,
            "deliveryGuarantee": mode,
            "transactionalIdPrefix": f"bench-{uuid.uuid4().hex[:8]}-",
        }
    )
    rows = min(ARROW_ROWS, args.batch_records)
    values = pa.array([os.urandom(args.size) for _ in range(rows)], pa.binary())
    arrow = pa.RecordBatch.from_arrays([pa.nulls(rows, pa.binary()), values], ["key", "value"])

    def task_rows(count: int) -> Iterator[pa.RecordBatch]:
        for first in range(0, count, rows):
            yield arrow.slice(0, min(rows, count - first))

    query_id = str(uuid.uuid4())
    batches: list[tuple[int, float, float]] = []
    cpu.start()
    started = time.monotonic()
    for batch, first in enumerate(range(0, args.records, args.batch_records)):
        count = min(args.batch_records, args.records - first)
        shares = [len(range(p, count, args.partitions)) for p in range(args.partitions)]
        batch_started = time.monotonic()
        messages = [
            write_task(options, TaskIdentity(query_id, batch, p, 0), task_rows(n), TIMEOUT_MS)
            for p, n in enumerate(shares)
        ]
        written = time.monotonic()
        commit_batch(options, messages, batch)
        batches.append((count, written - batch_started, time.monotonic() - batch_started))
    elapsed = time.monotonic() - started
    return Run(mode + NO_SPARK, round_, args.records, elapsed, batches, cpu.stop())


# --------------------------------------------------------------------------- confluent


def confluent_run(
    cpu: CpuMeter, bootstrap: str, source: str, sink: str, args: argparse.Namespace, round_: int
) -> Run:
    """A read_committed consume → produce loop, one transaction per ``batch_records``."""
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    cpu.start()
    started = time.monotonic()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-ck-{uuid.uuid4().hex[:8]}",
            **FAST_CONSUMER_SETTINGS,
            "enable.partition.eof": True,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            **PRODUCER_SETTINGS,
            "transactional.id": f"bench-ck-{uuid.uuid4().hex[:8]}",
            "on_delivery": on_delivery,
        }
    )
    producer.init_transactions(30)
    consumer.assign([TopicPartition(source, p, 0) for p in range(args.partitions)])
    pending = set(range(args.partitions))
    following: dict[int, int] = {}
    produce = producer.produce
    batches: list[tuple[int, float, float]] = []
    in_txn = 0
    txn_started: float | None = None  # when the loop began to ask for the transaction's records
    while pending or in_txn:
        if pending:
            if txn_started is None:
                txn_started = time.monotonic()
            # Ask for no more than the transaction takes: each commits exactly batch_records.
            # A short timeout: consume() waits that long when fewer records are left.
            for msg in consumer.consume(min(10_000, args.batch_records - in_txn), 0.1):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                        continue
                    raise KafkaException(err)
                if in_txn == 0:
                    producer.begin_transaction()
                while True:
                    try:
                        produce(sink, msg.value(), msg.key())
                        break
                    except BufferError:
                        producer.poll(0.005)
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None and offset is not None  # a record has both
                following[partition] = offset + 1
                in_txn += 1
        if in_txn and (in_txn == args.batch_records or not pending):
            offsets = [TopicPartition(source, p, o) for p, o in sorted(following.items())]
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(120)
            took = time.monotonic() - (txn_started or started)
            batches.append((in_txn, took, took))
            in_txn = 0
            txn_started = None
    elapsed = time.monotonic() - started
    used = cpu.stop()
    consumer.close()
    if errors:
        raise RuntimeError(f"{CONFLUENT}: delivery failed: {errors[0]}")
    return Run(CONFLUENT, round_, sum(b[0] for b in batches), elapsed, batches, used)


# --------------------------------------------------------------------------- report


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _table(runs: list[Run]) -> str:
    lines = [
        f"| {'run':<24} | round | records | batches | seconds | records/s | "
        "steady addBatch rec/s | steady trigger rec/s | CPU s |",
        f"|{'-' * 26}|------:|--------:|--------:|--------:|----------:|"
        "----------------------:|---------------------:|------:|",
    ]
    for r in runs:
        add_batch = f"{r.steady(1):,.0f}" if r.name != CONFLUENT else "-"
        lines.append(
            f"| {r.name:<24} | {r.round:>5} | {r.records:>7} | {len(r.batches):>7} | "
            f"{r.seconds:>7.2f} | {r.rate:>9,.0f} | {add_batch:>21} | {r.steady(2):>20,.0f} | "
            f"{r.cpu:>5.1f} |"
        )
    return "\n".join(lines) + "\n"


def _costs(run: Run, measure: str) -> float:
    """Seconds the run took by ``measure``, per record."""
    if measure == "wall":
        return run.seconds / run.records
    if measure == "cpu":
        return run.cpu / run.records
    return 1 / run.steady(1 if measure == "addBatch" else 2)


def _overhead(rounds_: list[dict[str, Run]], suffix: str, measure: str, what: str) -> str:
    values = [
        _costs(rs[EXACTLY_ONCE + suffix], measure) / _costs(rs[AT_LEAST_ONCE + suffix], measure) - 1
        for rs in rounds_
    ]
    return (
        f"exactly-once overhead{suffix} ({what}): median {_median(values):+.1%} "
        f"(rounds: {', '.join(f'{v:+.1%}' for v in values)})"
    )


def _by_round(runs: list[Run]) -> list[dict[str, Run]]:
    """The runs of each round, by name."""
    by_round: dict[int, dict[str, Run]] = {}
    for r in runs:
        by_round.setdefault(r.round, {})[r.name] = r
    return list(by_round.values())


def summary(runs: list[Run]) -> str:
    """Exactly-once overhead per round (median), and ratios to the confluent-kafka loop."""
    rounds_ = _by_round(runs)
    present = rounds_[0]
    lines = ["goal: exactly-once overhead <= +3%"]
    for measure, what in (
        ("wall", "start to end, wall"),
        ("addBatch", "steady micro-batches, addBatch"),
        ("trigger", "steady micro-batches, triggerExecution"),
        ("cpu", "start to end, CPU time"),
    ):
        lines.append(_overhead(rounds_, "", measure, what))
    if EXACTLY_ONCE + NO_SPARK in present:
        for measure, what in (("wall", "wall"), ("cpu", "CPU time")):
            lines.append(_overhead(rounds_, NO_SPARK, measure, what))
        for name in WRITERS:
            commits = [(b[2] - b[1]) * 1000 for rs in rounds_ for b in rs[name + NO_SPARK].batches]
            tasks = [b[1] * 1000 for rs in rounds_ for b in rs[name + NO_SPARK].batches]
            lines.append(
                f"{name}{NO_SPARK}, per micro-batch: tasks {_median(tasks):.0f} ms, "
                f"commit_batch {_median(commits):.1f} ms (median)"
            )
    if CONFLUENT in present:
        lines.append("goal: exactly_once / confluent-kafka >= 1x")
    for baseline, names in ((CONFLUENT, (*WRITERS, NULL, NOOP)), (NULL, WRITERS)):
        if baseline not in present:
            continue
        for name in names:
            if name not in present:
                continue
            wall = [rs[name].rate / rs[baseline].rate for rs in rounds_]
            steady = [rs[name].steady(2) / rs[baseline].steady(2) for rs in rounds_]
            cpu = [rs[baseline].cpu / rs[name].cpu for rs in rounds_]
            lines.append(
                f"ratio {name} / {baseline} (records/s): wall {_median(wall):.2f}x, "
                f"steady trigger {_median(steady):.2f}x, CPU {_median(cpu):.2f}x"
            )
    return "\n".join(lines) + "\n"


#: Colour of each run in the plot; its order is the plot's.
_COLOURS: dict[str, str] = {
    EXACTLY_ONCE: "tab:blue",
    AT_LEAST_ONCE: "tab:orange",
    NULL: "tab:green",
    NOOP: "tab:olive",
    CONFLUENT: "tab:red",
    EXACTLY_ONCE + NO_SPARK: "tab:blue",
    AT_LEAST_ONCE + NO_SPARK: "tab:orange",
}
#: Tick labels short enough for seven runs side by side.
_TICKS = {
    EXACTLY_ONCE: "exactly\nonce",
    AT_LEAST_ONCE: "at least\nonce",
    NULL: "null\nPython sink",
    NOOP: "noop\nsink",
    CONFLUENT: "confluent-\nkafka loop",
}


def plot(runs: list[Run], args: argparse.Namespace, path: str) -> None:
    """Records/s of every run: a point per round, a bar at the median, ratio labels.

    The ratio is the one ``summary`` prints: the median over the rounds of the run's
    records/s over the confluent-kafka loop's (at_least_once's if the loop was skipped).
    The runs without Spark, an order of magnitude faster, get a panel of their own.
    """
    plt = pyplot()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import EngFormatter

    rounds_ = _by_round(runs)
    names = [n for n in _COLOURS if n in rounds_[0]]
    baseline = CONFLUENT if CONFLUENT in rounds_[0] else AT_LEAST_ONCE
    panels = [[n for n in names if not n.endswith(NO_SPARK)]]
    if len(panels[0]) < len(names):
        panels.append([n for n in names if n.endswith(NO_SPARK)])
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=FIGSIZE,
        layout="constrained",
        squeeze=False,
        width_ratios=[len(p) + 0.5 for p in panels],
    )
    for ax, panel in zip(axes[0], panels, strict=True):
        for i, name in enumerate(panel):
            rates = [rs[name].rate for rs in rounds_]
            ax.bar(i, _median(rates), 0.7, color=_COLOURS[name], alpha=0.4)
            spread = (
                [0.0]
                if len(rates) == 1
                else [-0.2 + 0.4 * k / (len(rates) - 1) for k in range(len(rates))]
            )
            ax.plot([i + d for d in spread], rates, "o", ms=3.5, color="black")
            ratio = _median([rs[name].rate / rs[baseline].rate for rs in rounds_])
            ax.annotate(
                f"{ratio:.2f}\N{MULTIPLICATION SIGN}",
                (i, max(rates)),
                xytext=(0, 4),
                textcoords="offset points",
                ha="center",
                fontsize=8,
            )
        ax.set_xticks(
            range(len(panel)),
            [_TICKS[n.removesuffix(NO_SPARK)] for n in panel],
            fontsize=8,
        )
        ax.set_xlim(-0.6, len(panel) - 0.4)
        ax.set_ylim(0, max(rs[n].rate for rs in rounds_ for n in panel) * 1.15)
        ax.yaxis.set_major_formatter(EngFormatter())
    loop = "; the confluent-kafka loop" if CONFLUENT in names else ""
    axes[0][0].set_title(f"Spark queries on local[{args.processes}]{loop}", fontsize=9)
    axes[0][0].set_ylabel("records/s, start to end")
    if len(panels) > 1:
        axes[0][1].set_title("writer code alone,\nno Spark", fontsize=9)
    overhead = _median(
        [_costs(rs[EXACTLY_ONCE], "wall") / _costs(rs[AT_LEAST_ONCE], "wall") - 1 for rs in rounds_]
    )
    fig.suptitle(
        f"kafka_txn writer, Kafka \N{RIGHTWARDS ARROW} Kafka: exactly-once overhead "
        f"{overhead:+.1%} (median, wall)",
        fontsize=11,
    )
    fig.legend(
        [Line2D([], [], ls="", marker="o", ms=3.5, color="black"), Patch(color="grey", alpha=0.4)],
        ["one round", f"median of {len(rounds_)} round{'s' if len(rounds_) > 1 else ''}"],
        loc="outside lower center",
        ncol=2,
        fontsize=8,
        title=f"{args.records:,} records of {args.size} B, {args.batch_records:,} per "
        f"micro-batch / transaction, {args.partitions} partitions\n"
        f"labels: records/s over {baseline}'s (median of the rounds)",
        title_fontsize=8,
    )
    save(fig, path)


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=500_000, help="records to copy")
    parser.add_argument("--size", type=int, default=100, help="value bytes per record")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of each topic")
    parser.add_argument(
        "--batch-records",
        type=int,
        default=100_000,
        help="maxOffsetsPerTrigger, and records per confluent-kafka transaction",
    )
    parser.add_argument("--repeat", type=int, default=5, help="measured rounds")
    parser.add_argument("--processes", type=int, default=2, help="Spark local[N]")
    parser.add_argument(
        "--warmup-records", type=int, default=20_000, help="records of the unmeasured round"
    )
    parser.add_argument(
        "--skip-floors", action="store_true", help="no null-Python-sink and noop-sink queries"
    )
    parser.add_argument(
        "--skip-no-spark", action="store_true", help="no runs of the writer's code without Spark"
    )
    parser.add_argument("--skip-confluent", action="store_true", help="no confluent-kafka loop")
    parser.add_argument(
        "--plot", metavar="FILE.png", help="draw records/s of every run per round, and medians"
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a kafka_txn reader option for every Spark run, e.g. minRecordsPerPartition=50000",
    )
    args = parser.parse_args(argv)
    args.reader_options = dict(o.split("=", 1) for o in args.option)
    return args


def rounds(args: argparse.Namespace) -> Iterator[tuple[int, list[str]]]:
    """(round, runs in order): the writer modes swap places every round."""
    for n in range(1, args.repeat + 1):
        modes = [EXACTLY_ONCE, AT_LEAST_ONCE] if n % 2 else [AT_LEAST_ONCE, EXACTLY_ONCE]
        if not args.skip_no_spark:
            modes += [m + NO_SPARK for m in modes]
        if not args.skip_floors:
            modes += [NULL, NOOP]
        if not args.skip_confluent:
            modes.append(CONFLUENT)
        yield n, modes


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a table."""
    args = parse_args(argv)
    tag = uuid.uuid4().hex[:8]
    runs: list[Run] = []
    with broker_process() as (bootstrap, broker_pid):
        cpu = CpuMeter(broker_pid)
        admin = AdminClient({"bootstrap.servers": bootstrap, "log.connection.close": False})
        source = create_topic(admin, f"bench-writer-src-{tag}", args.partitions)
        warm_source = create_topic(admin, f"bench-writer-warm-{tag}", args.partitions)
        started = time.monotonic()
        fill(bootstrap, source, args.records, args.size, args.partitions)
        fill(bootstrap, warm_source, args.warmup_records, args.size, args.partitions)
        sys.stdout.write(
            f"filled {source}: {args.records} x {args.size} B over {args.partitions} "
            f"partitions in {time.monotonic() - started:.1f} s\n"
        )
        spark = spark_session(args.processes)
        spark.dataSource.register(null_sink())
        try:
            warm = argparse.Namespace(**{**vars(args), "records": args.warmup_records})
            for mode in WRITERS:
                sink = create_topic(admin, f"bench-writer-warm-{mode}-{tag}", args.partitions)
                run = spark_run(spark, cpu, bootstrap, warm_source, sink, mode, warm, 0)
                check_count(bootstrap, run, sink, args.partitions, args.warmup_records)
                if not args.skip_no_spark:  # the first calls import the client's schemas
                    tasks_run(cpu, bootstrap, sink, mode, warm, 0)
            if not args.skip_floors:
                spark_run(spark, cpu, bootstrap, warm_source, None, NULL, warm, 0)
            for round_, modes in rounds(args):
                for mode in modes:
                    sink = f"bench-writer-{round_}-{mode.replace(' ', '').replace(',', '-')}-{tag}"
                    if mode == CONFLUENT:
                        create_topic(admin, sink, args.partitions)
                        run = confluent_run(cpu, bootstrap, source, sink, args, round_)
                    elif mode.endswith(NO_SPARK):
                        create_topic(admin, sink, args.partitions)
                        run = tasks_run(cpu, bootstrap, sink, mode[: -len(NO_SPARK)], args, round_)
                    else:
                        if mode not in (NOOP, NULL):
                            create_topic(admin, sink, args.partitions)
                        run = spark_run(spark, cpu, bootstrap, source, sink, mode, args, round_)
                    if mode not in (NOOP, NULL):
                        check_count(bootstrap, run, sink, args.partitions, args.records)
                    elif run.records != args.records:
                        raise RuntimeError(f"{mode}: read {run.records} records")
                    runs.append(run)
                    sys.stdout.write(
                        f"round {round_} {mode}: {run.seconds:.2f} s, CPU {run.cpu:.1f} s, "
                        "batches " + ", ".join(f"{b[2]:.2f}" for b in run.batches) + " s\n"
                    )
        finally:
            spark.stop()
        del admin  # before the broker stops: librdkafka would log its reconnects
    sys.stdout.write(
        f"\n{args.records} records of {args.size} B, {args.batch_records} per micro-batch / "
        f"transaction, {args.partitions} partitions, local[{args.processes}], "
        f"cpu_count={os.cpu_count()}, load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}; every sink checked: "
        f"{args.records} read_committed records\n\n"
    )
    sys.stdout.write(_table(runs))
    sys.stdout.write("\n" + summary(runs))
    if args.plot:
        plot(runs, args, args.plot)
        sys.stdout.write(f"plot written to {args.plot}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
