"""AssemblyAI Universal Streaming (v3) speech-to-text.

One session per ``open``: a one-time token from ``GET {base_url}/v3/token`` (the bare API
key in ``Authorization``), then a WebSocket to ``/v3/ws`` carrying that token and the
connection settings in its query string. Audio goes up as binary messages, which the
service wants 50 to 1000 ms long; ``Begin``, ``SpeechStarted``, ``Turn``, ``Warning``,
``Error`` and ``Termination`` come down as JSON. The protocol as documented:
https://www.assemblyai.com/docs/streaming/universal-streaming/message-sequence and
https://www.assemblyai.com/docs/streaming/common-session-errors-and-closures.

The adapter never retries: failures are ``ProviderError(code="stt_failed")`` saying
whether a retry could help. Audio, transcripts, tokens and the key are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import aiohttp
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.frames import Close

import egress
from egress.websocket import open_websocket
from engine.protocol import ErrorCode
from engine.providers import languages
from engine.providers.base import (
    STT,
    Capabilities,
    FinalTranscript,
    PartialTranscript,
    ProviderError,
    SpeechStarted,
    STTEvent,
    STTStream,
)
from engine.providers.spec import (
    STT_TIMEOUT_S,
    CredentialKind,
    ProviderSpec,
    Setting,
    secret_setting,
)

logger = logging.getLogger(__name__)
# websockets logs whole frames and the handshake URL (which holds the token) at DEBUG;
# its own logger is pinned above that so no debug setting can leak them.
_WS_LOGGER = logging.getLogger(f"{__name__}.websocket")
_WS_LOGGER.setLevel(logging.INFO)

ERROR_CODE = ErrorCode.STT_FAILED
DEFAULT_BASE_URL = "https://streaming.assemblyai.com"
# Named explicitly: the server-side default has moved between models over time, and the
# turn settings below are Universal-Streaming's.
DEFAULT_SPEECH_MODEL = "universal-streaming-english"
MULTILINGUAL_SPEECH_MODEL = "universal-streaming-multilingual"  # en, es, fr, de, it, pt
CHUNK_MS = 100  # one audio message; the service accepts 50 to 1000 ms
MIN_CHUNK_MS = 50
TOKEN_EXPIRY_RANGE = range(1, 601)  # expires_in_seconds, per the token endpoint's spec
_PUSH_RECORDS = 3000  # a minute of 20 ms frames: enough to place any turn's last word
_MAX_DETAIL = 120

# Close codes: what each means and whether a new session could succeed. 1008 and 3005-3009
# are the v3 table; the 4xxx codes are the ones AssemblyAI's own v3 SDK still maps.
_CLOSE_CODES: dict[int, tuple[str, bool]] = {
    1008: ("unauthorized connection (token, concurrency or account problem)", False),
    1011: ("internal server error", True),
    1013: ("temporary server condition", True),
    3005: ("server error, the session was cancelled", True),
    3006: ("the service rejected a message or parameter as invalid", False),
    3007: ("audio message duration or transmission rate violation", False),
    3008: ("session expired: maximum session duration exceeded", True),
    3009: ("too many concurrent sessions", True),
    4000: ("sample rate must be a positive integer", False),
    4001: ("not authorized", False),
    4002: ("insufficient funds", False),
    4003: ("this feature needs a paid account", False),
    4004: ("session not found", False),
    4008: ("session expired", True),
    4010: ("session previously closed", False),
    4029: ("audio sent too fast / rate limited", True),
    4030: ("session is handled by another WebSocket", False),
    4031: ("session idle for too long", True),
    4032: ("audio duration is too short", False),
    4033: ("audio duration is too long", False),
    4034: ("audio too small to transcode", False),
    4100: ("the service received invalid JSON", False),
    4101: ("the service received a message with an invalid schema", False),
    4102: ("the account exceeded its number of allowed streams", True),
    4103: ("the session was reconnected elsewhere", False),
}


class AssemblyAISTT(STT):
    name = "assemblyai"
    capabilities = Capabilities(
        sample_rate=16000,
        languages=languages.ASSEMBLYAI_MULTILINGUAL,
        detects_language=True,
    )
    # Seconds without any outgoing message before a KeepAlive goes out (the agent is
    # talking and the client stopped sending audio), and the wait for Termination.
    keepalive_after_s: float = 5.0
    termination_wait_s: float = 2.0

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str = DEFAULT_BASE_URL,
        speech_model: str = DEFAULT_SPEECH_MODEL,
        format_turns: bool = True,
        end_of_turn_confidence_threshold: float | None = None,
        min_end_of_turn_silence_when_confident: int | None = None,
        max_turn_silence: int | None = None,
        token_expires_s: int = 60,
        timeout_s: float = 10.0,
        vocabulary: Sequence[str] = (),
        language: str = languages.ENGLISH,
    ) -> None:
        """``vocabulary``: words and phrases the speakers are expected to use (the
        agent's hints), sent as ``keyterms_prompt``. ``language``: another than English
        (or ``detect``) takes the multilingual streaming model, which recognises six and
        says which one each turn was in; ``detect`` also asks for that detection."""
        if token_expires_s not in TOKEN_EXPIRY_RANGE:
            raise ValueError("token_expires_s must be between 1 and 600 seconds")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        threshold = end_of_turn_confidence_threshold
        if threshold is not None and not 0 <= threshold <= 1:
            raise ValueError("end_of_turn_confidence_threshold must be between 0 and 1")
        self.base_url = base_url.rstrip("/")
        self._ws_base = _ws_base(self.base_url)
        self.language = languages.normalised(language)
        english = self.language == languages.ENGLISH
        self.speech_model = speech_model if english else MULTILINGUAL_SPEECH_MODEL
        self.format_turns = format_turns
        self._turn_settings = {
            "end_of_turn_confidence_threshold": threshold,
            "min_end_of_turn_silence_when_confident": min_end_of_turn_silence_when_confident,
            "max_turn_silence": max_turn_silence,
        }
        self.vocabulary = tuple(vocabulary)
        self._api_key = api_key or ""
        self._token_expires_s = token_expires_s
        self._timeout_s = timeout_s

    async def open(self, *, sample_rate: int) -> AssemblyAIStream:
        if not self._api_key:
            raise ProviderError("ASSEMBLYAI_API_KEY is not set", code=ERROR_CODE)
        if sample_rate <= 0:
            raise ValueError("sample_rate must be positive")
        token = await self._temporary_token()
        secrets = (self._api_key, token)
        socket = await self._connect(self._ws_url(sample_rate, token))
        try:
            session_id = await _await_begin(socket, self._timeout_s, secrets)
        except BaseException:
            await socket.close()
            raise
        logger.info("AssemblyAI session %s began", session_id)
        return AssemblyAIStream(
            socket,
            sample_rate=sample_rate,
            format_turns=self.format_turns,
            secrets=secrets,
            keepalive_after_s=self.keepalive_after_s,
            termination_wait_s=self.termination_wait_s,
        )

    async def _temporary_token(self) -> str:
        timeout = aiohttp.ClientTimeout(sock_connect=self._timeout_s, sock_read=self._timeout_s)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout, trust_env=True) as client,
                client.get(
                    f"{self.base_url}/v3/token",
                    params={"expires_in_seconds": self._token_expires_s},
                    headers={"Authorization": self._api_key},  # the bare key, no scheme
                ) as response,
            ):
                status, body = response.status, await response.read()
        except TimeoutError:
            raise _failure("AssemblyAI did not answer the token request in time") from None
        except aiohttp.ClientError as exc:
            logger.warning("AssemblyAI token request failed (%s)", type(exc).__name__)
            raise _failure("could not reach AssemblyAI for a streaming token") from None
        if status != 200:
            raise _token_failure(status, body, (self._api_key,))
        token = _json_object(body).get("token")
        if not isinstance(token, str) or not token:
            raise _failure("AssemblyAI's token response holds no token", retryable=False)
        return token

    def _ws_url(self, sample_rate: int, token: str) -> str:
        params: dict[str, Any] = {
            "sample_rate": sample_rate,
            "encoding": "pcm_s16le",
            "speech_model": self.speech_model,
            "format_turns": "true" if self.format_turns else "false",
        }
        params.update(
            {name: value for name, value in self._turn_settings.items() if value is not None}
        )
        if self.language == languages.DETECT:
            params["language_detection"] = "true"
        if self.vocabulary:
            params["keyterms_prompt"] = json.dumps(list(self.vocabulary))
        params["token"] = token
        return f"{self._ws_base}/v3/ws?{urlencode(params)}"

    async def _connect(self, url: str) -> ClientConnection:
        try:
            # The operator's URL (workspaces bring a key, never an address): dialled
            # through the egress guard all the same, pinned and without a proxy.
            return await open_websocket(
                url,
                policy=egress.OPERATOR,
                open_timeout=self._timeout_s,
                close_timeout=min(self._timeout_s, 2.0),
                compression=None,  # PCM barely compresses; deflate would only cost CPU
                logger=_WS_LOGGER,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            retryable = status in (408, 429) or status >= 500
            message = f"AssemblyAI refused the streaming connection with HTTP {status}"
            raise _failure(message, retryable=retryable) from None
        except TimeoutError:
            raise _failure("AssemblyAI did not accept the streaming connection in time") from None
        except (OSError, WebSocketException, egress.InvalidURL) as exc:
            logger.warning("AssemblyAI streaming connection failed (%s)", type(exc).__name__)
            raise _failure("could not connect to AssemblyAI streaming") from None


class AssemblyAIStream(STTStream):
    """One Universal Streaming session: audio in, ``STTEvent``s out."""

    def __init__(
        self,
        socket: ClientConnection,
        *,
        sample_rate: int,
        format_turns: bool,
        secrets: Sequence[str],
        keepalive_after_s: float,
        termination_wait_s: float,
    ) -> None:
        self._socket = socket
        self._chunk_bytes = _pcm_bytes(sample_rate, CHUNK_MS)
        self._min_bytes = _pcm_bytes(sample_rate, MIN_CHUNK_MS)
        self._buffer = bytearray()
        self._sent_bytes = 0
        self._clock = _AudioClock(sample_rate)
        self._turns = _Turns(format_turns, self._clock)
        self._secrets = tuple(secrets)
        self._keepalive_after_s = keepalive_after_s
        self._termination_wait_s = termination_wait_s
        self._events: asyncio.Queue[STTEvent | ProviderError | None] = asyncio.Queue()
        self._server_error: dict[str, Any] | None = None
        self._failure: ProviderError | None = None
        self._closing = False
        self._ended = asyncio.Event()  # Termination arrived or the socket closed
        self._last_sent_at = time.monotonic()
        self._reader = asyncio.create_task(self._read())
        self._keepalive = asyncio.create_task(self._keep_alive())

    # ------------------------------------------------------------ public

    async def push_audio(self, pcm16: bytes) -> None:
        self._check_open()
        if not pcm16:
            return
        self._buffer += pcm16
        self._clock.pushed(self._sent_bytes + len(self._buffer), time.monotonic())
        while len(self._buffer) >= self._chunk_bytes:
            chunk = bytes(self._buffer[: self._chunk_bytes])
            del self._buffer[: self._chunk_bytes]
            await self._send(chunk)

    async def events(self) -> AsyncIterator[STTEvent]:
        while (item := await self._events.get()) is not None:
            if isinstance(item, ProviderError):
                raise item
            yield item
        self._events.put_nowait(None)  # a later reader ends as well

    async def force_endpoint(self) -> None:
        """End the current turn now (the buffered audio goes first)."""
        self._check_open()
        await self._flush()
        await self._send_json({"type": "ForceEndpoint"})

    async def update_configuration(self, **settings: Any) -> None:
        """Change turn settings mid-session (``max_turn_silence=800``…); ``None`` skips one."""
        self._check_open()
        settings = {key: value for key, value in settings.items() if value is not None}
        if not settings:
            raise ValueError("update_configuration needs at least one setting")
        if "format_turns" in settings:
            self._turns.format_turns = bool(settings["format_turns"])
        await self._send_json({"type": "UpdateConfiguration", **settings})

    async def aclose(self) -> None:
        if self._closing:
            return
        self._closing = True
        if not self._ended.is_set():
            with contextlib.suppress(ProviderError):
                await self._flush()
                await self._send_json({"type": "Terminate"})
            # The service answers with the turns in flight, Termination, then a close.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ended.wait(), self._termination_wait_s)
        self._keepalive.cancel()
        await self._socket.close()
        await asyncio.gather(self._reader, self._keepalive, return_exceptions=True)

    # ------------------------------------------------------------ sending

    def _check_open(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self._closing:
            raise _failure("the AssemblyAI stream is closed", retryable=False)

    async def _flush(self) -> None:
        if not self._buffer:
            return
        tail = bytes(self._buffer)
        self._buffer.clear()
        # A message under 50 ms ends the session (3007): pad the tail with silence.
        await self._send(tail.ljust(max(self._min_bytes, len(tail) + len(tail) % 2), b"\0"))

    async def _send_json(self, message: dict[str, Any]) -> None:
        await self._send(json.dumps(message))

    async def _send(self, message: bytes | str) -> None:
        try:
            await self._socket.send(message)
        except ConnectionClosed as exc:
            failure = self._failure or _close_failure(exc.rcvd, self._server_error, self._secrets)
            self._failure = failure
            raise failure from None
        if isinstance(message, bytes):
            self._sent_bytes += len(message)
        self._last_sent_at = time.monotonic()

    async def _keep_alive(self) -> None:
        with contextlib.suppress(ProviderError):
            while True:
                idle = time.monotonic() - self._last_sent_at
                if idle >= self._keepalive_after_s:
                    await self._send_json({"type": "KeepAlive"})
                else:
                    await asyncio.sleep(self._keepalive_after_s - idle)

    # ------------------------------------------------------------ receiving

    async def _read(self) -> None:
        close: Close | None = None
        try:
            while True:
                message = await self._socket.recv()
                if isinstance(message, str):
                    for event in self._on_message(message, time.monotonic()):
                        self._events.put_nowait(event)
        except ConnectionClosed as exc:
            close = exc.rcvd
        finally:
            self._finish(close)

    def _on_message(self, raw: str, arrived_at: float) -> list[STTEvent]:
        message = _json_object(raw)
        kind = message.get("type")
        if kind == "Turn":
            return self._turns.feed(message, arrived_at)
        if kind == "SpeechStarted":
            return [SpeechStarted()]
        if kind == "Termination":
            seconds = message.get("audio_duration_seconds")
            logger.info("AssemblyAI session terminated after %s s of audio", seconds)
            self._ended.set()
            return self._turns.flush()
        self._note(message)
        return []

    def _note(self, message: dict[str, Any]) -> None:
        """Messages without an event: an error (its close follows), a warning, the unknown."""
        kind = message.get("type")
        if kind == "Error":
            self._server_error = message
            logger.warning("AssemblyAI reported error code %s", message.get("error_code"))
        elif kind == "Warning":
            logger.warning("AssemblyAI reported warning code %s", message.get("warning_code"))
        elif not message:
            logger.warning("AssemblyAI sent a message that is not a JSON object; ignored")

    def _finish(self, close: Close | None) -> None:
        for event in self._turns.flush():
            self._events.put_nowait(event)
        if not self._closing and self._failure is None:
            self._failure = _close_failure(close, self._server_error, self._secrets)
        if not self._closing:
            logger.warning("AssemblyAI stream failed: %s", self._failure)
            self._events.put_nowait(self._failure)
        self._events.put_nowait(None)
        self._ended.set()


# ---------------------------------------------------------------- turns and timing


class _AudioClock:
    """When each stretch of the audio timeline (ms since the stream began) was pushed."""

    def __init__(self, sample_rate: int) -> None:
        self._bytes_per_ms = sample_rate * 2 / 1000
        self._pushes: deque[tuple[float, float, float]] = deque(maxlen=_PUSH_RECORDS)

    def pushed(self, timeline_bytes: int, at: float) -> None:
        end_ms = timeline_bytes / self._bytes_per_ms
        start_ms = self._pushes[-1][1] if self._pushes else 0.0
        self._pushes.append((start_ms, end_ms, at))

    def pushed_at(self, audio_ms: float) -> float | None:
        if not self._pushes or audio_ms < self._pushes[0][0]:
            return None  # older than what we remember
        for _start_ms, end_ms, at in self._pushes:
            if end_ms >= audio_ms:
                return at
        return self._pushes[-1][2]  # inside the silence padding the last message


@dataclass
class _PendingFinal:
    turn: dict[str, Any]
    endpoint_at: float


class _Turns:
    """``Turn`` messages to partials and exactly one final per turn, and nothing of a turn
    after its final (a late partial would replace the final on the user's screen).

    With ``format_turns`` Universal-Streaming ends a turn twice: an unformatted
    ``end_of_turn`` message, then its formatted copy. The endpoint is the first; the text
    the second. Models that format every turn send only the formatted one.
    """

    def __init__(self, format_turns: bool, clock: _AudioClock) -> None:
        self.format_turns = format_turns
        self._clock = clock
        self._last_partial = ""
        self._pending: _PendingFinal | None = None
        self._ended: int | None = None  # the turn_order of the last final

    def feed(self, turn: dict[str, Any], arrived_at: float) -> list[STTEvent]:
        order = turn.get("turn_order")
        if isinstance(order, int) and self._ended is not None and order <= self._ended:
            # That turn's final is out: a late partial of it, or the formatted copy of a
            # turn that ended unformatted when the next one began, would come after it.
            return []
        events = self._stale_pending(turn)
        if not turn.get("end_of_turn"):
            return events + self._partial(turn)
        pending = self._pending
        if pending is not None and turn.get("turn_is_formatted"):
            self._pending = None
            return events + self._final(turn, pending.endpoint_at)
        if self.format_turns and not turn.get("turn_is_formatted"):
            self._pending = _PendingFinal(turn, arrived_at)
            return events
        return events + self._final(turn, arrived_at)

    def flush(self) -> list[STTEvent]:
        """The session ended: a turn still waiting for its formatting ends unformatted."""
        pending, self._pending = self._pending, None
        return self._final(pending.turn, pending.endpoint_at) if pending else []

    def _stale_pending(self, turn: dict[str, Any]) -> list[STTEvent]:
        pending = self._pending
        if pending is None or pending.turn.get("turn_order") == turn.get("turn_order"):
            return []
        return self.flush()  # a new turn began; the formatted copy is not coming

    def _partial(self, turn: dict[str, Any]) -> list[STTEvent]:
        text = _text(turn)
        if not text or text == self._last_partial:
            return []
        self._last_partial = text
        return [PartialTranscript(text)]

    def _final(self, turn: dict[str, Any], endpoint_at: float) -> list[STTEvent]:
        self._last_partial = ""
        order = turn.get("turn_order")
        self._ended = order if isinstance(order, int) else self._ended
        text = _text(turn)
        if not text:
            return []
        speech_end_at = self._speech_end_at(turn.get("words"))
        return [FinalTranscript(text, speech_end_at=speech_end_at, endpoint_at=endpoint_at)]

    def _speech_end_at(self, words: Any) -> float | None:
        ends = [
            word["end"]
            for word in words or []
            if isinstance(word, dict) and isinstance(word.get("end"), int | float)
        ]
        return self._clock.pushed_at(max(ends)) if ends else None


def _text(turn: dict[str, Any]) -> str:
    transcript = turn.get("transcript")
    return transcript.strip() if isinstance(transcript, str) else ""


# ---------------------------------------------------------------- helpers


def _ws_base(base_url: str) -> str:
    parts = urlsplit(base_url)
    scheme = {"https": "wss", "http": "ws"}.get(parts.scheme)
    if scheme is None or not parts.netloc:
        raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
    return urlunsplit((scheme, parts.netloc, parts.path, "", ""))


def _pcm_bytes(sample_rate: int, ms: int) -> int:
    return 2 * (sample_rate * ms // 1000)


def _json_object(raw: str | bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


async def _await_begin(socket: ClientConnection, timeout_s: float, secrets: Sequence[str]) -> str:
    server_error: dict[str, Any] | None = None
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                raw = await socket.recv()
                message = _json_object(raw)
                if message.get("type") == "Begin":
                    return str(message.get("id") or "without id")
                if message.get("type") == "Error":
                    server_error = message
    except TimeoutError:
        raise _failure("AssemblyAI did not begin the session in time") from None
    except ConnectionClosed as exc:
        raise _close_failure(exc.rcvd, server_error, secrets) from None


def _failure(message: str, *, retryable: bool = True) -> ProviderError:
    return ProviderError(message, code=ERROR_CODE, retryable=retryable)


def _close_failure(
    close: Close | None, server_error: dict[str, Any] | None, secrets: Sequence[str]
) -> ProviderError:
    if close is None:
        return _failure("the connection to AssemblyAI broke")
    code = close.code
    if code in (1000, 1001):
        return _failure(f"AssemblyAI ended the session (close code {code})")
    meaning, retryable = _CLOSE_CODES.get(code, ("", not 4000 <= code < 5000))
    said = server_error.get("error") if server_error else None
    detail = _detail(said if isinstance(said, str) else close.reason, secrets)
    message = f"AssemblyAI closed the session with code {code}"
    message += f" ({meaning})" if meaning else ""
    message += f": {detail}" if detail and detail.lower() != meaning.lower() else ""
    return _failure(message, retryable=retryable)


def _token_failure(status: int, body: bytes, secrets: Sequence[str]) -> ProviderError:
    said = _json_object(body).get("error")
    detail = _detail(said if isinstance(said, str) else "", secrets)
    retryable = status in (408, 429) or status >= 500
    logger.warning("AssemblyAI token request answered HTTP %s (retryable=%s)", status, retryable)
    if status in (401, 403):
        message = f"AssemblyAI refused the API key (HTTP {status})"
    else:
        message = f"AssemblyAI token request failed with HTTP {status}"
    return _failure(f"{message}: {detail}" if detail else message, retryable=retryable)


def _detail(text: str, secrets: Sequence[str]) -> str:
    """The provider's own words, bounded and with the key and token blanked out."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    text = " ".join(text.split())
    if text == "See Error message for details":
        return ""
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…"


API_KEY = secret_setting("ASSEMBLYAI_API_KEY")
BASE_URL = Setting("ASSEMBLYAI_BASE_URL", DEFAULT_BASE_URL)
SPEECH_MODEL = Setting("ASSEMBLYAI_SPEECH_MODEL", DEFAULT_SPEECH_MODEL)


def _options() -> dict[str, Any]:
    return {
        "api_key": API_KEY.value() or "",
        "base_url": BASE_URL.value(),
        "speech_model": SPEECH_MODEL.value(),
        "timeout_s": STT_TIMEOUT_S.value(),
    }


PROVIDER = ProviderSpec(
    kind="stt",
    name="assemblyai",
    label="AssemblyAI",
    adapter=AssemblyAISTT,
    settings=(API_KEY, BASE_URL, SPEECH_MODEL),
    options=_options,
    own_account=lambda account: {"api_key": account.api_key or ""},
    credential=CredentialKind("AssemblyAI speech-to-text"),
)
