"""OpenAI text-to-speech: ``POST {base_url}/audio/speech`` with ``response_format: "pcm"``.

The body streams back as raw PCM16 little-endian mono at 24 kHz, without a header; each
chunk is passed on as it arrives. Errors are OpenAI's JSON ``{"error": {"message", "type",
"code"}}``; the message is shown (cleaned and bounded) except for a rejected key, which
OpenAI quotes back half-masked. Connections come from the speech pool of ``http_pool``
(aiohttp), apart from the LLM streams'.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from engine.providers import http_pool, languages
from engine.providers.base import TTS, Capabilities, ProviderError
from engine.providers.spec import (
    TTS_TIMEOUT_S,
    CredentialKind,
    ProviderSpec,
    Setting,
    secret_setting,
)
from engine.providers.tts_common import Pcm16Aligner, Vendor, is_blank, require_setting

OPENAI = Vendor(name="OpenAI", key_setting="OPENAI_API_KEY")


class OpenAITTS(TTS):
    name = "openai"
    # Its voices speak the language of the text they are given.
    capabilities = Capabilities(sample_rate=24_000, languages=languages.ANY, detects_language=True)

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str = "https://api.openai.com/v1",
        model: str = "gpt-4o-mini-tts",
        default_voice: str = "alloy",
        timeout_s: float = 10.0,
        language: str = languages.ENGLISH,
    ) -> None:
        """``language``: another than English is said in ``instructions`` ("Speak in
        Spanish."), which the gpt-4o voices follow (tts-1 takes none: the text decides)."""
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self.language = languages.normalised(language)
        self._api_key = api_key
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.default_voice = default_voice
        self.timeout_s = timeout_s
        self._timeout = http_pool.timeout(timeout_s)

    async def synthesize(self, text: str, *, voice: str | None = None) -> AsyncIterator[bytes]:
        if is_blank(text):
            return
        api_key = require_setting(self._api_key, "OPENAI_API_KEY")
        body = {
            "model": self.model,
            "input": text,
            "voice": (voice or self.default_voice).strip(),
            "response_format": "pcm",
        }
        if self.language in languages.NAMES and self.language != languages.ENGLISH:
            if not self.model.startswith("tts-1"):
                body["instructions"] = f"Speak in {languages.NAMES[self.language]}."
        session = http_pool.shared_session("tts")
        try:
            async with session.post(
                f"{self.base_url}/audio/speech",
                json=body,
                headers={"Authorization": f"Bearer {api_key}"},
                timeout=self._timeout,
                allow_redirects=False,
            ) as response:
                if response.status >= 300:
                    detail = _error_detail(await response.read(), secrets=(api_key, text))
                    raise OPENAI.status_error(response.status, detail)
                samples = Pcm16Aligner()
                async for chunk in response.content.iter_any():
                    if pcm := samples.feed(chunk):
                        yield pcm
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise self._transport_error(exc) from None

    def _transport_error(self, exc: Exception) -> ProviderError:
        if isinstance(exc, TimeoutError):  # aiohttp's timeouts are TimeoutErrors too
            return OPENAI.timeout_error(self.timeout_s)
        if isinstance(exc, aiohttp.InvalidURL | aiohttp.NonHttpUrlClientError):
            return OPENAI.error("the OpenAI base URL is not an http(s) URL", retryable=False)
        if isinstance(exc, aiohttp.ClientConnectorError):
            return OPENAI.unreachable_error()
        if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ClientConnectionError):
            return OPENAI.broken_error()
        return OPENAI.garbage_error("a response that could not be read")


def _error_detail(body: bytes, *, secrets: tuple[str, ...]) -> str:
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return ""  # an HTML page from a proxy says nothing useful
    error = payload.get("error") if isinstance(payload, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return OPENAI.quote(message, secrets=secrets)


API_KEY = secret_setting("OPENAI_API_KEY")
BASE_URL = Setting("OPENAI_TTS_BASE_URL", "https://api.openai.com/v1")
MODEL = Setting("OPENAI_TTS_MODEL", "gpt-4o-mini-tts")


def _options() -> dict[str, Any]:
    return {
        "api_key": API_KEY.value() or "",
        "base_url": BASE_URL.value(),
        "model": MODEL.value(),
        "timeout_s": TTS_TIMEOUT_S.value(),
    }


PROVIDER = ProviderSpec(
    kind="tts",
    name="openai",
    label="OpenAI",
    adapter=OpenAITTS,
    settings=(API_KEY, BASE_URL, MODEL),
    options=_options,
    own_account=lambda account: {"api_key": account.api_key or ""},
    voice_help="alloy (default), ash, coral, echo, fable, nova, onyx, sage, shimmer",
    credential=CredentialKind("OpenAI text-to-speech"),
)
