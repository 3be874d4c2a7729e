"""What a turn is made of while it runs, and the helpers every part of a session uses."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import traceback
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from engine.session.config import TurnMetrics

# The package's name, not this module's: log configuration written for the single-module
# orchestrator keeps matching.
logger = logging.getLogger("engine.session")


@dataclass(eq=False)
class Sentence:
    round: int
    text: str
    start_ms: float | None = None  # offset in the turn's audio; None: not spoken yet


def _live() -> asyncio.Event:
    live = asyncio.Event()
    live.set()
    return live


@dataclass(eq=False)
class Turn:
    id: int  # 1, 2, … for the user's turns (their `metrics` say so), 0 for the greeting
    metrics: TurnMetrics | None  # None for the greeting
    task: asyncio.Task[None] | None = None
    speech_task: asyncio.Task[None] | None = None
    speech_queue: asyncio.Queue[Sentence | None] = field(default_factory=asyncio.Queue)
    round: int = 0
    round_request_at: float | None = None  # when this round's LLM request went out
    round_open: bool = False  # streamed text of this round is not in history yet
    round_text: str = ""
    text: str = ""  # everything streamed this turn (the `chat` text)
    steps: list[str] = field(default_factory=list)
    sentences: list[Sentence] = field(default_factory=list)
    message: dict[str, Any] | None = None  # the final assistant message, once committed
    client_calls: set[str] = field(default_factory=set)
    tool_result_bytes: int = 0  # what this turn's tool results add to its LLM requests
    audio_ms: float = 0.0  # audio sent so far
    first_audio_at: float | None = None
    playback_end: float = 0.0  # when the client will have played all of it (estimate)
    tts_failed: bool = False
    awaiting_audio: bool = False  # the greeting waits for the client's audio_ready
    finished: bool = False
    interrupted: bool = False
    # A reply started ahead (preemptive generation) is held back until it is released:
    # ``live`` is set then (nothing is sent, put into history or run before), ``held_text``
    # keeps what the LLM wrote meanwhile (None: live, sent as it comes), ``user_text`` is
    # the user's words it answers (not yet in history), ``context`` what it was asked on.
    live: asyncio.Event = field(default_factory=_live)
    held_text: str | None = None
    user_text: str | None = None
    context: str = ""
    held_failed: bool = False  # it failed while held: the turn runs afresh instead


@contextlib.asynccontextmanager
async def closing_stream(iterator: AsyncIterator[Any]) -> AsyncIterator[AsyncIterator[Any]]:
    """Close a provider stream promptly (its HTTP response) even when the turn is cancelled."""
    try:
        yield iterator
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()


def log_failure(session_id: str, what: str, exc: BaseException) -> None:
    # Exception messages may quote transcripts or tool arguments: log the type and the
    # code locations only.
    frames = "".join(traceback.format_tb(exc.__traceback__))
    logger.error("session %s: %s failed with %s\n%s", session_id, what, type(exc).__name__, frames)
