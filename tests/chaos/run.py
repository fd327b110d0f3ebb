"""``make chaos SEEDS=N DURATION=S``: the exactly-once pipeline under a seeded fault schedule.

For each seed: a cluster (the embedded one, 1 or 3 brokers on a data directory, or with
``--kafka apache`` a three-node Apache Kafka cluster, :mod:`tests.chaos.apache`), an input
topic written by :class:`~tests.chaos.feed.ChaosFeed` (committed and aborted transactions),
the query of :mod:`tests.chaos.job` in a Spark process of its own, and the faults of
:func:`~tests.chaos.schedule.draw`. A query that dies is restarted from its checkpoint,
as a supervisor would. At the end the feed stops, the query drains, and
:func:`~tests.chaos.checker.check` judges the output. The report (Markdown and JSON) lists
per seed the plan, what each fault did, the counts and every anomaly.

Every fault is judged: its report entry says whether it was seen to happen
(``happened``: a marker left by the failing task, a request caught by a rule, a process
killed, a leader or coordinator found where it was moved, a stalled input transaction
left open past its timeout); a fault that did not happen is an anomaly of its seed.

With ``--queries N`` (N > 1) the seed runs N streaming queries on one cluster, all with
the writer's default options (one ``transactionalIdPrefix`` for all): the query under
test (query 0: its own input and output topics, every fault of the seed aimed at it
alone) in one Spark application, and N - 1 neighbours in a second Spark application (a
process of its own), each reading its own input topic and all of them writing one shared
output topic. Every query's output is judged; a neighbour that fails or restarts is an
anomaly.

    .venv/bin/python -m tests.chaos.run --seeds 50 --duration 60 --report chaos-report
    .venv/bin/python -m tests.chaos.run --seed 17 --duration 60   # one seed again
    .venv/bin/python -m tests.chaos.run --kafka apache --seeds 20 --duration 60
    .venv/bin/python -m tests.chaos.run --kafka apache --apache-2pc --seed 3   # KIP-939 on
    .venv/bin/python -m tests.chaos.run --seeds 10 --duration 60 --queries 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.demo.child import JobProcess
from pyspark_kafka_txn.embedded import EmbeddedKafka
from pyspark_kafka_txn.embedded.faults import FaultRule
from pyspark_kafka_txn.wire import COORDINATOR_TXN
from tests.chaos.checker import Verdict, check
from tests.chaos.feed import ChaosFeed
from tests.chaos.job import ChaosJobSettings
from tests.chaos.schedule import TARGETS, Fault, Plan, draw

log = logging.getLogger("chaos")
ROOT = Path(__file__).resolve().parents[2]
INPUT, OUTPUT = "chaos-in", "chaos-out"
#: Multi-query runs: the output topic the neighbours share, and their Spark partitions.
SHARED_OUTPUT = "chaos-out-shared"
NEIGHBOUR_PARTITIONS = 3
#: The writer's default ``transactionalIdPrefix`` (multi-query runs set none).
DEFAULT_PREFIX = "spark-kafka-txn-"
#: A query making no progress this long while it has input is reported as stalled.
STALL_S = 240.0
#: Before a fault, waiting at most this long for the query to run a micro-batch.
RUNNING_WAIT_S = 120.0
#: Waiting for a fault's trigger (a held-back request being hit) at most this long.
ARM_S = 60.0
#: A flagged input record (task_exception, worker_kill) is read by one of the query's next
#: micro-batches with rows: the one running when it was flagged, a restart's replay of a
#: failed batch, then the batch that reads it. The wait for its task to fail lasts ARM_S
#: and at least this many such micro-batches (a restarting application can take longer
#: than ARM_S to run them on a loaded machine), within ARM_HANG_S.
ARM_BATCHES = 3
ARM_HANG_S = 300.0
#: The embedded cluster's transaction timeout sweep (Kafka's default is 10 s).
SWEEP_MS = 1000


@dataclass(slots=True)
class SeedResult:
    seed: int
    plan: dict[str, Any]
    applied: list[dict[str, Any]] = field(default_factory=list)
    runs: int = 0
    query_failures: list[str] = field(default_factory=list)
    batches: int = 0
    seconds: float = 0.0
    verdict: dict[str, Any] = field(default_factory=dict)
    anomalies: list[str] = field(default_factory=list)
    harness_errors: list[str] = field(default_factory=list)
    logs: str = ""
    #: The cluster the seed ran on ("embedded, 3 broker(s)", "Apache Kafka 4.4.0, ...").
    cluster: str = ""
    #: Multi-query runs: each neighbour's verdict, and how often their application ran.
    neighbours: list[dict[str, Any]] = field(default_factory=list)
    neighbour_runs: int = 0


class Harness:
    """One seed's pipeline and faults, whatever the cluster: the query, its supervision
    (:meth:`pump`), the faults that hit Spark and the input, and the run's course.

    Subclasses bring the cluster (:meth:`cluster`, :attr:`bootstrap`, :meth:`create_topic`,
    :meth:`pinned`) and the faults that hit it (:meth:`apply_cluster`).
    """

    def __init__(self, plan: Plan, work: Path) -> None:
        self.plan = plan
        self.work = work
        self.multi = plan.queries > 1
        #: The writer's prefix: the seed's own, or with several queries the default.
        self.prefix = DEFAULT_PREFIX if self.multi else f"chaos-{plan.seed}-{uuid.uuid4().hex[:6]}-"
        self.markers = work / "markers"
        self.markers.mkdir()
        #: Faults whose outcome is known only at the end: (index in applied, judge).
        self._pending: list[tuple[int, Callable[[], dict[str, Any]]]] = []
        #: Multi-query runs: the neighbours' application, and what it said.
        self.neighbours: JobProcess | None = None
        self.neighbours_started = 0
        self.neighbours_drained = False
        self.result = SeedResult(plan.seed, plan.to_dict())
        self.job: JobProcess | None = None
        self.query = ""
        self.drained = False
        self.last_progress = time.monotonic()
        self.batches_this_run = 0
        #: Spark partitions the writer asked the next run to have (see :meth:`start_job`).
        self.partitions_asked: int | None = None
        #: The Spark partitions of the query's current run.
        self.partitions = 0

    # --- the cluster (subclasses) -------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """Where the feed and the checker connect (never through fault injection)."""
        raise NotImplementedError

    @property
    def job_bootstrap(self) -> str:
        """Where the query connects."""
        return self.bootstrap

    def cluster(self) -> contextlib.AbstractContextManager[object]:
        """The running cluster, for the length of the seed."""
        raise NotImplementedError

    def create_topic(self, name: str, partitions: int) -> None:
        raise NotImplementedError

    def clear_faults(self) -> None:
        """Lift every request fault still standing."""
        raise NotImplementedError

    def pinned(self) -> dict[int, tuple[int, int]]:
        """Output partitions whose last stable offset is below the high watermark."""
        raise NotImplementedError

    def apply_cluster(self, fault: Fault, feed: ChaosFeed) -> dict[str, Any]:
        """Inject a fault of the cluster's own kinds; what it did."""
        raise NotImplementedError

    def aim(self) -> str | None:
        """What the transactional ids (and groups) of the query under test start with, for
        request faults aimed at it alone; ``None`` (any request) in single-query runs."""
        return f"{self.prefix}{self.query}-" if self.multi else None

    def writer_id(self, partition: int) -> str:
        """The transactional id of the query under test's writer for ``partition``."""
        return f"{self.prefix}{self.query}-{partition % self.writer_partitions()}"

    def judge_later(self, judge: Callable[[], dict[str, Any]]) -> None:
        """Judge the fault being applied at the end of the run (its entry is appended to
        the report right after :meth:`apply` returns)."""
        self._pending.append((len(self.result.applied), judge))

    def wait_for_hit(self, hits: Callable[[], int]) -> None:
        """Supervise the query until a request fault's rule caught a request (or
        :data:`ARM_S` passed), so that the next fault does not land before it."""
        deadline = time.monotonic() + ARM_S
        while hits() == 0 and time.monotonic() < deadline:
            self.pump(0.05)

    def drop_connections(self, drop: Callable[[], int]) -> dict[str, Any]:
        """Cut the clients' connections with ``drop`` (returns how many it cut). With none
        open (a drop just before, not yet reconnected), supervise the query until the
        clients reconnect and cut those, for at most :data:`ARM_S`."""
        deadline = time.monotonic() + ARM_S
        dropped = drop()
        while dropped == 0 and time.monotonic() < deadline:
            self.pump(0.2)
            dropped = drop()
        return {"dropped": dropped, "happened": dropped > 0}

    def settle(self) -> None:
        """Judge the faults left to the end; each one that did not happen is an anomaly."""
        for index, judge in self._pending:
            self.result.applied[index].update(judge())
        self._pending.clear()
        missed = [
            f"{a['kind']} at {a['at_s']} s"
            for a in self.result.applied
            if not a.get("happened", False)
        ]
        if missed:
            self.result.anomalies.append(f"faults that did not happen: {', '.join(missed)}")

    def expiry_wait_s(self) -> float:
        """How long ``output_txn_timeout`` waits for the broker to abort the held batch."""
        assert self.plan.writer_txn_timeout_ms is not None
        return (self.plan.writer_txn_timeout_ms + 3 * SWEEP_MS) / 1000

    # --- the query ----------------------------------------------------------------

    def start_job(self) -> None:
        """Start the query's next run: with the plan's number of Spark partitions for it,
        unless the writer refused a replay and named the number to restart with (a batch
        committed in part whose other transactions the broker aborted at their timeout),
        which the run then takes, as a user would."""
        runs = self.result.runs
        planned = self.plan.repartitions[min(runs, len(self.plan.repartitions) - 1)]
        self.partitions = self.partitions_asked or planned
        self.partitions_asked = None
        settings = ChaosJobSettings(
            bootstrap=self.job_bootstrap,
            input_topic=INPUT,
            output_topic=OUTPUT,
            checkpoint=str(self.work / "checkpoint"),
            prefix="" if self.multi else self.prefix,
            repartition=self.partitions,
            extra=self._writer_options(),
            marker_dir=str(self.markers),
        )
        self.result.runs += 1
        self.drained = False
        self.batches_this_run = 0
        self.job = JobProcess(settings, self.work / f"run{runs + 1}.log", module="tests.chaos.job")
        self.last_progress = time.monotonic()

    def _writer_options(self) -> tuple[tuple[str, str], ...]:
        timeout_ms = self.plan.writer_txn_timeout_ms
        if timeout_ms is None:
            return ()
        if self.plan.broker_two_phase:
            # KIP-939 brokers: the default auto mode takes 2PC, the timeout does not apply.
            return (("kafka.transaction.timeout.ms", str(timeout_ms)),)
        return (
            ("kafka.transaction.timeout.ms", str(timeout_ms)),
            ("kafka.transaction.two.phase.commit.enable", "false"),
        )

    def crash(self) -> bool:
        """SIGKILL the query's whole process (a supervisor restarts it); whether it was
        running."""
        assert self.job is not None
        alive = self.job.running()
        self.job.kill()
        return alive

    def neighbour_topics(self) -> list[str]:
        """The neighbours' input topics (none in single-query runs)."""
        return [f"{INPUT}-{i}" for i in range(1, self.plan.queries)]

    def start_neighbours(self) -> None:
        """Start (again) the neighbours' Spark application: default writer options,
        connected to the cluster directly (no fault injection on their way)."""
        topics = self.neighbour_topics()
        checkpoints = [str(self.work / f"checkpoint-{t}") for t in topics]
        settings = ChaosJobSettings(
            bootstrap=self.bootstrap,
            input_topic=topics[0],
            output_topic=SHARED_OUTPUT,
            checkpoint=checkpoints[0],
            prefix="",
            repartition=NEIGHBOUR_PARTITIONS,
            more=tuple(
                (t, SHARED_OUTPUT, c) for t, c in zip(topics[1:], checkpoints[1:], strict=True)
            ),
        )
        self.result.neighbour_runs += 1
        self.neighbours_drained = False
        log_path = self.work / f"neighbours-run{self.result.neighbour_runs}.log"
        self.neighbours = JobProcess(settings, log_path, module="tests.chaos.job")

    def _watch_neighbours(self) -> None:
        """The neighbours' events: any failure or restart is an anomaly (restarted, so
        that their output can still be judged)."""
        job = self.neighbours
        if job is None:
            return
        while (event := job.next_event(0)) is not None:
            kind = event["event"]
            if kind == "started":
                self.neighbours_started += 1
                if self.neighbours_started > self.plan.queries - 1:
                    self.result.anomalies.append(
                        f"a neighbour query restarted (query {event.get('query')})"
                    )
            elif kind == "drained":
                self.neighbours_drained = True
            elif kind in ("failed", "exited") and not self.neighbours_drained:
                job.stop_quietly()
                why = _reason(str(event.get("error", ""))) if kind == "failed" else "exited"
                self.result.anomalies.append(f"the neighbours' application failed: {why}")
                self.start_neighbours()
                return

    def pump(self, seconds: float) -> None:
        """Handle the job's events for ``seconds``; restart it if it died."""
        end = time.monotonic() + seconds
        while True:
            assert self.job is not None
            self._watch_neighbours()
            event = self.job.next_event(max(0.0, min(0.2, end - time.monotonic())))
            if event is not None:
                kind = event["event"]
                if kind == "started":
                    self.query = str(event["query"])
                elif kind == "progress":
                    if event["rows"]:
                        self.result.batches += 1
                        self.batches_this_run += 1
                    self.last_progress = time.monotonic()
                elif kind == "idle":
                    self.last_progress = time.monotonic()
                elif kind == "drained":
                    self.drained = True
                elif kind in ("failed", "exited"):
                    self.job.stop_quietly()
                    if kind == "failed":
                        error = str(event.get("error", ""))
                        self.result.query_failures.append(_reason(error))
                        if asked := _RESTART_WITH.search(error):
                            self.partitions_asked = int(asked.group(1))
                    if not self.drained:
                        self.start_job()
            if time.monotonic() - self.last_progress > STALL_S:
                raise StallError(f"no micro-batch for {STALL_S:.0f} s")
            if time.monotonic() >= end:
                return

    # --- faults -------------------------------------------------------------------

    def apply(self, fault: Fault, feed: ChaosFeed) -> dict[str, Any]:
        """Inject ``fault``; what it did (merged into the report's entry for it)."""
        p = fault.params
        if fault.kind in ("task_exception", "worker_kill"):
            # The failing task leaves a marker first: wait for one (a restart replays the
            # record, and its first attempt fails again: any new marker of the kind counts).
            flag = "exception" if fault.kind == "task_exception" else "kill"
            before = len(list(self.markers.glob(f"{flag}-*")))
            feed.flag(flag)
            armed, batches = time.monotonic(), self.result.batches

            def waiting() -> bool:
                if len(list(self.markers.glob(f"{flag}-*"))) > before:
                    return False
                now = time.monotonic()
                read = self.result.batches - batches >= ARM_BATCHES
                return now < armed + ARM_HANG_S and (now < armed + ARM_S or not read)

            while waiting():
                self.pump(0.2)
            seen = len(list(self.markers.glob(f"{flag}-*"))) - before
            return {
                "task_failures": seen,
                "happened": seen > 0,
                "waited_s": round(time.monotonic() - armed, 1),
                "batches_meanwhile": self.result.batches - batches,
            }
        if fault.kind == "driver_kill":
            self.pump(p["delay_s"])
            killed = self.crash()
            self.pump(0)
            return {"happened": killed}
        if fault.kind == "input_txn_timeout":
            number = feed.stall(p["records"], p["timeout_ms"], SWEEP_MS)

            def stalled() -> dict[str, Any]:
                outcome = feed.stalls.get(number, "unfinished")
                return {"outcome": outcome, "happened": outcome in ("timed_out", "late_commit")}

            self.judge_later(stalled)
            return {}
        return self.apply_cluster(fault, feed)

    def writer_partitions(self) -> int:
        """The number of Spark partitions of the query's current run."""
        return self.partitions

    # --- one run ------------------------------------------------------------------

    def run(self) -> SeedResult:
        started = time.monotonic()
        with self.cluster():
            self.create_topic(INPUT, self.plan.input_partitions)
            self.create_topic(OUTPUT, self.plan.output_partitions)
            feed = ChaosFeed(
                self.bootstrap,
                INPUT,
                self.plan.seed,
                producers=self.plan.input_producers,
            )
            # Multi-query runs: the neighbours' inputs (one producer each) and output.
            others = [
                ChaosFeed(self.bootstrap, topic, self.plan.seed, name=f"chaos-feed-{topic}")
                for topic in self.neighbour_topics()
            ]
            for other in others:
                self.create_topic(other.topic, 2)
            if others:
                self.create_topic(SHARED_OUTPUT, NEIGHBOUR_PARTITIONS)
                self.start_neighbours()
            self.start_job()
            try:
                self._play(feed, others)
            except (StallError, TimeoutError) as exc:
                self.result.anomalies.append(f"liveness: {exc}")
            finally:
                for one in [feed, *others]:
                    one.stop()
                self.clear_faults()
                for job in (self.job, self.neighbours):
                    if job is not None:
                        job.stop_quietly()
            for one in [feed, *others]:
                if one.error is not None:
                    self.result.harness_errors.append(f"input producer: {one.error}")
            self.settle()
            if not any(a.startswith("liveness: ") for a in self.result.anomalies):
                self._check(feed, others)
        self.result.seconds = round(time.monotonic() - started, 1)
        return self.result

    def _check(self, feed: ChaosFeed, others: list[ChaosFeed]) -> None:
        """Judge every query's output against its feed's truth and its input topic."""
        verdict = check(self.bootstrap, INPUT, OUTPUT, feed.truth)
        self.result.verdict = _summary(verdict, feed)
        self.result.anomalies.extend(verdict.anomalies)
        if verdict.output_others:
            self.result.anomalies.append(
                f"{OUTPUT}: {verdict.output_others} records from no query's input"
            )
        written = total = 0
        for other in others:
            seen = check(self.bootstrap, other.topic, SHARED_OUTPUT, other.truth)
            self.result.neighbours.append({"input": other.topic, **_summary(seen, other)})
            self.result.anomalies.extend(f"{other.topic}: {a}" for a in seen.anomalies)
            written += seen.output
            total = seen.output + seen.output_others
        if others and total != written:
            self.result.anomalies.append(
                f"{SHARED_OUTPUT}: {total - written} records from no neighbour's input"
            )

    def _play(self, feed: ChaosFeed, others: list[ChaosFeed]) -> None:
        # Wait for the first micro-batch (Spark warm), then start the input.
        while self.result.runs and not self.query:
            self.pump(0.5)
        deadline = time.monotonic() + RUNNING_WAIT_S
        while self.neighbours_started < len(others) and time.monotonic() < deadline:
            self.pump(0.5)
        for one in [feed, *others]:
            one.start()
        t0 = time.monotonic()
        for fault in self.plan.faults:
            self.pump(max(0.0, t0 + fault.at_s - time.monotonic()))
            # A fault lands on a running query: after a restart, wait for its first
            # micro-batch with rows (otherwise most faults would hit a query starting up).
            deadline = time.monotonic() + RUNNING_WAIT_S
            while self.batches_this_run == 0 and time.monotonic() < deadline:
                self.pump(0.2)
            outcome = self.apply(fault, feed)
            at = round(time.monotonic() - t0, 1)
            self.result.applied.append({"at_s": at, "kind": fault.kind, **fault.params, **outcome})
            if self.plan.broker_two_phase and outcome.get("expired"):
                self.result.anomalies.append(
                    f"{fault.kind} at {at} s: a two-phase-commit transaction expired"
                )
            log.info("seed %d: %.1f s %s %s", self.plan.seed, at, fault.kind, outcome)
        self.pump(max(0.0, t0 + self.plan.duration_s - time.monotonic()))
        for one in [feed, *others]:
            one.stop()
        self.clear_faults()
        self._drain()
        if others:
            self._drain_neighbours()

    def _drain_neighbours(self) -> None:
        """Ask the neighbours' application to drain (restarted if it fails meanwhile, an
        anomaly already); wait for it."""
        for _ in range(3):
            job = self.neighbours
            assert job is not None
            with contextlib.suppress(BrokenPipeError):  # failed: _watch_neighbours restarts it
                job.drain()
            deadline = time.monotonic() + STALL_S
            while not self.neighbours_drained and self.neighbours is job:
                if time.monotonic() > deadline:
                    raise StallError("the neighbours did not drain")
                self.pump(0.2)
            if self.neighbours_drained:
                job.wait(120)
                return
        raise StallError("the neighbours failed three times while draining")

    def _drain(self) -> None:
        """Ask the query under test to drain; restart it if it fails meanwhile."""
        for _ in range(3):  # drain; a query that fails meanwhile is restarted
            job = self.job
            assert job is not None
            try:
                job.drain()  # buffered in the pipe until the job reads its commands
            except BrokenPipeError:
                # Its query failed and the job exited before the command: pump() records
                # the failure and restarts it; the new job is asked to drain.
                deadline = time.monotonic() + STALL_S
                while self.job is job and time.monotonic() < deadline:
                    self.pump(0.5)
                if self.job is job:  # no word from it: restart it here
                    self.start_job()
                continue
            deadline = time.monotonic() + STALL_S
            # pump() restarts a job that failed: the new one must be asked to drain too.
            while (
                not self.drained
                and self.job is job
                and job.running()
                and time.monotonic() < deadline
            ):
                self.pump(0.5)
            if self.drained:
                job.wait(120)
                return
            if time.monotonic() >= deadline:
                raise StallError("the query did not drain")
            if self.job is job:  # it exited without a word: restart it
                self.start_job()
        raise StallError("the query failed three times while draining")


class EmbeddedHarness(Harness):
    """The pipeline on the embedded cluster (1 or 3 brokers, on a data directory)."""

    def __init__(self, plan: Plan, work: Path) -> None:
        super().__init__(plan, work)
        self.kafka = EmbeddedKafka(
            brokers=plan.brokers,
            data_dir=work / "data",
            initial_producer_epoch=plan.initial_producer_epoch,
            transaction_abort_interval_ms=SWEEP_MS,
        )
        self.result.cluster = f"embedded, {plan.brokers} broker(s)"

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap_servers

    def cluster(self) -> contextlib.AbstractContextManager[object]:
        return self.kafka

    def create_topic(self, name: str, partitions: int) -> None:
        self.kafka.create_topic(name, partitions)

    def clear_faults(self) -> None:
        self.kafka.clear_faults()

    def apply_cluster(self, fault: Fault, feed: ChaosFeed) -> dict[str, Any]:
        k, p = self.kafka, fault.params
        if fault.kind in ("driver_kill_after_decision", "driver_kill_before_decision"):
            api = "EndTxn" if fault.kind == "driver_kill_after_decision" else "OffsetCommit"
            # Aimed at the query's own requests: the feed's EndTxns must not trigger it.
            # (With several queries the OffsetCommit too, by its group id.)
            rule = k.fail_requests(
                api,
                "COORDINATOR_LOAD_IN_PROGRESS",
                count=1_000_000_000,
                transactional_id_prefix=(self.aim() or self.prefix)
                if api == "EndTxn"
                else self.aim(),
            )
            deadline = time.monotonic() + ARM_S
            while rule.hits == 0 and time.monotonic() < deadline:
                self.pump(0.05)
            hits = rule.hits
            killed = self.crash()
            open_partitions = self.pinned()
            k.clear_faults()
            self.pump(0)
            return {
                "hits": hits,
                "open_output_partitions": open_partitions,
                "happened": hits > 0 and killed,
            }
        if fault.kind == "output_txn_timeout":
            # EndTxn held back until the batch's transactions expire: the broker's sweep
            # aborts them after the decision record; commit() must fail, the restart rewrite.
            rule = k.fail_requests(
                "EndTxn",
                "COORDINATOR_LOAD_IN_PROGRESS",
                count=1_000_000_000,
                transactional_id_prefix=self.aim() or self.prefix,
            )
            deadline = time.monotonic() + ARM_S
            while rule.hits == 0 and time.monotonic() < deadline:
                self.pump(0.05)
            hits, held = rule.hits, self.pinned()
            deadline = time.monotonic() + self.expiry_wait_s()
            while self.pinned() and time.monotonic() < deadline:
                self.pump(0.2)
            expired = bool(held) and not self.pinned()
            k.clear_faults()
            self.pump(0)
            return {
                "hits": hits,
                "open_output_partitions": held,
                "expired": expired,
                "happened": hits > 0,
            }
        if fault.kind == "broker_restart":
            k.restart()  # returns once every broker listens again on its data
            return {"happened": True}
        if fault.kind == "drop_connections":
            return self.drop_connections(k.drop_connections)
        if fault.kind in ("retriable_errors", "lost_responses", "delays"):
            rule = self._request_fault(fault)
            self.wait_for_hit(lambda: rule.hits)
            self.judge_later(lambda: {"hits": rule.hits, "happened": rule.hits > 0})
            return {"aimed_at": self.aim()} if self.multi else {}
        if fault.kind == "leader_move":
            topic = OUTPUT if p["output"] else INPUT
            count = self.plan.output_partitions if p["output"] else self.plan.input_partitions
            partition = p["partition"] % count
            k.move_leader(topic, partition, p["node"])
            leader = self._leader(topic, partition)
            return {"topic": topic, "leader": leader, "happened": leader == p["node"]}
        if fault.kind == "coordinator_move":
            if p["writer"] and self.query:
                key = self.writer_id(p["partition"])
            else:
                key = feed.transactional_id(p["partition"] % self.plan.input_producers)
            k.move_coordinator("transaction", key, p["node"])
            with ClusterClient(self.bootstrap, retry_timeout_s=60) as cluster:
                node = cluster.coordinator(COORDINATOR_TXN, key).node_id
            return {"transactional_id": key, "coordinator": node, "happened": node == p["node"]}
        raise ValueError(f"unknown fault kind {fault.kind}")

    def _request_fault(self, fault: Fault) -> FaultRule:
        """Arm a retriable error, a lost answer or a delay (aimed at the query under test
        with several queries); the rule, whose hits tell whether it happened."""
        k, p, aim = self.kafka, fault.params, self.aim()
        if fault.kind == "delays":
            return k.delay_requests(
                p["api"], p["seconds"], count=p["count"], transactional_id_prefix=aim
            )
        if fault.kind == "lost_responses":
            return k.fail_requests(
                p["api"],
                "REQUEST_TIMED_OUT",
                count=p["count"],
                after=True,
                transactional_id_prefix=aim,
            )
        try:
            return k.fail_requests(
                p["api"], p["error"], count=p["count"], transactional_id_prefix=aim
            )
        except ValueError:  # no error builder for this API: executed, answer lost
            return k.fail_requests(
                p["api"], p["error"], count=p["count"], after=True, transactional_id_prefix=aim
            )

    def _leader(self, topic: str, partition: int) -> int:
        """The partition's leader as Metadata names it to an independent client."""
        from confluent_kafka.admin import AdminClient

        metadata = AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(topic, timeout=30)
        return int(metadata.topics[topic].partitions[partition].leader)

    def pinned(self) -> dict[int, tuple[int, int]]:
        out = {}
        for p in range(self.plan.output_partitions):
            o = self.kafka.offsets(OUTPUT, p)
            if o["last_stable"] < o["high_watermark"]:
                out[p] = (o["last_stable"], o["high_watermark"])
        return out


class StallError(Exception):
    pass


#: The writer's CommitFailedError when a replay's partitioning differs from the decision's.
_RESTART_WITH = re.compile(r"from its checkpoint with (\d+) Spark partitions")
_RAISED = re.compile(r"^[\w.]*(Error|Exception): .*")


def _reason(error: str) -> str:
    """A query failure in a line: the error's first line, and the exception a Python
    traceback in it ended with (the connector's error, e.g. ``CommitFailedError: ...``)."""
    lines = error.strip().splitlines()
    if not lines:
        return "?"
    raised = [line for line in lines[1:] if _RAISED.match(line)]
    return lines[0][:300] + (f" ... {raised[-1][:300]}" if raised else "")


#: The anomaly counts of a verdict, as the report names them.
COUNTS = (
    "lost",
    "duplicated",
    "aborted_visible",
    "unknown",
    "mismatched",
    "reordered",
    "lingering",
    "input_disagrees",
)


def _summary(verdict: Verdict, feed: ChaosFeed) -> dict[str, Any]:
    return {
        "input_committed": verdict.input_committed,
        "input_aborted": verdict.input_aborted,
        "output": verdict.output,
        "output_in_log": verdict.output_in_log,
        "feed_committed": verdict.feed_committed,
        "feed_aborted": verdict.feed_aborted,
        "feed_unknown": verdict.feed_unknown,
        **{name: getattr(verdict, name) for name in COUNTS},
        "feed_transactions": feed.committed_txns + feed.aborted_txns,
        "feed_failed_calls": feed.failed_calls,
        "feed_timed_out_txns": feed.timed_out_txns,
        "feed_late_commits": feed.late_commits,
    }


def run_seed(
    seed: int,
    duration_s: float,
    keep: Path | None,
    kafka: str = "embedded",
    kinds: Sequence[str] | None = None,
    keep_all: bool = False,
    queries: int = 1,
    broker_two_phase: bool = False,
) -> SeedResult:
    """Run one seed on a cluster of kind ``kafka`` (``embedded`` or ``apache``), with the
    drawn faults or the fixed list ``kinds``; the seed's logs (Spark's, and the Apache
    Kafka nodes') go under ``keep`` if it found an anomaly or the harness failed, or
    always with ``keep_all``."""
    work = Path(tempfile.mkdtemp(prefix=f"chaos-{seed}-"))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])
    )
    plan = draw(seed, duration_s, kafka, kinds, queries, broker_two_phase=broker_two_phase)
    harness: Harness
    if kafka == "apache":
        from tests.chaos.apache import ApacheHarness  # imports this module

        harness = ApacheHarness(plan, work)
    else:
        harness = EmbeddedHarness(plan, work)
    try:
        result = harness.run()
    except Exception:  # reported as the seed's harness error, never a run without a report
        log.exception("seed %d: the harness failed", seed)
        result = harness.result
        result.harness_errors.append(traceback.format_exc(limit=30))
    except BaseException:  # stopped by hand: nothing to report, nothing left behind
        shutil.rmtree(work, ignore_errors=True)
        raise
    if (result.anomalies or result.harness_errors or keep_all) and keep is not None:
        target = keep / f"seed-{seed}"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(work, target, ignore=shutil.ignore_patterns("data"))
        result.logs = str(target)
    shutil.rmtree(work, ignore_errors=True)
    return result


def _two_phase(plan: dict[str, Any]) -> str:
    """The report's 2PC column: whether the writer's transactions can expire."""
    if plan.get("broker_two_phase"):
        return "yes (KIP-939 brokers)"
    if plan.get("writer_txn_timeout_ms"):
        return "no"
    # Apache Kafka has no KIP-939 release yet: the writer's 15 min default timeout.
    return "no (15 min)" if plan.get("target") == "apache" else "yes"


def write_report(results: list[SeedResult], directory: Path, duration_s: float) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "report.json").write_text(
        json.dumps([asdict(r) for r in results], indent=1, default=str)
    )
    kinds = Counter(a["kind"] for r in results for a in r.applied)

    def total(name: str) -> int:  # over every query of every seed
        return sum(int(v.get(name, 0)) for r in results for v in [r.verdict, *r.neighbours])

    bad = [r for r in results if r.anomalies]
    apache = any(r.plan.get("target") == "apache" for r in results)
    make = "make chaos KAFKA=apache" if apache else "make chaos"
    queries = max((int(r.plan.get("queries", 1)) for r in results), default=1)
    if queries > 1:
        make += f" QUERIES={queries}"
    clusters = Counter(r.cluster or r.plan.get("target", "embedded") for r in results)
    # Each fault says whether it was seen to happen (a task's marker, a request caught, a
    # process killed, a node down and back, ...).
    judged = [a for r in results for a in r.applied if "happened" in a]
    lines = [
        "# Chaos report",
        "",
        f"Command: `{make} SEEDS={len(results)} DURATION={duration_s:g}` "
        f"(seeds {', '.join(str(r.seed) for r in results)}), {time.strftime('%Y-%m-%d')}",
        "",
        f"* runs: {len(results)}, with anomalies: **{len(bad)}**",
        f"* clusters: {'; '.join(f'{c} ({n} seeds)' for c, n in sorted(clusters.items()))}",
        f"* faults injected: {sum(kinds.values())} "
        f"({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})",
    ]
    if judged:
        missed = Counter(a["kind"] for a in judged if not a["happened"])
        lines.append(
            f"* faults seen to happen: {sum(1 for a in judged if a['happened'])} of "
            f"{len(judged)} (not seen: "
            f"{', '.join(f'{k} {n}' for k, n in sorted(missed.items())) or 'none'})"
        )
    if queries > 1:
        lines.append(
            f"* queries per seed: {queries}, default writer options (one prefix), in two "
            f"Spark applications: the faults hit query 0 alone; its {queries - 1} neighbours "
            f"({sum(len(r.neighbours) for r in results)} in all) write one shared output "
            f"topic; neighbour application restarts: "
            f"{sum(max(0, r.neighbour_runs - 1) for r in results)}"
        )
    lines += [
        f"* query restarts (kills and failures): {sum(max(0, r.runs - 1) for r in results)}; "
        f"micro-batches with rows: {sum(r.batches for r in results)}",
        f"* input records committed: {total('input_committed'):,}, aborted: "
        f"{total('input_aborted'):,} (as the feed's producers saw them: committed "
        f"{total('feed_committed'):,}, aborted {total('feed_aborted'):,}, commit outcome "
        f"unknown {total('feed_unknown'):,}); output records: {total('output'):,} "
        f"({total('output_in_log'):,} in the log, aborted attempts included)",
        "* " + ", ".join(f"{name.replace('_', '-')}: **{total(name)}**" for name in COUNTS),
        f"* input producers: {sum(r.plan.get('input_producers', 1) for r in results)} "
        f"in all; stalled input transactions aborted at their timeout: "
        f"{total('feed_timed_out_txns')} (committed before the sweep: "
        f"{total('feed_late_commits')})",
        f"* seeds whose writer transactions can expire (10 s timeout, no two-phase commit): "
        f"{sum(1 for r in results if r.plan.get('writer_txn_timeout_ms'))}; batches held in "
        f"commit() until the broker aborted them: "
        f"{sum(1 for r in results for a in r.applied if a.get('expired'))}",
        f"* seeds that could not be judged (liveness, harness): "
        f"{sum(1 for r in results if not r.verdict)}",
        f"* wall time: {sum(r.seconds for r in results) / 60:.1f} min",
        "",
        "| seed | brokers | producers | 2PC | faults | runs | batches | committed in | out "
        "| anomalies | s |",
        "|---:|---:|---:|---|---|---:|---:|---:|---:|---|---:|",
    ]
    for r in results:
        faults = ", ".join(a["kind"] for a in r.applied)
        lines.append(
            f"| {r.seed} | {r.plan['brokers']} | {r.plan.get('input_producers', 1)} | "
            f"{_two_phase(r.plan)} | {faults} | "
            f"{r.runs} | {r.batches} | "
            f"{r.verdict.get('input_committed', '-')} | {r.verdict.get('output', '-')} | "
            f"{'; '.join(r.anomalies + r.harness_errors) or 'none'} | {r.seconds} |"
        )
    for r in bad:
        lines += [
            "",
            f"## Seed {r.seed}",
            "",
            f"Reproduce: `{make} SEED={r.seed} DURATION={duration_s:g}`",
            "",
        ]
        lines += [f"* {a}" for a in r.anomalies]
        lines += ["", "Faults:", ""] + [f"* {json.dumps(a)}" for a in r.applied]
        if r.logs:
            lines += ["", f"Logs and checkpoint: `{r.logs}`"]
    path = directory / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1, help="run seeds 1..N")
    parser.add_argument("--seed", type=int, action="append", help="run this seed (repeatable)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of input per seed")
    parser.add_argument("--report", type=Path, default=ROOT / "chaos-report")
    parser.add_argument(
        "--kafka",
        choices=TARGETS,
        default="embedded",
        help="the cluster: the embedded one (default) or a three-node Apache Kafka",
    )
    parser.add_argument(
        "--faults",
        type=lambda text: [k.strip() for k in text.split(",") if k.strip()],
        help="a fixed fault list (comma-separated kinds) instead of the drawn one",
    )
    parser.add_argument(
        "--apache-2pc",
        action="store_true",
        help="with --kafka apache: brokers with KIP-939 two-phase commit on "
        "(transaction.two.phase.commit.enable, unstable.api.versions.enable); the writer "
        "transactions of every plan then never expire",
    )
    parser.add_argument(
        "--queries",
        type=int,
        default=1,
        help="streaming queries per seed (default 1); above 1 the faults hit the first alone",
    )
    parser.add_argument(
        "--keep-logs",
        action="store_true",
        help="keep every seed's logs under the report directory (default: anomalous ones)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    # Stopped by hand (SIGTERM, or SIGINT even when started in the background): unwind, so
    # that the query's process and the cluster's nodes (sessions of their own) are stopped.
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    seeds = args.seed or list(range(1, args.seeds + 1))
    results = []
    for seed in seeds:
        result = run_seed(
            seed,
            args.duration,
            args.report,
            args.kafka,
            args.faults,
            args.keep_logs,
            args.queries,
            broker_two_phase=args.apache_2pc,
        )
        results.append(result)
        status = "OK" if not result.anomalies else f"ANOMALIES: {result.anomalies}"
        log.info("seed %d done in %.0f s: %s", seed, result.seconds, status)
        write_report(results, args.report, args.duration)
    path = write_report(results, args.report, args.duration)
    sys.stdout.write(path.read_text())
    return 1 if any(r.anomalies for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
