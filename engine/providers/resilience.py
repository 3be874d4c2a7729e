"""Retries and fallbacks, in one place: adapters never retry, the session never decides.

A call that fails with a retryable ``ProviderError`` before it produced anything is
tried again after a short pause (``RetryPolicy``, from ``PROVIDER_RETRY_DELAYS_MS``).
When the retries are spent, or the failure is one a retry cannot help (a wrong key),
the next provider of the agent's ordered list takes the call ("LLM cascading"). Once a
token or an audio byte went out, a failure ends the call as it is: asking again would
make the agent say things twice.

A provider that keeps failing is skipped for a while (``breaker``: per provider and
workspace, opened after ``BreakerPolicy.failures`` failed calls in a row, closed when a
background probe gets an answer); the call it would have taken goes straight to the next
provider, with ``circuit_open`` as the reason.

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
from typing import Any, Generic, TypeVar

from engine.providers.base import (
    LLM,
    REASON_CIRCUIT_OPEN,
    STT,
    TTS,
    LLMEvent,
    ProviderError,
    STTStream,
    ToolSpec,
)
from engine.providers.breaker import Breaker, BreakerPolicy, Probe, breaker_for

T = TypeVar("T")
P = TypeVar("P", LLM, STT, TTS)
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


@dataclass(frozen=True)
class Candidate(Generic[T]):
    """One provider of a call: how to start the call, its breaker and how to probe it."""

    label: str
    start: Callable[[], AsyncIterator[T]]
    breaker: Breaker | None = None
    probe: Probe | None = None


@dataclass(frozen=True)
class Breakers:
    """Where a chain's breakers are: ``scope`` (the workspace) and the policy; None: none."""

    kind: str
    scope: str
    policy: BreakerPolicy

    def of(self, label: str) -> Breaker:
        return breaker_for((self.kind, label, self.scope), self.policy)


def _closed_ones(candidates: Sequence[Candidate[T]]) -> tuple[list[Candidate[T]], str | None]:
    """The candidates whose breaker lets a call through, and why the first was skipped;
    every one of them, if all are open (skipping everyone would answer nobody)."""
    usable = [c for c in candidates if c.breaker is None or c.breaker.allows()]
    if not usable:
        return list(candidates), None
    skipped_first = bool(candidates) and usable[0] is not candidates[0]
    return usable, REASON_CIRCUIT_OPEN if skipped_first else None


async def _resilient(
    candidates: Sequence[Candidate[T]],
    policy: RetryPolicy,
    report: Report | None,
    sleep: Sleep,
) -> AsyncIterator[T]:
    """The first candidate's items that produced any; see the module docstring."""
    retries = 0
    first_error: ProviderError | None = None
    error: ProviderError | None = None
    usable, reason = _closed_ones(candidates)

    def served(candidate: Candidate[T] | None) -> None:
        if candidate is not None and candidate.breaker is not None:
            candidate.breaker.succeeded()
        if report is not None:
            report(Attempts(candidate.label if candidate else None, retries, reason))

    for candidate in usable:
        for attempt in range(len(policy.delays_s) + 1):
            produced = False
            stream = candidate.start()
            try:
                async for item in stream:
                    if not produced:
                        produced = True
                        served(candidate)
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
                    served(candidate)
                return
            finally:
                await _close(stream)
        if candidate.breaker is not None:
            candidate.breaker.failed(candidate.probe)
        reason = error.reason if error is not None else None  # why the next one serves
    served(None)
    # Every provider failed: the user hears what the primary's failure says, as they
    # would without fallbacks.
    assert first_error is not None
    raise first_error


# What a probe asks an open provider: as little as it will answer.
_PROBE_TEXT = "OK."
_PROBE_CHAT = [{"role": "user", "content": "Say OK."}]


def _candidate(
    label: str,
    start: Callable[[], AsyncIterator[T]],
    breakers: Breakers | None,
    probe: Probe,
) -> Candidate[T]:
    breaker = breakers.of(label) if breakers is not None else None
    return Candidate(label, start, breaker, probe if breaker is not None else None)


def _llm_probe(llm: LLM) -> Probe:
    return lambda: _first(llm.stream(messages=_PROBE_CHAT, tools=[]))


def _tts_probe(tts: TTS) -> Probe:
    return lambda: _first(tts.synthesize(_PROBE_TEXT))


async def _first(stream: AsyncIterator[Any]) -> None:
    """The provider answers: its first item came (the rest is not wanted)."""
    try:
        async for _item in stream:
            return
    finally:
        await _close(stream)


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
        breakers: Breakers | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if not chain:
            raise ValueError("a ResilientLLM needs at least one LLM")
        self._chain, self._policy, self._sleep = list(chain), policy, sleep
        self._breakers = breakers
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
            _candidate(label, start(llm, model if index == 0 else None), self._breakers,
                       _llm_probe(llm))
            for index, (label, llm) in enumerate(self._chain)
            if index == 0 or llm.capabilities.tools or not tools
        ]  # fmt: skip
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
        breakers: Breakers | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if not chain:
            raise ValueError("a ResilientTTS needs at least one TTS")
        self._breakers = breakers
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

        candidates = [
            _candidate(label, start(tts), self._breakers, _tts_probe(tts))
            for label, tts in self._chain
        ]  # fmt: skip
        return _resilient(candidates, self._policy, report, self._sleep)

    async def warm(self, voice: str | None = None) -> None:
        """The primary gets ready (its socket opens); fallbacks connect when needed."""
        primary = self._chain[0][1]
        await primary.warm(_voice_for(primary, voice))

    async def aclose(self) -> None:
        for _, tts in self._chain:
            await tts.aclose()


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


@dataclass(frozen=True)
class Chain(Generic[P]):
    """A provider as a host chose it: the primary first, then its fallbacks, each with the
    label records and metrics name it by, and the retry policy. The session wraps it
    (``resilient_llm``…): the one place a ``Resilient*`` is made."""

    providers: Sequence[tuple[str, P]]
    policy: RetryPolicy = NO_RETRIES
    breakers: BreakerPolicy | None = None  # None: no circuit breakers
    scope: str = ""  # whose credentials: the breakers are per provider and scope

    @property
    def primary(self) -> P:
        return self.providers[0][1]


def _chain(provider: P | Chain[P]) -> Chain[P]:
    return provider if isinstance(provider, Chain) else Chain([(provider.name, provider)])


def _breakers(kind: str, chain: Chain[Any]) -> Breakers | None:
    if chain.breakers is None:
        return None
    return Breakers(kind, chain.scope, chain.breakers)


def resilient_llm(llm: LLM | Chain[LLM]) -> ResilientLLM:
    if isinstance(llm, ResilientLLM):
        return llm
    chain = _chain(llm)
    return ResilientLLM(chain.providers, policy=chain.policy, breakers=_breakers("llm", chain))


def resilient_tts(tts: TTS | Chain[TTS] | None) -> ResilientTTS | None:
    if tts is None or isinstance(tts, ResilientTTS):
        return tts
    chain = _chain(tts)
    return ResilientTTS(chain.providers, policy=chain.policy, breakers=_breakers("tts", chain))


def resilient_stt(stt: STT | Chain[STT] | None) -> ResilientSTT | None:
    if stt is None or isinstance(stt, ResilientSTT):
        return stt
    chain = _chain(stt)
    return ResilientSTT(chain.primary, policy=chain.policy)
