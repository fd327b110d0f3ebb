"""What the benchmarks' ``--plot`` options share: matplotlib on Agg, the size, saving."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Inches: fits a documentation page at about 780 x 500 pixels.
FIGSIZE = (6.5, 4.2)
DPI = 120


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the Agg backend, imported only when a plot is drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Figure, path: str) -> None:
    """Lay ``fig`` out (unless it has a layout engine), write it to ``path`` and close it."""
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    pyplot().close(fig)
