"""The turn lifecycle: begin, converse with the LLM (tool rounds included), finish.

Each assistant turn is one task that an interruption cancels. A turn streams its rounds
into history as they close; ``interrupt`` cuts the open one down to what the user got.

Preemptive generation: at the recogniser's likely end of turn (``speculate``) a turn starts
held back (``Turn.live`` unset): its first LLM round streams and its sentences are
synthesized, but what it writes is kept (``held_text``), its audio waits to be sent, and it
waits before running tools or touching history. ``begin`` releases it when the turn ends
with its words and nothing it was asked on changed; otherwise it is cancelled unseen.

``Turns`` is owned by the session and given what a turn needs: the config, the LLM, the
guard, the usage meter, the ``SpeechOutput`` and ``ToolCalls`` collaborators, the
conversation (history and variables, which the session keeps and restores in place), and
callables to emit events, report errors, spawn tasks, read the clock and ask whether the
session is closed. It holds the current turn and the lock that starts and stops turns.
"""

from __future__ import annotations

import asyncio
import collections
import json
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Literal

from engine.protocol import (
    CancelledEvent,
    ChatDeltaEvent,
    ChatEvent,
    ErrorCode,
    ServerEvent,
    ThinkingEvent,
    TurnEvent,
)
from engine.providers.base import (
    LLMDone,
    ProviderError,
    TextDelta,
    ToolCall,
    ToolCallsRequested,
    ToolSpec,
)
from engine.providers.resilience import ResilientLLM
from engine.session.budget import fit_history
from engine.session.config import SessionConfig, TurnMetrics, render_template
from engine.session.guard import SessionGuard
from engine.session.speech import SpeechOutput
from engine.session.state import Turn, closing_stream, log_failure
from engine.session.tools import Emit, Spawn, ToolCalls
from engine.session.usage import UsageMeter, wire_usage
from engine.text.sentences import SentenceSplitter, split_sentences
from engine.text.words import words_of

# A reply's opening clause of at least this many words is spoken on its own, sooner.
FIRST_CLAUSE_WORDS = 2
TOOLS_EXHAUSTED_NOTE = (
    "The tool-call limit for this turn is reached. Answer the user now with what you have; "
    "do not call tools."
)


GREETING_TURN = 0  # the greeting is no turn of the user's: their first is turn 1
# Preemptive generation: replies started ahead and discarded (the user went on, or said
# other words) in the last minute, past which none is started until the minute clears (a
# user who pauses and resumes all the time spends no more than this on it).
SPECULATIONS_DISCARDED_PER_MINUTE = 20


class Turns:
    def __init__(
        self,
        *,
        config: SessionConfig,
        llm: ResilientLLM,
        guard: SessionGuard,
        usage: UsageMeter,
        speech: SpeechOutput,
        tool_calls: ToolCalls,
        history: list[dict[str, Any]],
        variables: dict[str, str],
        audio_ready: asyncio.Event,
        emit: Emit,
        handle_error: Callable[[ErrorCode, str], Coroutine[Any, Any, None]],
        spawn: Spawn,
        clock: Callable[[], float],
        closed: Callable[[], bool],
        on_turn_metrics: Callable[[TurnMetrics], None] | None = None,
    ) -> None:
        self.config, self._llm, self._guard, self._usage = config, llm, guard, usage
        self._speech, self._tool_calls = speech, tool_calls
        self._history, self._variables, self._audio_ready = history, variables, audio_ready
        self._emit, self._handle_error, self._spawn = emit, handle_error, spawn
        self._clock, self._closed, self._on_turn_metrics = clock, closed, on_turn_metrics
        self.control_lock = asyncio.Lock()  # starting, cancelling and resetting turns
        self.current: Turn | None = None
        self.ids = 0  # the user's turns so far: the first is turn 1 (the greeting is 0)
        # Set when the session may start no more turns (its workspace is out of quota).
        self.refused: str | None = None
        # The last thing the agent said was the tool filler: it is not said again until
        # the agent says something else.
        self.filler_said_last = False
        # A reply started ahead of the end of the turn, held back (at most one).
        self.speculative: Turn | None = None
        self._discarded: collections.deque[float] = collections.deque()

    @property
    def speaks(self) -> bool:
        return self._speech.speaks

    async def begin(
        self,
        text: str,
        source: Literal["speech", "text"],
        at: float,
        *,
        speech_end_at: float | None = None,
        endpoint_at: float | None = None,
    ) -> None:
        refusal = await self._guard.turn()
        if refusal is not None:  # the running turn goes on undisturbed
            await self.withdraw()
            await self._handle_error(ErrorCode.RATE_LIMITED, refusal)
            return
        async with self.control_lock:
            held, self.speculative = self.speculative, None
            try:
                if self._closed():
                    return
                if self.refused is None:  # the counters, not the records: same instant for all
                    self.refused = await self._guard.turn_quota()
                if self.refused is not None:
                    await self._handle_error(ErrorCode.QUOTA_EXCEEDED, self.refused)
                    return
                await self.interrupt("new_turn", None)
                if self._closed():  # closed meanwhile: start nothing close() would not see
                    return
                if held is not None and not self._releasable(held, text, source):
                    await self._discard(held)
                    held = None
                self.ids += 1
                if held is not None:
                    turn, held = held, None
                    await self._release(turn, text, at, speech_end_at, endpoint_at)
                    return
                metrics = TurnMetrics(
                    self.ids, source, at, speech_end_at=speech_end_at, endpoint_at=endpoint_at
                )
                turn = Turn(id=self.ids, metrics=metrics)
                self._history.append({"role": "user", "content": text})
                self.current = turn
                # The LLM request goes out while `turn` is being sent; the emit lock, taken
                # before the task first runs, keeps `turn` and `thinking` ahead of its events.
                turn.task = self._spawn("turn", self._run_turn, turn)
                await self._emit(TurnEvent(text=text), ThinkingEvent())
            finally:
                if held is not None:  # refused, or the session closed
                    await self._discard(held)

    # ------------------------------------------------------------ preemptive generation

    async def speculate(self, text: str) -> None:
        """The user has likely finished saying ``text``: start the reply now, held back
        (``Turn.live``) until ``begin`` releases it; anything else discards it. At most one
        runs: a new one replaces the last."""
        async with self.control_lock:
            if self.speculative is not None:
                await self._discard(self.speculative)
                self.speculative = None
            if not self._may_speculate():
                return
            metrics = TurnMetrics(self.ids + 1, "speech", self._clock())
            turn = Turn(id=self.ids + 1, metrics=metrics, live=asyncio.Event())
            turn.held_text, turn.user_text, turn.context = "", text, self._context()
            self.speculative = turn
            turn.task = self._spawn("speculative turn", self._run_turn, turn)

    async def withdraw(self) -> None:
        """The user went on (or the turn ended otherwise): a held reply is discarded."""
        if self.speculative is None:
            return
        async with self.control_lock:
            held, self.speculative = self.speculative, None
            if held is not None:
                await self._discard(held)

    def _may_speculate(self) -> bool:
        now = self._clock()
        while self._discarded and self._discarded[0] < now - 60:
            self._discarded.popleft()
        return (
            self.config.preemptive_generation
            and not self._closed()
            and self.refused is None
            and not self.config.prefetch_tool  # that tool runs before the LLM: only at the end
            and len(self._discarded) < SPECULATIONS_DISCARDED_PER_MINUTE
        )

    def _context(self) -> str:
        """What a reply is asked on besides the user's last words (instructions, variables,
        history): a held reply is released only if this has not changed meanwhile."""
        return json.dumps([self.config.instructions, self._variables, self._history], default=str)

    def _releasable(self, held: Turn, text: str, source: str) -> bool:
        return (
            source == "speech"
            and held.user_text is not None
            and words_of(held.user_text) == words_of(text)
            and not held.held_failed
            and held.task is not None
            and not held.task.done()
            and held.context == self._context()
        )

    async def _discard(self, held: Turn) -> None:
        """Stop a held reply (its LLM stream and TTS): nothing of it was sent or kept."""
        self._discarded.append(self._clock())
        held.interrupted = held.finished = True
        await _stop(held.task, held.speech_task)

    async def _release(
        self,
        turn: Turn,
        text: str,
        at: float,
        speech_end_at: float | None,
        endpoint_at: float | None,
    ) -> None:
        """The turn ended with the held reply's words: it becomes the turn (caller holds
        the control lock, ``ids`` counted), what it wrote goes out, then its audio."""
        metrics = turn.metrics
        assert metrics is not None
        turn.id = metrics.turn_id = self.ids
        metrics.input_at, metrics.speech_end_at, metrics.endpoint_at = (
            at, speech_end_at, endpoint_at
        )  # fmt: skip
        self._history.append({"role": "user", "content": text})
        turn.user_text = None
        self.current = turn
        held, turn.held_text = turn.held_text, None  # from here on its text goes out as it comes
        events: list[ServerEvent] = [TurnEvent(text=text), ThinkingEvent()]
        if held:
            events.append(ChatDeltaEvent(text=held))
            self.filler_said_last = self.filler_said_last and not held.strip()
        await self._emit(*events)
        turn.live.set()

    async def greet(self, greeting: str) -> None:
        turn = Turn(id=GREETING_TURN, metrics=None)
        self._say_fixed(turn, greeting, sent=None)

    async def say_text(self, text: str, *, sent: Callable[[], Awaitable[None]] | None) -> None:
        """Say ``text`` as the agent, now, without the LLM (the caller holds the control
        lock): what runs is interrupted, ``text`` goes into history as the agent's and out
        as a ``chat`` event. ``sent``: called once its audio is all sent."""
        await self.interrupt("new_turn", None)
        if self._closed():
            return
        await self._emit(ChatEvent(text=text, steps=[]))
        self._say_fixed(Turn(id=self.ids, metrics=None), text, sent=sent)

    def _say_fixed(
        self, turn: Turn, text: str, *, sent: Callable[[], Awaitable[None]] | None
    ) -> None:
        """``turn`` says ``text`` (no LLM): the greeting, or a text the platform says."""
        turn.message = {"role": "assistant", "content": text}
        self._history.append(turn.message)
        self.current = turn
        if not self.speaks:
            turn.finished = True
            if sent is not None:
                turn.task = self._spawn("a fixed text", sent)
            return
        turn.awaiting_audio = not self._audio_ready.is_set()
        turn.task = self._spawn("a fixed text", self._speak_fixed, turn, text, sent)

    async def _speak_fixed(
        self, turn: Turn, text: str, sent: Callable[[], Awaitable[None]] | None
    ) -> None:
        await self._audio_ready.wait()
        turn.awaiting_audio = False
        for sentence in split_sentences(text):
            self._speech.say(turn, sentence)
        await self._speech.finish(turn, sent=sent)
        await self._finish_turn(turn, "completed")

    async def _run_turn(self, turn: Turn) -> None:
        try:
            await self._converse(turn)
        except ProviderError as exc:
            if not turn.live.is_set():  # a held reply failed: the turn will run afresh
                await self._held_failed(turn)
                return
            await self._handle_error(exc.code, str(exc))
            await self._abandon(turn)  # its metrics are the turn's last event
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log_failure(self.config.session_id, "a turn", exc)
            if not turn.live.is_set():
                await self._held_failed(turn)
                return
            await self._handle_error(ErrorCode.INTERNAL, "internal error")
            await self._abandon(turn)
        else:
            await self._finish_turn(turn, "completed")

    async def _held_failed(self, turn: Turn) -> None:
        turn.held_failed = True
        await _stop(turn.speech_task)

    async def _abandon(self, turn: Turn) -> None:
        await _stop(turn.speech_task)
        self._tool_calls.forget(turn)
        self._speech.cut_history(turn, None, self._history)
        await self._finish_turn(turn, "failed")

    async def _converse(self, turn: Turn) -> None:
        specs = [
            ToolSpec(t.name, t.description, t.parameters) for t in self._tool_calls.specs.values()
        ]
        if self.config.prefetch_tool:
            query = next(m["content"] for m in reversed(self._history) if m["role"] == "user")
            await self._tool_calls.prefetch(turn, self.config.prefetch_tool, query, self._history)
        steps = max(1, self.config.max_tool_steps)
        for round_no in range(1, steps + 1):
            turn.round = round_no
            last = round_no == steps
            messages = self._llm_messages(turn, exhausted=last and round_no > 1 and bool(specs))
            text, calls = await self._stream_round(turn, messages, [] if last else specs)
            await turn.live.wait()  # a held reply runs no tool and keeps nothing until then
            if calls and not last:
                await self._run_tools(turn, text, calls)
                continue
            if text:  # calls on the last round are dropped: the turn ends with what it has
                turn.message = {"role": "assistant", "content": text}
                self._history.append(turn.message)
            turn.round_open = False
            break
        if not turn.text.strip():
            self._reply_instead_of_nothing(turn)
        await self._emit(ChatEvent(text=turn.text, steps=turn.steps))
        if self.speaks:
            await self._speech.finish(turn)

    async def _run_tools(self, turn: Turn, text: str, calls: tuple[ToolCall, ...]) -> None:
        """Run a round's calls; if they take longer than the agent's threshold, say the
        filler meanwhile (the results are awaited all the same)."""
        after = self.config.tool_filler_after_s
        filler = None
        if after and self.speaks and self.config.tool_filler.strip():
            filler = self._spawn("tool filler", self._say_filler_after, turn, after)
        try:
            await self._tool_calls.run(turn, text, calls, self._history)
        finally:
            if filler is not None:
                filler.cancel()

    async def _say_filler_after(self, turn: Turn, after_s: float) -> None:
        await asyncio.sleep(after_s)
        if turn.interrupted or turn.finished or self.filler_said_last:
            return
        self.filler_said_last = True
        filler = self.config.tool_filler.strip()
        self._speech.say(turn, filler)
        # Shown as it is heard; not the reply (``chat``), nor in history: the LLM did not
        # write it.
        await self._emit(ChatDeltaEvent(text=f"{filler} "))

    def _reply_instead_of_nothing(self, turn: Turn) -> None:
        """The LLM wrote nothing: say the agent's fallback sentence, never silence."""
        turn.text = self.config.empty_reply
        self.filler_said_last = False
        if turn.message is None:  # (a blank one is already in history: it is replaced)
            turn.message = {"role": "assistant", "content": ""}
            self._history.append(turn.message)
        turn.message["content"] = turn.text
        if self.speaks:
            self._speech.say(turn, turn.text)

    def _llm_messages(self, turn: Turn, *, exhausted: bool) -> list[dict[str, Any]]:
        instructions = render_template(self.config.instructions, self._variables)
        system = [{"role": "system", "content": instructions}] if instructions.strip() else []
        history = self._history
        if turn.user_text is not None:  # a held reply: the words it answers are not in yet
            history = [*history, {"role": "user", "content": turn.user_text}]
        messages = fit_history(system, history, self.config.llm_request_max_bytes)
        if exhausted:
            messages.append({"role": "system", "content": TOOLS_EXHAUSTED_NOTE})
        return messages

    async def _stream_round(
        self, turn: Turn, messages: list[dict[str, Any]], tools: list[ToolSpec]
    ) -> tuple[str, tuple[ToolCall, ...]]:
        turn.round_open, turn.round_text = True, ""
        splitter = SentenceSplitter(first_clause_words=FIRST_CLAUSE_WORDS) if self.speaks else None
        calls: tuple[ToolCall, ...] = ()
        metrics = turn.metrics
        assert metrics is not None
        metrics.llm_rounds += 1
        refusal = await self._guard.llm_request()
        if refusal is not None:
            raise ProviderError(refusal, code=ErrorCode.RATE_LIMITED)
        turn.round_request_at = self._clock()
        if metrics.llm_request_at is None:
            metrics.llm_request_at = turn.round_request_at
        stream = self._llm.stream(
            messages=messages, tools=tools, model=self.config.model, report=metrics.llm.add
        )
        done: LLMDone | None = None
        try:
            async with closing_stream(stream) as events:
                async for event in events:
                    if isinstance(event, TextDelta) and event.text:
                        await self._on_text(turn, splitter, event.text)
                    elif isinstance(event, ToolCallsRequested):
                        calls = event.calls
                    elif isinstance(event, LLMDone):
                        done = event
        finally:  # an interrupted round was still a request the provider worked on
            self._meter_round(messages, tools, turn.round_text, calls, done)
        for sentence in splitter.flush() if splitter else ():
            self._speech.say(turn, sentence)
        return turn.round_text, calls

    def _meter_round(
        self,
        messages: list[dict[str, Any]],
        tools: list[ToolSpec],
        text: str,
        calls: tuple[ToolCall, ...],
        done: LLMDone | None,
    ) -> None:
        # A round counts once it got an answer; the offline stand-in is no provider at all.
        if self.config.llm_name == "offline" or (done is None and not text and not calls):
            return
        self._usage.llm_round(
            messages=messages,
            tools=tools,
            text=text,
            calls=calls,
            reported=done.usage if done is not None else None,
        )

    async def _on_text(self, turn: Turn, splitter: SentenceSplitter | None, text: str) -> None:
        assert turn.metrics is not None
        if turn.metrics.first_llm_text_at is None:
            turn.metrics.first_llm_text_at = self._clock()
            turn.metrics.text_round_request_at = turn.round_request_at
        if not turn.round_text and turn.text and not turn.text[-1].isspace():
            text = " " + text  # rounds of one turn read as one reply
        turn.round_text += text
        turn.text += text
        if text.strip() and turn.live.is_set():
            self.filler_said_last = False
        for sentence in splitter.push(text) if splitter else ():
            self._speech.say(turn, sentence)
        if turn.held_text is not None:  # a held reply: sent when it is released
            turn.held_text += text
        else:
            await self._emit(ChatDeltaEvent(text=text))

    async def _finish_turn(
        self, turn: Turn, outcome: Literal["completed", "cancelled", "failed"]
    ) -> None:
        """Mark ``turn`` over and report its metrics (the greeting has none)."""
        if turn.finished:
            return
        turn.finished = True
        metrics = turn.metrics
        if metrics is None:
            return
        metrics.end_at, metrics.outcome = self._clock(), outcome
        # The turn's usage: what the session consumed since the previous turn ended.
        await self._emit(metrics.as_event(usage=wire_usage(self._usage.take())))
        if self._on_turn_metrics is not None:
            try:
                self._on_turn_metrics(metrics)
            except Exception as exc:
                log_failure(self.config.session_id, "on_turn_metrics", exc)

    # ------------------------------------------------------------ interruption

    async def interrupt(self, reason: str, played_ms: float | None) -> bool:
        """Stop the current turn (caller holds the control lock). False: nothing to stop."""
        turn = self.current
        if turn is None or turn.interrupted:
            return False
        if turn.awaiting_audio:  # a greeting shown but never heard: drop its speech only
            turn.interrupted = turn.finished = True
            await _stop(turn.task)
            return False
        running = turn.task is not None and not turn.task.done() and not turn.finished
        # The client's playedMs outranks the door's account and our estimate of playback.
        if not running and not self._speech.playing(turn) and played_ms is None:
            return False
        if played_ms is None and (reason != "cancel" or not running):
            played_ms = self._speech.played_ms(turn)
        turn.interrupted = True
        await _stop(turn.task, turn.speech_task)
        await self._emit(CancelledEvent(reason=reason))
        await self._tool_calls.cancel_client_calls(turn)
        self._speech.cut_history(turn, played_ms, self._history)
        await self._finish_turn(turn, "cancelled")
        return True


async def _stop(*tasks: asyncio.Task[Any] | None) -> None:
    running = {task for task in tasks if task is not None and not task.done()}
    for task in running:
        task.cancel()
    if running:
        await asyncio.wait(running)
