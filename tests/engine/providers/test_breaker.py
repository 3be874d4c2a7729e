"""Circuit breakers: OpenAI's speech endpoint (a fake on a real socket) fails, then
recovers; the breaker opens, the fallback serves at once, a probe finds it well again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from engine import metrics
from engine.providers import breaker
from engine.providers.base import ProviderError
from engine.providers.breaker import BreakerPolicy
from engine.providers.resilience import Attempts, Chain, RetryPolicy, resilient_tts
from engine.providers.tts.openai.adapter import OpenAITTS
from tests.engine.providers.fake import FakeTTS
from tests.engine.providers.llm.openai.fake_server import HttpError
from tests.engine.providers.tts.openai.fake_server import FakeOpenAISpeechServer

KEY = "sk-breaker-key"
RETRY_S = 0.3
COOLDOWN_S = 0.3


@pytest.fixture(autouse=True)
def fresh_breakers() -> Iterator[None]:
    breaker.forget_all()
    yield
    breaker.forget_all()


@pytest.fixture
async def primary() -> AsyncIterator[FakeOpenAISpeechServer]:
    async with FakeOpenAISpeechServer(api_key=KEY) as server:
        yield server


def changes(change: str) -> float:
    value = metrics.REGISTRY.get_sample_value(
        "voice_provider_circuit_changes_total", {"kind": "tts", "change": change}
    )
    return value or 0.0


def open_now() -> float:
    return metrics.REGISTRY.get_sample_value("voice_provider_circuits_open", {"kind": "tts"}) or 0


async def say(chain: Chain[OpenAITTS | FakeTTS], text: str) -> tuple[Attempts, float]:
    tts = resilient_tts(chain)  # type: ignore[arg-type]
    assert tts is not None
    reports: list[Attempts] = []
    started = time.monotonic()
    audio = [chunk async for chunk in tts.synthesize(text, report=reports.append)]
    assert audio  # the caller always hears something
    return reports[-1], time.monotonic() - started


async def test_a_failing_provider_is_skipped_probed_and_restored(
    primary: FakeOpenAISpeechServer,
) -> None:
    backup = FakeTTS()
    chain: Chain[OpenAITTS | FakeTTS] = Chain(
        [("openai", OpenAITTS(api_key=KEY, base_url=primary.base_url)), ("backup", backup)],
        RetryPolicy((RETRY_S,)),
        BreakerPolicy(failures=2, cooldown_s=COOLDOWN_S),
        "workspace:1",
    )
    restored = asyncio.Event()

    def on_change(_kind: str, opened: bool) -> None:
        if not opened:
            restored.set()

    breaker.listeners.append(on_change)
    # Two calls (each tried twice), then the first probe fail; the second probe answers.
    primary.inject(*[HttpError(503, "overloaded")] * 5)
    opened, closed = changes("opened"), changes("closed")

    for sentence in ("One.", "Two."):
        attempts, took = await say(chain, sentence)
        assert (attempts.served, attempts.fallback_reason) == ("backup", "server_error")
        assert took >= RETRY_S  # the primary's retry was paid
    assert len(primary.requests) == 4
    assert (changes("opened") - opened, open_now()) == (1, 1)

    # Open: the fallback answers at once, the primary is not asked.
    attempts, took = await say(chain, "Three.")
    assert (attempts.served, attempts.fallback_reason, attempts.retries) == (
        "backup",
        "circuit_open",
        0,
    )
    assert took < RETRY_S and len(primary.requests) == 4
    # Another workspace's credential has a breaker of its own, closed.
    assert breaker.breaker_for(("tts", "openai", "workspace:2"), BreakerPolicy()).allows()

    await asyncio.wait_for(restored.wait(), 10)
    assert changes("closed") - closed == 1 and open_now() == 0
    assert [r.json["input"] for r in primary.requests[4:]] == ["OK.", "OK."]  # two probes

    breaker.listeners.remove(on_change)
    attempts, _took = await say(chain, "Four.")
    assert (attempts.served, attempts.fallback_reason) == ("openai", None)
    assert [text for text, _voice in backup.requests] == ["One.", "Two.", "Three."]


async def test_when_every_provider_is_open_they_are_all_tried_anyway(
    primary: FakeOpenAISpeechServer,
) -> None:
    chain: Chain[OpenAITTS] = Chain(
        [("openai", OpenAITTS(api_key=KEY, base_url=primary.base_url))],
        RetryPolicy(()),
        BreakerPolicy(failures=1, cooldown_s=60),
        "workspace:1",
    )
    primary.inject(HttpError(503, "overloaded"))
    tts = resilient_tts(chain)  # type: ignore[arg-type]
    assert tts is not None
    with pytest.raises(ProviderError, match="overloaded"):
        _ = [chunk async for chunk in tts.synthesize("One.")]
    attempts, _took = await say(chain, "Two.")  # open, but the only one: asked anyway
    assert attempts.served == "openai"
