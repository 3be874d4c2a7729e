"""The state every part of a session shares, and how a session talks to its client.

``SessionCore`` holds the injected providers and callables, the history and the turn
state, and owns the collaborators ``SpeechOutput`` (``speech``), ``ToolCalls``
(``tools``), ``Turns`` (``turns``) and ``Moves`` (``resumable``), each given only what it
needs; ``session.VoiceSession`` builds on it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from sessions_app.orchestrator.config import SessionConfig, SettledToolCall, TurnMetrics
from sessions_app.orchestrator.guard import NoGuard, SessionGuard
from sessions_app.orchestrator.resumable import Moves
from sessions_app.orchestrator.speech import SpeechOutput
from sessions_app.orchestrator.state import log_failure
from sessions_app.orchestrator.tools import ToolCalls
from sessions_app.orchestrator.turns import Turns
from sessions_app.orchestrator.usage import UsageMeter
from sessions_app.protocol import ErrorCode, ErrorEvent, ServerEvent
from sessions_app.providers.base import LLM, STT, TTS, STTStream, ToolRunner
from sessions_app.providers.resilience import resilient_llm, resilient_tts


class SessionCore:
    def __init__(
        self,
        *,
        config: SessionConfig,
        llm: LLM,
        tool_runner: ToolRunner,
        emit: Callable[[dict[str, Any]], Awaitable[None]],
        send_audio: Callable[[bytes], Awaitable[None]],
        stt: STT | None = None,
        tts: TTS | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_turn_metrics: Callable[[TurnMetrics], None] | None = None,
        on_tool_settled: Callable[[SettledToolCall], None] | None = None,
        first_seq: int = 0,
        guard: SessionGuard | None = None,
    ) -> None:
        """``first_seq``: the last seq the connection already used (events sent before the
        session existed); the session continues after it. ``on_tool_settled`` hears of
        every tool call that reached its final status (for the session's record).
        ``guard`` is asked before each turn and each LLM request (rate limits)."""
        self.config = config
        self._stt = stt
        self._emit_event = emit
        self._clock = clock
        self._last_activity = clock()  # the user's last speech, text or tool result
        # History and variables change in place (reset, restore): ``Turns`` shares them.
        self._variables = dict(config.variables)
        self._history: list[dict[str, Any]] = []
        self._seq = first_seq
        self._emit_lock = asyncio.Lock()
        self._stt_stream: STTStream | None = None
        self._stt_task: asyncio.Task[None] | None = None
        self._stt_opening = False
        self._early_audio: list[bytes] = []
        self._audio_refused = False
        self._audio_ready = asyncio.Event()
        if config.audio_ready:
            self._audio_ready.set()
        self._usage = UsageMeter(tts_sample_rate=config.tts_sample_rate)
        self._closed = False
        self._speech = SpeechOutput(
            config=config,
            tts=resilient_tts(tts),
            usage=self._usage,
            emit=self._emit,
            send_audio=send_audio,
            handle_error=self.handle_error,
            spawn=self._spawn,
            clock=clock,
        )
        self._tool_calls = ToolCalls(
            config=config,
            runner=tool_runner,
            usage=self._usage,
            emit=self._emit,
            handle_error=self.handle_error,
            spawn=self._spawn,
            clock=clock,
            on_settled=on_tool_settled,
        )
        self._turns = Turns(
            config=config,
            llm=resilient_llm(llm),
            guard=guard or NoGuard(),
            usage=self._usage,
            speech=self._speech,
            tool_calls=self._tool_calls,
            history=self._history,
            variables=self._variables,
            audio_ready=self._audio_ready,
            emit=self._emit,
            handle_error=self.handle_error,
            spawn=self._spawn,
            clock=clock,
            closed=lambda: self._closed,
            on_turn_metrics=on_turn_metrics,
        )
        self._moves = Moves(
            history=self._history,
            variables=self._variables,
            turns=self._turns,
            tool_calls=self._tool_calls,
            audio_ready=self._audio_ready,
            last_seq=lambda: self._seq,
        )

    @property
    def idle_s(self) -> float:
        """Seconds since the user last spoke, typed or answered a tool call."""
        return self._clock() - self._last_activity

    def _active(self) -> None:
        self._last_activity = self._clock()

    @property
    def speaks(self) -> bool:
        return self._speech.speaks

    async def handle_error(self, code: ErrorCode, message: str) -> None:
        """Emit an ``error`` event in this session's sequence (never raises)."""
        try:
            await self._emit(ErrorEvent(code=code, message=message))
        except Exception as exc:
            log_failure(self.config.session_id, "emitting an error", exc)

    # ------------------------------------------------------------ events

    async def _emit(self, *events: ServerEvent) -> None:
        """Emit events back to back: nothing else gets a seq between them."""
        if self._closed:
            return
        async with self._emit_lock:  # seq order is send order
            for event in events:
                self._seq += 1
                ts = int(time.time() * 1000)
                await self._emit_event(event.to_wire(seq=self._seq, ts=ts))

    def _spawn(
        self, what: str, function: Callable[..., Coroutine[Any, Any, None]], *args: Any
    ) -> asyncio.Task[None]:
        # The coroutine is created inside the task: one cancelled before it ever ran
        # leaves no un-awaited coroutine behind.
        task = self._guarded(what, function, *args)
        return asyncio.create_task(task, name=f"voice-session {what}")

    async def _guarded(
        self, what: str, function: Callable[..., Coroutine[Any, Any, None]], *args: Any
    ) -> None:
        try:
            await function(*args)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log_failure(self.config.session_id, what, exc)
            await self.handle_error(ErrorCode.INTERNAL, "internal error")
