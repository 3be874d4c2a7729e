"""The stand-in LLM for a platform with no language model configured.

It keeps the voice loop honest without any network: the caller hears that no model is
set up and what the speech recogniser understood, which is also a handy end-to-end check
of the audio path.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

from engine.providers.base import LLM, Capabilities, LLMDone, LLMEvent, TextDelta, ToolSpec
from engine.providers.spec import ProviderSpec

NO_MODEL = "No language model is configured on this platform"
_WORDS_PER_DELTA = 4
_WORD = re.compile(r"\S+\s*")


class OfflineLLM(LLM):
    name = "offline"
    capabilities = Capabilities(tools=False, offline=True)

    async def stream(
        self,
        *,
        messages: list[dict[str, Any]],
        tools: list[ToolSpec],
        model: str | None = None,
    ) -> AsyncIterator[LLMEvent]:
        for piece in _pieces(offline_reply(messages)):
            yield TextDelta(piece)
            # A real model streams with pauses; yielding lets a barge-in cancel mid-reply.
            await asyncio.sleep(0)
        yield LLMDone("stop")


def offline_reply(messages: list[dict[str, Any]]) -> str:
    heard = _last_user_text(messages)
    if not heard:
        return f"{NO_MODEL}."
    ending = "" if heard[-1] in ".!?…" else "."
    return f"{NO_MODEL}, so I can only repeat what I heard: {heard}{ending}"


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(
                part["text"]
                for part in content
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            )
        return " ".join(content.split()) if isinstance(content, str) else ""
    return ""


def _pieces(reply: str) -> list[str]:
    words = _WORD.findall(reply)
    return [
        "".join(words[start : start + _WORDS_PER_DELTA])
        for start in range(0, len(words), _WORDS_PER_DELTA)
    ]


PROVIDER = ProviderSpec(kind="llm", name="offline", label="Offline stand-in", adapter=OfflineLLM)
