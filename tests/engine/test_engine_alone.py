"""The engine runs with no Django at all: every module imports without settings, a text turn
goes through a session with the scripted providers, and provider settings come from the
environment when no host installed its own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TEXT_TURN = """
import asyncio, pkgutil, importlib, sys
import engine
for module in pkgutil.walk_packages(engine.__path__, "engine."):
    importlib.import_module(module.name)
from engine import protocol
from engine.providers import registry
from tests.engine.providers.fake import FakeLLM, FakeSTT, FakeToolRunner, FakeTTS
from engine.session import SessionConfig, VoiceSession

async def turn():
    events = []
    async def emit(event):
        events.append(event.to_wire())
    async def send_audio(chunk):
        pass
    session = VoiceSession(
        config=SessionConfig(session_id="s1", resume_token="r1", workspace_id=1,
                             llm_name="fake", mode="text"),
        llm=FakeLLM(script=[["Hello ", "there."]]), tool_runner=FakeToolRunner(),
        emit=emit, send_audio=send_audio, stt=FakeSTT(), tts=FakeTTS(),
    )
    await session.start()
    await session.handle(protocol.TextMessage(text="hi"))
    for _ in range(500):
        if any(event["type"] == "chat" for event in events):
            break
        await asyncio.sleep(0.01)
    await session.close()
    return [event for event in events if event["type"] == "chat"]

chats = asyncio.run(turn())
print("chat:", chats[0]["text"])
print("fakes choosable:", "fake" in registry.names("stt", choosable=True))
loaded = sorted({name.split(".")[0] for name in sys.modules} & {
    "django", "rest_framework", "channels", "celery", "platform_site", "core", "realtime",
    "sessions_app", "tools_app", "secrets_app", "usage_app", "webhooks_app", "frontend"})
print("loaded:", loaded)
"""


def run_alone(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    clean.pop("ALLOW_FAKE_PROVIDERS", None)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(TEXT_TURN)],
        cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_engine_imports_and_runs_a_turn_without_django() -> None:
    out = run_alone()
    assert "chat: Hello there." in out
    assert "loaded: []" in out  # no Django, no app, not even lazily
    assert "fakes choosable: False" in out  # ALLOW_FAKE_PROVIDERS is off by default


def test_without_a_host_the_environment_sets_the_engine() -> None:
    assert "fakes choosable: True" in run_alone(ALLOW_FAKE_PROVIDERS="true")
