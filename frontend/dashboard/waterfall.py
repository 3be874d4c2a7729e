"""One turn's latency figures (its ``metrics`` event) → the geometry of a waterfall chart.

Pure: no Django, no I/O; the template only draws what this computes. One row per stage,
a label line above its bar, every bar on one millisecond axis that starts at the user's
last word (or the typed text's arrival). The SVG's ``viewBox`` is ``WIDTH`` units wide and
scales to its container, so the units are sized to stay legible on a 390 px phone.

Turns recorded before the event carried a ``timeline`` are laid out from their durations
(stage after stage); such a chart is marked ``estimated``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

WIDTH = 360.0
PAD_X = 6.0
TOP = 4.0
ROW_HEIGHT = 36.0
LABEL_BASELINE = 13.0  # from the row's top
BAR_TOP = 18.0  # from the row's top
BAR_HEIGHT = 11.0
AXIS_HEIGHT = 28.0
MAX_TICK_INTERVALS = 4
LABEL_MAX_CHARS = 32

KIND_COLOURS = {
    "stt": "#0e7490",
    "llm": "#5046e5",
    "tool": "#b45309",
    "tts": "#15803d",
    "audio": "#c8243a",
    "turn": "#94a3b8",
    "other": "#64748b",
}
_STAGES = {
    "end_of_utterance": ("End of utterance", "stt"),
    "stt_final": ("STT final transcript", "stt"),
    "llm_first_token": ("LLM first token", "llm"),
    "tts_first_byte": ("TTS first byte", "tts"),
    "first_audio": ("First audio sent", "audio"),
    "turn": ("Whole turn", "turn"),
}
_TOOL_PREFIX = "tool:"


@dataclass(frozen=True)
class Bar:
    """One stage's row. ``x``/``width`` are viewBox units; a marker has no width."""

    stage: str
    label: str  # may be cut short; ``title`` has it whole
    title: str
    kind: str
    colour: str
    start_ms: float
    end_ms: float
    x: float
    width: float
    y: float  # top of the row
    marker: bool

    @property
    def duration_ms(self) -> float:
        return self.end_ms - self.start_ms

    @property
    def figure(self) -> str:
        return f"at {format_ms(self.start_ms)}" if self.marker else format_ms(self.duration_ms)

    @property
    def start_figure(self) -> str:
        return format_ms(self.start_ms)

    @property
    def label_y(self) -> float:
        return self.y + LABEL_BASELINE

    @property
    def bar_y(self) -> float:
        return self.y + BAR_TOP

    @property
    def bar_middle_y(self) -> float:
        return self.y + BAR_TOP + BAR_HEIGHT / 2

    @property
    def bar_bottom_y(self) -> float:
        return self.y + BAR_TOP + BAR_HEIGHT

    @property
    def drawn_width(self) -> float:
        # A 0.2 ms stage still shows as a sliver; its figure says how long it really was.
        return max(self.width, 1.5)


@dataclass(frozen=True)
class Tick:
    x: float
    label: str
    anchor: str  # SVG text-anchor, so the first and last labels stay inside the chart


@dataclass(frozen=True)
class Waterfall:
    bars: list[Bar]
    ticks: list[Tick]
    axis_y: float
    height: float
    aria_label: str
    estimated: bool
    width: float = WIDTH
    bar_height: float = BAR_HEIGHT
    label_x: float = PAD_X
    figure_x: float = WIDTH - PAD_X

    @property
    def tick_end_y(self) -> float:
        return self.axis_y + 4

    @property
    def tick_label_y(self) -> float:
        return self.axis_y + 18


def format_ms(ms: float) -> str:
    if abs(ms) < 1000:
        return f"{round(ms):d} ms"
    seconds = f"{ms / 1000:.2f}".rstrip("0").rstrip(".")
    return f"{seconds} s"


def waterfall_for(metrics: dict[str, Any], *, turn_id: int | None = None) -> Waterfall | None:
    """The chart of one turn; None when it has no figure to draw."""
    timeline = _valid_timeline(metrics.get("timeline"))
    estimated = timeline is None
    if timeline is None:
        timeline = timeline_from_durations(metrics)
    if not timeline:
        return None
    return layout(timeline, turn_id=turn_id, estimated=estimated)


def timeline_from_durations(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """A timeline for a turn recorded before timelines were: each stage after the last.

    Only first audio is known on the turn's clock; the TTS request is put just before it.
    """
    entries: list[dict[str, Any]] = []
    cursor = 0.0

    def add(stage: str, start: float, ms: float) -> None:
        nonlocal cursor
        entries.append({"stage": stage, "startMs": start, "endMs": start + ms})
        cursor = start + ms

    for stage, key in (("end_of_utterance", "endOfUtteranceMs"), ("stt_final", "sttFinalMs")):
        if (ms := _duration(metrics.get(key))) is not None:
            add(stage, cursor, ms)
    speech_ms = cursor  # the user's last word → the final transcript
    tools = metrics.get("tools")
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict) and (ms := _duration(tool.get("ms"))) is not None:
            add(f"{_TOOL_PREFIX}{tool.get('name', '?')}", cursor, ms)
    if (ms := _duration(metrics.get("llmFirstTokenMs"))) is not None:
        add("llm_first_token", cursor, ms)
    first_audio = _duration(metrics.get("firstAudioMs"))
    if (ms := _duration(metrics.get("ttsFirstByteMs"))) is not None:
        start = cursor if first_audio is None else max(cursor, first_audio - ms)
        add("tts_first_byte", start, ms)
    if first_audio is not None:
        entries.append({"stage": "first_audio", "startMs": first_audio, "endMs": first_audio})
    if (turn_ms := _duration(metrics.get("turnMs"))) is not None:
        # Records from before timelines counted turnMs from the final transcript (since
        # then it counts from the user's last word, like firstAudioMs).
        entries.append({"stage": "turn", "startMs": 0.0, "endMs": speech_ms + turn_ms})
    return entries


def layout(
    timeline: list[dict[str, Any]], *, turn_id: int | None = None, estimated: bool = False
) -> Waterfall:
    """Rows in the timeline's order, on an axis from 0 (or the earliest start) to a round
    figure past the latest end."""
    lowest: float = min(0.0, *(entry["startMs"] for entry in timeline))
    highest: float = max(entry["endMs"] for entry in timeline)
    step = tick_step(highest - lowest)
    domain_start = math.floor(lowest / step) * step
    domain_end = max(math.ceil(highest / step) * step, domain_start + step)
    plot_width = WIDTH - 2 * PAD_X

    def x_of(ms: float) -> float:
        return PAD_X + (ms - domain_start) / (domain_end - domain_start) * plot_width

    bars = []
    for row, entry in enumerate(timeline):
        label, kind = stage_label(entry["stage"])
        start, end = entry["startMs"], entry["endMs"]
        bars.append(
            Bar(
                stage=entry["stage"],
                label=_shortened(label),
                title=label,
                kind=kind,
                colour=KIND_COLOURS[kind],
                start_ms=start,
                end_ms=end,
                x=round(x_of(start), 2),
                width=round(x_of(end) - x_of(start), 2),
                y=TOP + row * ROW_HEIGHT,
                marker=kind == "audio",
            )
        )
    axis_y = TOP + len(bars) * ROW_HEIGHT
    count = round((domain_end - domain_start) / step)
    ticks = [
        Tick(
            x=round(x_of(domain_start + i * step), 2),
            label=_tick_label(domain_start + i * step),
            anchor="start" if i == 0 else "end" if i == count else "middle",
        )
        for i in range(count + 1)
    ]
    return Waterfall(
        bars=bars,
        ticks=ticks,
        axis_y=axis_y,
        height=axis_y + AXIS_HEIGHT,
        aria_label=_aria_label(bars, turn_id, estimated),
        estimated=estimated,
    )


def stage_label(stage: str) -> tuple[str, str]:
    """(human label, kind) of a timeline stage."""
    if stage.startswith(_TOOL_PREFIX):
        return f"Tool {stage[len(_TOOL_PREFIX) :]}", "tool"
    return _STAGES.get(stage, (stage.replace("_", " ").capitalize(), "other"))


def _valid_timeline(value: Any) -> list[dict[str, Any]] | None:
    """The entries that can be drawn; None when the turn has no timeline at all."""
    if not isinstance(value, list):
        return None
    entries = []
    for entry in value:
        if not isinstance(entry, dict) or not isinstance(entry.get("stage"), str):
            continue
        start, end = _number(entry.get("startMs")), _number(entry.get("endMs"))
        if start is not None and end is not None and end >= start:
            entries.append({"stage": entry["stage"], "startMs": start, "endMs": end})
    return entries


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _duration(value: Any) -> float | None:
    number = _number(value)
    return number if number is not None and number >= 0 else None


def tick_step(span: float, intervals: int = MAX_TICK_INTERVALS) -> float:
    """A round step (1, 2, 2.5, 4 or 5 × 10ⁿ) giving at most ``intervals`` intervals."""
    raw = max(span, 1.0) / intervals
    magnitude: float = 10 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 2.5, 4, 5, 10) if m * magnitude >= raw)


def _tick_label(ms: float) -> str:
    if ms == 0:
        return "0"
    if abs(ms) < 1000:
        return f"{ms:g} ms"
    return f"{ms / 1000:g} s"


def _shortened(label: str) -> str:
    return label if len(label) <= LABEL_MAX_CHARS else label[: LABEL_MAX_CHARS - 1] + "…"


def _aria_label(bars: list[Bar], turn_id: int | None, estimated: bool) -> str:
    turn = f" of turn {turn_id}" if turn_id is not None else ""
    stages = "; ".join(f"{bar.title} {bar.figure}" for bar in bars)
    note = " (positions estimated from durations)" if estimated else ""
    return f"Latency waterfall{turn}{note}: {stages}"
