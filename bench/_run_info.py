"""What a benchmark ran on, and the machine's load around each of its phases.

:func:`describe` gathers the commit of the code (and whether the work tree had changes),
the versions of everything measured and the machine; :class:`LoadLog` reads the load
average (:func:`os.getloadavg`: 1, 5 and 15 minutes) before and after each phase and the
CPU time other work took during it, and :func:`load_check` says whether a run may be
published: in no phase did work outside the benchmark take more than a share of the
machine's CPU.

Why not the load average alone: it counts the benchmark's own runnable threads too (Spark,
the broker, the producer of the end-to-end runs), so on 2 cores a latency phase reaches a
1-minute load of 4 with nothing else running. What a reader needs to know is whether
*other* work competed for the CPU: the machine's busy CPU time (``/proc/stat``) minus the
CPU time of the benchmark's own process tree (itself, every descendant — Spark's JVM and
Python workers, the broker — and the children they reaped), over the phase.
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

#: Clock ticks per second of ``/proc``'s CPU times.
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class CpuSample:
    """CPU seconds used so far: by the whole machine, and by the benchmark's process tree."""

    busy_s: float
    own_s: float


def _machine_busy_s() -> float:
    """Busy CPU seconds of every core since boot (``/proc/stat``: everything but idle and
    I/O wait; steal counts, as the hypervisor gave that time to others)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / _TICK


def _tree_s(root: int) -> float:
    """CPU seconds of ``root`` and every descendant alive now, each with the CPU time of
    the children it reaped (``utime + stime + cutime + cstime`` of ``/proc/PID/stat``).

    A descendant that ends between two samples still counts once: its time moves into its
    parent's ``cutime`` when the parent reaps it."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # gone since the listing
        rest = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        pid = int(entry.name)
        parents[pid] = int(rest[1])
        times[pid] = sum(int(x) for x in rest[11:15]) / _TICK
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0.0)
        todo += children.get(pid, [])
    return total


def cpu_sample() -> CpuSample | None:
    """The machine's and this process tree's CPU seconds so far; ``None`` without
    ``/proc`` (not Linux)."""
    try:
        return CpuSample(_machine_busy_s(), _tree_s(os.getpid()))
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class PhaseLoad:
    """The load around one phase (a contender's run in a round): the load average before
    and after it, and the share of the machine's CPU that work outside the benchmark took
    during it (``None`` where ``/proc`` cannot tell)."""

    phase: str
    before: Load
    after: Load
    seconds: float
    other_cpu: float | None = None

    @property
    def peak(self) -> float:
        """The higher 1-minute load average of the two readings."""
        return max(self.before[0], self.after[0])


def other_share(before: CpuSample | None, after: CpuSample | None, seconds: float) -> float | None:
    """The share (0 to 1) of the machine's CPU capacity over ``seconds`` that processes
    outside the benchmark's tree used between the two samples."""
    if before is None or after is None or seconds <= 0:
        return None
    other = (after.busy_s - before.busy_s) - (after.own_s - before.own_s)
    return max(0.0, other) / ((os.cpu_count() or 1) * seconds)


@dataclass
class LoadLog:
    """The load around every phase of a run, in the order they ran."""

    phases: list[PhaseLoad] = field(default_factory=list)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Measure the load around the ``with`` block (phase ``name``)."""
        before, cpu = os.getloadavg(), cpu_sample()
        started = time.monotonic()
        try:
            yield
        finally:
            seconds = time.monotonic() - started
            share = other_share(cpu, cpu_sample(), seconds)
            self.phases.append(PhaseLoad(name, before, os.getloadavg(), seconds, share))

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
