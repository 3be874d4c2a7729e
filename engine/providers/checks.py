"""'Test connection': one tiny real request through an adapter, and what it did in words.

Each kind has its check here; a provider whose folder knows a better one sets
``ProviderSpec.check``. A failure raises ``ProviderError`` (the caller words it)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from engine.protocol import ErrorCode
from engine.providers.base import LLM, STT, TTS, ProviderError, TextDelta

Check = Callable[[Any], Awaitable[str]]
PROMPT = [{"role": "user", "content": "Reply with the single word OK."}]
ANSWER_SHOWN_MAX = 40


async def llm_answers(llm: LLM) -> str:
    answer = ""
    async for event in llm.stream(messages=PROMPT, tools=[]):
        if isinstance(event, TextDelta):
            answer += event.text
    shown = " ".join(answer.split())[:ANSWER_SHOWN_MAX] or "(an empty reply)"
    model, url = getattr(llm, "model", "?"), getattr(llm, "base_url", "")
    return f"model {model} at {urlsplit(url).hostname} answered “{shown}”"


async def stt_opens(stt: STT) -> str:
    stream = await stt.open(sample_rate=16_000)
    await stream.aclose()
    return "a streaming recognition session opened"


async def tts_speaks(tts: TTS) -> str:
    audio = tts.synthesize("OK")
    try:
        async for chunk in audio:
            if chunk:
                return "the voice spoke a test word"
    finally:
        if isinstance(audio, AsyncGenerator):
            await audio.aclose()
    raise ProviderError("the provider answered without audio", code=ErrorCode.TTS_FAILED)


BY_KIND: dict[str, Check] = {"llm": llm_answers, "stt": stt_opens, "tts": tts_speaks}
