"""Scripted speech providers that keep what they served, and a tool runner that reports
sandbox CPU, registered under names sessions can be configured with."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar

from asgiref.sync import sync_to_async

from engine.providers import registry
from engine.tools.call import ToolRequest, ToolResult
from sessions_app.models import Session, SessionError
from tests.engine.providers.fake import FakeSTT, FakeSTTStream, FakeToolRunner, FakeTTS

CPU_MS_PER_CALL = 12.4


class RecordingSTT(FakeSTT):
    streams: ClassVar[list[FakeSTTStream]] = []

    async def open(self, *, sample_rate: int) -> FakeSTTStream:
        stream = await super().open(sample_rate=sample_rate)
        RecordingSTT.streams.append(stream)
        return stream

    @classmethod
    def received_bytes(cls) -> int:
        return sum(stream.received_bytes for stream in cls.streams)


class RecordingTTS(FakeTTS):
    characters: ClassVar[list[int]] = []
    served_bytes: ClassVar[list[int]] = []

    async def synthesize(self, text: str, *, voice: str | None = None) -> AsyncIterator[bytes]:
        RecordingTTS.characters.append(len(text))
        async for chunk in super().synthesize(text, voice=voice):
            RecordingTTS.served_bytes.append(len(chunk))
            yield chunk


@dataclasses.dataclass
class CpuToolRunner(FakeToolRunner):
    """Like the fake runner, and every call reports the sandbox CPU a real one measures."""

    async def run(self, invocation: ToolRequest) -> ToolResult:
        outcome = await super().run(invocation)
        return dataclasses.replace(outcome, cpu_ms=CPU_MS_PER_CALL)


def use_recording_providers(settings: Any) -> None:
    RecordingSTT.streams.clear()
    RecordingTTS.characters.clear()
    RecordingTTS.served_bytes.clear()
    module = __name__
    registry.register("stt", "recording", f"{module}.RecordingSTT")
    registry.register("tts", "recording", f"{module}.RecordingTTS")
    registry.register("tools", "cpu", f"{module}.CpuToolRunner")
    settings.STT_PROVIDER = "recording"
    settings.TTS_PROVIDER = "recording"
    settings.TOOL_RUNNER = "cpu"


async def eventually(check: Callable[[], Any], within: float = 10.0) -> Any:
    """Poll ``check`` (sync, may read the database) until it returns something truthy."""
    deadline = time.monotonic() + within
    while True:
        value = await sync_to_async(check)()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def ended_session(workspace: Any = None) -> Session:
    """The test's (or the workspace's) one session, once its record is closed."""
    sessions = Session.objects.filter(ended_at__isnull=False).select_related("agent")
    if workspace is not None:
        sessions = sessions.filter(workspace=workspace)
    return await eventually(sessions.first)


async def recorded_errors(workspace: Any = None) -> list[tuple[str, str]]:
    """(code, detail) of the provider failures kept with the (ended) session's record."""
    session = await ended_session(workspace)
    rows = SessionError.objects.filter(session=session).order_by("pk")
    return await sync_to_async(lambda: [(row.code, row.detail) for row in rows])()


def recordings_on_disk(settings: Any, folder: Any) -> Any:
    """The recordings storage on the filesystem (the embedded default), under ``folder``."""
    settings.STORAGES = {
        **settings.STORAGES,
        "recordings": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(folder)},
        },
    }
    return folder
