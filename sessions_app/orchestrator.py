"""VoiceSession: one realtime conversation, plain asyncio, providers injected.

The consumer decodes frames and calls ``handle`` / ``push_audio``; the session answers
through ``emit`` (JSON events, already carrying ``seq`` and ``ts``) and ``send_audio``
(PCM16 at ``tts_sample_rate``). Each assistant turn is one task that an interruption
cancels; server tools run shielded so a finished tool keeps its result in history.

History is OpenAI chat format. When a turn is interrupted, the assistant message keeps
only what the user heard (the sentences handed to TTS, narrowed by ``playedMs`` when
known) followed by ``INTERRUPTED_MARK``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal

from sessions_app import protocol
from sessions_app.providers.base import (
    LLM,
    STT,
    TTS,
    FinalTranscript,
    PartialTranscript,
    ProviderError,
    SpeechStarted,
    STTEvent,
    STTStream,
    TextDelta,
    ToolCall,
    ToolCallsRequested,
    ToolInvocation,
    ToolOutcome,
    ToolRunner,
    ToolSpec,
)
from sessions_app.sentences import SentenceSplitter, split_sentences
from sessions_app.voice_cleaner import clean_for_speech
from tools_app.schema import ArgumentsInvalid, SchemaError, parse_arguments, validate_arguments

logger = logging.getLogger(__name__)

Mode = Literal["voice", "text"]
INTERRUPTED_MARK = "[interrupted]"
TOOLS_EXHAUSTED_NOTE = (
    "The tool-call limit for this turn is reached. Answer the user now with what you have; "
    "do not call tools."
)
# Extra time the runner gets beyond the tool's own timeout before we stop waiting for it.
SERVER_TOOL_GRACE_S = 5.0
_PLACEHOLDER_NAME = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_NAME_SHOWN_MAX = 64


def _object_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


@dataclass(kw_only=True)
class ToolDefinition:
    """A tool ready to use: ``parameters`` is already JSON Schema."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=_object_schema)
    handler: str | None = None  # JavaScript source of a server tool
    client: bool = False
    timeout_s: float | None = None  # None: the session's client_tool_timeout
    pinned: bool = False


@dataclass(kw_only=True)
class SessionConfig:
    session_id: str
    resume_token: str
    workspace_id: int
    llm_name: str
    instructions: str = ""
    greeting: str | None = None
    voice: str | None = None
    mode: Mode = "voice"
    variables: dict[str, str] = field(default_factory=dict)
    tools: list[ToolDefinition] = field(default_factory=list)
    model: str | None = None
    max_tool_steps: int = 5  # LLM rounds per turn
    tts_sample_rate: int = 24_000
    client_tool_timeout: float = 10.0


@dataclass
class TurnMetrics:
    """Monotonic timestamps (seconds) of one turn; ``None`` where it never got there."""

    turn_id: int
    source: Literal["speech", "text"]
    input_at: float  # final transcript or text received
    llm_request_at: float | None = None
    first_llm_text_at: float | None = None
    first_tts_request_at: float | None = None
    first_audio_at: float | None = None
    end_at: float | None = None
    outcome: Literal["completed", "cancelled", "failed"] = "completed"
    llm_rounds: int = 0
    tool_calls: int = 0

    @staticmethod
    def _ms(start: float | None, end: float | None) -> float | None:
        return None if start is None or end is None else (end - start) * 1000

    @property
    def input_to_llm_ms(self) -> float | None:
        return self._ms(self.input_at, self.llm_request_at)

    @property
    def llm_text_to_tts_ms(self) -> float | None:
        return self._ms(self.first_llm_text_at, self.first_tts_request_at)

    @property
    def input_to_first_audio_ms(self) -> float | None:
        return self._ms(self.input_at, self.first_audio_at)


@dataclass(eq=False)
class _Sentence:
    round: int
    text: str
    start_ms: float | None = None  # offset in the turn's audio; None: not spoken yet


@dataclass(eq=False)
class _Turn:
    id: int
    metrics: TurnMetrics | None  # None for the greeting
    task: asyncio.Task[None] | None = None
    speech_task: asyncio.Task[None] | None = None
    speech_queue: asyncio.Queue[_Sentence | None] = field(default_factory=asyncio.Queue)
    round: int = 0
    round_open: bool = False  # streamed text of this round is not in history yet
    round_text: str = ""
    text: str = ""  # everything streamed this turn (the `chat` text)
    steps: list[str] = field(default_factory=list)
    sentences: list[_Sentence] = field(default_factory=list)
    message: dict[str, Any] | None = None  # the final assistant message, once committed
    client_calls: set[str] = field(default_factory=set)
    audio_ms: float = 0.0  # audio sent so far
    first_audio_at: float | None = None
    playback_end: float = 0.0  # when the client will have played all of it (estimate)
    tts_failed: bool = False
    finished: bool = False
    interrupted: bool = False


@dataclass(eq=False)
class _PendingClientCall:
    future: asyncio.Future[tuple[Any, str | None]]
    turn: _Turn
    name: str
    message: dict[str, Any]


@contextlib.asynccontextmanager
async def _closing(iterator: AsyncIterator[Any]) -> AsyncIterator[AsyncIterator[Any]]:
    """Close a provider stream promptly (its HTTP response) even when the turn is cancelled."""
    try:
        yield iterator
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()


def render_template(template: str, variables: dict[str, str]) -> str:
    """Fill ``{{name}}`` placeholders; unknown names become empty."""
    return _PLACEHOLDER_NAME.sub(lambda match: variables.get(match[1], ""), template)


def _interrupted(kept: str) -> str:
    kept = kept.rstrip()
    return f"{kept} {INTERRUPTED_MARK}" if kept else INTERRUPTED_MARK


def _error_content(error: str) -> str:
    return json.dumps({"error": error}, ensure_ascii=False)


class VoiceSession:
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
        first_seq: int = 0,
    ) -> None:
        """``first_seq``: the last seq the connection already used (events sent before the
        session existed); the session continues after it."""
        self.config = config
        self._llm, self._tool_runner, self._stt, self._tts = llm, tool_runner, stt, tts
        self._emit_event, self._send_audio = emit, send_audio
        self._clock, self._on_turn_metrics = clock, on_turn_metrics
        self._variables = dict(config.variables)
        self._tools = {tool.name: tool for tool in config.tools}
        self._history: list[dict[str, Any]] = []
        self._seq = first_seq
        self._emit_lock = asyncio.Lock()
        self._control_lock = asyncio.Lock()  # starting, cancelling and resetting turns
        self._turn: _Turn | None = None
        self._turn_ids = 0
        self._client_calls: dict[str, _PendingClientCall] = {}
        self._used_call_ids: set[str] = set()
        self._background: set[asyncio.Task[Any]] = set()
        self._stt_stream: STTStream | None = None
        self._stt_task: asyncio.Task[None] | None = None
        self._audio_refused = False
        self._closed = False

    # ------------------------------------------------------------ what the consumer calls

    @property
    def speaks(self) -> bool:
        return self.config.mode == "voice" and self._tts is not None

    @property
    def history(self) -> list[dict[str, Any]]:
        return list(self._history)

    @property
    def last_seq(self) -> int:
        return self._seq

    async def start(self) -> None:
        config = self.config
        await self._emit("ready", {
            "sessionId": config.session_id,
            "resumeToken": config.resume_token,
            "sampleRate": protocol.CLIENT_SAMPLE_RATE,
            "ttsSampleRate": config.tts_sample_rate,
            "protocolVersion": protocol.PROTOCOL_VERSION,
            "mode": config.mode,
            "llm": config.llm_name,
        })  # fmt: skip
        if config.mode == "voice":
            await self._open_stt()
        greeting = render_template(config.greeting or "", self._variables).strip()
        if greeting:
            await self._emit("greeting", {"text": greeting})
            await self._greet(greeting)

    async def handle(self, message: protocol.ClientMessage) -> None:
        if self._closed:
            return
        match message:
            case protocol.TextMessage():
                await self._begin_turn(message.text, "text", self._clock())
            case protocol.CancelMessage():
                await self.cancel(played_ms=message.played_ms)
            case protocol.ResetMessage():
                await self.reset()
            case protocol.ContextMessage():
                await self._update_context(message.variables, message.text)
            case protocol.ToolResultMessage():
                await self.resolve_tool_result(message.call_id, message.result, message.error)
            case protocol.PingMessage():
                await self._emit("pong", {} if message.t is None else {"t": message.t})
            case protocol.ConfigureMessage():
                await self.handle_error("already_configured", "this session is already configured")
            case protocol.ResumeMessage():
                await self.handle_error(
                    "resume_unavailable", "resume must be the first message of a connection"
                )

    async def push_audio(self, pcm: bytes) -> None:
        if self._closed:
            return
        if self.config.mode != "voice" or self._stt is None:
            if not self._audio_refused:
                self._audio_refused = True
                if self.config.mode != "voice":
                    await self.handle_error("not_voice_mode", "audio is ignored in text mode")
                else:
                    await self.handle_error("stt_failed", "no speech recognition is configured")
            return
        stream = self._stt_stream
        if stream is None:
            return
        try:
            await stream.push_audio(pcm)
        except ProviderError as exc:
            await self._stt_failed(stream, exc)

    async def cancel(self, *, played_ms: int | None = None) -> None:
        async with self._control_lock:
            if not await self._interrupt("cancel", played_ms):
                await self._emit("cancelled", {"reason": "cancel"})

    async def reset(self) -> None:
        async with self._control_lock:
            await self._interrupt("reset", None)
            self._history.clear()
            self._turn = None
            await self._emit("reset")

    async def resolve_tool_result(
        self, call_id: str, result: Any = None, error: str | None = None
    ) -> None:
        pending = self._client_calls.pop(call_id, None)
        if pending is None or pending.future.done():
            await self.handle_error(
                "unknown_tool_call", "no tool call is waiting for this callId (finished or expired)"
            )
            return
        pending.future.set_result((result, error))

    async def handle_error(self, code: str, message: str) -> None:
        """Emit an ``error`` event in this session's sequence (never raises)."""
        try:
            await self._emit("error", {"code": code, "message": message})
        except Exception as exc:
            _log_failure(self.config.session_id, "emitting an error", exc)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for pending in self._client_calls.values():
            pending.future.cancel()
        self._client_calls.clear()
        turn = self._turn
        tasks = {self._stt_task, *self._background}
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

    # ------------------------------------------------------------ events

    async def _emit(self, event_type: str, data: dict[str, Any] | None = None) -> None:
        await self._emit_all((event_type, data or {}))

    async def _emit_all(self, *events: tuple[str, dict[str, Any]]) -> None:
        """Emit events back to back: nothing else gets a seq between them."""
        if self._closed:
            return
        async with self._emit_lock:  # seq order is send order
            for event_type, data in events:
                self._seq += 1
                ts = int(time.time() * 1000)
                await self._emit_event({"type": event_type, "seq": self._seq, "ts": ts, **data})

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
            _log_failure(self.config.session_id, what, exc)
            await self.handle_error("internal", "internal error")

    # ------------------------------------------------------------ speech in

    async def _open_stt(self) -> None:
        if self._stt is None:
            return
        try:
            self._stt_stream = await self._stt.open(sample_rate=protocol.CLIENT_SAMPLE_RATE)
        except ProviderError as exc:
            await self.handle_error("stt_failed", str(exc))
            return
        self._stt_task = self._spawn("speech recognition", self._consume_stt, self._stt_stream)

    async def _consume_stt(self, stream: STTStream) -> None:
        try:
            async with _closing(stream.events()) as events:
                async for event in events:
                    try:
                        await self._on_stt_event(event)
                    except Exception as exc:  # one bad event must not end transcription
                        _log_failure(self.config.session_id, "a speech event", exc)
                        await self.handle_error("internal", "internal error")
        except ProviderError as exc:
            await self._stt_failed(stream, exc)

    async def _stt_failed(self, stream: STTStream, exc: ProviderError) -> None:
        if self._stt_stream is not stream:
            return  # already reported
        self._stt_stream = None
        await self.handle_error("stt_failed", str(exc))
        with contextlib.suppress(Exception):
            await stream.aclose()

    async def _on_stt_event(self, event: STTEvent) -> None:
        if isinstance(event, SpeechStarted):
            async with self._control_lock:
                if self._agent_speaking():
                    await self._interrupt("barge_in", None)
        elif isinstance(event, PartialTranscript):
            if event.text.strip():
                await self._emit("transcript", {"text": event.text, "final": False})
        elif isinstance(event, FinalTranscript) and event.text.strip():
            await self._begin_turn(event.text.strip(), "speech", self._clock())

    def _agent_speaking(self) -> bool:
        turn = self._turn
        if turn is None or turn.first_audio_at is None:
            return False
        return not turn.finished or self._playing(turn)

    def _playing(self, turn: _Turn) -> bool:
        """Whether the client is probably still playing audio we sent."""
        return self._clock() < turn.playback_end

    # ------------------------------------------------------------ turns

    async def _begin_turn(self, text: str, source: Literal["speech", "text"], at: float) -> None:
        async with self._control_lock:
            if self._closed:
                return
            await self._interrupt("new_turn", None)
            if self._closed:  # closed meanwhile: start nothing close() would not see
                return
            self._turn_ids += 1
            turn = _Turn(id=self._turn_ids, metrics=TurnMetrics(self._turn_ids, source, at))
            self._history.append({"role": "user", "content": text})
            self._turn = turn
            # The LLM request goes out while `turn` is being sent; the emit lock, taken
            # before the task first runs, keeps `turn` and `thinking` ahead of its events.
            turn.task = self._spawn("turn", self._run_turn, turn)
            await self._emit_all(("turn", {"text": text}), ("thinking", {}))

    async def _greet(self, greeting: str) -> None:
        self._turn_ids += 1
        turn = _Turn(id=self._turn_ids, metrics=None)
        turn.message = {"role": "assistant", "content": greeting}
        self._history.append(turn.message)
        self._turn = turn
        if not self.speaks:
            turn.finished = True
            return
        for sentence in split_sentences(greeting):
            self._say(turn, sentence)
        turn.task = self._spawn("greeting", self._speak_greeting, turn)

    async def _speak_greeting(self, turn: _Turn) -> None:
        await self._finish_speech(turn)
        self._finish_turn(turn, "completed")

    async def _run_turn(self, turn: _Turn) -> None:
        try:
            await self._converse(turn)
        except ProviderError as exc:
            await self._abandon(turn)
            await self.handle_error(exc.code or "llm_failed", str(exc))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            _log_failure(self.config.session_id, "a turn", exc)
            await self._abandon(turn)
            await self.handle_error("internal", "internal error")
        else:
            self._finish_turn(turn, "completed")

    async def _abandon(self, turn: _Turn) -> None:
        await _stop(turn.speech_task)
        for call_id in turn.client_calls:
            self._client_calls.pop(call_id, None)
        self._cut_history(turn, None)
        self._finish_turn(turn, "failed")

    async def _converse(self, turn: _Turn) -> None:
        specs = [ToolSpec(t.name, t.description, t.parameters) for t in self._tools.values()]
        steps = max(1, self.config.max_tool_steps)
        for round_no in range(1, steps + 1):
            turn.round = round_no
            last = round_no == steps
            messages = self._llm_messages(exhausted=last and round_no > 1 and bool(specs))
            text, calls = await self._stream_round(turn, messages, [] if last else specs)
            if calls and not last:
                await self._run_tools(turn, text, calls)
                continue
            if text:  # calls on the last round are dropped: the turn ends with what it has
                turn.message = {"role": "assistant", "content": text}
                self._history.append(turn.message)
            turn.round_open = False
            break
        await self._emit("chat", {"text": turn.text, "steps": turn.steps})
        if self.speaks:
            await self._finish_speech(turn)

    def _llm_messages(self, *, exhausted: bool) -> list[dict[str, Any]]:
        instructions = render_template(self.config.instructions, self._variables)
        messages = [{"role": "system", "content": instructions}] if instructions.strip() else []
        messages += self._history
        if exhausted:
            messages.append({"role": "system", "content": TOOLS_EXHAUSTED_NOTE})
        return messages

    async def _stream_round(
        self, turn: _Turn, messages: list[dict[str, Any]], tools: list[ToolSpec]
    ) -> tuple[str, tuple[ToolCall, ...]]:
        turn.round_open, turn.round_text = True, ""
        splitter = SentenceSplitter() if self.speaks else None
        calls: tuple[ToolCall, ...] = ()
        metrics = turn.metrics
        assert metrics is not None
        metrics.llm_rounds += 1
        if metrics.llm_request_at is None:
            metrics.llm_request_at = self._clock()
        stream = self._llm.stream(messages=messages, tools=tools, model=self.config.model)
        async with _closing(stream) as events:
            async for event in events:
                if isinstance(event, TextDelta) and event.text:
                    await self._on_text(turn, splitter, event.text)
                elif isinstance(event, ToolCallsRequested):
                    calls = event.calls
        for sentence in splitter.flush() if splitter else ():
            self._say(turn, sentence)
        return turn.round_text, calls

    async def _on_text(self, turn: _Turn, splitter: SentenceSplitter | None, text: str) -> None:
        assert turn.metrics is not None
        if turn.metrics.first_llm_text_at is None:
            turn.metrics.first_llm_text_at = self._clock()
        if not turn.round_text and turn.text and not turn.text[-1].isspace():
            text = " " + text  # rounds of one turn read as one reply
        turn.round_text += text
        turn.text += text
        for sentence in splitter.push(text) if splitter else ():
            self._say(turn, sentence)
        await self._emit("chat_delta", {"text": text})

    def _finish_turn(
        self, turn: _Turn, outcome: Literal["completed", "cancelled", "failed"]
    ) -> None:
        if turn.finished:
            return
        turn.finished = True
        metrics = turn.metrics
        if metrics is None or self._on_turn_metrics is None:
            return
        metrics.end_at, metrics.outcome = self._clock(), outcome
        try:
            self._on_turn_metrics(metrics)
        except Exception as exc:
            _log_failure(self.config.session_id, "on_turn_metrics", exc)

    # ------------------------------------------------------------ interruption

    async def _interrupt(self, reason: str, played_ms: int | None) -> bool:
        """Stop the current turn (caller holds the control lock). False: nothing to stop."""
        turn = self._turn
        if turn is None or turn.interrupted:
            return False
        running = turn.task is not None and not turn.task.done() and not turn.finished
        # The client's playedMs outranks our estimate of its playback.
        if not running and not self._playing(turn) and played_ms is None:
            return False
        if played_ms is None and (reason != "cancel" or not running):
            played_ms = self._estimated_played_ms(turn)
        turn.interrupted = True
        await _stop(turn.task, turn.speech_task)
        await self._emit("cancelled", {"reason": reason})
        for call_id in sorted(turn.client_calls):
            pending = self._client_calls.pop(call_id, None)
            if pending is not None:
                pending.future.cancel()
                pending.message["content"] = _error_content("cancelled: the user interrupted")
                await self._tool_status(call_id, pending.name, "cancelled")
        self._cut_history(turn, played_ms)
        self._finish_turn(turn, "cancelled")
        return True

    def _estimated_played_ms(self, turn: _Turn) -> float | None:
        if not self.speaks:
            return None
        unplayed_ms = max(0.0, turn.playback_end - self._clock()) * 1000
        return max(0.0, turn.audio_ms - unplayed_ms)

    def _cut_history(self, turn: _Turn, played_ms: float | None) -> None:
        """Keep in history only the part of this round's reply the user got."""
        if turn.round_open:
            turn.round_open = False
            kept = self._kept_text(turn, played_ms) if self.speaks else turn.round_text
            if turn.round_text:
                self._history.append({"role": "assistant", "content": _interrupted(kept)})
        elif turn.message is not None and self.speaks:
            round_sentences = [s for s in turn.sentences if s.round == turn.round]
            if not all(_heard(s, played_ms) for s in round_sentences):
                turn.message["content"] = _interrupted(self._kept_text(turn, played_ms))

    def _kept_text(self, turn: _Turn, played_ms: float | None) -> str:
        return " ".join(
            s.text for s in turn.sentences if s.round == turn.round and _heard(s, played_ms)
        )

    # ------------------------------------------------------------ speech out

    def _say(self, turn: _Turn, text: str) -> None:
        sentence = _Sentence(turn.round, text)
        turn.sentences.append(sentence)
        turn.speech_queue.put_nowait(sentence)
        if turn.speech_task is None:
            turn.speech_task = self._spawn("speech", self._speak, turn)

    async def _finish_speech(self, turn: _Turn) -> None:
        if turn.speech_task is not None:
            turn.speech_queue.put_nowait(None)
            await turn.speech_task
        await self._emit("tts_done")

    async def _speak(self, turn: _Turn) -> None:
        assert self._tts is not None
        while (sentence := await turn.speech_queue.get()) is not None:
            if turn.tts_failed:
                continue  # reported once; the text still reached the screen
            speech = clean_for_speech(sentence.text)
            sentence.start_ms = turn.audio_ms
            if not speech.strip():
                continue
            if turn.metrics is not None and turn.metrics.first_tts_request_at is None:
                turn.metrics.first_tts_request_at = self._clock()
            try:
                chunks = self._tts.synthesize(speech, voice=self.config.voice)
                async with _closing(chunks) as audio:
                    async for chunk in audio:
                        await self._play(turn, chunk)
            except ProviderError as exc:
                turn.tts_failed = True
                await self.handle_error("tts_failed", str(exc))

    async def _play(self, turn: _Turn, chunk: bytes) -> None:
        if not chunk:
            return
        if turn.first_audio_at is None:
            turn.first_audio_at = self._clock()
            if turn.metrics is not None:
                turn.metrics.first_audio_at = turn.first_audio_at
        await self._send_audio(chunk)
        chunk_ms = len(chunk) * 1000 / (2 * self.config.tts_sample_rate)
        turn.audio_ms += chunk_ms
        # Playback runs in real time from the first chunk and stalls when audio runs out.
        turn.playback_end = max(turn.playback_end, self._clock()) + chunk_ms / 1000

    # ------------------------------------------------------------ tools

    async def _run_tools(self, turn: _Turn, text: str, calls: tuple[ToolCall, ...]) -> None:
        calls = tuple(
            ToolCall(self._unique_call_id(call.id), call.name, call.arguments) for call in calls
        )
        tool_calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]
        self._history.append(
            {"role": "assistant", "content": text or None, "tool_calls": tool_calls}
        )
        turn.round_open = False
        # Results replace these placeholders in place, even after the turn is gone.
        messages = [
            {"role": "tool", "tool_call_id": c.id, "content": _error_content("interrupted")}
            for c in calls
        ]
        self._history.extend(messages)
        turn.steps.extend(f"Using {c.name}" for c in calls)
        assert turn.metrics is not None
        turn.metrics.tool_calls += len(calls)
        async with asyncio.TaskGroup() as group:  # a cancelled turn cancels every call
            for call, message in zip(calls, messages, strict=True):
                group.create_task(self._run_tool(turn, call, message))

    def _unique_call_id(self, call_id: str) -> str:
        # Some models number calls "0", "1"… every round; the browser needs them unique.
        base = call_id or "call"
        unique, n = base, 1
        while unique in self._used_call_ids:
            n += 1
            unique = f"{base}_{n}"
        self._used_call_ids.add(unique)
        return unique

    async def _run_tool(self, turn: _Turn, call: ToolCall, message: dict[str, Any]) -> None:
        name = call.name[:_NAME_SHOWN_MAX]
        await self._tool_status(call.id, name, "started")
        tool = self._tools.get(call.name)
        if tool is None:
            known = ", ".join(self._tools) or "none"
            error = f"unknown tool {name!r}; available tools: {known}"
            return await self._settle(call.id, name, message, ToolOutcome("failed", error=error))
        try:
            arguments = parse_arguments(call.arguments)
            validate_arguments(tool.parameters, arguments)
        except (ArgumentsInvalid, SchemaError) as exc:
            outcome = ToolOutcome("failed", error=f"invalid arguments: {exc}")
            return await self._settle(call.id, name, message, outcome)
        if tool.client:
            await self._run_client_tool(turn, tool, call, arguments, message)
        else:
            await self._run_server_tool(tool, call, arguments, message)

    async def _run_server_tool(
        self,
        tool: ToolDefinition,
        call: ToolCall,
        arguments: dict[str, Any],
        message: dict[str, Any],
    ) -> None:
        invocation = ToolInvocation(
            call_id=call.id,
            session_id=self.config.session_id,
            workspace_id=self.config.workspace_id,
            name=tool.name,
            handler=tool.handler or "",
            arguments=arguments,
            timeout_s=self._timeout(tool),
            pinned=tool.pinned,
        )
        task = self._spawn("server tool", self._execute, invocation, message)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        await asyncio.shield(task)  # an interrupted turn stops waiting; the tool goes on

    async def _execute(self, invocation: ToolInvocation, message: dict[str, Any]) -> None:
        try:
            outcome = await asyncio.wait_for(
                self._tool_runner.run(invocation), invocation.timeout_s + SERVER_TOOL_GRACE_S
            )
        except TimeoutError:
            outcome = ToolOutcome("timed_out", error=_timed_out(invocation.timeout_s))
        except Exception as exc:
            _log_failure(self.config.session_id, "a server tool", exc)
            outcome = ToolOutcome("failed", error="the tool could not be run")
        await self._settle(invocation.call_id, invocation.name, message, outcome)

    async def _run_client_tool(
        self,
        turn: _Turn,
        tool: ToolDefinition,
        call: ToolCall,
        arguments: dict[str, Any],
        message: dict[str, Any],
    ) -> None:
        future: asyncio.Future[tuple[Any, str | None]] = asyncio.get_running_loop().create_future()
        self._client_calls[call.id] = _PendingClientCall(future, turn, tool.name, message)
        turn.client_calls.add(call.id)
        timeout = self._timeout(tool)
        await self._emit(
            "tool_call", {"callId": call.id, "name": tool.name, "arguments": arguments}
        )
        try:
            result, error = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self._client_calls.pop(call.id, None)
            outcome = ToolOutcome("timed_out", error=_timed_out(timeout))
        else:
            if error is not None:
                outcome = ToolOutcome("failed", error=error)
            else:
                outcome = ToolOutcome("completed", result=json.dumps(result, ensure_ascii=False))
        turn.client_calls.discard(call.id)
        await self._settle(call.id, tool.name, message, outcome)

    def _timeout(self, tool: ToolDefinition) -> float:
        return tool.timeout_s or self.config.client_tool_timeout

    async def _settle(
        self, call_id: str, name: str, message: dict[str, Any], outcome: ToolOutcome
    ) -> None:
        if outcome.status == "completed":
            message["content"] = outcome.result if outcome.result is not None else "null"
        else:
            message["content"] = _error_content(outcome.error or outcome.status.replace("_", " "))
        await self._tool_status(call_id, name, outcome.status)

    async def _tool_status(self, call_id: str, name: str, status: str) -> None:
        await self._emit("tool_status", {"callId": call_id, "name": name, "status": status})

    async def _update_context(self, variables: dict[str, str] | None, text: str | None) -> None:
        merged = {**self._variables, **(variables or {})}
        if len(merged) > protocol.VARIABLES_MAX:
            message = f"variables: at most {protocol.VARIABLES_MAX} per session; nothing changed"
            await self.handle_error("invalid", message)
            return
        self._variables = merged
        if text and text.strip():
            self._history.append({"role": "system", "content": f"Context update: {text.strip()}"})


def _heard(sentence: _Sentence, played_ms: float | None) -> bool:
    if sentence.start_ms is None:
        return False
    return played_ms is None or sentence.start_ms < played_ms


def _timed_out(seconds: float) -> str:
    return f"timed out after {seconds:g} s"


async def _stop(*tasks: asyncio.Task[Any] | None) -> None:
    running = {task for task in tasks if task is not None and not task.done()}
    for task in running:
        task.cancel()
    if running:
        await asyncio.wait(running)


def _log_failure(session_id: str, what: str, exc: BaseException) -> None:
    # Exception messages may quote transcripts or tool arguments: log the type and the
    # code locations only.
    frames = "".join(traceback.format_tb(exc.__traceback__))
    logger.error("session %s: %s failed with %s\n%s", session_id, what, type(exc).__name__, frames)
