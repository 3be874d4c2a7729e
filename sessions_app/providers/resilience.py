"""Retries and fallbacks, in one place: adapters never retry, the session never decides.

A call that fails with a retryable ``ProviderError`` before it produced anything is
tried again after a short pause (``RetryPolicy``, from ``PROVIDER_RETRY_DELAYS_MS``).
When the retries are spent, or the failure is one a retry cannot help (a wrong key),
the next provider of the agent's ordered list takes the call ("LLM cascading"). Once a
token or an audio byte went out, a failure ends the call as it is: asking again would
make the agent say things twice.

Each call reports an ``Attempts``: who served it (or nobody), how many retries it took,
and why the list moved past a provider (a ``FAILURE_REASONS`` code, never a message).
``Capabilities`` decide who may serve: a fallback TTS must speak at the primary's sample
rate (the client was told it in ``ready``) and is asked for the voice only when it has
it; a fallback LLM without function calling is skipped for rounds that offer tools.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sessions_app.providers.base import (
    LLM,
    STT,
    TTS,
    LLMEvent,
    ProviderError,
    STTStream,
    ToolSpec,
)

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[Any]]


@dataclass(frozen=True)
class RetryPolicy:
    """The pause before each retry of one provider; empty: no retries."""

    delays_s: tuple[float, ...] = ()

    @classmethod
    def from_ms(cls, delays_ms: Sequence[int]) -> RetryPolicy:
        return cls(tuple(max(0, ms) / 1000 for ms in delays_ms))


NO_RETRIES = RetryPolicy()


@dataclass(frozen=True)
class Attempts:
    """How one call went: ``served`` is the label of the provider that answered (None:
    every one failed), ``fallback_reason`` why the one before it did not."""

    served: str | None
    retries: int = 0
    fallback_reason: str | None = None


Report = Callable[[Attempts], None]
Candidate = tuple[str, Callable[[], AsyncIterator[T]]]


async def _resilient(
    candidates: Sequence[Candidate[T]],
    policy: RetryPolicy,
    report: Report | None,
    sleep: Sleep,
) -> AsyncIterator[T]:
    """The first candidate's items that produced any; see the module docstring."""
    retries, reason = 0, None
    first_error: ProviderError | None = None
    error: ProviderError | None = None

    def served(label: str | None) -> None:
        if report is not None:
            report(Attempts(label, retries, reason))

    for label, start in candidates:
        for attempt in range(len(policy.delays_s) + 1):
            produced = False
            stream = start()
            try:
                async for item in stream:
                    if not produced:
                        produced = True
                        served(label)
                    yield item
            except ProviderError as exc:
                if produced:
                    raise
                first_error, error = first_error or exc, exc
                if not exc.retryable or attempt == len(policy.delays_s):
                    break
                retries += 1
                await sleep(policy.delays_s[attempt])
            else:
                if not produced:  # an empty answer is still an answer
                    served(label)
                return
            finally:
                await _close(stream)
        reason = error.reason if error is not None else None  # why the next one serves
    served(None)
    # Every provider failed: the user hears what the primary's failure says, as they
    # would without fallbacks.
    assert first_error is not None
    raise first_error


async def _close(stream: AsyncIterator[Any]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


class ResilientLLM(LLM):
    """An ordered list of ``(label, LLM)``: the first is the agent's own, the rest its
    fallbacks. Speaks as the primary (``name``, ``capabilities``)."""

    def __init__(
        self,
        chain: Sequence[tuple[str, LLM]],
        *,
        policy: RetryPolicy = NO_RETRIES,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if not chain:
            raise ValueError("a ResilientLLM needs at least one LLM")
        self._chain, self._policy, self._sleep = list(chain), policy, sleep
        primary = chain[0][1]
        self.name, self.capabilities = primary.name, primary.capabilities

    @property
    def labels(self) -> list[str]:
        return [label for label, _ in self._chain]

    def stream(
        self,
        *,
        messages: list[dict[str, Any]],
        tools: list[ToolSpec],
        model: str | None = None,
        report: Report | None = None,
    ) -> AsyncIterator[LLMEvent]:
        """``model`` is the primary's override; fallbacks use the model they were made with."""

        def start(llm: LLM, model: str | None) -> Callable[[], AsyncIterator[LLMEvent]]:
            return lambda: llm.stream(messages=messages, tools=tools, model=model)

        candidates = [
            (label, start(llm, model if index == 0 else None))
            for index, (label, llm) in enumerate(self._chain)
            if index == 0 or llm.capabilities.tools or not tools
        ]
        return _resilient(candidates, self._policy, report, self._sleep)

    async def aclose(self) -> None:
        for _, llm in self._chain:
            await llm.aclose()


class ResilientTTS(TTS):
    """An ordered list of ``(label, TTS)``, the primary first. Fallbacks that speak at
    another sample rate than the primary are left out."""

    def __init__(
        self,
        chain: Sequence[tuple[str, TTS]],
        *,
        policy: RetryPolicy = NO_RETRIES,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if not chain:
            raise ValueError("a ResilientTTS needs at least one TTS")
        primary = chain[0][1]
        self.name, self.capabilities = primary.name, primary.capabilities
        rate = primary.capabilities.sample_rate
        self._chain = [chain[0], *(c for c in chain[1:] if c[1].capabilities.sample_rate == rate)]
        self._policy, self._sleep = policy, sleep

    @property
    def labels(self) -> list[str]:
        return [label for label, _ in self._chain]

    def synthesize(
        self, text: str, *, voice: str | None = None, report: Report | None = None
    ) -> AsyncIterator[bytes]:
        def start(tts: TTS) -> Callable[[], AsyncIterator[bytes]]:
            return lambda: tts.synthesize(text, voice=_voice_for(tts, voice))

        candidates = [(label, start(tts)) for label, tts in self._chain]
        return _resilient(candidates, self._policy, report, self._sleep)


def _voice_for(tts: TTS, voice: str | None) -> str | None:
    """``voice`` when ``tts`` has it (or takes any name); else its own default."""
    voices = tts.capabilities.voices
    return voice if voice is None or voices is None or voice.lower() in voices else None


class ResilientSTT(STT):
    """Opening a recogniser's stream is retried like any call; once audio flows, a
    failure is the session's to report (there is no fallback recogniser)."""

    def __init__(self, stt: STT, *, policy: RetryPolicy = NO_RETRIES, sleep: Sleep = asyncio.sleep):
        self._stt, self._policy, self._sleep = stt, policy, sleep
        self.name, self.capabilities = stt.name, stt.capabilities

    async def open(self, *, sample_rate: int) -> STTStream:
        delays = iter(self._policy.delays_s)
        while True:
            try:
                return await self._stt.open(sample_rate=sample_rate)
            except ProviderError as exc:
                delay = next(delays, None) if exc.retryable else None
                if delay is None:
                    raise
            await self._sleep(delay)


def resilient_llm(llm: LLM) -> ResilientLLM:
    return llm if isinstance(llm, ResilientLLM) else ResilientLLM([(llm.name, llm)])


def resilient_tts(tts: TTS | None) -> ResilientTTS | None:
    if tts is None or isinstance(tts, ResilientTTS):
        return tts
    return ResilientTTS([(tts.name, tts)])
