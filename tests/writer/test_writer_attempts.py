"""Several attempts of one Spark partition's write: speculation and killed Python workers.

DESIGN.md's failure table: *two attempts of the same partition (speculation, zombie
executor): only the newest epoch can produce/commit; the older one's data never becomes
visible*, and a task whose Python worker is killed, or which raises, is retried. Every
test reads the output with an independent read_committed consumer (librdkafka) and shows
that the losing attempt's records *are* in the log (read_uncommitted), so the check could
fail.

Where Spark speculates (Spark 4.3.0: read in the installed jars with ``javap -c``, and
tried with a job whose attempt 0 of one task blocks while the others finish):

* ``local``, ``local[N]``, ``local[N,F]``: never. ``SparkContext.createTaskScheduler``
  builds their ``TaskSchedulerImpl`` with ``isLocal = true`` (``local-cluster`` and
  ``spark://`` get the default ``false``), and ``TaskSchedulerImpl.start()`` schedules
  ``checkSpeculatableTasks`` only ``if (!isLocal && conf.get(SPECULATION_ENABLED))``
  (the same code in apache/spark v4.1.2, ``TaskSchedulerImpl.scala`` L228-L237). With
  ``spark.speculation=true`` on ``local[4]`` the driver log has neither "Starting
  speculative execution thread" nor any task marked speculatable.
* ``local-cluster[2,1,1024]``: the thread runs and marks the task ("Marking task 0 in
  stage 0.0 (on 192.0.2.2) as speculatable …"), but no copy is launched:
  ``TaskSetManager.dequeueTaskFromList`` skips a speculative task for an offer when
  ``hasAttemptOnHost(index, host)``, a plain comparison of the host *names* of the
  task's earlier attempts with the offer's, and every executor of ``LocalSparkCluster``
  registers with the same host. No setting reaches that check (it is unconditional);
  attempt 0 blocked for 40 s next to an idle executor and got no copy.
* a standalone cluster (``spark-class …Master`` and two ``…Worker``) on this one machine
  whose workers bind ``127.0.0.1`` and ``127.0.0.2`` (both loopback on Linux): the
  executors register with different host names and the copy is launched on the other
  one a few milliseconds after the task is marked speculatable.

So the speculation test starts such a cluster and runs its job in a child process
(``tests/jobs/speculation_job.py``); it runs the same way whatever ``KAFKA_TXN_SPARK``
says. A driver that holds the *fenced* attempt's handle (commit fails loudly, the replay
is exactly once) cannot be arranged deterministically through Spark; the writer's task
and commit functions are driven directly for it in ``tests/writer/test_zombie.py``.
The killed Python worker runs on the shared session (``local[2,2]`` retries a failed task
once; ``local-cluster`` and Spark Connect as configured in ``conftest.py``), and so does
the failed attempt whose writer, which Spark does not wait for, runs on after its retry
started (``tests/writer/attempt_race.py`` sets that order with files).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812

from pyspark_kafka_txn.demo.child import local_spark_env
from tests.jobs.speculation_job import ROWS as SPEC_ROWS
from tests.support.apache_kafka.tools import kafka_tool
from tests.support.kafka_data import Row, reference_rows
from tests.support.lso import assert_nothing_open
from tests.support.spark import kill_everything
from tests.support.target import KafkaTarget
from tests.support.writer_kit import holds_records
from tests.support.writer_options import fresh_prefix
from tests.writer.attempt_race import (
    FIRST_DONE,
    GATES_OPTION,
    RETRY_READING,
    AttemptRaceSource,
    entered,
)

ROOT = Path(__file__).resolve().parents[2]
HANG_S = 240.0  # hang detector of every wait here, never a timing assertion
WORKER_HOSTS = ("127.0.0.1", "127.0.0.2")


def _tags(rows: list[Row], partition: int) -> Counter[str]:
    """How many records of Kafka ``partition`` each attempt (``a<n>``) wrote."""
    return Counter(bytes(r[1]).split()[1].decode() for r in rows if r[3] == partition)


def _assert_exactly_once(rows: list[Row], expected: range) -> None:
    got = Counter(int(bytes(r[1]).split()[0]) for r in rows)
    assert got == Counter(expected), (
        f"missing {sorted(set(expected) - set(got))[:10]}, "
        f"twice {sorted(v for v, n in got.items() if n > 1)[:10]}"
    )


# -- a killed Python worker --------------------------------------------------------------

KILL_ROWS = 400  # ids per Spark partition
KILL_AT = 300  # attempt 0 of partition 0 dies at this id
#: Padding of every value: a Python worker writes its output through a 64 KiB buffer, so
#: rows must be this large for attempt 0's first rows to reach its writer while its UDF
#: waits (with short values nothing reached the log, seen by experiment).
PAD = 1000


def _fail_first_attempt(
    marker: str, bootstrap: str, sink: str, *, kill: bool
) -> Callable[[int], str]:
    """A UDF making each value ``"<id> a<attempt> <padding>"``; once, in attempt 0 of
    partition 0, it SIGKILLs its own worker (``kill``) or raises (see the tests)."""
    produced = holds_records(bootstrap, sink, "kill-wm")

    def tag(value: int) -> str:
        import signal
        import time

        from pyspark import TaskContext

        ctx = TaskContext.get()
        assert ctx is not None
        attempt = ctx.attemptNumber()
        if ctx.partitionId() == 0 and attempt == 0 and value == KILL_AT:
            # Die only once this attempt's transaction holds records: the retry must
            # deal with data of the killed attempt, not with an empty transaction.
            deadline = time.monotonic() + 240
            while not produced():
                if time.monotonic() > deadline:
                    raise RuntimeError("no record of attempt 0 reached the log")
                time.sleep(0.05)
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return f"{value} a{attempt} {'.' * PAD}"  # fired before: not again
            if kill:
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"injected failure at id {value}")
        return f"{value} a{attempt} {'.' * PAD}"

    return tag


@pytest.fixture
def small_arrow_batches(spark: SparkSession) -> Iterator[None]:
    """Arrow batches of 20 rows (UDF input, writer input) for the duration of a test."""
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, "20")
    yield
    if before is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, before)


@pytest.mark.usefixtures("small_arrow_batches")
@pytest.mark.parametrize("kill", [True, False], ids=["worker-killed", "task-raises"])
def test_failed_attempt_is_retried_exactly_once(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path, kill: bool
) -> None:
    """Attempt 0 of partition 0 fails while its transaction holds records: its Python
    worker is SIGKILLed, or the task raises. Spark retries the task, whose InitProducerId
    aborts them; its rows are written once and the failed attempt's stay invisible."""
    bs = kafka.bootstrap_servers
    sink = kafka.create_topic(partitions=2, prefix="wkill")
    marker = tmp_path / "failed"
    tag = F.udf(
        _fail_first_attempt(str(marker), bs, sink, kill=kill), "string", useArrow=True
    ).asNondeterministic()
    df = spark.range(0, 2 * KILL_ROWS, 1, 2).select(
        tag(F.col("id")).alias("value"),
        F.spark_partition_id().alias("partition"),  # Spark partition p -> Kafka partition p
    )
    df.write.format("kafka_txn").option("kafka.bootstrap.servers", bs).option("topic", sink).option(
        "transactionalIdPrefix", fresh_prefix("att")
    ).mode("append").save()

    assert marker.exists(), "attempt 0 never failed"
    committed = reference_rows(bs, sink, 2)
    _assert_exactly_once(committed, range(2 * KILL_ROWS))
    assert _tags(committed, 0) == {"a1": KILL_ROWS}  # all of partition 0 from the retry
    assert _tags(committed, 1) == {"a0": KILL_ROWS}
    # The failed attempt's records reached the log and were aborted, never committed.
    uncommitted = reference_rows(bs, sink, 2, isolation="read_uncommitted")
    assert 0 < _tags(uncommitted, 0)["a0"] <= KILL_AT
    assert_nothing_open(bs, sink, 2)


# -- a failed attempt's writer against its retry ----------------------------------------

RACE_ROWS = 50  # ids per Spark partition
#: Made by the UDF of attempt 0 of partition 0 when it raises.
A0_FAILED = "a0-failed"


def _fail_before_any_row(gates: Path) -> Callable[[int], str]:
    """A UDF making each value ``"<id> a<attempt>"``; in attempt 0 of partition 0 it raises
    at the first row, once that attempt's writer has started (before any row reached it:
    the writer's process is there, as in the race, and has nothing to write)."""
    writer, failed = str(entered(gates, 0, 0)), str(gates / A0_FAILED)

    def tag(value: int) -> str:
        import os
        import time

        from pyspark import TaskContext

        ctx = TaskContext.get()
        assert ctx is not None
        attempt = ctx.attemptNumber()
        if ctx.partitionId() == 0 and attempt == 0:
            deadline = time.monotonic() + 240  # a hang detector
            while not os.path.exists(writer):
                if time.monotonic() > deadline:
                    raise TimeoutError("attempt 0's writer never started")
                time.sleep(0.02)
            open(failed, "w").close()
            raise RuntimeError(f"injected failure at id {value}, before any row was written")
        return f"{value} a{attempt}"

    return tag


def _kafka_transactions_list(kafka: KafkaTarget, prefix: str) -> dict[str, str]:
    """Kafka's own ``kafka-transactions list`` (a Java client): the state of every
    transactional id under ``prefix``."""
    if kafka.apache is not None:
        done = kafka.apache.tool("kafka-transactions", "list")
    else:
        done = kafka_tool("kafka-transactions", kafka.bootstrap_servers, "list")
    assert (done.returncode, done.stderr) == (0, ""), (done.stdout, done.stderr)
    header, *lines = [line for line in done.stdout.splitlines() if line.strip()]
    columns = [cell.strip() for cell in header.split("\t")]
    rows = [
        dict(zip(columns, (c.strip() for c in line.split("\t")), strict=False)) for line in lines
    ]
    return {
        r["TransactionalId"]: r["TransactionState"]
        for r in rows
        if r["TransactionalId"].startswith(prefix)
    }


def test_failed_attempt_writer_cannot_fence_its_retry(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    """Attempt 0 of partition 0 fails upstream of the writer before any row reached it;
    its writer, which Spark does not wait for, runs on *after* the retry's writer started.
    The retry is not fenced: the job succeeds with two task failures allowed, after one.

    The order is set by :mod:`tests.writer.attempt_race`, which wraps the product's writer
    and only waits at the edges of its ``write()`` and of its input: attempt 0's writer
    runs the product's ``write()`` once the retry's writer has asked for its first input,
    and the retry gets that input once attempt 0's writer has ended. A writer that claims
    its transactional id (InitProducerId) before it reads its first rows thus claims it
    *after* the retry did and fences it: the retry fails, a second task failure, and the
    job fails (``local[2,2]`` and Spark Connect's ``local[2,2]`` allow two; with
    ``local-cluster``, which allows four, a third attempt shows in the count). Reading
    first, attempt 0's writer gets no rows (Spark closed its input) and claims nothing.

    Deterministic as far as Spark goes: it neither waits for nor kills a failed task's
    Python writer (it closes the writer's input), and it runs ``write()`` before the
    writer's input flows, so the UDF can wait for attempt 0's writer to have started.
    """
    spark.dataSource.register(AttemptRaceSource)
    bs = kafka.bootstrap_servers
    sink = kafka.create_topic(partitions=2, prefix="wrace")
    prefix = fresh_prefix("att")
    gates = tmp_path / "gates"
    gates.mkdir()
    tag = F.udf(_fail_before_any_row(gates), "string", useArrow=False).asNondeterministic()
    df = spark.range(0, 2 * RACE_ROWS, 1, 2).select(
        tag(F.col("id")).alias("value"),
        F.spark_partition_id().alias("partition"),  # Spark partition p -> Kafka partition p
    )
    df.write.format(AttemptRaceSource.name()).option(GATES_OPTION, str(gates)).option(
        "kafka.bootstrap.servers", bs
    ).option("topic", sink).option("transactionalIdPrefix", prefix).mode("append").save()

    # The fault happened, in that order: attempt 0 failed before its writer got a row,
    # and its writer ran to its end while the retry waited at its first input.
    assert (gates / A0_FAILED).exists(), "attempt 0 never failed"
    assert (gates / RETRY_READING).exists()
    # Attempt 0's writer ended without rows and without claiming the id: nobody held it
    # then (the retry claims it after its first rows, which it had not got yet).
    first = (gates / FIRST_DONE).read_text()
    assert first.endswith("; id held by nobody"), first
    assert first.startswith(("raised ", "returned empty;")), first
    # One task failure: partition 0 ran twice (the retry was not fenced), partition 1 once.
    attempts = sorted(p.name for p in gates.glob("entered-*"))
    assert attempts == ["entered-0-0", "entered-0-1", "entered-1-0"], (attempts, first)

    committed = reference_rows(bs, sink, 2)
    _assert_exactly_once(committed, range(2 * RACE_ROWS))
    assert _tags(committed, 0) == {"a1": RACE_ROWS}  # all of partition 0 from the retry
    assert _tags(committed, 1) == {"a0": RACE_ROWS}
    # Nothing else reached the log: attempt 0 never wrote, the retry wrote once.
    uncommitted = reference_rows(bs, sink, 2, isolation="read_uncommitted")
    assert Counter(bytes(r[1]) for r in uncommitted) == Counter(bytes(r[1]) for r in committed)
    assert_nothing_open(bs, sink, 2)
    listed = _kafka_transactions_list(kafka, prefix)
    assert sorted(listed.values()) == ["CompleteCommit", "CompleteCommit"], listed
    assert sorted(tid.rsplit("-", 1)[1] for tid in listed) == ["0", "1"], listed


# -- speculation on a standalone cluster -------------------------------------------------


def _child_env() -> dict[str, str]:
    return local_spark_env(PYTHONPATH=str(ROOT))


def _spawn(log: Path, *command: str) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            list(command),
            cwd=ROOT,
            env=_child_env(),
            start_new_session=True,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _wait_for_log(log: Path, pattern: str, proc: subprocess.Popen[bytes], count: int = 1) -> str:
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:
        found = re.findall(pattern, log.read_text(errors="replace"))
        if len(found) >= count:
            return str(found[0])
        assert proc.poll() is None, f"{log.name} ended:\n{log.read_text()[-5000:]}"
        time.sleep(0.2)
    raise AssertionError(f"no {pattern!r} in {log.name}:\n{log.read_text()[-5000:]}")


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[str]:
    """A standalone Spark cluster: a master and two 1-core workers on two host names."""
    spark_class = str(Path(sys.executable).with_name("spark-class"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        master_log = tmp_path / "master.log"
        master = _spawn(
            master_log,
            spark_class,
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
        )
        procs.append(master)
        url = _wait_for_log(master_log, r"Starting Spark master at (spark://[\w.:-]+)", master)
        for host in WORKER_HOSTS:
            work = tmp_path / f"worker-{host}"
            work.mkdir()
            procs.append(
                _spawn(
                    tmp_path / f"worker-{host}.log",
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    *("--host", host, "--port", "0", "--webui-port", "0"),
                    *("--cores", "1", "--memory", "1g", "--work-dir", str(work), url),
                )
            )
        _wait_for_log(master_log, r"Registering worker", master, count=len(WORKER_HOSTS))
        yield url
    finally:
        for proc in reversed(procs):
            kill_everything(proc)


@pytest.mark.slow
@pytest.mark.own_spark
@pytest.mark.timeout(900)
def test_speculative_copy_writes_the_partition_exactly_once(
    standalone: str, kafka: KafkaTarget, tmp_path: Path
) -> None:
    """Spark launches a speculative copy of a partition whose first attempt produced and
    hangs; the copy fences it and alone becomes visible, every record exactly once."""
    bs = kafka.bootstrap_servers
    sink = kafka.create_topic(partitions=2, prefix="wspec")
    work = tmp_path / "job"
    work.mkdir()
    log = tmp_path / "job.log"
    prefix = fresh_prefix("att")
    job = _spawn(
        log,
        sys.executable,
        *("-m", "tests.jobs.speculation_job", standalone, bs, sink, prefix, str(work)),
    )
    try:
        job.wait(HANG_S * 2)
    finally:
        kill_everything(job)
    assert job.returncode == 0, log.read_text()[-5000:]

    tasks = json.loads((work / "tasks.json").read_text())
    first = [t for t in tasks if t["index"] == 0]
    by_attempt = {t["attempt"]: t for t in first}
    assert set(by_attempt) == {0, 1}, tasks  # partition 0 ran twice, nothing else did
    assert not by_attempt[0]["speculative"] and by_attempt[0]["status"] == "KILLED", tasks
    assert by_attempt[1]["speculative"] and by_attempt[1]["status"] == "SUCCESS", tasks
    assert by_attempt[1]["host"] != by_attempt[0]["host"], tasks
    assert [(t["attempt"], t["status"]) for t in tasks if t["index"] == 1] == [(0, "SUCCESS")]

    committed = reference_rows(bs, sink, 2)
    _assert_exactly_once(committed, range(2 * SPEC_ROWS))
    assert _tags(committed, 0) == {"a1": SPEC_ROWS}  # the speculative copy's rows only
    assert _tags(committed, 1) == {"a0": SPEC_ROWS}
    # Attempt 0 did produce (the job waited for it); fenced, its records stay aborted.
    uncommitted = reference_rows(bs, sink, 2, isolation="read_uncommitted")
    assert _tags(uncommitted, 0)["a0"] > 0
    assert_nothing_open(bs, sink, 2)
