"""The chart of ``bench/compare.py``'s side-by-side run (``--plot``, or ``--plot-from`` a
raw report written before).

Two panels, medians over the rounds:

* end-to-end latency: p50, p95 and p99 of ``format("kafka")`` (at least once) and of
  ``kafka_txn`` (exactly once, default options) at each input rate, each ``kafka_txn`` bar
  labelled with its ratio to the built-in's (the median of the per-round ratios, as the
  report's headline table);
* throughput: ``kafka_txn`` ÷ the built-in for each read and for the exactly-once writer
  (records/s; above 1 is faster), with the line at 1.

Usage::

    .venv/bin/python bench/compare_plot.py bench-compare.json docs/img/compare.png
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from _plot import pyplot, save
from compare import (
    BUILTIN,
    BUILTIN_WRITER,
    EXACTLY_ONCE,
    PERCENTILES,
    TXN,
    Measure,
    _cases,
    _per_round,
    _ratios,
)


def _median_ratio(rounds: dict[int, dict[str, Measure]], num: str, den: str, key: Any) -> float:
    values = _ratios(rounds, num, den, key)
    return statistics.median(values) if values else float("nan")


def plot(found: list[Measure], path: str) -> None:
    """Draw the two panels of ``found`` (``compare.py``'s measures) into ``path`` (PNG)."""
    plt = pyplot()
    fig, (lat, thr) = plt.subplots(
        1, 2, figsize=(11, 4.4), gridspec_kw={"width_ratios": [3, 2]}, layout="constrained"
    )
    width = 0.38
    ticks: list[str] = []
    where: list[float] = []
    groups: list[tuple[float, str]] = []
    x = 0.0
    for case in _cases(found, "latency"):
        rounds = _per_round(found, "latency", case)
        start = x
        for q in PERCENTILES:
            values = {
                who: statistics.median([by[who].extra[q] for by in rounds.values() if who in by])
                for who in (BUILTIN_WRITER, EXACTLY_ONCE)
                if any(who in by for by in rounds.values())
            }
            if len(values) < 2:
                continue
            lat.bar(x - width / 2, values[BUILTIN_WRITER], width, color="#9aa5b1")
            bar = lat.bar(x + width / 2, values[EXACTLY_ONCE], width, color="#2f6db5")
            ratio = _median_ratio(rounds, EXACTLY_ONCE, BUILTIN_WRITER, lambda m, q=q: m.extra[q])
            lat.bar_label(bar, [f"{ratio:.1f}x"], fontsize=8, padding=2)
            ticks.append(q)
            where.append(x)
            x += 1
        groups.append(((start + x - 1) / 2, case))
        x += 0.5  # a gap between the rates
    lat.set_xticks(where, ticks, fontsize=8)
    for centre, case in groups:
        lat.annotate(
            case,
            (centre, 0),
            xycoords=("data", "axes fraction"),
            xytext=(0, -24),
            textcoords="offset points",
            ha="center",
            fontsize=8,
        )
    lat.margins(y=0.15)
    lat.set_ylabel("end-to-end latency, ms (median of the rounds)")
    lat.set_title("Kafka -> Spark -> Kafka latency (label: kafka_txn / built-in)", fontsize=10)
    lat.legend(
        [plt.Rectangle((0, 0), 1, 1, color=c) for c in ("#9aa5b1", "#2f6db5")],
        ['format("kafka"), at least once', "kafka_txn, exactly once"],
        fontsize=8,
        loc="upper left",
        frameon=False,
    )

    labels: list[str] = []
    ratios: list[float] = []
    for case in _cases(found, "reader"):
        rounds = _per_round(found, "reader", case)
        labels.append(f"read {case}")
        ratios.append(_median_ratio(rounds, TXN, BUILTIN, lambda m: m.records / m.wall_s))
    for case in _cases(found, "writer"):
        rounds = _per_round(found, "writer", case)
        labels.append(f"write {case}, exactly once")
        ratios.append(
            _median_ratio(rounds, EXACTLY_ONCE, BUILTIN_WRITER, lambda m: m.records / m.wall_s)
        )
    bars = thr.barh(range(len(labels)), ratios, color="#2f6db5")
    thr.bar_label(bars, [f"{r:.2f}x" for r in ratios], fontsize=8, padding=2)
    thr.axvline(1.0, color="black", linewidth=0.8)
    thr.set_yticks(range(len(labels)), labels, fontsize=8)
    thr.invert_yaxis()
    thr.set_xlabel("kafka_txn ÷ built-in, records/s (median)")
    thr.margins(x=0.15)
    thr.set_title('Throughput against format("kafka")', fontsize=10)
    save(fig, path)


def load(raw: Path) -> list[Measure]:
    """The measures of a raw report (``bench-compare.json``)."""
    return [Measure(**m) for m in json.loads(raw.read_text())["measures"]]


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: compare_plot.py RAW_REPORT.json OUT.png")
    plot(load(Path(sys.argv[1])), sys.argv[2])
