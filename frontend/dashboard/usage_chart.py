"""One usage figure per day (or per agent) → the geometry of a bar chart.

Pure: no Django, no I/O; the template only draws what this computes, as inline SVG
(like the latency waterfall). The ``viewBox`` is ``WIDTH`` units wide and scales to its
container; labels are thinned out so that they never overlap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from frontend.dashboard.waterfall import tick_step

WIDTH = 720.0
HEIGHT = 240.0
LEFT = 56.0  # room for the value axis
RIGHT = 8.0
TOP = 12.0
BOTTOM = 36.0  # room for the labels
GAP = 0.25  # share of a slot left empty between bars
LABEL_MIN_UNITS = 64.0  # a label needs this much width
LABEL_MAX_CHARS = 12


@dataclass(frozen=True)
class Column:
    label: str
    title: str  # the whole label, for the tooltip and screen readers
    value: float
    figure: str
    x: float
    width: float
    y: float
    height: float
    show_label: bool

    @property
    def label_x(self) -> float:
        return self.x + self.width / 2

    @property
    def short_label(self) -> str:
        label = self.label
        return label if len(label) <= LABEL_MAX_CHARS else label[: LABEL_MAX_CHARS - 1] + "…"


@dataclass(frozen=True)
class Tick:
    y: float
    label: str


@dataclass(frozen=True)
class BarChart:
    title: str
    columns: list[Column]
    ticks: list[Tick]
    width: float = WIDTH
    height: float = HEIGHT
    left: float = LEFT
    right_x: float = WIDTH - RIGHT
    baseline_y: float = HEIGHT - BOTTOM

    @property
    def label_y(self) -> float:
        return self.baseline_y + 16

    @property
    def tick_label_x(self) -> float:
        return self.left - 6

    @property
    def aria_label(self) -> str:
        shown = "; ".join(f"{c.title}: {c.figure}" for c in self.columns if c.value)
        return f"{self.title}: {shown or 'nothing in this range'}"


def format_figure(value: float) -> str:
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:,.1f}"


def bar_chart(
    points: list[tuple[str, float]], *, title: str, titles: list[str] | None = None
) -> BarChart:
    """Bars for ``points`` (label, value ≥ 0), on an axis from 0 to a round maximum;
    ``titles``: the points' whole names, where the labels are shortened."""
    plot_height = HEIGHT - TOP - BOTTOM
    highest = max((value for _, value in points), default=0.0)
    step = tick_step(highest, 4) if highest > 0 else 1.0
    top = max(step, math.ceil(highest / step) * step)
    slot = (WIDTH - LEFT - RIGHT) / max(1, len(points))
    every = max(1, math.ceil(LABEL_MIN_UNITS / slot))
    baseline = HEIGHT - BOTTOM
    columns = []
    for index, (label, value) in enumerate(points):
        height = plot_height * value / top
        columns.append(
            Column(
                label=label,
                title=titles[index] if titles else label,
                value=value,
                figure=format_figure(value),
                x=round(LEFT + index * slot + slot * GAP / 2, 2),
                width=round(slot * (1 - GAP), 2),
                y=round(baseline - height, 2),
                height=round(height, 2),
                show_label=index % every == 0,
            )
        )
    intervals = round(top / step)
    ticks = [
        Tick(y=round(baseline - plot_height * i / intervals, 2), label=format_figure(i * step))
        for i in range(intervals + 1)
    ]
    return BarChart(title=title, columns=columns, ticks=ticks)
