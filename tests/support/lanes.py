"""``make test``'s legs, in lanes that run at the same time.

``python -m tests.support.lanes --lane NAME=COMMAND [NAME=COMMAND ...] --lane ...`` runs each
lane's legs one after the other with ``bash -c`` (a lane stops at its first failed leg), all
lanes at once, each lane's output into a file of its own; once every lane has ended it
prints each lane's output whole, in the order given, then a table of every leg with its
exit status and time, and exits non-zero if any leg failed (naming it). With
``KAFKA_TXN_LEG_TIMES`` set to a file, the table is appended there too (``.ci/run`` prints
it at its very end).

Why: a leg keeps this 2-core machine only about 40 % busy (Spark, the brokers and the
tests wait on one another), so two legs side by side take little longer than the longer
one. Legs that start a local Spark Connect server (port 15002) must share a lane: the
Spark Connect leg and ``make spark-versions``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Leg:
    """One command of a lane."""

    name: str
    command: str


@dataclass(frozen=True)
class LegResult:
    """How a leg ended: its exit status (None: not run, an earlier leg failed), minutes."""

    lane: int
    leg: Leg
    code: int | None
    minutes: float


def parse_leg(text: str) -> Leg:
    """``NAME=COMMAND`` as a :class:`Leg`.

    Raises
    ------
    argparse.ArgumentTypeError
        If there is no ``=`` or the name is empty.
    """
    name, sep, command = text.partition("=")
    if not sep or not name.strip() or not command.strip():
        raise argparse.ArgumentTypeError(f"a leg is NAME=COMMAND, got {text!r}")
    return Leg(name.strip(), command)


def _lane_script(legs: list[Leg], times: Path) -> str:
    """A bash script running ``legs`` in order, each timed into ``times`` (one line each:
    index, exit status, milliseconds), stopping at the first failure."""
    lines = ["set -u"]
    for n, leg in enumerate(legs):
        lines.append(
            f"s=$(date +%s%N); bash -c {_quote(leg.command)}; c=$?; "
            f'echo "{n} $c $(( ($(date +%s%N) - s) / 1000000 ))" >> {_quote(str(times))}; '
            '[ "$c" = 0 ] || exit "$c"'
        )
    return "\n".join(lines)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def run_lanes(lanes: list[list[Leg]]) -> int:
    """Run ``lanes`` at once; print their outputs in order and a table of every leg.

    Returns
    -------
    int
        0 if every leg exited 0, else 1.
    """
    started = time.monotonic()
    results: list[LegResult] = []
    with tempfile.TemporaryDirectory(prefix="lanes-") as work:
        logs = [Path(work) / f"lane-{n}.log" for n in range(1, len(lanes) + 1)]
        times = [Path(work) / f"lane-{n}.times" for n in range(1, len(lanes) + 1)]
        procs = []
        for legs, log, timing in zip(lanes, logs, times, strict=True):
            timing.touch()
            with log.open("wb") as out:
                procs.append(
                    subprocess.Popen(
                        ["bash", "-c", _lane_script(legs, timing)],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    )
                )
        for proc in procs:
            proc.wait()
        for n, (legs, log, timing) in enumerate(zip(lanes, logs, times, strict=True), 1):
            ended = {
                int(i): (int(c), int(ms) / 60_000)
                for i, c, ms in (line.split() for line in timing.read_text().splitlines())
            }
            for i, leg in enumerate(legs):
                code, minutes = ended.get(i, (None, 0.0))
                results.append(LegResult(n, leg, code, minutes))
            names = ", ".join(leg.name for leg in legs)
            print(f"\n===== lane {n}: {names}", flush=True)
            sys.stdout.buffer.write(log.read_bytes())
            sys.stdout.flush()
    minutes = (time.monotonic() - started) / 60
    table = _table(results, minutes)
    print("\n" + table, flush=True)
    target = os.environ.get("KAFKA_TXN_LEG_TIMES")
    if target:
        with open(target, "a", encoding="utf-8") as out:
            out.write(table + "\n")
    return 1 if any(r.code != 0 for r in results) else 0


def _table(results: list[LegResult], minutes: float) -> str:
    rows = [f"{'lane':<5} {'leg':<28} {'exit':>5} {'minutes':>8}"]
    for r in results:
        code = "-" if r.code is None else str(r.code)
        rows.append(f"{r.lane:<5} {r.leg.name:<28} {code:>5} {r.minutes:>8.1f}")
    failed = [r.leg.name for r in results if r.code not in (0, None)]
    rows.append(f"lanes took {minutes:.1f} min; failed: {', '.join(failed) or 'none'}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Parse ``--lane NAME=COMMAND ...`` groups and run them."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.lanes")
    parser.add_argument("--lane", nargs="+", type=parse_leg, action="append", required=True)
    args = parser.parse_args(argv)
    return run_lanes(args.lane)


if __name__ == "__main__":
    sys.exit(main())
