"""How much of the machine's CPU work outside a benchmark took while it ran (Linux).

The load average cannot say it: it counts the benchmark's own runnable threads (Spark's,
the broker's, the producer's of an end-to-end run), so on 2 cores a latency phase reaches
a 1-minute load of 4 with nothing else running. What a reader of a benchmark needs to
know is whether *other* work competed for the CPU.

:class:`OtherWorkMeter` samples every process's CPU time a few times a second on a thread
of its own (``utime + stime`` of ``/proc/PID/stat``, and for the benchmark's processes
``cutime + cstime`` too: the children they reaped) and files each process under one of
three owners: the benchmark
(this process and every descendant, kept as the benchmark's even after it was orphaned),
the kernel's threads (which serve the benchmark's own loopback traffic too) and other
work. Other work over a phase is the sampled time of the processes filed under it (their
reaped children left out: a process of other work that ends would count twice, sampled
and in its parent's ``cutime``).

Why per process, and why not "busy time minus the benchmark's": Spark's Python daemon
ignores ``SIGCHLD``, so its workers are reaped by the kernel and their CPU time reaches no
parent's ``cutime``; a first version that summed the benchmark's live tree lost them and
charged them to other work (up to 119 % of the CPU on an idle machine). Sampled per
process they are counted, but a benchmark process that ends can then be counted twice
(sampled, and in its parent's ``cutime``), so the difference between the machine's busy
time (``/proc/stat``) and the owners' sampled time is reported, not used: it is what
sampling missed or counted twice. A process of other work that lives less than one
interval may be missed; one that lives longer is counted from its first sample.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

#: Clock ticks per second of ``/proc``'s CPU times.
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

#: A process across samples: its PID and its start time (a reused PID is another process).
_Key = tuple[int, int]

#: Owners of a process's CPU time.
OWN, KERNEL, OTHER = "own", "kernel", "other"


@dataclass(frozen=True)
class CpuShare:
    """The CPU one phase used, in seconds, and the share of the machine's capacity that
    work outside the benchmark took.

    Attributes
    ----------
    seconds : float
        The phase's wall-clock length.
    busy_s : float
        The machine's busy CPU seconds (all cores) over the phase.
    own_s : float
        The benchmark's processes' CPU seconds, sampled.
    kernel_s : float
        The kernel threads' CPU seconds, sampled.
    other_s : float
        The other processes' CPU seconds, sampled.
    unexplained_s : float
        ``busy_s`` minus the three above: what sampling missed (above 0) or counted twice
        (below 0).
    other_share : float
        ``other_s`` over the capacity of every core for the phase (0 to 1).
    """

    seconds: float
    busy_s: float
    own_s: float
    kernel_s: float
    other_s: float
    unexplained_s: float
    other_share: float

    @property
    def unexplained_share(self) -> float:
        """``unexplained_s`` over the capacity of every core for the phase."""
        return self.unexplained_s / _capacity(self.seconds)


def _busy_s() -> float:
    """Busy CPU seconds of every core since boot: user, nice, system and steal (interrupt
    time is left out: on a loopback benchmark it serves the benchmark's own traffic)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, _irq, _softirq, steal = fields
    return (user + nice + system + steal) / _TICK


def _scan() -> dict[_Key, tuple[int, float, float]]:
    """Every process now: key -> (parent PID, its CPU seconds so far, those of the children
    it reaped)."""
    found: dict[_Key, tuple[int, float, float]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # ended since the listing
        rest = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        # rest[1] = ppid, rest[11:15] = utime, stime, cutime, cstime; rest[19] = starttime
        found[(int(entry.name), int(rest[19]))] = (
            int(rest[1]),
            (int(rest[11]) + int(rest[12])) / _TICK,
            (int(rest[13]) + int(rest[14])) / _TICK,
        )
    return found


class OtherWorkMeter:
    """Samples every process's CPU time every ``interval`` seconds while running, and
    tells, per phase, how much of the CPU work outside the benchmark took.

    Parameters
    ----------
    root : int
        The benchmark's process: it and its descendants are the benchmark's.
    interval : float
        Seconds between samples (each costs a few milliseconds of one core).
    """

    def __init__(self, root: int | None = None, interval: float = 0.5) -> None:
        self._root = os.getpid() if root is None else root
        self._interval = interval
        self._owner: dict[_Key, str] = {}
        self._last: dict[_Key, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        """Take one sample: file new processes under their owner, note everyone's time."""
        procs = _scan()
        pid_key = {key[0]: key for key in procs}
        with self._lock:
            for key, (ppid, cpu_s, reaped_s) in procs.items():
                if key not in self._owner:
                    self._owner[key] = self._classify(key, ppid, procs, pid_key)
                # The benchmark's processes count the children they reaped (the JVM's
                # short-lived helpers); others do not, or a process of other work that
                # ends would count twice (sampled, then in its parent's cutime).
                self._last[key] = cpu_s + (reaped_s if self._owner[key] == OWN else 0.0)

    def _classify(
        self,
        key: _Key,
        ppid: int,
        procs: dict[_Key, tuple[int, float, float]],
        pid_key: dict[int, _Key],
    ) -> str:
        """The owner of a process first seen now: the benchmark's if it is the root or
        descends from it or from a process already filed as the benchmark's."""
        pid = key[0]
        if pid == 2 or ppid == 2:
            return KERNEL
        seen: set[int] = set()
        while pid > 1 and pid not in seen:
            seen.add(pid)
            if pid == self._root or self._owner.get(pid_key.get(pid, (0, 0))) == OWN:
                return OWN
            parent = pid_key.get(pid)
            pid = procs[parent][0] if parent is not None else 0
        return OTHER

    def totals(self) -> tuple[float, dict[str, float]]:
        """Take a sample; the machine's busy seconds, and each owner's sampled seconds."""
        self.sample()
        busy = _busy_s()
        sums = {OWN: 0.0, KERNEL: 0.0, OTHER: 0.0}
        with self._lock:
            for key, cpu_s in self._last.items():
                sums[self._owner[key]] += cpu_s
        return busy, sums

    def start(self) -> OtherWorkMeter:
        """Start sampling on a daemon thread."""
        self.sample()
        self._thread = threading.Thread(target=self._run, name="cpu-meter", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.sample()
            except (OSError, ValueError, IndexError):
                continue

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def share(
    before: tuple[float, dict[str, float]],
    after: tuple[float, dict[str, float]],
    seconds: float,
) -> CpuShare:
    """The phase between two :meth:`OtherWorkMeter.totals`, ``seconds`` long.

    A process that started during the phase counts from 0; one that ended keeps the time
    of its last sample."""
    busy = after[0] - before[0]
    own, kernel, other = (after[1][k] - before[1][k] for k in (OWN, KERNEL, OTHER))
    return CpuShare(
        seconds,
        busy,
        own,
        kernel,
        other,
        busy - own - kernel - other,
        min(1.0, other / _capacity(seconds)),
    )


def _capacity(seconds: float) -> float:
    """CPU seconds every core together offers in ``seconds``."""
    return (os.cpu_count() or 1) * max(seconds, 1e-9)


def available() -> bool:
    """Whether this machine has the ``/proc`` the meter reads."""
    try:
        _busy_s()
        return bool(_scan())
    except (OSError, ValueError, IndexError):
        return False
