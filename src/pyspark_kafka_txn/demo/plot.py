"""``kafka-txn demo --plot FILE.png``: rows and latency per micro-batch, with the faults."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

INSTALL_HINT = (
    "--plot needs matplotlib: pip install matplotlib, or install the package with its "
    "'plot' extra (pip install '.[plot]' in the clone; see the Install page)"
)


@dataclass(frozen=True, slots=True)
class BatchPoint:
    """One micro-batch as its progress event reported it."""

    at_s: float  # when it ended, seconds since the input producer started
    run: int  # 1 before the driver was killed, 2 after the restart
    batch: int
    rows: int
    trigger_ms: int


def check_available() -> None:
    """Raise :class:`SystemExit` with an install hint if matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit(INSTALL_HINT) from None


def draw(
    path: Path,
    batches: Sequence[BatchPoint],
    latencies: Sequence[tuple[float, float]],
    events: Sequence[tuple[float, str]],
) -> None:
    """Write the PNG.

    Parameters
    ----------
    batches
        The micro-batches of both runs.
    latencies
        (seconds since the input producer started, seconds from the input commit to
        visible in the output) per output record.
    events
        (seconds since the input producer started, label): the faults and the restart.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (rows_ax, lat_ax) = plt.subplots(2, 1, sharex=True, figsize=(10, 6.5))
    for run, colour in ((1, "tab:blue"), (2, "tab:green")):
        mine = [b for b in batches if b.run == run]
        rows_ax.bar(
            [b.at_s for b in mine],
            [b.rows for b in mine],
            width=0.4,
            color=colour,
            label=f"run {run}" + (" (restarted from its checkpoint)" if run == 2 else ""),
        )
    rows_ax.set_ylabel("input rows per micro-batch")
    rows_ax.legend(loc="upper right")
    lat_ax.scatter(
        [t for t, _ in latencies],
        [lat for _, lat in latencies],
        s=4,
        alpha=0.4,
        color="tab:purple",
        label="input commit → visible in the output (read_committed), per record",
    )
    lat_ax.plot(
        [b.at_s for b in batches],
        [b.trigger_ms / 1000 for b in batches],
        "o",
        markersize=3,
        color="tab:orange",
        label="micro-batch duration (triggerExecution)",
    )
    lat_ax.set_yscale("log")  # the restart's catch-up would flatten the steady state
    lat_ax.set_ylabel("seconds (log scale)")
    lat_ax.set_xlabel("seconds since the input producer started")
    lat_ax.legend(loc="upper right")
    for ax in (rows_ax, lat_ax):
        for at, _label in events:
            ax.axvline(at, color="tab:red", linestyle="--", linewidth=1)
    for n, (at, label) in enumerate(events):  # staggered: events may be close together
        rows_ax.annotate(
            f" {label}",
            (at, 0.95 - 0.09 * (n % 5)),
            xycoords=("data", "axes fraction"),
            va="top",
            ha="left",
            fontsize=8,
            color="tab:red",
        )
    fig.suptitle("kafka_txn demo: Kafka → Spark → Kafka, exactly once")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
