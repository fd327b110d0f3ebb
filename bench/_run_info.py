"""What a benchmark ran on, and the machine's load around each of its phases.

:func:`describe` gathers the commit of the code (and whether the work tree had changes),
the versions of everything measured and the machine; :class:`LoadLog` reads the load
average (:func:`os.getloadavg`: 1, 5 and 15 minutes) before and after each phase, and
:func:`load_check` says whether a run may be published: no phase's 1-minute load average,
before or after it, above a threshold.
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


@dataclass(frozen=True)
class PhaseLoad:
    """The load average before and after one phase (a contender's run in a round)."""

    phase: str
    before: Load
    after: Load
    seconds: float

    @property
    def peak(self) -> float:
        """The higher 1-minute load average of the two readings."""
        return max(self.before[0], self.after[0])


@dataclass
class LoadLog:
    """The load average around every phase of a run, in the order they ran."""

    phases: list[PhaseLoad] = field(default_factory=list)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Read the load average before and after the ``with`` block (phase ``name``)."""
        before = os.getloadavg()
        started = time.monotonic()
        try:
            yield
        finally:
            self.phases.append(PhaseLoad(name, before, os.getloadavg(), time.monotonic() - started))

    def over(self, limit: float) -> list[PhaseLoad]:
        """The phases whose 1-minute load average before or after was above ``limit``."""
        return [p for p in self.phases if p.peak > limit]


def load_check(log: LoadLog, limit: float, allowed: bool = False) -> list[str]:
    """Markdown lines for the top of a report: the load rule and whether the run kept it
    (never empty: the rule is always stated); ``allowed``: a run that broke it is kept
    anyway (``--allow-loaded``), as a try-out."""
    if not log.phases:
        return [f"Load check: no phase measured (threshold {limit:g})."]
    peaks = [p.peak for p in log.phases]
    over = log.over(limit)
    span = f"1-minute load average {min(peaks):.1f}-{max(peaks):.1f}"
    if not over:
        return [
            f"Load check: passed; every phase's 1-minute load average before and after it "
            f"was at most {limit:g} ({span} over {len(peaks)} phases)."
        ]
    worst = max(over, key=lambda p: p.peak)
    then = (
        "Kept as a try-out (`--allow-loaded`)."
        if allowed
        else "Rerun on a quieter machine, or pass `--allow-loaded` to keep it as a try-out."
    )
    return [
        f"**Load check: FAILED, not for publishing.** {len(over)} of {len(peaks)} phases had "
        f"a 1-minute load average above {limit:g} before or after them ({span}; highest "
        f"{worst.peak:.1f}, around {worst.phase}). {then}",
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
