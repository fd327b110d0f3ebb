"""``make demo`` / ``kafka-txn demo``: Kafka → Spark → Kafka, exactly once, through faults.

The story, on the embedded cluster:

1. An independent producer (confluent-kafka) writes orders to ``demo-orders`` in
   transactions; every fourth transaction aborts.
2. A streaming query, in a Spark process of its own, reads them with
   ``format("kafka_txn")`` (read_committed), turns each order into an invoice line and
   writes it to ``demo-invoices`` with ``format("kafka_txn")``.
3. **A task fails**: the task transforming one flagged order fails on its first attempt;
   Spark retries it.
4. **The driver crashes at the worst moment**: the broker holds back EndTxn (answering
   the retriable COORDINATOR_LOAD_IN_PROGRESS), so the driver, inside ``commit()``, has
   recorded its decision but committed none of the micro-batch's transactions; then the
   whole Spark process (JVM and Python) is killed with SIGKILL.
5. The query restarts from its checkpoint, rolls that micro-batch forward and carries on
   with what the producer wrote meanwhile.
6. A read_committed consumer reads the output; every committed order must be there
   exactly once, and nothing of the aborted transactions.

Progress is printed while it runs; ``--plot FILE.png`` draws it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark_kafka_txn.demo.child import JobFailedError, JobProcess
from pyspark_kafka_txn.demo.feed import Feed, FeedPlan
from pyspark_kafka_txn.demo.output import Check, Watcher, check, read_orders
from pyspark_kafka_txn.demo.plot import BatchPoint
from pyspark_kafka_txn.demo.protocol import JobSettings

if TYPE_CHECKING:
    from pyspark_kafka_txn.writer.decision import Decision

__all__ = ["run_demo"]

INPUT, INPUT_PARTITIONS = "demo-orders", 4
OUTPUT, OUTPUT_PARTITIONS = "demo-invoices", 3
PREFIX = "kafka-txn-demo-"
#: Orders written outside transactions while the crash is armed (they start the batch).
PLAIN_ORDERS = 50
#: Micro-batches with rows before the crash, and after the restart.
BATCHES_PER_RUN = 5
#: Hang detection for each step (seconds): generous, the machine may be busy.
STEP_TIMEOUT_S = 300.0


def _say(line: str = "") -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


@dataclass(slots=True)
class _Story:
    """What happened, for the live lines, the summary and the plot."""

    feed: Feed
    watcher: Watcher
    markers: Path
    started: float = field(default_factory=time.time)
    run: int = 1
    batches: list[BatchPoint] = field(default_factory=list)
    events: list[tuple[float, str]] = field(default_factory=list)
    task_failures: int = 0
    query: str = ""  # the streaming query's id, once started
    warm: bool = False  # the run has finished a micro-batch
    drained: bool = False  # the last run processed everything and stopped
    decided_batch: int | None = None  # the batch decided when the driver was killed
    pinned_at_crash: dict[int, tuple[int, int]] = field(default_factory=dict)
    _shown: int = 0  # arrivals already summarised in a progress line

    def since(self, at: float) -> float:
        return at - self.started

    def event(self, label: str, line: str) -> None:
        self.events.append((self.since(time.time()), label))
        _say(f"  >> {line}")

    def latencies(self, first: int = 0) -> list[tuple[float, float]]:
        """(seconds since start, input commit → visible s) of arrivals from ``first`` on."""
        committed = self.feed.committed
        return [
            (self.since(at), at - committed[order])
            for at, order in self.watcher.arrivals[first:]
            if order in committed
        ]

    def data_batches(self, run: int) -> int:
        """Micro-batches with rows that ``run`` has finished."""
        return sum(1 for b in self.batches if b.run == run)

    def progress(self, event: dict[str, Any]) -> None:
        self.warm = True
        rows = int(event["rows"])
        if not rows:
            return
        if self.run == 2 and event["batch"] == self.decided_batch:
            self.event(
                "rolled forward",
                f"batch {self.decided_batch} ran again: the recorded decision was carried out",
            )
        durations = event["durations"]
        trigger = int(durations.get("triggerExecution", 0))
        self.batches.append(
            BatchPoint(self.since(event["at"]), self.run, int(event["batch"]), rows, trigger)
        )
        recent = self.latencies(self._shown)
        self._shown = len(self.watcher.arrivals)
        lat = "" if not recent else _latency_text([s for _, s in recent])
        _say(
            f"{self.run:>4}{event['batch']:>7}{rows:>7}{durations.get('addBatch', 0):>9} ms"
            f"{trigger:>9} ms{len(self.watcher.arrivals):>11,}   {lat}"
        )

    def poll_markers(self) -> None:
        found = sorted(self.markers.glob("task-failure-*"))
        for marker in found[self.task_failures :]:
            self.event(
                "task failure",
                f"a task failed on purpose ({marker.name}, first attempt); Spark retries it",
            )
        self.task_failures = len(found)


def _latency_text(seconds: list[float]) -> str:
    return f"{statistics.median(seconds):5.2f} s / {max(seconds):5.2f} s"


def _pump(story: _Story, job: JobProcess, done: Callable[[], bool], what: str) -> None:
    """Handle the job's events until ``done()``; raise :class:`JobFailedError` if it ends first."""
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while not done():
        story.poll_markers()
        for source in (story.feed, story.watcher):
            if source.error is not None:
                raise JobFailedError(f"{type(source).__name__} failed: {source.error}")
        if time.monotonic() > deadline:
            raise JobFailedError(f"waited {STEP_TIMEOUT_S:.0f} s for {what}\n{job.tail()}")
        event = job.next_event(0.1)
        if event is None:
            continue
        kind = event["event"]
        if kind == "progress":
            story.progress(event)
        elif kind == "started":
            story.query = str(event["query"])
            if story.run == 2:
                story.event("restarted", "the query restarted from its checkpoint")
                _header()
        elif kind == "drained":
            story.drained = True
        elif kind != "idle":  # failed, exited
            raise JobFailedError(f"the Spark job ended while waiting for {what}:\n{job.tail()}")


def _header() -> None:
    _say(
        f"{'run':>4}{'batch':>7}{'rows':>7}{'addBatch':>12}{'trigger':>12}{'visible':>11}   "
        "input commit → visible, median / max"
    )


def _java_found() -> bool:
    """Whether Spark's launcher finds a ``java`` (``$JAVA_HOME/bin/java``, else the PATH)."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        return os.access(Path(java_home, "bin", "java"), os.X_OK)
    return shutil.which("java") is not None


def run_demo(plan: FeedPlan | None = None, plot: Path | None = None) -> int:
    """Run the demo; return a process exit code (0 when every check holds)."""
    from pyspark_kafka_txn.embedded import EmbeddedKafka

    if importlib.util.find_spec("pyspark") is None:
        raise SystemExit(
            "the demo runs Spark: pip install 'pyspark>=4.0', or install the package with its "
            "'spark' extra (pip install '.[spark]' in the clone; see the Install page)"
        )
    if not _java_found():
        raise SystemExit(
            "the demo runs Spark, which needs Java 17 or later: no java in $JAVA_HOME/bin "
            "nor on the PATH"
        )
    plan = plan or FeedPlan()
    if plot is not None:
        from pyspark_kafka_txn.demo.plot import check_available

        check_available()
    clock = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="kafka-txn-demo-"))  # kept when the demo fails
    with EmbeddedKafka() as kafka:
        kafka.create_topic(INPUT, INPUT_PARTITIONS)
        kafka.create_topic(OUTPUT, OUTPUT_PARTITIONS)
        bootstrap = kafka.bootstrap_servers
        _say(f"embedded cluster: bootstrap.servers={bootstrap}")
        _say(
            f"input  {INPUT} ({INPUT_PARTITIONS} partitions): transactions of "
            f"{plan.orders_per_transaction} orders, every {plan.abort_every}th aborted"
        )
        _say(f'output {OUTPUT} ({OUTPUT_PARTITIONS} partitions), written by format("kafka_txn")')
        markers = Path(tmp, "markers")
        markers.mkdir()
        settings = JobSettings(
            bootstrap=bootstrap,
            input_topic=INPUT,
            output_topic=OUTPUT,
            checkpoint=str(Path(tmp, "checkpoint")),
            transactional_id_prefix=PREFIX,
            marker_dir=str(markers),
        )
        feed = Feed(bootstrap, INPUT, plan)
        watcher = Watcher(bootstrap, OUTPUT, OUTPUT_PARTITIONS)
        story = _Story(feed, watcher, markers)
        watcher.start()
        jobs: list[JobProcess] = []
        try:
            checks = _play(kafka, story, settings, jobs)
        except JobFailedError as exc:
            _say(f"FAIL {exc}")
            return 1  # the logs stay in tmp
        finally:
            for job in jobs:
                job.stop_quietly()
            watcher.stop()
            feed.resume()
        if plot is not None:
            from pyspark_kafka_txn.demo.plot import draw

            draw(plot, story.batches, story.latencies(), story.events)
            _say(f"plot written to {plot}")
    _say()
    for c in checks:
        _say(f"{'OK  ' if c.ok else 'FAIL'} {c.name}" + (f" ({c.detail})" if c.detail else ""))
    _say(f"done in {time.monotonic() - clock:.0f} s")
    if not all(c.ok for c in checks):
        _say(f"the Spark jobs' logs and checkpoint: {tmp}")
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _play(kafka: Any, story: _Story, settings: JobSettings, jobs: list[JobProcess]) -> list[Check]:
    """Steps 2 to 6 of the module docstring; the checks."""
    feed, watcher = story.feed, story.watcher
    tmp = Path(settings.marker_dir).parent
    _say("starting Spark (run 1) ...")
    first = JobProcess(settings, tmp / "run1.log")
    jobs.append(first)
    _pump(story, first, lambda: story.warm, "the query's first (empty) micro-batch")
    _say(f"query {story.query} is running; the input producer starts")
    _header()
    story.started = time.time()  # the plot's time 0
    feed.start()
    _pump(
        story,
        first,
        lambda: watcher.seen(feed.fail_once_order) and story.data_batches(1) >= BATCHES_PER_RUN,
        f"{BATCHES_PER_RUN} micro-batches and the flagged order's output",
    )

    # The crash: EndTxn held back, so the next commit() stops after its decision record.
    feed.pause()
    rule = kafka.fail_requests("EndTxn", "COORDINATOR_LOAD_IN_PROGRESS", count=1_000_000_000)
    story.event("EndTxn held", "the broker now answers EndTxn with a retriable error")
    feed.write_outside_transactions(PLAIN_ORDERS)
    _pump(story, first, lambda: rule.hits > 0, "the driver to commit a micro-batch")
    decision = _decision(settings, story.query)
    first.kill()
    kafka.clear_faults()
    story.pinned_at_crash = _pinned(kafka)
    story.decided_batch = None if decision is None else decision.batch
    story.event(
        "driver killed",
        "driver killed (SIGKILL, JVM and Python) inside commit(): "
        + (
            "no decision recorded"
            if decision is None
            else f"its decision to commit batch {decision.batch} ({len(decision.handles)} "
            "transactions) is recorded, none of them committed"
        )
        + f"; output partitions held by those open transactions: {story.pinned_at_crash}",
    )
    feed.resume()

    story.run = 2
    story.warm = False
    _say("restarting the query from its checkpoint (run 2) ...")
    second = JobProcess(settings, tmp / "run2.log")
    jobs.append(second)
    _pump(story, second, lambda: story.data_batches(2) >= BATCHES_PER_RUN, "run 2's batches")
    feed.stop(STEP_TIMEOUT_S)
    second.drain()
    _pump(story, second, lambda: story.drained, "the query to process everything and stop")
    if second.wait(STEP_TIMEOUT_S) != 0:
        raise JobFailedError(f"run 2 exited with an error:\n{second.tail()}")
    time.sleep(0.5)  # the watcher's last fetch (only its latencies depend on it)
    return _verify(kafka, story)


def _decision(settings: JobSettings, query: str) -> Decision | None:
    """The query's last recorded decision (read with this package's client)."""
    from pyspark_kafka_txn.client.metadata import ClusterClient
    from pyspark_kafka_txn.writer.decision import read_decision

    with ClusterClient(settings.bootstrap) as cluster:
        return read_decision(cluster, settings.transactional_id_prefix, query)


def _pinned(kafka: Any) -> dict[int, tuple[int, int]]:
    """Output partitions whose LSO is below the high watermark: (LSO, high watermark)."""
    out = {}
    for p in range(OUTPUT_PARTITIONS):
        o = kafka.offsets(OUTPUT, p)
        if o["last_stable"] < o["high_watermark"]:
            out[p] = (o["last_stable"], o["high_watermark"])
    return out


def _verify(kafka: Any, story: _Story) -> list[Check]:
    feed = story.feed
    bootstrap = kafka.bootstrap_servers
    committed = read_orders(bootstrap, OUTPUT, OUTPUT_PARTITIONS, "read_committed")
    everything = read_orders(bootstrap, OUTPUT, OUTPUT_PARTITIONS, "read_uncommitted")
    hidden = len(everything) - len(committed)
    latencies = [s for _, s in story.latencies()]
    _say()
    _say(
        f"input:  {feed.transactions} transactions; {len(feed.committed):,} orders committed "
        f"({PLAIN_ORDERS} of them outside transactions), {len(feed.aborted):,} aborted"
    )
    _say(
        f"output: {len(committed):,} records for a read_committed consumer"
        + (
            f"; the log holds {hidden:,} more, written by aborted attempts, which only a "
            "read_uncommitted consumer would see"
            if hidden
            else ""
        )
    )
    if len(latencies) > 1:
        q = statistics.quantiles(latencies, n=20)
        _say(
            "input commit → visible in the output: "
            f"median {statistics.median(latencies):.2f} s, p95 {q[18]:.2f} s, "
            f"max {max(latencies):.2f} s (the crash and restart included)"
        )
    checks = check(feed.committed, feed.aborted, committed, _pinned(kafka))
    in_log = set(read_orders(bootstrap, INPUT, INPUT_PARTITIONS, "read_uncommitted"))
    not_in_log = feed.aborted - in_log
    checks.insert(
        2,
        Check(
            "the aborted orders are in the input's log (a read_uncommitted consumer sees them)",
            not not_in_log,
            f"{len(not_in_log)} never written" if not_in_log else "",
        ),
    )
    checks.append(
        Check(
            "the injected task failure happened",
            story.task_failures > 0,
            f"{story.task_failures} failed attempt(s)",
        )
    )
    checks.append(
        Check(
            "the driver was killed with a batch decided, its transactions open",
            story.decided_batch is not None and bool(story.pinned_at_crash),
            f"batch {story.decided_batch}",
        )
    )
    return checks
