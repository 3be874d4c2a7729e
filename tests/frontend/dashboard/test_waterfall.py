"""Per-turn metrics → waterfall geometry: rows in order, bars to scale, the old-record path."""

from __future__ import annotations

import pytest

from frontend.dashboard.waterfall import (
    KIND_COLOURS,
    PAD_X,
    WIDTH,
    format_ms,
    layout,
    timeline_from_durations,
    waterfall_for,
)

SPOKEN = {
    "turnId": 3,
    "endOfUtteranceMs": 200.0,
    "sttFinalMs": 100.0,
    "llmFirstTokenMs": 150.0,
    "ttsFirstByteMs": 50.0,
    "firstAudioMs": 720.0,
    "turnMs": 1300.0,
    "tools": [{"name": "lookup", "status": "completed", "ms": 120.0}],
    "timeline": [
        {"stage": "end_of_utterance", "startMs": 0.0, "endMs": 200.0},
        {"stage": "stt_final", "startMs": 200.0, "endMs": 300.0},
        {"stage": "tool:lookup", "startMs": 350.0, "endMs": 470.0},
        {"stage": "llm_first_token", "startMs": 480.0, "endMs": 630.0},
        {"stage": "tts_first_byte", "startMs": 660.0, "endMs": 710.0},
        {"stage": "first_audio", "startMs": 720.0, "endMs": 720.0},
        {"stage": "turn", "startMs": 0.0, "endMs": 1600.0},
    ],
}


def test_rows_follow_the_timeline_and_bars_sit_on_one_axis() -> None:
    chart = waterfall_for(SPOKEN, turn_id=3)
    assert chart is not None and not chart.estimated
    assert [bar.stage for bar in chart.bars] == [e["stage"] for e in SPOKEN["timeline"]]
    rows = [bar.y for bar in chart.bars]
    assert rows == sorted(rows) and len(set(rows)) == len(rows)  # one row each, top to bottom
    # The axis runs 0 → 1600 ms (a round figure) across the plot: x is proportional to time.
    plot = WIDTH - 2 * PAD_X
    by_stage = {bar.stage: bar for bar in chart.bars}
    assert by_stage["end_of_utterance"].x == PAD_X
    assert by_stage["tool:lookup"].x == pytest.approx(PAD_X + plot * 350 / 1600, abs=0.01)
    assert by_stage["turn"].width == pytest.approx(plot, abs=0.01)
    # starts follow one another like the stages did
    starts = [by_stage[s].x for s in ("stt_final", "tool:lookup", "llm_first_token")]
    assert starts == sorted(starts)


def test_widths_are_proportional_to_durations() -> None:
    chart = waterfall_for(SPOKEN)
    assert chart is not None
    by_stage = {bar.stage: bar for bar in chart.bars}
    eou, stt, llm = by_stage["end_of_utterance"], by_stage["stt_final"], by_stage["llm_first_token"]
    assert eou.width / stt.width == pytest.approx(2.0, rel=1e-3)
    assert llm.width / stt.width == pytest.approx(1.5, rel=1e-3)
    assert (eou.figure, stt.figure, by_stage["turn"].figure) == ("200 ms", "100 ms", "1.6 s")


def test_first_audio_is_a_marker_and_each_kind_has_its_colour() -> None:
    chart = waterfall_for(SPOKEN, turn_id=3)
    assert chart is not None
    (marker,) = [bar for bar in chart.bars if bar.marker]
    assert marker.stage == "first_audio" and marker.width == 0
    assert marker.figure == "at 720 ms"
    kinds = {bar.kind: bar.colour for bar in chart.bars}
    assert set(kinds) == {"stt", "tool", "llm", "tts", "audio", "turn"}
    assert len(set(kinds.values())) == len(kinds) == len(set(KIND_COLOURS.values())) - 1
    assert chart.aria_label.startswith("Latency waterfall of turn 3: End of utterance 200 ms")
    assert "Tool lookup 120 ms" in chart.aria_label


def test_ticks_are_round_figures_spanning_the_plot() -> None:
    chart = waterfall_for(SPOKEN)
    assert chart is not None
    assert [tick.label for tick in chart.ticks] == ["0", "400 ms", "800 ms", "1.2 s", "1.6 s"]
    assert chart.ticks[0].x == PAD_X and chart.ticks[-1].x == pytest.approx(WIDTH - PAD_X)
    assert [tick.anchor for tick in chart.ticks] == ["start", "middle", "middle", "middle", "end"]
    assert chart.axis_y > max(bar.bar_y for bar in chart.bars)


def test_a_turn_recorded_before_timelines_is_laid_out_from_its_durations() -> None:
    old = {key: value for key, value in SPOKEN.items() if key != "timeline"}
    chart = waterfall_for(old)
    assert chart is not None and chart.estimated
    spans = {e["stage"]: (e["startMs"], e["endMs"]) for e in timeline_from_durations(old)}
    assert spans == {
        "end_of_utterance": (0.0, 200.0),
        "stt_final": (200.0, 300.0),
        "tool:lookup": (300.0, 420.0),
        "llm_first_token": (420.0, 570.0),
        "tts_first_byte": (670.0, 720.0),  # just before the first audio, which is known
        "first_audio": (720.0, 720.0),
        "turn": (0.0, 1600.0),  # from the last word: the speech stages + turnMs
    }
    assert "estimated" in chart.aria_label


def test_a_typed_turn_without_a_timeline_starts_at_the_llm() -> None:
    old = {"turnId": 1, "endOfUtteranceMs": None, "sttFinalMs": None, "llmFirstTokenMs": 80,
           "ttsFirstByteMs": None, "firstAudioMs": None, "turnMs": 300, "tools": []}  # fmt: skip
    chart = waterfall_for(old)
    assert chart is not None
    assert [(bar.stage, bar.start_ms, bar.end_ms) for bar in chart.bars] == [
        ("llm_first_token", 0.0, 80.0),
        ("turn", 0.0, 300.0),
    ]


def test_nothing_to_draw_and_malformed_entries() -> None:
    assert waterfall_for({}) is None
    assert waterfall_for({"turnId": 1, "timeline": []}) is None
    broken = {
        "timeline": [
            {"stage": "turn", "startMs": 0, "endMs": "soon"},
            {"stage": "stt_final", "startMs": 50, "endMs": 10},
            "junk",
            {"stage": "llm_first_token", "startMs": 0, "endMs": 40},
        ]
    }
    chart = waterfall_for(broken)
    assert chart is not None and [bar.stage for bar in chart.bars] == ["llm_first_token"]


def test_a_long_tool_name_is_cut_in_the_chart_and_whole_in_its_title() -> None:
    name = "look_up_every_order_of_the_customer_since_2019"
    chart = layout([{"stage": f"tool:{name}", "startMs": 0.0, "endMs": 10.0}])
    (bar,) = chart.bars
    assert len(bar.label) <= 32 and bar.label.endswith("…")
    assert bar.title == f"Tool {name}"


def test_format_ms() -> None:
    assert [format_ms(v) for v in (0, 12.4, 999.4, 1000, 1250, 61_000)] == [
        "0 ms", "12 ms", "999 ms", "1 s", "1.25 s", "61 s",
    ]  # fmt: skip
