"""``VoiceSession``: what the consumer calls; it owns the parts of a session (see the
package docstring), the shared state (history, variables, seq), and how events go out."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from engine import protocol
from engine.doors.door import CallControl
from engine.protocol import (
    PROVIDER_FAILURES,
    CancelledEvent,
    ErrorCode,
    ErrorEvent,
    GreetingEvent,
    PongEvent,
    ReadyEvent,
    ReconnectEvent,
    ResetEvent,
    ServerEvent,
    Stamped,
)
from engine.providers.base import LLM, STT, TTS
from engine.providers.resilience import Chain, resilient_llm, resilient_stt, resilient_tts
from engine.session.config import SessionConfig, SettledToolCall, TurnMetrics, render_template
from engine.session.guard import NoGuard, SessionGuard
from engine.session.resumable import Relocation
from engine.session.speech import SpeechOutput
from engine.session.speech_in import SpeechInput
from engine.session.state import log_failure
from engine.session.tools import ToolCalls
from engine.session.turns import Turns
from engine.session.usage import UsageMeter
from engine.text.sentences import split_sentences
from engine.tools.runner import ToolRunner

# How long `ready` may wait for the greeting's first audio (a warm offline voice: ~0.1 s).
GREETING_WAIT_S = 0.3
CONTEXT_NOTE = "Context update: "


class VoiceSession:
    """One realtime conversation; see the package docstring."""

    def __init__(
        self,
        *,
        config: SessionConfig,
        llm: LLM | Chain[LLM],
        tool_runner: ToolRunner,
        emit: Callable[[Stamped], Awaitable[None]],
        send_audio: Callable[[bytes], Awaitable[None]],
        stt: STT | Chain[STT] | None = None,
        tts: TTS | Chain[TTS] | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_turn_metrics: Callable[[TurnMetrics], None] | None = None,
        on_tool_settled: Callable[[SettledToolCall], None] | None = None,
        first_seq: int = 0,
        guard: SessionGuard | None = None,
        scrub: Callable[[str], str] | None = None,
        on_provider_error: Callable[[ErrorCode, str], None] | None = None,
        call: CallControl | None = None,
        played_ms: Callable[[], float | None] | None = None,
    ) -> None:
        """``llm``, ``stt``, ``tts``: a provider, or a ``Chain`` (fallbacks and retries) that
        the session wraps for retries and fallbacks here, the one place that does.
        ``first_seq``: the last seq the connection already used (events sent before the
        session existed); the session continues after it. ``on_tool_settled`` hears of
        every tool call that reached its final status (for the session's record).
        ``guard`` is asked before each turn and each LLM request (rate limits).
        ``scrub`` masks every credential the session uses in every error text;
        ``on_provider_error`` gets a provider failure's detail (scrubbed), which the page
        only hears as its code and a fixed sentence (``protocol.PROVIDER_FAILURES``).
        ``call``: the phone call the session's door carries (its system tools act on it).
        ``played_ms``: the door's account of how much of the reply its peer played
        (``Door.played_ms``), which an interrupted reply is cut to."""
        self.config = config
        self._scrub = scrub or (lambda text: text)
        self._on_provider_error = on_provider_error
        self._emit_event = emit
        self._clock = clock
        self._last_activity = clock()  # the user's last speech, text or tool result
        # History and variables change in place (reset, restore): ``Turns`` shares them.
        self._variables = dict(config.variables)
        self._history: list[dict[str, Any]] = []
        self._seq = first_seq
        self._emit_lock = asyncio.Lock()
        self._audio_ready = asyncio.Event()
        if config.audio_ready:
            self._audio_ready.set()
        self._usage = UsageMeter(tts_sample_rate=config.tts_sample_rate)
        self._closed = False
        self._call = call
        self._warming: asyncio.Task[None] | None = None
        self._speech = SpeechOutput(
            config=config,
            tts=resilient_tts(tts),
            usage=self._usage,
            emit=self._emit,
            send_audio=send_audio,
            handle_error=self.handle_error,
            spawn=self._spawn,
            clock=clock,
            played=played_ms,
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
            guard=guard,
            call=call,
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
        self._speech_in = SpeechInput(
            config=config,
            stt=resilient_stt(stt),
            usage=self._usage,
            turns=self._turns,
            speech=self._speech,
            emit=self._emit,
            handle_error=self.handle_error,
            spawn=self._spawn,
            clock=clock,
            active=self._active,
            closed=lambda: self._closed,
        )
        self._relocation = Relocation(
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
        """Emit an ``error`` event in this session's sequence (never raises): its text
        scrubbed, and for a provider's failure a fixed sentence, the detail to the record."""
        try:
            detail = self._scrub(message)
            sentence = PROVIDER_FAILURES.get(code)
            if sentence is not None and self._on_provider_error is not None:
                self._on_provider_error(code, detail)
            await self._emit(ErrorEvent(code=code, message=sentence or detail))
        except Exception as exc:
            log_failure(self.config.session_id, "emitting an error", exc)

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
        self._warming = self._speech.warm()
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
            await self._speech_in.open()
        if greeting:
            await self._emit(GreetingEvent(text=greeting))
            await self._turns.greet(greeting)

    async def resume(self) -> None:
        """Go on after ``restore`` in another process: no ``ready``, no greeting."""
        self._active()
        self._warming = self._speech.warm()
        await self._relocation.report_lost_calls()
        if self.config.mode == "voice":
            await self._speech_in.open()

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
        await self._speech_in.push(pcm)

    def snapshot(self) -> dict[str, Any]:
        """The state a resumed session goes on from (refers to live objects: serialise now)."""
        return self._relocation.snapshot()

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Take over a snapshot's state (before ``resume``)."""
        self._relocation.restore(snapshot)

    async def settle(self, within_s: float) -> None:
        """Before a handover: let the turn and running server tools finish, up to
        ``within_s``, then interrupt what still runs."""
        await self._relocation.settle(within_s)

    async def resolve_tool_result(
        self, call_id: str, result: Any = None, error: str | None = None
    ) -> None:
        """A client tool's outcome (``tool_result``), for the call waiting on it."""
        await self._tool_calls.resolve_tool_result(call_id, result, error)

    async def cancel(self, *, played_ms: int | None = None) -> None:
        async with self._turns.control_lock:
            if not await self._turns.interrupt("cancel", played_ms):
                await self._emit(CancelledEvent(reason="cancel"))

    async def speak(self, text: str, *, then_end_call: bool = False) -> None:
        """Say ``text`` now, in the agent's voice and as the agent's words (in history, the
        record and a ``chat`` event), without asking the LLM; what the agent was saying
        stops. ``then_end_call``: the call ends once ``text`` has been heard (the door's
        ``end_call``; nothing on a session without a call)."""
        text = text.strip()
        if self._closed or not text:
            return
        self._active()
        call = self._call if then_end_call else None
        async with self._turns.control_lock:
            await self._turns.say_text(text, sent=call.end_call if call is not None else None)

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

    async def ask_to_reconnect(self) -> None:
        """The process is shutting down: the client opens a new connection and resumes."""
        await self._emit(ReconnectEvent())

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
        tasks = {
            self._speech_in.task, self._warming, *self._tool_calls.background,
            *self._speech.prepared,
        }  # fmt: skip
        for each in (turn, self._turns.speculative):
            if each is not None:
                tasks |= {each.task, each.speech_task}
        running = {task for task in tasks if task is not None and not task.done()}
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running)
        await self._speech_in.close()
        await self._speech.aclose()

    async def _update_context(self, variables: dict[str, str] | None, text: str | None) -> None:
        merged = {**self._variables, **(variables or {})}
        if len(merged) > protocol.VARIABLES_MAX:
            message = f"variables: at most {protocol.VARIABLES_MAX} per session; nothing changed"
            await self.handle_error(ErrorCode.INVALID, message)
            return
        changed = self._variables_not_the_pages(variables or {})
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

    def _variables_not_the_pages(self, sent: dict[str, str]) -> list[str]:
        """What ``sent`` would change that the page may not: a token's fixed variables, and
        in a token session every variable its ``page_variables`` does not name."""
        locked, allowed = self.config.locked_variables, self.config.page_variables
        return sorted(
            name
            for name, value in sent.items()
            if (name in locked and value != locked[name])
            or (allowed is not None and name not in allowed and value != self._variables.get(name))
        )

    def _context_notes(self) -> int:
        return sum(
            1
            for message in self._history
            if message.get("role") == "system"
            and str(message.get("content", "")).startswith(CONTEXT_NOTE)
        )

    # ------------------------------------------------------------ events

    async def _emit(self, *events: ServerEvent) -> None:
        """Emit events back to back: nothing else gets a seq between them."""
        if self._closed:
            return
        async with self._emit_lock:  # seq order is send order
            for event in events:
                self._seq += 1
                ts = int(time.time() * 1000)
                await self._emit_event(Stamped(event, seq=self._seq, ts=ts))

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
