"""What a benchmark ran on, and the machine's load around each of its phases.

:func:`describe` gathers the commit of the code (and whether the work tree had changes),
the versions of everything measured and the machine; :class:`LoadLog` reads the load
average (:func:`os.getloadavg`: 1, 5 and 15 minutes) before and after each phase and the
CPU time other work took during it, and :func:`load_check` says whether a run may be
published: in no phase did work outside the benchmark take more than a share of the
machine's CPU.

Why not the load average alone: it counts the benchmark's own runnable threads too, so
on 2 cores a latency phase reaches a 1-minute load of 4 with nothing else running. Other
work's CPU is measured per process by :mod:`_other_cpu`.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _other_cpu import OtherWorkMeter, available, share

REPO = Path(__file__).resolve().parents[1]

#: Load = three floats: the 1-, 5- and 15-minute load averages.
Load = tuple[float, float, float]


def default_max_load() -> float:
    """Twice the number of cores: a Spark benchmark keeps about as many of its threads
    runnable as there are cores (``bench/README.md``, "The load rule"), so above twice
    the cores other work had the CPU for a good part of the phase."""
    return 2.0 * (os.cpu_count() or 1)


#: The default share of the machine's CPU that other work may take during a phase.
DEFAULT_MAX_OTHER_CPU = 0.10


@dataclass(frozen=True)
class PhaseLoad:
    """The load around one phase (a contender's run in a round): the load average before
    and after it, the share of the machine's CPU that work outside the benchmark took
    during it, and the share of busy time no sampled process explained (below 0: counted
    twice; both ``None`` where ``/proc`` cannot tell; :mod:`_other_cpu`)."""

    phase: str
    before: Load
    after: Load
    seconds: float
    other_cpu: float | None = None
    unexplained_cpu: float | None = None

    @property
    def peak(self) -> float:
        """The higher 1-minute load average of the two readings."""
        return max(self.before[0], self.after[0])


@dataclass
class LoadLog:
    """The load around every phase of a run, in the order they ran; other work's CPU is
    measured while the log is :meth:`running` (and not at all without ``/proc``)."""

    phases: list[PhaseLoad] = field(default_factory=list)
    meter: OtherWorkMeter | None = None

    @contextlib.contextmanager
    def running(self) -> Iterator[LoadLog]:
        """Sample every process's CPU time (:class:`OtherWorkMeter`) for the ``with``
        block, where ``/proc`` allows it."""
        if not available():
            yield self
            return
        self.meter = OtherWorkMeter().start()
        try:
            yield self
        finally:
            self.meter.stop()
            self.meter = None

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Measure the load around the ``with`` block (phase ``name``)."""
        meter = self.meter
        before, cpu = os.getloadavg(), meter.totals() if meter is not None else None
        started = time.monotonic()
        try:
            yield
        finally:
            seconds = time.monotonic() - started
            other = unexplained = None
            if meter is not None and cpu is not None:
                measured = share(cpu, meter.totals(), seconds)
                other, unexplained = measured.other_share, measured.unexplained_share
            self.phases.append(
                PhaseLoad(name, before, os.getloadavg(), seconds, other, unexplained)
            )

    def over(self, max_other: float, max_load: float) -> list[PhaseLoad]:
        """The phases that broke the rule: other work above ``max_other`` of the CPU, or,
        where that was not measured, a 1-minute load average above ``max_load``."""
        return [
            p
            for p in self.phases
            if (p.other_cpu > max_other if p.other_cpu is not None else p.peak > max_load)
        ]


def load_check(log: LoadLog, max_other: float, max_load: float, allowed: bool = False) -> list[str]:
    """Markdown lines for the top of a report: the load rule and whether the run kept it
    (never empty: the rule is always stated); ``allowed``: a run that broke it is kept
    anyway (``--allow-loaded``), as a try-out."""
    if not log.phases:
        return [f"Load check: no phase measured (threshold {max_other:.0%} other work)."]
    peaks = [p.peak for p in log.phases]
    shares = [p.other_cpu for p in log.phases if p.other_cpu is not None]
    span = (
        "the 1-minute load average, the benchmark's own threads included, was "
        f"{min(peaks):.1f}-{max(peaks):.1f}"
    )
    measured = (
        f"other work took {max(shares):.1%} of the machine's CPU at most in a phase"
        if shares
        else "other work's CPU could not be measured (no /proc): the load average decides"
    )
    over = log.over(max_other, max_load)
    if not over:
        return [
            f"Load check: passed over {len(peaks)} phases (threshold {max_other:.0%} of the "
            f"CPU for other work): {measured}; {span}."
        ]
    worst = max(over, key=lambda p: p.other_cpu if p.other_cpu is not None else p.peak)
    then = (
        "Kept as a try-out (`--allow-loaded`)."
        if allowed
        else "Rerun on a quieter machine, or pass `--allow-loaded` to keep it as a try-out."
    )
    return [
        f"**Load check: FAILED, not for publishing.** {len(over)} of {len(peaks)} phases had "
        f"other work above {max_other:.0%} of the CPU (or, unmeasured, a load average above "
        f"{max_load:g}): {measured}, worst around {worst.phase}; {span}. {then}",
    ]


def _git(*cmd: str) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), *cmd], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def java_version() -> str:
    """The first line of ``java -version`` (the ``java`` Spark and Kafka start), or why not."""
    try:
        out = subprocess.run(
            ["java", "-version"], capture_output=True, text=True, check=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc})"
    lines = (out.stderr or out.stdout).strip().splitlines()
    return lines[0] if lines else "unknown"


def memory_gib() -> float:
    """The machine's physical memory in GiB."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (Linux), or the platform's processor."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def describe(kafka: str, argv: list[str]) -> dict[str, Any]:
    """The commit, versions and machine of this run, as JSON-ready values.

    ``kafka`` names the cluster (e.g. ``Apache Kafka 4.4.0 (1 node)``); ``argv`` is the
    command line after the script's name.
    """
    import confluent_kafka

    import pyspark_kafka_txn

    status = _git("status", "--porcelain")
    return {
        "command": [Path(sys.argv[0]).name, *argv],
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "commit": _git("rev-parse", "HEAD"),
        "dirty": status not in ("", "unknown"),
        "versions": {
            "pyspark_kafka_txn": pyspark_kafka_txn.__version__,
            "python": platform.python_version(),
            "pyspark": _version("pyspark"),
            "java": java_version(),
            "kafka": kafka,
            "confluent_kafka": _version("confluent-kafka"),
            "librdkafka": confluent_kafka.libversion()[0],
            "pyarrow": _version("pyarrow"),
        },
        "machine": {
            "cores": os.cpu_count(),
            "memory_gib": round(memory_gib(), 1),
            "cpu": cpu_model(),
            "platform": platform.platform(),
        },
    }


#: The versions :func:`describe` gives; :func:`header` adds any others a script put in.
_KNOWN = {
    "pyspark_kafka_txn",
    "python",
    "pyspark",
    "java",
    "kafka",
    "confluent_kafka",
    "librdkafka",
    "pyarrow",
}


def header(info: dict[str, Any]) -> list[str]:
    """Markdown lines naming the code, versions and machine of ``info`` (:func:`describe`)."""
    v, m = info["versions"], info["machine"]
    more = "".join(f"; {value}" for key, value in v.items() if key not in _KNOWN)
    commit = info["commit"][:12]
    if info["dirty"]:
        commit += " (work tree with uncommitted changes)"
    return [
        f"* Command: `{' '.join(info['command'])}`, {info['date']}; commit {commit}.",
        f"* Versions: pyspark-kafka-txn {v['pyspark_kafka_txn']}, Python {v['python']}, "
        f"PySpark {v['pyspark']}, Java: {v['java']}, {v['kafka']}, confluent-kafka "
        f"{v['confluent_kafka']} (librdkafka {v['librdkafka']}), pyarrow {v['pyarrow']}{more}.",
        f"* Machine: {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB memory, "
        f"{m['platform']}.",
    ]
