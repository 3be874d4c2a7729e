"""ElevenLabs text-to-speech over the ``stream-input`` WebSocket.

One connection per sentence: ``wss://api.elevenlabs.io/v1/text-to-speech/{voice_id}/
stream-input?model_id=…&output_format=pcm_24000`` with the ``xi-api-key`` header, then the
messages the API reference prescribes: ``{"text": " "}`` to open, the sentence (ending in a
space) with ``flush`` so generation starts at once, and ``{"text": ""}`` to end. ElevenLabs
answers with JSON messages carrying base64 PCM16 (``audio``, with alignment data we ignore),
then ``{"isFinal": true}``, and closes. Failures arrive as ``{"message", "error", "code"}``
followed by a close with code 1008, or as a close code and reason alone.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote, urlencode

from django.conf import settings

from sessions_app.providers.base import TTS, ProviderError
from sessions_app.providers.spec import ProviderSpec, Setting, secret_setting
from sessions_app.providers.tts_common import (
    ERROR_CODE,
    Pcm16Aligner,
    Vendor,
    is_blank,
    receive,
    require_setting,
    websocket_session,
)

ELEVENLABS = Vendor(name="ElevenLabs", key_setting="ELEVENLABS_API_KEY")
DEFAULT_VOICE = "JBFqnCBsd6RMkjVDRZzb"  # "George", a premade voice every account has
OUTPUT_FORMAT = "pcm_24000"
_VOICE_ID = re.compile(r"[A-Za-z0-9]{1,64}")
# ``error`` values naming a request no retry can fix (bad key, bad input, no quota…).
_CLIENT_ERRORS = ("invalid", "unauthorized", "auth", "quota", "not_found", "permission")


class ElevenLabsTTS(TTS):
    name = "elevenlabs"

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str = "wss://api.elevenlabs.io",
        default_voice: str = DEFAULT_VOICE,
        model_id: str = "eleven_flash_v2_5",
        timeout_s: float = 10.0,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self._api_key = api_key
        self.base_url = base_url.rstrip("/")
        self.default_voice = default_voice
        self.model_id = model_id
        self.timeout_s = timeout_s

    async def synthesize(self, text: str, *, voice: str | None = None) -> AsyncIterator[bytes]:
        if is_blank(text):
            return
        api_key = require_setting(self._api_key, "ELEVENLABS_API_KEY")
        secrets = (api_key, text)
        async with websocket_session(
            ELEVENLABS,
            self._url(voice_id(voice or self.default_voice)),
            headers={"xi-api-key": api_key},
            timeout_s=self.timeout_s,
            secrets=secrets,
        ) as websocket:
            for request in _request_messages(text):
                await websocket.send(json.dumps(request))
            samples = Pcm16Aligner()
            while (raw := await receive(websocket, self.timeout_s)) is not None:
                message = _parse(raw, secrets=secrets)
                if pcm := samples.feed(_audio_of(message)):
                    yield pcm
                if message.get("isFinal") is True:
                    return

    def _url(self, voice: str) -> str:
        query = urlencode({"model_id": self.model_id, "output_format": OUTPUT_FORMAT})
        return f"{self.base_url}/v1/text-to-speech/{quote(voice, safe='')}/stream-input?{query}"


def _request_messages(text: str) -> list[dict[str, Any]]:
    """Open, the sentence (ending in a space, flushed at once), end of input."""
    return [{"text": " "}, {"text": text.strip() + " ", "flush": True}, {"text": ""}]


def voice_id(voice: str) -> str:
    voice = voice.strip()
    if not _VOICE_ID.fullmatch(voice):
        raise ProviderError(
            f"ElevenLabs voices are voice ids such as {DEFAULT_VOICE}, not {voice[:40]!r}",
            code=ERROR_CODE,
        )
    return voice


def _parse(raw: str | bytes, *, secrets: tuple[str, ...]) -> dict[str, Any]:
    if isinstance(raw, bytes):
        raise ELEVENLABS.garbage_error("binary data where JSON was expected")
    try:
        message = json.loads(raw)
    except json.JSONDecodeError:
        raise ELEVENLABS.garbage_error("a message that is not valid JSON") from None
    if not isinstance(message, dict):
        raise ELEVENLABS.garbage_error("a message that is not a JSON object")
    if message.get("error") or ("message" in message and "audio" not in message):
        raise _error_message(message, secrets=secrets)
    return message


def _error_message(message: dict[str, Any], *, secrets: tuple[str, ...]) -> ProviderError:
    kind = ELEVENLABS.quote(message.get("error"), secrets=secrets)
    if "api_key" in kind.lower() or "auth" in kind.lower():
        return ELEVENLABS.key_error(kind)
    said = ELEVENLABS.quote(message.get("message"), secrets=secrets) or kind or "unknown error"
    retryable = not any(marker in kind.lower() for marker in _CLIENT_ERRORS)
    return ELEVENLABS.error(f"ElevenLabs error: {said}", retryable=retryable)


def _audio_of(message: dict[str, Any]) -> bytes:
    audio = message.get("audio")
    if not audio:
        return b""  # the final message and alignment-only messages carry no audio
    try:
        return base64.b64decode(audio, validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise ELEVENLABS.garbage_error("audio that is not valid base64") from None


API_KEY = secret_setting("ELEVENLABS_API_KEY")
BASE_URL = Setting("ELEVENLABS_BASE_URL", "wss://api.elevenlabs.io")
MODEL = Setting("ELEVENLABS_MODEL", "eleven_flash_v2_5")


def _options() -> dict[str, Any]:
    return {
        "api_key": API_KEY.value() or "",
        "base_url": BASE_URL.value(),
        "model_id": MODEL.value(),
        "timeout_s": settings.TTS_TIMEOUT_S,
    }


PROVIDER = ProviderSpec(
    kind="tts",
    name="elevenlabs",
    label="ElevenLabs",
    adapter=ElevenLabsTTS,
    settings=(API_KEY, BASE_URL, MODEL),
    options=_options,
    own_account=lambda account: {"api_key": account.api_key or ""},
)
