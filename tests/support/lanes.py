"""``make test``'s later legs, in lanes that run at the same time.

``python -m tests.support.lanes "COMMAND && COMMAND" "COMMAND"`` runs each argument with
``bash -c`` as one lane, all lanes at once, each lane's output into a file of its own;
once every lane has ended it prints each lane's output whole, in the order given, and
exits non-zero if any lane failed (naming it).

Why: a leg keeps this 2-core machine only about 40 % busy (Spark, the brokers and the
tests wait on one another), so two legs side by side take little longer than the longer
one. Legs that start a local Spark Connect server (port 15002) must share a lane: the
Spark Connect leg and ``make spark-versions``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_lanes(commands: list[str]) -> int:
    """Run ``commands`` as lanes at once; print their outputs in order; the exit status.

    Parameters
    ----------
    commands
        One shell command line per lane.

    Returns
    -------
    int
        0 if every lane exited 0, else 1.
    """
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lanes-") as work:
        logs = [Path(work) / f"lane-{n}.log" for n in range(1, len(commands) + 1)]
        procs = []
        for command, log in zip(commands, logs, strict=True):
            with log.open("wb") as out:
                procs.append(
                    subprocess.Popen(["bash", "-c", command], stdout=out, stderr=subprocess.STDOUT)
                )
        codes = [proc.wait() for proc in procs]
        minutes = (time.monotonic() - started) / 60
        for n, (command, log, code) in enumerate(zip(commands, logs, codes, strict=True), 1):
            print(f"\n===== lane {n} (exit {code}): {command}", flush=True)
            sys.stdout.buffer.write(log.read_bytes())
            sys.stdout.flush()
    failed = [n for n, code in enumerate(codes, 1) if code != 0]
    print(f"\n===== {len(commands)} lanes in {minutes:.1f} min; failed: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run_lanes(sys.argv[1:]))
