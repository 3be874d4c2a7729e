"""Attacks on spoken test turns and voice simulations, with the real offline engines: lines
that would cost the worker's CPU and memory (a run's ``spoken: true`` over long typed lines,
a simulated user's or an agent's long line with no full stop for Piper), lines with nothing
to say that would wait out the turn's timeout, and control characters, markup and bidi
marks in what Piper is given."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from engine.providers.tts.local import adapter as local_tts
from evals_app import speech
from sessions_app.models import Session
from tests.conftest import api_client
from tests.engine.providers.llm.openai.fake_server import Delay, FakeOpenAIServer, text_reply
from tests.evals_app.test_spoken import _agent, _get, _post, _run
from tests.factories import Tenant

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        speech.offline_speech_missing() is not None, reason="the offline speech models are missing"
    ),
]

UNPUNCTUATED = " ".join(["weather"] * 180)  # 1,439 characters, not one full stop


@pytest.fixture
def eager(settings: Any) -> Any:
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.AGENT_TEST_TURN_TIMEOUT_S = 20
    return settings


async def _timed_run(tenant: Tenant, lines: list[str], body: dict[str, Any]) -> tuple[float, Any]:
    test = {"name": "lines", "turns": [{"user": line} for line in lines]}
    saved = await _post(tenant, "agents/weather/tests", test)
    assert saved.status_code == 201, saved.content
    started = time.monotonic()
    run = await _run(tenant, body)
    return time.monotonic() - started, run


async def test_spoken_true_over_long_typed_lines_refuses_them_before_piper(
    owner: Tenant, llm: FakeOpenAIServer, eager: Any
) -> None:
    """Typed lines may be 2,000 characters; ``spoken: true`` has them said. Piper's cost
    grows faster than a sentence's length (a few thousand characters without a full stop
    killed the process for memory): a line past the spoken limit is never synthesized."""
    await _agent(owner)
    llm.script(text_reply("It is sunny."))
    floor, short = await _timed_run(owner, ["What is the weather in London?"], {"spoken": True})
    assert short["results"][0]["turns"][0]["spoken"] is True, short

    await sync_to_async(_drop_tests)(owner)
    took, run = await _timed_run(owner, [UNPUNCTUATED], {"spoken": True})
    turn = run["results"][0]["turns"][0]
    assert turn["error"] == "too_long", turn
    assert "longer than" in turn["checks"][0]["detail"]
    assert took < floor + 3.0, (took, floor)  # not a minute of Piper on one line


def _drop_tests(tenant: Tenant) -> None:
    from evals_app.models import AgentTest

    AgentTest.objects.filter(workspace=tenant.workspace).delete()


async def test_a_line_with_nothing_to_say_is_not_heard_at_once(
    owner: Tenant, llm: FakeOpenAIServer, eager: Any
) -> None:
    """Piper says nothing for "… … …": only silence reaches the recogniser, which would
    leave the turn to wait out AGENT_TEST_TURN_TIMEOUT_S (a run of 50 tests of 20 such
    turns holds a worker for hours)."""
    await _agent(owner)
    took, run = await _timed_run(owner, ["... ... ...", "…"], {"spoken": True})
    turn = run["results"][0]["turns"][0]
    assert turn["error"] == "not_heard", turn
    assert took < eager.AGENT_TEST_TURN_TIMEOUT_S / 2, took


async def test_markup_control_characters_and_bidi_marks_are_only_words_to_piper(
    owner: Tenant, llm: FakeOpenAIServer, eager: Any
) -> None:
    hostile = [
        "<speak><break time='30s'/>Hello</speak>",
        "Hello\x07\x1b[31m there\u202e dlrow \u200b\ufeff",
        "🙂🙂🙂 \\n\\r {{user}} %s %n",
    ]
    for _ in hostile:
        llm.script(text_reply("Okay."))
    await _agent(owner)
    took, run = await _timed_run(owner, hostile, {"spoken": True})
    assert run["status"] in ("passed", "failed"), run  # each turn heard or not, no error
    for turn in run["results"][0]["turns"]:
        assert turn["error"] in ("", "not_heard"), turn
    assert took < 3 * eager.AGENT_TEST_TURN_TIMEOUT_S, took


def test_piper_is_given_pieces_no_longer_than_its_limit() -> None:
    pieces = local_tts.pieces
    cut = list(pieces(UNPUNCTUATED))
    assert max(map(len, cut)) <= local_tts.PIECE_MAX_CHARS and " ".join(cut) == UNPUNCTUATED
    sentences = list(pieces("It is sunny. " * 40))
    assert all(piece.endswith("sunny.") for piece in sentences)  # cut after a sentence
    assert list(pieces("x" * 600)) == ["x" * 250, "x" * 250, "x" * 100]
    assert list(pieces("Short.")) == ["Short."] and list(pieces(" \n ")) == []


async def test_a_long_reply_without_a_full_stop_starts_speaking_as_a_short_one_does() -> None:
    """An agent's reply (its LLM's words) in a voice simulation, or a live session on the
    offline voice: the first audio of a long run of words comes as soon as a short line's,
    not after Piper has read all of it at once."""
    voice = local_tts.LocalTTS(sample_rate=24_000)

    async def first_audio(text: str) -> float:
        started = time.monotonic()
        stream = voice.synthesize(text)
        try:
            await anext(stream)
        finally:
            await stream.aclose()
        return time.monotonic() - started

    await first_audio("Warm up.")
    floor = await first_audio(" ".join(["weather"] * 30))  # about 240 characters
    took = await first_audio(UNPUNCTUATED)
    await asyncio.sleep(floor * 2)  # the interrupted piece finishes on Piper's thread
    assert took < floor * 3 + 1.0, (took, floor)


async def test_a_nul_in_a_tests_lines_is_refused_not_a_server_error(
    owner: Tenant, eager: Any
) -> None:
    """PostgreSQL's jsonb refuses a NUL and a lone surrogate: saved as they came, the test
    would answer 500."""
    await _agent(owner)
    for turns, results in (
        ([{"user": "Hello\x00 there", "spoken": True}], {}),
        ([{"user": "Hello"}], {"get_weather": {"sky": "sun\x00ny"}}),
    ):
        saved = await _post(
            owner, "agents/weather/tests",
            {"name": "nul", "turns": turns, "tool_results": results},
        )  # fmt: skip
        assert saved.status_code == 400, saved.content
        assert "NUL" in saved.content.decode()
    raw = '{"name": "nul", "turns": [{"user": "Hello \\ud800"}]}'  # JSON's own escape
    client = api_client(owner.secret_key)
    saved = await sync_to_async(client.post)(
        "/api/v1/agents/weather/tests", raw, content_type="application/json"
    )
    assert saved.status_code == 400 and "surrogate" in saved.content.decode(), saved.content


async def test_an_llm_writing_a_nul_still_finishes_the_run_and_the_simulation(
    owner: Tenant, llm: FakeOpenAIServer, eager: Any
) -> None:
    """The agent's reply, the simulated user's line and the judge's reason are the
    workspace LLM's words: one NUL in them must not leave a run `running` (holding one of
    the workspace's in-flight runs) until the stuck sweep."""
    await _agent(owner)
    saved = await _post(owner, "agents/weather/tests", {"name": "t", "turns": [{"user": "Hi"}]})
    assert saved.status_code == 201, saved.content
    llm.script(text_reply("Hello\x00 there"))
    run = await _run(owner, {})
    assert run["status"] in ("passed", "failed"), run

    llm.script(text_reply("I need the weather\x00."))
    llm.script(text_reply("Sunny\x00."))
    llm.script(text_reply("[done]"))
    llm.script(text_reply('{"pass": true, "reason": "fine\\u0000"}'))
    scenario = {"persona": "A traveller.", "goal": "The weather.", "criteria": ["Said it."],
                "max_turns": 2}  # fmt: skip
    started = await _post(owner, "agents/weather/simulations", {"scenarios": [scenario]})
    assert started.status_code == 202, started.content
    [result] = (
        await _get(owner, f"agents/weather/simulations?batch={started.json()[0]['batch']}")
    ).json()
    assert result["status"] in ("passed", "failed"), result


async def test_a_run_of_slow_turns_stops_before_the_stuck_sweep_would_free_its_place(
    owner: Tenant, llm: FakeOpenAIServer, eager: Any
) -> None:
    """Turns that each take nearly the turn's timeout (an LLM of the workspace's that
    crawls): left to run, the run outlived EVALS_STUCK_AFTER_MIN, the sweep freed its
    in-flight place while its worker went on, and the workspace could start another on a
    second worker, and so on."""
    eager.AGENT_TEST_TURN_TIMEOUT_S = 1
    eager.EVALS_STUCK_AFTER_MIN = 4 / 60  # 4 s: a deadline 2 s after the run was queued
    await _agent(owner)
    turns = [{"user": f"Question {n}?"} for n in range(12)]
    saved = await _post(owner, "agents/weather/tests", {"name": "slow", "turns": turns})
    assert saved.status_code == 201, saved.content
    for _ in turns:
        llm.script(Delay(0.7), text_reply("Fine."))
    started = time.monotonic()
    run = await _run(owner, {})
    assert run["status"] == "error" and "EVALS_STUCK_AFTER_MIN" in run["message"], run
    assert time.monotonic() - started < 6, time.monotonic() - started  # not 12 x 0.7 s
    metered = await sync_to_async(Session.objects.get)(workspace=owner.workspace, origin="test run")
    assert metered.usage, metered.usage  # what it used before it stopped still counts
