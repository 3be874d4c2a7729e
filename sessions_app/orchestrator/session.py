"""``VoiceSession``: what the consumer calls, and speech recognition in."""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import Any

from sessions_app import protocol
from sessions_app.orchestrator.config import render_template
from sessions_app.orchestrator.core import SessionCore
from sessions_app.orchestrator.state import closing_stream, log_failure
from sessions_app.protocol import (
    CancelledEvent,
    ErrorCode,
    GreetingEvent,
    PongEvent,
    ReadyEvent,
    ResetEvent,
    TranscriptEvent,
)
from sessions_app.providers.base import (
    FinalTranscript,
    PartialTranscript,
    ProviderError,
    SpeechStarted,
    STTEvent,
    STTStream,
)
from sessions_app.sentences import split_sentences

# Words that acknowledge rather than interrupt ("mm-hmm", "okay", "I see").
BACKCHANNEL_WORDS = frozenset(
    "mm mmm hmm mhm uh huh um ah aha oh ok okay yeah yep yes right sure alright i see "
    "got it cool nice great".split()
)
_WORD = re.compile(r"[a-z0-9']+")
# How long `ready` may wait for the greeting's first audio (a warm offline voice: ~0.1 s).
GREETING_WAIT_S = 0.3
_EARLY_AUDIO_MAX = 500  # frames kept while the recogniser connects (10 s of 20 ms frames)
CONTEXT_NOTE = "Context update: "


class VoiceSession(SessionCore):
    """One realtime conversation; see the package docstring.

    The constructor (``SessionCore.__init__``) takes the config, the providers, and the
    ``emit`` / ``send_audio`` callables, all keyword-only.
    """

    # ------------------------------------------------------------ what the consumer calls

    @property
    def history(self) -> list[dict[str, Any]]:
        return list(self._history)

    @property
    def last_seq(self) -> int:
        return self._seq

    async def start(self) -> None:
        config = self.config
        greeting = render_template(config.greeting or "", self._variables).strip()
        if greeting and self.speaks and self._audio_ready.is_set():
            # Its first words are synthesized before `ready`, so they play right after it.
            # (A page that cannot play yet may never hear it: the TTS is not asked then.)
            await self._speech.prepare(split_sentences(greeting)[0], wait_s=GREETING_WAIT_S)
        await self._emit(
            ReadyEvent(
                session_id=config.session_id,
                resume_token=config.resume_token,
                tts_sample_rate=config.tts_sample_rate,
                mode=config.mode,
                llm=config.llm_name,
                notice=config.notice or None,
            )
        )
        await self._speech.check_voice()
        if config.mode == "voice":
            await self._open_stt()
        if greeting:
            await self._emit(GreetingEvent(text=greeting))
            await self._turns.greet(greeting)

    async def resume(self) -> None:
        """Go on after ``restore`` in another process: no ``ready``, no greeting."""
        self._active()
        await self._moves.report_lost_calls()
        if self.config.mode == "voice":
            await self._open_stt()

    async def handle(self, message: protocol.ClientMessage) -> None:
        if self._closed:
            return
        if isinstance(message, protocol.TextMessage | protocol.ToolResultMessage):
            self._active()
        match message:
            case protocol.TextMessage():
                await self._turns.begin(message.text, "text", self._clock())
            case protocol.CancelMessage():
                await self.cancel(played_ms=message.played_ms)
            case protocol.ResetMessage():
                await self.reset()
            case protocol.ContextMessage():
                await self._update_context(message.variables, message.text)
            case protocol.ToolResultMessage():
                await self.resolve_tool_result(message.call_id, message.result, message.error)
            case protocol.PingMessage():
                await self._emit(PongEvent.answering(message))
            case protocol.AudioReadyMessage():
                self._audio_ready.set()
            case protocol.ConfigureMessage():
                await self.handle_error(
                    ErrorCode.ALREADY_CONFIGURED, "this session is already configured"
                )
            case protocol.ResumeMessage():
                await self.handle_error(
                    ErrorCode.RESUME_UNAVAILABLE, "resume must be the first message of a connection"
                )

    async def push_audio(self, pcm: bytes) -> None:
        if self._closed:
            return
        if self.config.mode != "voice" or self._stt is None:
            if not self._audio_refused:
                self._audio_refused = True
                if self.config.mode != "voice":
                    await self.handle_error(
                        ErrorCode.NOT_VOICE_MODE, "audio is ignored in text mode"
                    )
                else:
                    await self.handle_error(
                        ErrorCode.STT_FAILED, "no speech recognition is configured"
                    )
            return
        stream = self._stt_stream
        if stream is None:
            if self._stt_opening and len(self._early_audio) < _EARLY_AUDIO_MAX:
                self._early_audio.append(pcm)  # the recogniser is still connecting
            return
        try:
            await stream.push_audio(pcm)
        except ProviderError as exc:
            await self._stt_failed(stream, exc)
        else:
            self._usage.stt_audio_bytes += len(pcm)

    def snapshot(self) -> dict[str, Any]:
        """The state a resumed session goes on from (refers to live objects: serialise now)."""
        return self._moves.snapshot()

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Take over a snapshot's state (before ``resume``)."""
        self._moves.restore(snapshot)

    async def settle(self, within_s: float) -> None:
        """Before a handover: let the turn and running server tools finish, up to
        ``within_s``, then interrupt what still runs."""
        await self._moves.settle(within_s)

    async def resolve_tool_result(
        self, call_id: str, result: Any = None, error: str | None = None
    ) -> None:
        """A client tool's outcome (``tool_result``), for the call waiting on it."""
        await self._tool_calls.resolve_tool_result(call_id, result, error)

    async def cancel(self, *, played_ms: int | None = None) -> None:
        async with self._turns.control_lock:
            if not await self._turns.interrupt("cancel", played_ms):
                await self._emit(CancelledEvent(reason="cancel"))

    async def reset(self) -> None:
        async with self._turns.control_lock:
            await self._turns.interrupt("reset", None)
            self._history.clear()
            self._turns.current = None
            await self._emit(ResetEvent())

    def take_usage(self) -> dict[str, int]:
        """What the session consumed since the last take (the last turn's end, or this)."""
        return self._usage.take()

    async def refuse_turns(self, message: str) -> None:
        """Say ``message`` (code ``quota_exceeded``); from now on no new turn starts."""
        self._turns.refused = message
        await self.handle_error(ErrorCode.QUOTA_EXCEEDED, message)

    async def current_turn_done(self, within_s: float) -> None:
        """Wait, up to ``within_s``, until the running turn is over and its audio played."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within_s
        turn = self._turns.current
        if turn is not None and turn.task is not None and not turn.task.done():
            await asyncio.wait({turn.task}, timeout=within_s)
        if turn is not None and self.speaks:
            await asyncio.sleep(
                max(0.0, min(turn.playback_end - self._clock(), deadline - loop.time()))
            )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._tool_calls.drop_client_calls()
        turn = self._turns.current
        tasks = {self._stt_task, *self._tool_calls.background, *self._speech.prepared}
        if turn is not None:
            tasks |= {turn.task, turn.speech_task}
        running = {task for task in tasks if task is not None and not task.done()}
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running)
        if self._stt_stream is not None:
            stream, self._stt_stream = self._stt_stream, None
            with contextlib.suppress(Exception):
                await stream.aclose()

    async def _update_context(self, variables: dict[str, str] | None, text: str | None) -> None:
        merged = {**self._variables, **(variables or {})}
        if len(merged) > protocol.VARIABLES_MAX:
            message = f"variables: at most {protocol.VARIABLES_MAX} per session; nothing changed"
            await self.handle_error(ErrorCode.INVALID, message)
            return
        locked = self.config.locked_variables
        changed = sorted(name for name in locked if merged.get(name) != locked[name])
        if changed:
            message = f"variables: {', '.join(changed)} fixed by the session token; nothing changed"
            await self.handle_error(ErrorCode.INVALID, message)
            return
        note = (text or "").strip()
        if note and self._context_notes() >= self.config.context_notes_max:
            await self.handle_error(
                ErrorCode.CONTEXT_LIMIT,
                f"at most {self.config.context_notes_max} context notes per session; "
                "nothing changed (update variables instead, or reset)",
            )
            return
        self._variables.update(merged)
        if note:
            self._history.append({"role": "system", "content": CONTEXT_NOTE + note})

    def _context_notes(self) -> int:
        return sum(
            1
            for message in self._history
            if message.get("role") == "system"
            and str(message.get("content", "")).startswith(CONTEXT_NOTE)
        )

    # ------------------------------------------------------------ speech in

    async def _open_stt(self) -> None:
        if self._stt is None:
            return
        self._stt_opening = True
        try:
            stream = await self._stt.open(sample_rate=protocol.CLIENT_SAMPLE_RATE)
        except ProviderError as exc:
            await self.handle_error(ErrorCode.STT_FAILED, str(exc))
            return
        finally:
            self._stt_opening = False
        self._stt_stream = stream
        self._stt_task = self._spawn("speech recognition", self._consume_stt, stream)
        early, self._early_audio = self._early_audio, []
        for pcm in early:  # what the microphone sent while the recogniser was connecting
            await self.push_audio(pcm)

    async def _consume_stt(self, stream: STTStream) -> None:
        try:
            async with closing_stream(stream.events()) as events:
                async for event in events:
                    try:
                        await self._on_stt_event(event)
                    except Exception as exc:  # one bad event must not end transcription
                        log_failure(self.config.session_id, "a speech event", exc)
                        await self.handle_error(ErrorCode.INTERNAL, "internal error")
        except ProviderError as exc:
            await self._stt_failed(stream, exc)

    async def _stt_failed(self, stream: STTStream, exc: ProviderError) -> None:
        if self._stt_stream is not stream:
            return  # already reported
        self._stt_stream = None
        await self.handle_error(ErrorCode.STT_FAILED, str(exc))
        with contextlib.suppress(Exception):
            await stream.aclose()

    async def _on_stt_event(self, event: STTEvent) -> None:
        self._active()
        if isinstance(event, SpeechStarted):
            if self.config.barge_in_min_words <= 0:
                await self._barge_in()
        elif isinstance(event, PartialTranscript):
            if event.text.strip():
                await self._emit(TranscriptEvent(text=event.text))
                if self._interrupts(event.text):
                    await self._barge_in()
        elif isinstance(event, FinalTranscript) and event.text.strip():
            if self._agent_speaking() and not self._interrupts(event.text):
                return  # "mm-hmm" while the agent talks: a backchannel, not a turn
            await self._barge_in()
            await self._turns.begin(
                event.text.strip(),
                "speech",
                self._clock(),
                speech_end_at=event.speech_end_at,
                endpoint_at=event.endpoint_at,
            )

    def _interrupts(self, text: str) -> bool:
        """Whether the user's words while the agent speaks are meant to interrupt it."""
        words = [w for w in _WORD.findall(text.lower()) if w not in BACKCHANNEL_WORDS]
        return len(words) >= max(1, self.config.barge_in_min_words)

    async def _barge_in(self) -> None:
        async with self._turns.control_lock:
            if self._agent_speaking():
                await self._turns.interrupt("barge_in", None)

    def _agent_speaking(self) -> bool:
        turn = self._turns.current
        if turn is None or turn.first_audio_at is None:
            return False
        return not turn.finished or self._speech.playing(turn)
