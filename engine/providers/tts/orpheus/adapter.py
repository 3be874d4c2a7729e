"""Orpheus text-to-speech over the WebSocket of Baseten's Orpheus truss.

One connection per sentence, as the truss expects: open it with ``Authorization: Api-Key``,
send the generation settings as one JSON frame, then the words (one text frame each), then
the text frame ``__END__``. The truss answers with binary frames of PCM16 little-endian mono
at 24 kHz and closes the connection when the sentence is spoken.

Defaults are the truss's own (basetenlabs/truss-examples, ``orpheus-3b-websockets``):
max_tokens 6144, buffer_size 10 words, temperature 0.6, top_p 0.8, repetition_penalty 1.3.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import egress
from engine.providers.base import TTS, Capabilities, ProviderError
from engine.providers.spec import (
    TTS_TIMEOUT_S,
    AccountURL,
    CredentialKind,
    ProviderSpec,
    Setting,
    secret_setting,
)
from engine.providers.tts_common import (
    ERROR_CODE,
    Pcm16Aligner,
    Vendor,
    is_blank,
    receive,
    require_setting,
    websocket_session,
)

VOICES = ("tara", "leah", "jess", "leo", "dan", "mia", "zac", "zoe")
END_OF_TEXT = "__END__"
ORPHEUS = Vendor(name="Orpheus", key_setting="ORPHEUS_API_KEY")


class OrpheusTTS(TTS):
    name = "orpheus"
    capabilities = Capabilities(sample_rate=24_000, voices=VOICES)

    def __init__(
        self,
        *,
        url: str,
        api_key: str,
        default_voice: str = "tara",
        max_tokens: int = 6144,
        buffer_size: int = 10,
        temperature: float = 0.6,
        top_p: float = 0.8,
        repetition_penalty: float = 1.3,
        timeout_s: float = 10.0,
        egress_policy: egress.Policy = egress.OPERATOR,
    ) -> None:
        """``egress_policy``: the egress guard's rules for a workspace's own URL; the
        platform's ``ORPHEUS_URL`` is the operator's (``egress.OPERATOR``)."""
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self.url = url
        self.egress_policy = egress_policy
        self._api_key = api_key
        try:
            self.default_voice = voice_name(default_voice)
        except ProviderError as exc:
            raise ValueError(str(exc)) from None
        self.settings: dict[str, Any] = {
            "max_tokens": max_tokens,
            "buffer_size": buffer_size,
            "temperature": temperature,
            "top_p": top_p,
            "repetition_penalty": repetition_penalty,
        }
        self.timeout_s = timeout_s

    async def synthesize(self, text: str, *, voice: str | None = None) -> AsyncIterator[bytes]:
        if is_blank(text):
            return
        url = require_setting(self.url, "ORPHEUS_URL")
        api_key = require_setting(self._api_key, "ORPHEUS_API_KEY")
        metadata = {"voice": voice_name(voice) if voice else self.default_voice, **self.settings}
        async with websocket_session(
            ORPHEUS,
            url,
            headers={"Authorization": f"Api-Key {api_key}"},
            timeout_s=self.timeout_s,
            secrets=(api_key, text),
            policy=self.egress_policy,
        ) as websocket:
            await websocket.send(json.dumps(metadata))
            for word in text.split():
                await websocket.send(word)
            await websocket.send(END_OF_TEXT)
            samples = Pcm16Aligner()
            while (frame := await receive(websocket, self.timeout_s)) is not None:
                if isinstance(frame, str):
                    raise ORPHEUS.garbage_error("a text message where audio was expected")
                if pcm := samples.feed(frame):
                    yield pcm


def voice_name(voice: str) -> str:
    name = voice.strip().lower()
    if name not in VOICES:
        raise ProviderError(
            f"Orpheus has no voice {voice[:40]!r}; choose one of {', '.join(VOICES)}",
            code=ERROR_CODE,
        )
    return name


URL = Setting("ORPHEUS_URL")
API_KEY = secret_setting("ORPHEUS_API_KEY")


def _options() -> dict[str, Any]:
    return {
        "url": URL.value() or "",
        "api_key": API_KEY.value() or "",
        "timeout_s": TTS_TIMEOUT_S.value(),
    }


PROVIDER = ProviderSpec(
    kind="tts",
    name="orpheus",
    label="Orpheus",
    adapter=OrpheusTTS,
    settings=(URL, API_KEY),
    options=_options,
    own_account=lambda account: {"api_key": account.api_key or "", "url": account.url},
    credential=CredentialKind(
        "Orpheus text-to-speech",
        url=AccountURL(
            label="WebSocket URL",
            what="Orpheus URL",
            schemes=("wss", "ws"),
            placeholder="wss://model-….api.baseten.co/…",
        ),
    ),
)
