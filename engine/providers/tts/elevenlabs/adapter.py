"""ElevenLabs text-to-speech over the multi-context ``multi-stream-input`` WebSocket.

One connection per session and voice, reused across sentences and turns (ElevenLabs'
``multi-stream-input``: ``wss://api.elevenlabs.io/v1/text-to-speech/{voice_id}/
multi-stream-input?model_id=…&output_format=pcm_24000&inactivity_timeout=180`` with the
``xi-api-key`` header). It is opened at the session's start (``warm``, while the greeting
is prepared) or by the first sentence. Each sentence is a context of its own: ``{"text":
" ", "context_id"}`` opens it, the sentence (ending in a space) goes with ``flush`` so
generation starts at once, and ``close_context`` right after lets ElevenLabs finish that
audio and then say ``{"isFinal": true, "contextId"}``. Audio arrives as JSON messages with
base64 PCM16 and the ``contextId`` they belong to; one reader task hands each to its
sentence. A barge-in drops the sentence's context (the rest of its audio is ignored); the
socket stays for the next one.

Failures arrive as ``{"message", "error", "code"}`` followed by a close with code 1008, or
as a close code and reason alone: every sentence waiting on that socket fails with it, and
the next sentence opens a new one (``resilience`` retries a sentence that had produced
nothing). After ``aclose`` (the session ended) a call, such as a circuit breaker's probe,
gets a connection of its own, closed when it ends.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import itertools
import json
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote, urlencode

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from engine.providers import languages
from engine.providers.base import TTS, Capabilities, ProviderError
from engine.providers.spec import (
    TTS_TIMEOUT_S,
    CredentialKind,
    ProviderSpec,
    Setting,
    secret_setting,
)
from engine.providers.tts_common import (
    ERROR_CODE,
    Pcm16Aligner,
    Vendor,
    closed_error,
    is_blank,
    require_setting,
    websocket_session,
)

ELEVENLABS = Vendor(name="ElevenLabs", key_setting="ELEVENLABS_API_KEY")
DEFAULT_VOICE = "JBFqnCBsd6RMkjVDRZzb"  # "George", a premade voice every account has
OUTPUT_FORMAT = "pcm_24000"
INACTIVITY_TIMEOUT_S = 180  # ElevenLabs' longest: a socket outlives a pause between turns
_VOICE_ID = re.compile(r"[A-Za-z0-9]{1,64}")
# ``error`` values naming a request no retry can fix (bad key, bad input, no quota…).
_CLIENT_ERRORS = ("invalid", "unauthorized", "auth", "quota", "not_found", "permission")

Message = dict[str, Any]


class _Socket:
    """One open ``multi-stream-input`` connection: its contexts and the task reading it."""

    def __init__(
        self, stack: contextlib.AsyncExitStack, websocket: ClientConnection, secrets: list[str]
    ) -> None:
        self._stack, self._websocket, self.secrets = stack, websocket, secrets
        self._contexts: dict[str, asyncio.Queue[Message | ProviderError]] = {}
        self.failure: ProviderError | None = None
        self._reader = asyncio.create_task(self._read())

    @property
    def usable(self) -> bool:
        return self.failure is None and not self._reader.done()

    def context(self, context_id: str) -> asyncio.Queue[Message | ProviderError]:
        queue: asyncio.Queue[Message | ProviderError] = asyncio.Queue()
        self._contexts[context_id] = queue
        return queue

    def forget(self, context_id: str) -> None:
        self._contexts.pop(context_id, None)

    async def send(self, message: Message) -> None:
        if self.failure is not None:
            raise self.failure
        try:
            await self._websocket.send(json.dumps(message))
        except ConnectionClosed as exc:
            self.fail(closed_error(ELEVENLABS, exc, secrets=self.secrets))
            raise self.failure or ELEVENLABS.broken_error() from None

    async def _read(self) -> None:
        try:
            async for raw in self._websocket:
                message = _parse(raw, secrets=tuple(self.secrets))
                queue = self._contexts.get(str(message.get("contextId")))
                if queue is not None:  # else: a sentence the user talked over
                    queue.put_nowait(message)
            self.fail(ELEVENLABS.error("ElevenLabs closed the connection", retryable=True))
        except ConnectionClosed as exc:
            self.fail(closed_error(ELEVENLABS, exc, secrets=self.secrets))
        except ProviderError as exc:
            self.fail(exc)

    def fail(self, error: ProviderError) -> None:
        """Every sentence waiting on this socket fails with ``error``; no new one uses it."""
        self.failure = self.failure or error
        for queue in self._contexts.values():
            queue.put_nowait(self.failure)

    async def aclose(self) -> None:
        self.fail(ELEVENLABS.error("the session ended", retryable=False))
        with contextlib.suppress(Exception):
            await self._websocket.send(json.dumps({"close_socket": True}))
        self._reader.cancel()
        with contextlib.suppress(BaseException):
            await self._reader
        with contextlib.suppress(Exception):
            await self._stack.aclose()


class ElevenLabsTTS(TTS):
    name = "elevenlabs"
    # eleven_flash_v2_5 and the other multilingual models speak 32 languages, each in the
    # language of the text it is given.
    capabilities = Capabilities(sample_rate=24_000, languages=languages.ANY, detects_language=True)

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str = "wss://api.elevenlabs.io",
        default_voice: str = DEFAULT_VOICE,
        model_id: str = "eleven_flash_v2_5",
        timeout_s: float = 10.0,
        language: str = languages.ENGLISH,
    ) -> None:
        """``language``: a code is sent as ``language_code`` (the model reads numbers and
        names in that language); English and ``detect`` leave it to the text."""
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self.language = languages.normalised(language)
        self._api_key = api_key
        self.base_url = base_url.rstrip("/")
        self.default_voice = default_voice
        self.model_id = model_id
        self.timeout_s = timeout_s
        self._sockets: dict[str, _Socket] = {}  # by voice id
        self._opening = asyncio.Lock()
        self._context_ids = itertools.count(1)
        self._closed = False

    async def warm(self, voice: str | None = None) -> None:
        """Open the session's connection ahead of its first sentence."""
        with contextlib.suppress(ProviderError):
            await self._socket(voice_id(voice or self.default_voice))

    async def synthesize(self, text: str, *, voice: str | None = None) -> AsyncIterator[bytes]:
        if is_blank(text):
            return
        voice = voice_id(voice or self.default_voice)
        if self._closed:  # a call after the session (a breaker's probe): a socket of its own
            socket = await self._open(voice)
            try:
                async for pcm in self._spoken(socket, text):
                    yield pcm
            finally:
                await socket.aclose()
            return
        async for pcm in self._spoken(await self._socket(voice), text):
            yield pcm

    async def _spoken(self, socket: _Socket, text: str) -> AsyncIterator[bytes]:
        context_id = f"c{next(self._context_ids)}"
        queue = socket.context(context_id)
        socket.secrets.append(text)  # quoted back in an error: masked
        try:
            await socket.send({"text": " ", "context_id": context_id})
            await socket.send({"text": text.strip() + " ", "context_id": context_id, "flush": True})
            await socket.send({"context_id": context_id, "close_context": True})
            samples = Pcm16Aligner()
            while True:
                message = await self._next(socket, queue)
                if pcm := samples.feed(_audio_of(message)):
                    yield pcm
                if message.get("isFinal") is True:
                    return
        finally:
            socket.forget(context_id)
            socket.secrets.remove(text)

    async def _next(
        self, socket: _Socket, queue: asyncio.Queue[Message | ProviderError]
    ) -> Message:
        try:
            item = await asyncio.wait_for(queue.get(), self.timeout_s)
        except TimeoutError:
            # A socket that went silent is not trusted with the next sentence either.
            error = ELEVENLABS.timeout_error(self.timeout_s)
            socket.fail(error)
            raise error from None
        if isinstance(item, ProviderError):
            raise item
        return item

    async def _socket(self, voice: str) -> _Socket:
        async with self._opening:
            socket = self._sockets.get(voice)
            if socket is None or not socket.usable:
                if socket is not None:
                    await socket.aclose()
                socket = self._sockets[voice] = await self._open(voice)
            return socket

    async def _open(self, voice: str) -> _Socket:
        api_key = require_setting(self._api_key, "ELEVENLABS_API_KEY")
        stack = contextlib.AsyncExitStack()
        websocket = await stack.enter_async_context(
            websocket_session(
                ELEVENLABS,
                self._url(voice),
                headers={"xi-api-key": api_key},
                timeout_s=self.timeout_s,
                secrets=(api_key,),
            )
        )
        return _Socket(stack, websocket, [api_key])

    async def aclose(self) -> None:
        self._closed = True
        sockets, self._sockets = list(self._sockets.values()), {}
        for socket in sockets:
            await socket.aclose()

    def _url(self, voice: str) -> str:
        params: dict[str, Any] = {
            "model_id": self.model_id,
            "output_format": OUTPUT_FORMAT,
            "inactivity_timeout": INACTIVITY_TIMEOUT_S,
        }
        if self.language not in (languages.ENGLISH, languages.DETECT):
            params["language_code"] = self.language
        path = f"/v1/text-to-speech/{quote(voice, safe='')}/multi-stream-input"
        return f"{self.base_url}{path}?{urlencode(params)}"


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
    except (json.JSONDecodeError, RecursionError):  # or nested past the parser's depth
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
        "timeout_s": TTS_TIMEOUT_S.value(),
    }


PROVIDER = ProviderSpec(
    kind="tts",
    name="elevenlabs",
    label="ElevenLabs",
    adapter=ElevenLabsTTS,
    settings=(API_KEY, BASE_URL, MODEL),
    options=_options,
    own_account=lambda account: {"api_key": account.api_key or ""},
    voice_help=f"a voice id from the account's voice library ({DEFAULT_VOICE}, George, by default)",
    credential=CredentialKind("ElevenLabs text-to-speech"),
)
