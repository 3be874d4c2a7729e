"""Preemptive generation: the reply starts, held back, at the recogniser's likely end of
turn (``LikelyEndOfTurn``), goes out at once when the turn ends with the same words, and is
discarded, unseen, when the user goes on or says something else."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from engine.providers.base import (
    FinalTranscript,
    LikelyEndOfTurn,
    LLMEvent,
    PartialTranscript,
    SpeechStarted,
    ToolSpec,
)
from engine.session import ToolDefinition
from engine.session.turns import SPECULATIONS_DISCARDED_PER_MINUTE
from tests.engine.providers.fake import Delay, FakeLLM, FakeToolRunner, FakeTTS, tool_call
from tests.factories import Tenant
from tests.sessions_app.harness import Harness, started, until
from tests.sessions_app.test_tool_settings import _config as session_config

WEATHER = ToolDefinition(name="get_weather", handler="async () => ({temp: 21})")
LLM_S, TTS_S = 0.4, 0.3  # the reply's LLM time to first token and TTS first byte
# What a session sends before anyone speaks (voice mode, no greeting).
QUIET = ["ready"]


class CountingLLM(FakeLLM):
    """A FakeLLM that counts its streams open at once (and the most ever)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.open_streams = self.most_open = self.closed_streams = 0

    async def stream(
        self, *, messages: list[dict[str, Any]], tools: list[ToolSpec], model: str | None = None
    ) -> AsyncIterator[LLMEvent]:
        self.open_streams += 1
        self.most_open = max(self.most_open, self.open_streams)
        try:
            async for event in super().stream(messages=messages, tools=tools, model=model):
                yield event
        finally:
            self.open_streams -= 1
            self.closed_streams += 1


async def voice(make: Callable[..., Harness], llm: FakeLLM, **config: Any) -> Harness:
    tts = config.pop("tts", None) or FakeTTS(first_byte_delay=TTS_S)
    return await started(make, mode="voice", llm=llm, tts=tts, **config)


def spoken(harness: Harness, event: object) -> None:
    harness.stt.streams[0].inject(event)  # type: ignore[arg-type]


def held(harness: Harness) -> Any:
    return harness.session._turns.speculative


async def first_audio_after_final(harness: Harness, text: str) -> float:
    """Seconds from the final transcript to the first audio frame."""
    frames = len(harness.audio)
    now = time.monotonic()
    spoken(harness, FinalTranscript(text, speech_end_at=now - 0.5, endpoint_at=now))
    await until(lambda: len(harness.audio) > frames, within=5)
    return time.monotonic() - now


async def test_a_held_reply_goes_out_at_once_when_the_turn_ends_with_its_words(
    make: Callable[..., Harness],
) -> None:
    llm = CountingLLM(script=[[Delay(LLM_S), "Sure, it is noon. ", "Anything else?"]])
    harness = await voice(make, llm)
    spoken(harness, LikelyEndOfTurn("What time is it?"))
    # The reply is written and its first sentence synthesized, all held back.
    await until(lambda: llm.completed_rounds == 1 and len(harness.tts.requests) >= 1)
    await asyncio.sleep(TTS_S + 0.1)
    assert harness.types == QUIET and not harness.audio  # nothing reached the client
    assert harness.session.history == []  # nor the conversation
    assert llm.requests[0].messages[-1] == {"role": "user", "content": "What time is it?"}

    waited = await first_audio_after_final(harness, "what time is it")
    # Neither the LLM nor the TTS was waited for: the same request, audio already made.
    assert len(llm.requests) == 1 and waited < LLM_S + TTS_S
    await harness.wait_for("tts_done")
    assert harness.types[:4] == ["ready", "turn", "thinking", "chat_delta"]
    assert harness.of_type("turn")[0]["text"] == "what time is it"  # the final's words
    assert "".join(e["text"] for e in harness.of_type("chat_delta")) == (
        "Sure, it is noon. Anything else?"
    )
    assert harness.types.index("chat_delta") < harness.timeline.index("audio")
    assert harness.session.history == [
        {"role": "user", "content": "what time is it"},
        {"role": "assistant", "content": "Sure, it is noon. Anything else?"},
    ]
    await until(lambda: bool(harness.metrics))
    (metrics,) = harness.metrics
    assert metrics.turn_id == 1 and metrics.outcome == "completed"
    assert metrics.first_audio_ms is not None and metrics.first_audio_ms < 500 + 1000 * LLM_S


async def test_without_it_the_turn_waits_for_the_llm_and_the_tts(
    make: Callable[..., Harness],
) -> None:
    llm = CountingLLM(script=[[Delay(LLM_S), "Sure, it is noon."]])
    harness = await voice(make, llm, preemptive_generation=False)
    spoken(harness, LikelyEndOfTurn("What time is it?"))
    await asyncio.sleep(0.1)
    assert llm.requests == []  # the setting is off: nothing starts ahead
    assert await first_audio_after_final(harness, "What time is it?") >= LLM_S + TTS_S


async def test_a_held_reply_is_discarded_when_the_user_speaks_again(
    make: Callable[..., Harness],
) -> None:
    llm = CountingLLM(script=[["Sure, ", "it is noon. ", Delay(5), "More."], ["Paris: ten."]])
    harness = await voice(make, llm, tts=FakeTTS())
    spoken(harness, LikelyEndOfTurn("What time is it"))
    await until(lambda: len(harness.tts.requests) == 1)  # its first sentence synthesized
    reply = held(harness)
    spoken(harness, SpeechStarted())  # the user goes on
    await until(lambda: held(harness) is None)
    assert reply.task.cancelled() and llm.open_streams == 0 and llm.closed_streams == 1
    assert harness.types == QUIET and not harness.audio and harness.session.history == []

    spoken(harness, FinalTranscript("What time is it in Paris"))
    await harness.wait_for("tts_done")
    assert [e["text"] for e in harness.of_type("turn")] == ["What time is it in Paris"]
    assert "".join(e["text"] for e in harness.of_type("chat_delta")) == "Paris: ten."
    assert llm.requests[1].messages[-1]["content"] == "What time is it in Paris"
    assert [m["content"] for m in harness.session.history] == [
        "What time is it in Paris",
        "Paris: ten.",
    ]
    # Its tokens were spent: they are counted, with the turn that follows.
    await until(lambda: bool(harness.of_type("metrics")))
    assert harness.of_type("metrics")[0]["usage"]["llmRequests"] == 2


async def test_a_final_with_other_words_runs_the_normal_path_once(
    make: Callable[..., Harness],
) -> None:
    llm = CountingLLM(script=[["Noon."], ["Ten in Paris."]])
    harness = await voice(make, llm, tts=FakeTTS())
    spoken(harness, LikelyEndOfTurn("What time is it"))
    await until(lambda: llm.completed_rounds == 1)
    spoken(harness, FinalTranscript("What time is it in Paris"))
    await harness.wait_for("tts_done")
    await asyncio.sleep(0.05)
    assert harness.types.count("turn") == 1 and harness.types.count("chat") == 1
    assert harness.of_type("chat")[0]["text"] == "Ten in Paris."
    assert all("Noon" not in e.get("text", "") for e in harness.events)
    assert len(llm.requests) == 2 and held(harness) is None
    assert "Noon." not in [m["content"] for m in harness.session.history]


async def test_a_tool_call_in_a_held_reply_runs_once_after_the_real_end(
    make: Callable[..., Harness],
) -> None:
    llm = CountingLLM(script=[[tool_call("get_weather", {})], ["It is sunny."]])
    runner = FakeToolRunner(handlers={"get_weather": lambda args: {"temp": 21}})
    harness = await voice(make, llm, runner=runner, tools=[WEATHER], tts=FakeTTS())
    spoken(harness, LikelyEndOfTurn("Weather please"))
    await until(lambda: llm.completed_rounds == 1)
    await asyncio.sleep(0.1)
    assert runner.invocations == [] and harness.types == QUIET  # it waits for the end
    spoken(harness, FinalTranscript("Weather, please."))
    await harness.wait_for("tts_done")
    assert len(runner.invocations) == 1 and len(llm.requests) == 2
    assert harness.of_type("chat")[0]["text"] == "It is sunny."
    assert harness.types.count("tool_call") <= 1


async def test_pausing_and_resuming_keeps_at_most_one_held_reply(
    make: Callable[..., Harness],
) -> None:
    llm = CountingLLM(script=[["Sure, ", Delay(5), "more."]] * 100)
    harness = await voice(make, llm, tts=FakeTTS())
    for attempt in range(SPECULATIONS_DISCARDED_PER_MINUTE + 10):
        spoken(harness, LikelyEndOfTurn(f"words {attempt}"))
        await asyncio.sleep(0.005)
        assert llm.open_streams <= 1
        spoken(harness, PartialTranscript(f"words {attempt} and more"))
        await asyncio.sleep(0.005)
    await until(lambda: held(harness) is None)
    assert llm.most_open == 1 and llm.open_streams == 0
    # Past so many discarded in a minute, no more is started (the normal path still runs).
    assert len(llm.requests) == SPECULATIONS_DISCARDED_PER_MINUTE
    assert "turn" not in harness.types and not harness.audio


async def test_a_held_reply_that_fails_is_not_said_and_the_turn_runs_afresh(
    make: Callable[..., Harness],
) -> None:
    from engine.protocol import ErrorCode
    from engine.providers.base import ProviderError

    failure = ProviderError("down", code=ErrorCode.LLM_FAILED)
    llm = CountingLLM(script=[[failure], ["Noon."]])
    harness = await voice(make, llm, tts=FakeTTS())
    spoken(harness, LikelyEndOfTurn("What time is it"))
    await until(lambda: held(harness) is not None and held(harness).held_failed)
    assert harness.types == QUIET
    spoken(harness, FinalTranscript("What time is it"))
    await harness.wait_for("tts_done")
    assert "error" not in harness.types and harness.of_type("chat")[0]["text"] == "Noon."


@pytest.mark.django_db
def test_the_agent_setting_is_on_by_default_and_reaches_the_session(
    owner: Tenant, owner_api: APIClient
) -> None:
    response = owner_api.post("/api/v1/agents", {"name": "Desk", "slug": "desk"}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["preemptive_generation"] is True
    assert session_config(owner, "desk").preemptive_generation is True
    owner_api.patch("/api/v1/agents/desk", {"preemptive_generation": False}, format="json")
    assert session_config(owner, "desk").preemptive_generation is False


@pytest.mark.parametrize(
    ("likely", "final"),
    [
        ("Какая погода?", "Который час?"),
        ("天気はどう", "今何時ですか"),
        ("Où est-il", "Où était-il"),
    ],
    ids=["cyrillic", "japanese", "accented"],
)
async def test_a_held_reply_to_other_words_in_any_script_is_discarded(
    make: Callable[..., Harness], likely: str, final: str
) -> None:
    """The words were compared as ASCII letters and digits only: two sentences in Cyrillic
    or Japanese were both no words, so equal, and the reply to the first was said as the
    answer to the second."""
    llm = CountingLLM(script=[["Held answer."], ["Right answer."]])
    harness = await voice(make, llm, tts=FakeTTS())
    spoken(harness, LikelyEndOfTurn(likely))
    await until(lambda: llm.completed_rounds == 1)
    spoken(harness, FinalTranscript(final))
    await harness.wait_for("tts_done")
    assert harness.of_type("chat")[0]["text"] == "Right answer."
    assert all("Held" not in e.get("text", "") for e in harness.events)
    assert llm.requests[1].messages[-1]["content"] == final


async def test_a_held_reply_in_another_script_is_released_for_the_same_words(
    make: Callable[..., Harness],
) -> None:
    llm = CountingLLM(script=[["Солнечно."]])
    harness = await voice(make, llm, tts=FakeTTS())
    spoken(harness, LikelyEndOfTurn("Какая погода"))
    await until(lambda: llm.completed_rounds == 1)
    spoken(harness, FinalTranscript("Какая погода?"))
    await harness.wait_for("tts_done")
    assert len(llm.requests) == 1 and harness.of_type("chat")[0]["text"] == "Солнечно."
