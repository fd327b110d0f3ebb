"""The smoke suite: the package on each older PySpark release, in a fresh virtual environment.

For each release line of ``KAFKA_TXN_SPARK_VERSIONS`` (``make spark-versions``; ``4.0``
means the newest 4.0.x, as pip resolves ``pyspark~=4.0.0``), a new virtual environment
gets that PySpark (with its Spark Connect extra), then the package's wheel, which must
leave that PySpark as it was. There, :mod:`smoke_job` runs:

* the reader: committed, aborted and still-open transactions; a streaming read with
  ``maxOffsetsPerTrigger`` (several micro-batches, none over the limit, on a PySpark
  without admission control too), an ``availableNow`` read and a batch read each return
  exactly the committed records;
* the writer, exactly once across a driver kill: every EndTxn of the first run is held
  until its decision record is in Kafka, then the whole driver is SIGKILLed; the run
  again, with another number of Spark partitions, rolls the batch forward;
* Spark Connect: ``register(spark)`` twice, a batch write, a streaming copy, a batch read.

The Kafka cluster is the session's (embedded by default) and this process checks what
the jobs wrote with a librdkafka read_committed consumer. The whole suite runs on the
newest PySpark in the ordinary test run; this one asks only what differs between releases.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.wire import END_TXN
from pyspark_kafka_txn.writer.decision import Decision, read_decision
from pyspark_kafka_txn.writer.ids import query_of
from pyspark_kafka_txn.writer.open_transactions import find_open_transactions
from tests.support.kafka_data import reference_rows
from tests.support.lso import assert_nothing_open
from tests.support.spark import kill_everything
from tests.support.target import KafkaTarget
from tests.support.txns import committed_batches, interleaved
from tests.support.wheel import copy_build_inputs, run
from tests.support.writer_kit import wait_until

JOB = Path(__file__).with_name("smoke_job.py")
#: What ``pip wheel`` reads from the repository.
#: The release lines to test (``make spark-versions`` sets it; unset: none are collected).
VERSIONS = os.environ.get("KAFKA_TXN_SPARK_VERSIONS", "").split()

pytestmark = [pytest.mark.slow, pytest.mark.own_spark, pytest.mark.timeout(900)]


def report(line: str) -> None:
    """A line in the terminal summary's captured output (timings)."""
    sys.stderr.write(f"spark-versions: {line}\n")


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package's wheel, built once from a copy of the build's inputs."""
    start = time.monotonic()
    source = tmp_path_factory.mktemp("source")
    copy_build_inputs(source)
    out = tmp_path_factory.mktemp("wheel")
    pip = (sys.executable, "-m", "pip", "--disable-pip-version-check")
    run(*pip, "wheel", "--quiet", "--no-deps", "--wheel-dir", out, source)
    (built,) = out.glob("*.whl")
    report(f"wheel built in {time.monotonic() - start:.1f} s")
    return built


@dataclass(frozen=True)
class Env:
    """A fresh virtual environment with one PySpark release and the wheel."""

    line: str
    python: Path
    pyspark: str
    path: Path

    def job(self, cwd: Path, *args: str, timeout: float = 420) -> dict[str, Any]:
        """Run a mode of :mod:`smoke_job`; its last output line, parsed."""
        start = time.monotonic()
        out = run(self.python, JOB, *args, timeout=timeout, cwd=cwd, env=self.environ())
        report(f"PySpark {self.pyspark}: {args[0]} job {time.monotonic() - start:.1f} s")
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        assert result["pyspark"] == self.pyspark
        assert Path(result["module"]).resolve().is_relative_to(self.path.resolve())
        return result

    def start(self, log: Path, cwd: Path, *args: str) -> subprocess.Popen[bytes]:
        """Start a mode of :mod:`smoke_job` in a process group of its own."""
        with log.open("wb") as out:
            return subprocess.Popen(
                [str(self.python), str(JOB), *args],
                cwd=cwd,
                env=self.environ(),
                start_new_session=True,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def environ(self) -> dict[str, str]:
        """This environment without the repository or the test session's Spark settings."""
        skip = ("PYTHON", "PYSPARK_", "SPARK_", "KAFKA_TXN_", "VIRTUAL_ENV")
        env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
        env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = str(self.python)
        env["PATH"] = f"{self.python.parent}{os.pathsep}{env.get('PATH', '')}"
        return env


@pytest.fixture(scope="module", params=VERSIONS)
def env(
    request: pytest.FixtureRequest, wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Env]:
    line: str = request.param
    start = time.monotonic()
    path = tmp_path_factory.mktemp(f"venv-{line}")
    run(sys.executable, "-m", "venv", "--without-pip", path)
    python = path / "bin" / "python"
    # This environment's pip installs into the new one (--python): no ensurepip.
    pip = (sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check")
    spec = f"pyspark[connect]~={line}.0" if line.count(".") == 1 else f"pyspark[connect]=={line}"
    run(*pip, "install", "--quiet", spec)
    installed = _installed(pip)
    pyspark = installed["pyspark"]
    mark = time.monotonic()
    run(*pip, "install", "--quiet", wheel)
    after = _installed(pip)
    assert after["pyspark"] == pyspark, "installing the wheel replaced PySpark"
    assert "pyspark-kafka-txn" in after
    report(
        f"PySpark {pyspark}: environment {mark - start:.1f} s, wheel and its "
        f"dependencies {time.monotonic() - mark:.1f} s"
    )
    yield Env(line, python, pyspark, path)
    shutil.rmtree(path, ignore_errors=True)


def _installed(pip: tuple[str | Path, ...]) -> dict[str, str]:
    shown = run(*pip, "list", "--format=json")
    return {p["name"].lower(): p["version"] for p in json.loads(shown)}


def test_reader_reads_exactly_the_committed_records(
    env: Env, kafka: KafkaTarget, tmp_path: Path
) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2, prefix="smokeread")
    layout = interleaved(bs, topic)  # committed c1-*, aborted ab-*, open-* pinning the LSO
    layout.commit_open(bs)
    batches = [[(i % 2, f"m{n}-{i}".encode()) for i in range(10)] for n in range(3)]
    committed_batches(bs, topic, batches)
    expected = Counter(bytes(r[1]).decode() for r in reference_rows(bs, topic, 2))
    assert not any(v.startswith("ab-") for v in expected)
    assert sum(expected.values()) == 4 + 2 + 2 + 30

    limit = 12
    result = env.job(
        tmp_path, "read", bs, topic, str(tmp_path / "chk"), str(limit), str(sum(expected.values()))
    )
    streamed = result["stream_batches"]
    assert Counter(v for b in streamed for v in b["values"]) == expected
    # maxOffsetsPerTrigger: each micro-batch spans at most `limit` offsets (markers count).
    for b in streamed:
        spans: dict[int, list[int]] = {}
        for partition, offset in b["offsets"]:
            spans.setdefault(partition, []).append(offset)
        width = sum(max(o) - min(o) + 1 for o in spans.values())
        assert width <= limit, (b["id"], spans)
    assert len([b for b in streamed if b["values"]]) >= sum(expected.values()) // limit
    assert Counter(result["available_now"]) == expected
    assert Counter(result["batch"]) == expected
    report(
        f"PySpark {env.pyspark}: {len(streamed)} micro-batches of at most {limit} offsets, "
        f"availableNow in {result['available_now_batches']}; interfaces {result['interfaces']}"
    )


def test_writer_exactly_once_across_a_driver_kill(
    env: Env, kafka: KafkaTarget, tmp_path: Path
) -> None:
    bs = kafka.bootstrap_servers
    source = kafka.create_topic(partitions=2, prefix="smokesrc")
    sink = kafka.create_topic(partitions=3, prefix="smokeout")
    batches = [[(i % 2, f"w{n}-{i}".encode()) for i in range(30)] for n in range(2)]
    committed_batches(bs, source, batches)
    expected = Counter(v for b in batches for _, v in b)
    prefix = f"smoke-{uuid.uuid4().hex[:8]}-"
    checkpoint = str(tmp_path / "chk")

    log = tmp_path / "first.log"
    stall = kafka.stall(END_TXN)
    args = (kafka.fault_bootstrap_servers, source, sink, checkpoint, prefix)
    first = env.start(log, tmp_path, "write", *args, "4")
    try:

        def decided() -> tuple[str, Decision] | None:
            assert first.poll() is None, f"the first run ended:\n{log.read_text()[-5000:]}"
            with ClusterClient(bs) as cluster:
                for txn in find_open_transactions(cluster, prefix):
                    query = query_of(prefix, txn.transactional_id)
                    if query is None:
                        continue
                    found = read_decision(cluster, prefix, query, batch=0)
                    if found is not None and stall.hits > 0:
                        return query, found
            return None

        query, decision = wait_until("the decision record and a held EndTxn", decided, 240)
    finally:
        kill_everything(first)
        kafka.clear_faults()
    assert reference_rows(bs, sink, 3) == []  # decided, but nothing committed yet
    # The tasks sent the run id (the micro-batch's job group): another UUID than the query's.
    run = decision.checked_run
    assert run is not None and run != query and str(uuid.UUID(run)) == run, decision

    second = env.job(tmp_path, "write", bs, source, sink, checkpoint, prefix, "3")
    assert second["terminated"]
    got = Counter(bytes(r[1]) for r in reference_rows(bs, sink, 3))
    assert got == expected  # every input record exactly once
    assert_nothing_open(bs, sink, 3)


def test_connect_registers_writes_and_reads(env: Env, kafka: KafkaTarget, tmp_path: Path) -> None:
    bs = kafka.bootstrap_servers
    source = kafka.create_topic(partitions=2, prefix="smokecsrc")
    sink = kafka.create_topic(partitions=2, prefix="smokecout")
    result = env.job(tmp_path, "connect", bs, source, sink, str(tmp_path / "chk"))
    expected = Counter(f"v{i}" for i in range(40))
    assert result["registered"][1] is False
    assert Counter(result["sink"]) == expected
    assert Counter(bytes(r[1]).decode() for r in reference_rows(bs, sink, 2)) == expected
