"""The figure helpers every plot of a report uses: a Plot (a PNG or why there is none), a grid
figure, its PNG bytes, integer ticks."""
from __future__ import annotations

import io
from dataclasses import dataclass

from matplotlib.figure import Figure


@dataclass
class Plot:
    key: str  # file name part, e.g. "rewards" -> report-rewards.png
    title: str
    png: bytes | None
    note: str = ""  # why there is no plot, or a caveat


def _figure(cols: int = 1, width: float = 7.5) -> tuple[Figure, list]:
    fig = Figure(figsize=(width, 3.6), dpi=100)
    axes = [fig.add_subplot(1, cols, i + 1) for i in range(cols)]
    for ax in axes:
        ax.grid(True, alpha=0.3)
    return fig, axes


def _png(fig: Figure) -> bytes:
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _int_ticks(ax) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
