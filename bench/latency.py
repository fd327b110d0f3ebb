"""End-to-end latency of the exactly-once pipeline at a steady input rate.

A feeder thread produces ``--rate`` records per second (100 B values, keyed) into an
input topic; each value starts with its produce time. A streaming query reads the input
with ``format("kafka_txn")`` (read_committed) and writes it with ``format("kafka_txn")``
(a ``processingTime`` trigger, ``0 seconds`` by default: a new micro-batch as soon as the
last one ended). A watcher thread reads the output with a ``read_committed`` librdkafka
consumer and takes, for every record, the time from its produce to the moment the
watcher received it: what a downstream consumer of an exactly-once pipeline sees.

Side by side in one run, for every rate of ``--rates``:

* **exactly_once** and **at_least_once**: the same query with that ``deliveryGuarantee``;
* **confluent-kafka**: what a Python user writes by hand instead, in one process: a
  read_committed consumer and a transactional producer committing (with the consumed
  offsets) every ``--loop-commit-ms`` milliseconds (Kafka Streams' exactly-once default
  is 100 ms).

Each run first waits ``--warmup`` seconds (query start, first batches, Python workers),
then measures ``--duration`` seconds. The report gives latency percentiles and, for the
Spark runs, the median of each phase of the micro-batches measured (from the query
progress ``durationMs``: ``latestOffset`` and ``queryPlanning`` are the driver planning,
``walCommit`` and ``commitOffsets`` Spark's own offset and commit logs, ``addBatch`` the
Spark job: the tasks reading and writing, then the sink's ``commit()``).

Example::

    .venv/bin/python bench/latency.py                                  # about 4 minutes
    .venv/bin/python bench/latency.py --rates 1000 --modes exactly_once --duration 60
    .venv/bin/python bench/latency.py --also-option minRecordsPerPartition=20000 \
        --plot docs/img/latency.png      # every Spark mode without and with the option

This is a benchmark, not a test: it checks that every record produced during the run
reached the output exactly once (read_committed), and reports what it measured.
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
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from _common import broker_process
from _plot import FIGSIZE, pyplot, save

EXACTLY_ONCE = "exactly_once"
AT_LEAST_ONCE = "at_least_once"
CONFLUENT = "confluent-kafka"
MODES = (EXACTLY_ONCE, AT_LEAST_ONCE, CONFLUENT)
#: The phases of a micro-batch reported, in the order Spark runs them.
PHASES = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets")

FEED_SETTINGS: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 1,
    "compression.type": "none",
}
WATCH_SETTINGS: dict[str, Any] = {
    "isolation.level": "read_committed",
    "enable.auto.commit": False,
    "fetch.wait.max.ms": 10,
    "fetch.queue.backoff.ms": 0,
}


@dataclass
class Run:
    """One measured run: a mode at a rate."""

    mode: str
    rate: int
    #: The reader options of the run (``--option``, ``--also-option``), for the report.
    variant: str = ""
    latencies_ms: list[float] = field(default_factory=list)
    phases: dict[str, list[float]] = field(default_factory=dict)
    batch_rows: list[int] = field(default_factory=list)
    produced: int = 0

    def pct(self, q: float) -> float:
        """The ``q`` quantile (0..1) of the measured latencies, in milliseconds."""
        values = sorted(self.latencies_ms)
        if not values:
            return float("nan")
        return values[min(len(values) - 1, round(q * (len(values) - 1)))]


# --------------------------------------------------------------------------- feed and watch


class Feeder(threading.Thread):
    """Produces ``rate`` records/s of 100 B: produce time (µs, 16 digits), number (12), padding."""

    def __init__(self, bootstrap: str, topic: str, rate: int, partitions: int) -> None:
        super().__init__(name="feeder", daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, **FEED_SETTINGS})
        self.topic, self.rate, self.partitions = topic, rate, partitions
        self.stop_event = threading.Event()
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc

    def _run(self) -> None:
        pad = b"x" * 72
        tick = 0.005  # produce in 5 ms slices: steady, not one burst per second
        started = time.monotonic()
        while not self.stop_event.is_set():
            due = int((time.monotonic() - started) * self.rate)
            for i in range(self.sent, due):
                head = b"%016d%012d" % (time.time_ns() // 1000, i)
                self.producer.produce(self.topic, head + pad, str(i % 1000).encode())
            self.sent = max(self.sent, due)
            self.producer.poll(0)
            time.sleep(tick)
        if self.producer.flush(60) != 0:
            raise RuntimeError("the feeder could not deliver every record")


class Watcher(threading.Thread):
    """Reads the output read_committed and records each record's produce → receive time."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(name="watcher", daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-watch-{uuid.uuid4().hex[:8]}",
                **WATCH_SETTINGS,
            }
        )
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.stop_event = threading.Event()
        #: (receive time s, produce time µs, sequence number) of every record read
        self.received: list[tuple[float, int, int]] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                msgs = self.consumer.consume(10_000, 0.05)
                now = time.time()
                for msg in msgs:
                    if msg.error() is not None:
                        raise KafkaException(msg.error())
                    value = msg.value()
                    assert value is not None
                    self.received.append((now, int(value[:16]), int(value[16:28])))
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc
        finally:
            self.consumer.close()


# --------------------------------------------------------------------------- the runs


def spark_session(app: str = "kafka_txn-latency-bench", jars: str = "") -> Any:
    """One ``local[2]`` SparkSession for every query of the run (with ``jars`` on
    ``spark.jars``: ``bench/compare.py`` adds Spark's built-in Kafka connector)."""
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = SparkSession.builder.master("local[2]").appName(app)
    if jars:
        builder = builder.config("spark.jars", jars)
    spark = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.numRecentProgressUpdates", "100000")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def start_query(
    spark: Any,
    bootstrap: str,
    source: str,
    sink: str,
    mode: str,
    options: dict[str, str],
    args: Any,
    fmt: str = "kafka_txn",
) -> Any:
    """``kafka_txn`` → ``kafka_txn`` with ``deliveryGuarantee=mode``, started; with
    ``fmt="kafka"``, Spark's built-in connector both ways instead (its reader set to
    read_committed, its writer at least once: ``mode`` is not used)."""
    checkpoint = tempfile.mkdtemp(prefix="bench-latency-ckpt-")
    if fmt == "kafka":
        options = {"kafka.isolation.level": "read_committed", **options}
    df = (
        spark.readStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "latest")
        .options(**options)
        .load()
        .select("key", "value")
    )
    writer = df.writeStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    if fmt == "kafka_txn":
        writer = writer.option("deliveryGuarantee", mode).option(
            "transactionalIdPrefix", f"bench-lat-{uuid.uuid4().hex[:8]}-"
        )
    return (
        writer.option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=args.trigger)
        .start()
    )


class ConfluentLoop(threading.Thread):
    """A read_committed consume → produce loop committing every ``commit_ms``."""

    def __init__(self, bootstrap: str, source: str, sink: str, args: Any) -> None:
        super().__init__(name="confluent-loop", daemon=True)
        self.bootstrap, self.source, self.sink = bootstrap, source, sink
        self.partitions, self.commit_s = args.partitions, args.loop_commit_ms / 1000
        self.stop_event = threading.Event()
        self.ready = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc
            self.ready.set()

    def _run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"bench-loop-{uuid.uuid4().hex[:8]}",
                **WATCH_SETTINGS,
                "auto.offset.reset": "latest",
            }
        )
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                **FEED_SETTINGS,
                "transactional.id": f"bench-loop-{uuid.uuid4().hex[:8]}",
            }
        )
        producer.init_transactions(30)
        # Start at the current end, as the Spark query's startingOffsets=latest does.
        ends = []
        for p in range(self.partitions):
            _low, high = consumer.get_watermark_offsets(TopicPartition(self.source, p), 10)
            ends.append(TopicPartition(self.source, p, high))
        consumer.assign(ends)
        self.ready.set()
        following: dict[int, int] = {}
        in_txn = False
        last_commit = time.monotonic()
        while not self.stop_event.is_set():
            for msg in consumer.consume(10_000, 0.01):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                if not in_txn:
                    producer.begin_transaction()
                    in_txn = True
                producer.produce(self.sink, msg.value(), msg.key())
                following[msg.partition()] = msg.offset() + 1  # type: ignore[index,operator]
            producer.poll(0)
            if in_txn and time.monotonic() - last_commit >= self.commit_s:
                offsets = [TopicPartition(self.source, p, o) for p, o in following.items()]
                producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata())
                producer.commit_transaction(60)
                in_txn = False
                last_commit = time.monotonic()
        if in_txn:
            producer.commit_transaction(60)
        consumer.close()


def create_topics(bootstrap: str, partitions: int) -> tuple[str, str]:
    """A fresh input and output topic of ``partitions`` partitions each."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = uuid.uuid4().hex[:8]
    source, sink = f"lat-in-{name}", f"lat-out-{name}"
    futures = admin.create_topics([NewTopic(t, partitions, 1) for t in (source, sink)])
    for future in futures.values():
        future.result(30)
    return source, sink


def measure(
    spark: Any,
    bootstrap: str,
    mode: str,
    rate: int,
    options: dict[str, str],
    args: Any,
    start: Any = None,
) -> Run:
    """Run ``mode`` at ``rate``: warm up, measure, drain, check exactly once.

    ``start`` starts the Spark query (the arguments of :func:`start_query`, which is the
    default); ``bench/compare.py`` passes one for Spark's built-in connector.
    """
    source, sink = create_topics(bootstrap, args.partitions)
    variant = " ".join(f"{k}={v}" for k, v in options.items())
    run = Run(mode, rate, "" if mode == CONFLUENT else variant)
    query = loop = None
    if mode == CONFLUENT:
        loop = ConfluentLoop(bootstrap, source, sink, args)
        loop.start()
        loop.ready.wait(60)
    else:
        query = (start or start_query)(spark, bootstrap, source, sink, mode, options, args)
        deadline = time.monotonic() + 120
        while query.lastProgress is None:  # the query resolved its start offsets
            if time.monotonic() > deadline:
                raise RuntimeError(f"{mode}: no progress in 120 s: {query.exception()}")
            time.sleep(0.1)
    watcher = Watcher(bootstrap, sink, args.partitions)
    feeder = Feeder(bootstrap, source, rate, args.partitions)
    watcher.start()
    feeder.start()
    measure_from = time.time() + args.warmup
    time.sleep(args.warmup + args.duration)
    measure_to = time.time()
    feeder.stop_event.set()
    feeder.join()
    run.produced = feeder.sent
    # Drain: wait until every produced record is visible in the output.
    deadline = time.monotonic() + 120
    while len(watcher.received) < feeder.sent and time.monotonic() < deadline:
        for failed in (feeder, watcher, loop):
            if failed is not None and failed.error is not None:
                raise RuntimeError(f"{mode}: {failed.name} failed") from failed.error
        if query is not None and query.exception() is not None:
            raise RuntimeError(f"{mode}: the query failed: {query.exception()}")
        time.sleep(0.2)
    time.sleep(1)  # a duplicate would arrive with the last records
    watcher.stop_event.set()
    watcher.join()
    if query is not None:
        progress = query.recentProgress
        query.stop()
        for p in progress:
            stamp = _epoch_s(p["timestamp"])
            if p["numInputRows"] and measure_from <= stamp <= measure_to:
                run.batch_rows.append(int(p["numInputRows"]))
                for phase in (*PHASES, "triggerExecution"):
                    run.phases.setdefault(phase, []).append(p["durationMs"].get(phase, 0))
    if loop is not None:
        loop.stop_event.set()
        loop.join()
    seqs = {seq for _, _, seq in watcher.received}
    if len(watcher.received) != feeder.sent or seqs != set(range(feeder.sent)):
        raise RuntimeError(
            f"{mode} at {rate}/s: {feeder.sent} produced, {len(watcher.received)} read back, "
            f"{len(seqs)} distinct, {feeder.sent - len(seqs & set(range(feeder.sent)))} missing"
        )
    run.latencies_ms = [
        now * 1000 - produced / 1000
        for now, produced, _seq in watcher.received
        if measure_from <= produced / 1e6 <= measure_to
    ]
    return run


def _epoch_s(timestamp: str) -> float:
    """Seconds since the epoch of a progress timestamp such as 2026-11-26T02:10:00.123Z."""
    from datetime import datetime

    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


# --------------------------------------------------------------------------- report


def table(runs: list[Run]) -> str:
    """Latency percentiles and the micro-batch breakdown, one row per run."""
    lines = [
        "| rate/s | mode | reader options | records | p50 ms | p95 ms | p99 ms | max ms "
        "| batches | rows/batch | " + " | ".join(PHASES) + " | trigger |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * (len(PHASES) + 1),
    ]
    for r in runs:
        med = {k: statistics.median(v) for k, v in r.phases.items() if v}
        phases = " | ".join(f"{med[k]:.0f}" if k in med else "" for k in PHASES)
        rows = f"{statistics.median(r.batch_rows):.0f}" if r.batch_rows else ""
        trigger = f"{med['triggerExecution']:.0f}" if "triggerExecution" in med else ""
        lines.append(
            f"| {r.rate} | {r.mode} | {r.variant} | {len(r.latencies_ms)} | {r.pct(0.5):.0f} | "
            f"{r.pct(0.95):.0f} | {r.pct(0.99):.0f} | {max(r.latencies_ms, default=0):.0f} | "
            f"{len(r.batch_rows) or ''} | {rows} | {phases} | {trigger} |"
        )
    return "\n".join(lines)


def plot(runs: list[Run], path: str) -> None:
    """Horizontal bars of p50/p95/p99 per run, one panel per input rate."""
    plt = pyplot()
    rates = sorted({r.rate for r in runs})
    fig, axes = plt.subplots(
        len(rates), 1, figsize=(FIGSIZE[0], 1.4 + 0.6 * len(runs)), squeeze=False
    )
    height = 0.27
    for ax, rate in zip(axes[:, 0], rates, strict=True):
        mine = [r for r in runs if r.rate == rate]
        labels = [r.mode + (f"\n{r.variant}" if r.variant else "") for r in mine]
        for i, (q, name) in enumerate(((0.5, "p50"), (0.95, "p95"), (0.99, "p99"))):
            ys = [j + (i - 1) * height for j in range(len(mine))]
            ax.barh(ys, [r.pct(q) for r in mine], height, label=name)
        ax.axvline(500, color="grey", linestyle=":", linewidth=1)
        ax.axvline(1000, color="grey", linestyle="--", linewidth=1)
        ax.set_yticks(range(len(mine)), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(f"{rate:,} records/s", fontsize=9)
        ax.tick_params(axis="x", labelsize=8)
    axes[0, 0].legend(fontsize=8)
    axes[-1, 0].set_xlabel("produce → visible to a read_committed consumer, ms")
    fig.suptitle("End-to-end latency at a steady input rate", fontsize=10)
    save(fig, path)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rates", default="1000,20000", help="records/s, comma-separated")
    p.add_argument("--modes", default=",".join(MODES), help=f"of {', '.join(MODES)}")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--trigger", default="0 seconds", help="processingTime of the query")
    p.add_argument("--warmup", type=float, default=15.0, help="seconds before measuring")
    p.add_argument("--duration", type=float, default=30.0, help="seconds measured")
    p.add_argument("--loop-commit-ms", type=int, default=100)
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a kafka_txn reader option, e.g. minRecordsPerPartition=20000 (repeatable)",
    )
    p.add_argument(
        "--also-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="run the Spark modes a second time with these reader options too (repeatable)",
    )
    p.add_argument("--plot", help="write a PNG of the latency percentiles here")
    args = p.parse_args(argv)
    args.reader_options = dict(o.split("=", 1) for o in args.option)
    args.also_options = dict(o.split("=", 1) for o in args.also_option)
    return args


def say(line: str) -> None:
    """One line of the report on standard output, at once."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    """Run every mode at every rate, side by side; print the table."""
    args = parse_args(argv)
    rates = [int(r) for r in args.rates.split(",")]
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            raise SystemExit(f"unknown mode {m!r} (--modes takes {', '.join(MODES)})")
    runs: list[Run] = []
    with broker_process() as (bootstrap, _pid):
        spark = spark_session() if set(modes) - {CONFLUENT} else None
        plans = [(mode, args.reader_options) for mode in modes]
        if args.also_options:
            both = {**args.reader_options, **args.also_options}
            plans += [(mode, both) for mode in modes if mode != CONFLUENT]
        for rate in rates:
            for mode, options in plans:
                say(f"{mode} at {rate} records/s {options or ''} ...")
                run = measure(spark, bootstrap, mode, rate, options, args)
                say(
                    f"  p50 {run.pct(0.5):.0f} ms, p95 {run.pct(0.95):.0f} ms, "
                    f"p99 {run.pct(0.99):.0f} ms ({len(run.latencies_ms)} records measured, "
                    f"{run.produced} exactly once)"
                )
                runs.append(run)
    say("\n" + table(runs))
    if args.plot:
        plot(runs, args.plot)
        say(f"plot written to {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
