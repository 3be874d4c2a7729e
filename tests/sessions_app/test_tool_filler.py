"""Speaking while a tool works: a round's tools that take longer than the agent's
threshold make it say its filler once, and the turn goes on when the results arrive."""

from __future__ import annotations

import json
from collections.abc import Callable

from engine import protocol
from engine.session import ToolDefinition
from engine.session.config import DEFAULT_TOOL_FILLER
from tests.engine.providers.fake import FakeLLM, FakeToolRunner, tool_call
from tests.sessions_app.harness import Harness, started, until

LOOKUP = ToolDefinition(name="lookup", handler="async () => 1")


def spoken(harness: Harness) -> list[str]:
    return [text for text, _voice in harness.tts.requests]


async def test_a_slow_tool_makes_the_agent_say_the_filler_then_the_answer(
    make: Callable[..., Harness],
) -> None:
    llm = FakeLLM(script=[[tool_call("lookup")], ["It is open until six."]])
    runner = FakeToolRunner(handlers={"lookup": lambda args: {"open": "18:00"}}, delay=0.5)
    harness = await started(
        make, mode="voice", llm=llm, runner=runner, tools=[LOOKUP], tool_filler_after_s=0.1
    )
    await harness.say("When do you close?")
    await harness.wait_for("tts_done")
    assert spoken(harness) == [DEFAULT_TOOL_FILLER, "It is open until six."]
    deltas = [e["text"] for e in harness.of_type("chat_delta")]
    assert deltas[0].strip() == DEFAULT_TOOL_FILLER  # the page shows what it hears
    (chat,) = harness.of_type("chat")
    assert chat["text"] == "It is open until six."  # the reply is the LLM's alone
    assert json.loads(llm.requests[1].messages[-1]["content"]) == {"open": "18:00"}
    assert all(DEFAULT_TOOL_FILLER not in str(m.get("content")) for m in harness.session.history)


async def test_a_quick_tool_says_no_filler(make: Callable[..., Harness]) -> None:
    llm = FakeLLM(script=[[tool_call("lookup")], ["Six."]])
    harness = await started(
        make, mode="voice", llm=llm, runner=FakeToolRunner(), tools=[LOOKUP],
        tool_filler_after_s=0.3,
    )  # fmt: skip
    await harness.say("When do you close?")
    await harness.wait_for("tts_done")
    assert spoken(harness) == ["Six."]


async def test_the_filler_is_the_agents_own_and_never_twice_in_a_row(
    make: Callable[..., Harness],
) -> None:
    # Two slow rounds with nothing said between them: one filler. A third slow round after
    # the agent said something: the filler again.
    llm = FakeLLM(
        script=[
            [tool_call("lookup", id="a")],
            [tool_call("lookup", id="b")],
            ["Still checking.", tool_call("lookup", id="c")],
            ["Found it."],
        ]
    )
    harness = await started(
        make, mode="voice", llm=llm, runner=FakeToolRunner(delay=0.3), tools=[LOOKUP],
        tool_filler_after_s=0.05, tool_filler="Hang on.", max_tool_steps=5,
    )  # fmt: skip
    await harness.say("Look it up")
    await harness.wait_for("tts_done")
    assert spoken(harness) == ["Hang on.", "Still checking.", "Hang on.", "Found it."]


async def test_no_filler_without_speech_or_when_switched_off(make: Callable[..., Harness]) -> None:
    for config in ({"mode": "text"}, {"mode": "voice", "tool_filler_after_s": None}):
        llm = FakeLLM(script=[[tool_call("lookup")], ["Six."]])
        harness = await started(
            make, llm=llm, runner=FakeToolRunner(delay=0.3), tools=[LOOKUP],
            **{"tool_filler_after_s": 0.05, **config},
        )  # fmt: skip
        await harness.say("When?")
        await harness.wait_for("chat")
        assert DEFAULT_TOOL_FILLER not in spoken(harness)
        assert all(DEFAULT_TOOL_FILLER not in e["text"] for e in harness.of_type("chat_delta"))


async def test_a_barge_in_during_a_slow_tool_keeps_the_finished_result(
    make: Callable[..., Harness],
) -> None:
    llm = FakeLLM(script=[[tool_call("lookup")], ["Six."]])
    runner = FakeToolRunner(handlers={"lookup": lambda args: {"open": "18:00"}}, delay=0.4)
    harness = await started(
        make, mode="voice", llm=llm, runner=runner, tools=[LOOKUP], tool_filler_after_s=0.05
    )
    await harness.say("When do you close?")
    await until(lambda: DEFAULT_TOOL_FILLER in spoken(harness))
    await harness.session.handle(protocol.CancelMessage())
    await harness.wait_for("cancelled")
    await until(lambda: runner.finished != [], within=3)
    await until(
        lambda: any(
            m["role"] == "tool" and "18:00" in m["content"] for m in harness.session.history
        )
    )
    assert len(llm.requests) == 1  # the interrupted turn asked the LLM nothing more
