"""A fake AssemblyAI Universal Streaming (v3) server on a real socket.

One port serves both halves of the protocol the adapter meets in production:

- ``GET /v3/token?expires_in_seconds=N`` with the bare API key in ``Authorization``
  answers ``{"token": …, "expires_in_seconds": N}``. A wrong key gets 401 and an expiry
  outside 1–600 gets 400, both with ``{"error": …}``. Tokens are good for one session.
- ``/v3/ws?sample_rate=…&token=…`` is the WebSocket. It checks the token and the query
  parameters, sends ``Begin``, records every message, refuses an audio message outside
  50–1000 ms with ``Error`` and close 3007 as the service does, answers ``ForceEndpoint``
  by ending the current turn and ``Terminate`` with ``Termination`` and a 1000 close.
  Scripted steps play ``SpeechStarted`` and ``Turn`` messages::

    async with FakeAssemblyAIServer(api_key="aai-test") as server:
        server.script(WaitAudio(300), SpeechStart(), Partial("hello"),
                      EndOfTurn("hello there", formatted="Hello there."))
        stt = AssemblyAISTT(api_key="aai-test", base_url=server.base_url)
        stream = await stt.open(sample_rate=16000)
        ...
        assert all(50 <= ms <= 1000 for ms in server.sessions[0].audio_ms)

A test can also drive a live session: ``await server.sessions[0].play(Partial("hi"))``.
Where the documentation is silent the fake is strict on purpose: an unknown query
parameter is refused with close 3006, so a misspelt setting fails a test.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import itertools
import json
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from tests.fakes.lifecycle import ServerLifecycle

SPEECH_MODELS = (
    "universal-streaming-english",
    "universal-streaming-multilingual",
    "u3-rt-pro",
    "universal-3-5-pro",
    "universal-3-6-pro",
)
CLIENT_MESSAGE_TYPES = ("UpdateConfiguration", "ForceEndpoint", "KeepAlive", "Terminate")
OTHER_PARAMETERS = ("keyterms_prompt", "inactivity_timeout", "vad_threshold", "min_turn_silence")

# ---------------------------------------------------------------- steps


@dataclass(frozen=True)
class WaitAudio:
    """Wait until the session has received this much audio, in ms, in total."""

    ms: float


@dataclass(frozen=True)
class Delay:
    seconds: float


@dataclass(frozen=True)
class SpeechStart:
    """``SpeechStarted``; ``timestamp_ms`` defaults to the audio received so far."""

    timestamp_ms: int | None = None


@dataclass(frozen=True)
class Partial:
    """A ``Turn`` with ``end_of_turn: false``; its last word ends at ``end_ms`` (default:
    the audio received so far)."""

    text: str
    end_ms: int | None = None


@dataclass(frozen=True)
class EndOfTurn:
    """The current turn ends: the unformatted ``end_of_turn`` message and, when the session
    asked for ``format_turns``, its formatted copy ``formatting_delay`` seconds later."""

    text: str
    formatted: str | None = None  # default: capitalised, with a full stop
    end_ms: int | None = None
    formatting_delay: float = 0.0


@dataclass(frozen=True)
class Send:
    """Any JSON message, verbatim."""

    message: Mapping[str, Any]


@dataclass(frozen=True)
class CloseWith:
    """The service's failure: an ``Error`` message (when ``error`` is given), then the close."""

    code: int
    error: str | None = None
    reason: str = ""


Step = WaitAudio | Delay | SpeechStart | Partial | EndOfTurn | Send | CloseWith


@dataclass
class RecordedRequest:
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # names lower-cased


# ---------------------------------------------------------------- one session


class FakeSession:
    """One WebSocket session: what the client sent, and the controls to answer it."""

    def __init__(self, connection: ServerConnection, query: dict[str, str]) -> None:
        self.query = query
        self.audio: list[bytes] = []
        self.control: list[dict[str, Any]] = []  # the client's JSON messages, in order
        self.close_code: int | None = None
        self.closed = asyncio.Event()
        self.answer_terminate = True
        self.sample_rate = _int(query.get("sample_rate")) or 16000
        self.format_turns = query.get("format_turns") == "true"
        self._connection = connection
        self._started_at = time.monotonic()
        self._turn_order = 0
        self._turn_text = ""
        self._arrived = asyncio.Condition()  # audio or a control message

    @property
    def audio_ms(self) -> list[float]:
        return [self._ms(chunk) for chunk in self.audio]

    @property
    def received_ms(self) -> float:
        return sum(self.audio_ms)

    @property
    def control_types(self) -> list[str]:
        return [str(message.get("type")) for message in self.control]

    async def wait_for_control(self, message_type: str) -> None:
        """Until the client has sent a JSON message of this type."""
        async with self._arrived:
            await self._arrived.wait_for(lambda: message_type in self.control_types)

    async def play(self, *steps: Step) -> None:
        with contextlib.suppress(ConnectionClosed):
            for step in steps:
                await self._play(step)

    async def send(self, message: Mapping[str, Any]) -> None:
        await self._connection.send(json.dumps(message))

    async def close(self, code: int, *, error: str | None = None, reason: str = "") -> None:
        if error is not None:
            await self.send({"type": "Error", "error_code": code, "error": error})
        await self._connection.close(code, reason)

    async def receive(self, message: str | bytes) -> None:
        if isinstance(message, bytes):
            await self._receive_audio(message)
            return
        try:
            payload = json.loads(message)
        except ValueError:
            await self.close(3006, error=f"Invalid JSON: {message[:40]}")
            return
        kind = payload.get("type") if isinstance(payload, dict) else None
        if kind not in CLIENT_MESSAGE_TYPES:
            await self.close(3006, error=f"Invalid Message Type: {kind}")
            return
        self.control.append(payload)
        await self._notify()
        if kind == "ForceEndpoint" and self._turn_text:
            await self._end_turn(EndOfTurn(self._turn_text))
        elif kind == "Terminate" and self.answer_terminate:
            await self._terminate()

    async def _receive_audio(self, chunk: bytes) -> None:
        self.audio.append(chunk)
        await self._notify()
        ms = self._ms(chunk)
        if not 50 <= ms <= 1000:
            error = f"Input duration violation: {ms:.0f} ms. Expected between 50 and 1000 ms"
            await self.close(3007, error=error)

    async def _play(self, step: Step) -> None:
        if isinstance(step, WaitAudio):
            async with self._arrived:
                await self._arrived.wait_for(lambda: self.received_ms >= step.ms)
        elif isinstance(step, Delay):
            await asyncio.sleep(step.seconds)
        elif isinstance(step, SpeechStart):
            timestamp = step.timestamp_ms if step.timestamp_ms is not None else self.received_ms
            await self.send(
                {"type": "SpeechStarted", "timestamp": int(timestamp), "confidence": 0.98}
            )
        elif isinstance(step, Partial):
            self._turn_text = step.text
            await self.send(self._turn(step.text, step.end_ms, end_of_turn=False))
        elif isinstance(step, EndOfTurn):
            await self._end_turn(step)
        elif isinstance(step, Send):
            await self.send(step.message)
        else:
            await self.close(step.code, error=step.error, reason=step.reason)

    async def _end_turn(self, step: EndOfTurn) -> None:
        await self.send(self._turn(step.text, step.end_ms, end_of_turn=True))
        if self.format_turns:
            await asyncio.sleep(step.formatting_delay)
            formatted = step.formatted or _formatted(step.text)
            await self.send(self._turn(formatted, step.end_ms, end_of_turn=True, formatted=True))
        self._turn_order += 1
        self._turn_text = ""

    async def _terminate(self) -> None:
        await self.send(
            {
                "type": "Termination",
                "audio_duration_seconds": int(self.received_ms / 1000),
                "session_duration_seconds": int(time.monotonic() - self._started_at),
            }
        )
        await self._connection.close(1000)

    def _turn(
        self, text: str, end_ms: int | None, *, end_of_turn: bool, formatted: bool = False
    ) -> dict[str, Any]:
        return turn_message(
            text,
            turn_order=self._turn_order,
            last_end_ms=int(self.received_ms if end_ms is None else end_ms),
            end_of_turn=end_of_turn,
            formatted=formatted,
        )

    async def _notify(self) -> None:
        async with self._arrived:
            self._arrived.notify_all()

    def _ms(self, chunk: bytes) -> float:
        return 1000 * len(chunk) / 2 / self.sample_rate


def turn_message(
    text: str, *, turn_order: int, last_end_ms: int, end_of_turn: bool, formatted: bool = False
) -> dict[str, Any]:
    """A ``Turn`` as the service sends it; words are 300 ms apart, the last ending at
    ``last_end_ms``."""
    return {
        "turn_order": turn_order,
        "turn_is_formatted": formatted,
        "end_of_turn": end_of_turn,
        "transcript": text,
        "end_of_turn_confidence": 0.9 if end_of_turn else 0.1,
        "words": _words(text, last_end_ms, final=end_of_turn),
        "utterance": text if end_of_turn and not formatted else "",
        "type": "Turn",
    }


def _words(text: str, last_end_ms: int, *, final: bool) -> list[dict[str, Any]]:
    names = text.split()
    words = []
    for index, name in enumerate(names):
        end = max(0, last_end_ms - 300 * (len(names) - 1 - index))
        words.append(
            {
                "start": max(0, end - 250),
                "end": end,
                "text": name,
                "confidence": 0.9,
                "word_is_final": final,
            }
        )
    return words


def _formatted(text: str) -> str:
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "?", "!")) else f"{text}."


# ---------------------------------------------------------------- the server


@dataclass
class _Refusal:
    code: int
    error: str | None


@dataclass
class _TokenFailure:
    status: int
    error: str


@dataclass
class _Tokens:
    unused: set[str] = field(default_factory=set)
    counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def issue(self) -> str:
        token = f"fake-token-{next(self.counter)}-{uuid.uuid4().hex[:8]}"
        self.unused.add(token)
        return token

    def redeem(self, token: str | None) -> bool:
        if token in self.unused:
            self.unused.discard(token)
            return True
        return False


class FakeAssemblyAIServer(ServerLifecycle):
    """Serves ``/v3/token`` and ``/v3/ws`` on 127.0.0.1 and an ephemeral port by default."""

    def __init__(self, *, api_key: str = "aai-test-key", host: str = "127.0.0.1") -> None:
        self.api_key = api_key
        self.host = host
        self.port = 0
        self.token_requests: list[RecordedRequest] = []
        self.sessions: list[FakeSession] = []
        self.issued_tokens: list[str] = []
        self.token_delay = 0.0  # seconds before the token endpoint answers
        self.answer_terminate = True
        self._tokens = _Tokens()
        self._token_failure: _TokenFailure | None = None
        self._refusal: _Refusal | None = None
        self._scripts: deque[tuple[Step, ...]] = deque()
        self._server: Server | None = None
        self._stopping = asyncio.Event()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def script(self, *steps: Step) -> None:
        """Steps for the next session, played from its ``Begin`` on."""
        self._scripts.append(steps)

    def fail_tokens(self, status: int, error: str) -> None:
        """Every token request from now on gets this HTTP error."""
        self._token_failure = _TokenFailure(status, error)

    def refuse_sessions(self, code: int, error: str | None = None) -> None:
        """Every session from now on is closed with ``code`` before ``Begin``."""
        self._refusal = _Refusal(code, error)

    async def start(self) -> None:
        self._server = await serve(
            self._serve_session, self.host, self.port, process_request=self._process_request
        )
        self.port = next(iter(self._server.sockets)).getsockname()[1]

    async def stop(self) -> None:
        if self._server is None:
            return
        self._stopping.set()
        self._server.close()
        await self._server.wait_closed()
        self._server = None

    # ------------------------------------------------------------ the token endpoint

    async def _process_request(
        self, connection: ServerConnection, request: Request
    ) -> Response | None:
        path, query = _split(request.path)
        if path == "/v3/ws":
            return None  # credentials are checked after the upgrade, as the service does
        if path != "/v3/token":
            return _json_response(connection, 404, {"error": "Not found"})
        headers = {name.lower(): value for name, value in request.headers.raw_items()}
        self.token_requests.append(RecordedRequest(path, query, headers))
        if self.token_delay:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.token_delay)
        status, body = self._token_answer(headers.get("authorization"), query)
        return _json_response(connection, status, body)

    def _token_answer(self, authorization: str | None, query: dict[str, str]) -> tuple[int, Any]:
        if self._token_failure is not None:
            return self._token_failure.status, {"error": self._token_failure.error}
        if authorization != self.api_key:
            return 401, {"error": "Invalid API key"}
        expires = _int(query.get("expires_in_seconds"))
        if expires is None or not 1 <= expires <= 600:
            return 400, {"error": "expires_in_seconds must be an integer between 1 and 600"}
        token = self._tokens.issue()
        self.issued_tokens.append(token)
        return 200, {"token": token, "expires_in_seconds": expires}

    # ------------------------------------------------------------ the WebSocket

    async def _serve_session(self, connection: ServerConnection) -> None:
        assert connection.request is not None
        _path, query = _split(connection.request.path)
        session = FakeSession(connection, query)
        session.answer_terminate = self.answer_terminate
        self.sessions.append(session)
        script = self._scripts.popleft() if self._scripts else ()
        try:
            await self._run(session, connection, script)
        except ConnectionClosed:
            pass  # the client went away; that is its right
        finally:
            session.close_code = connection.close_code
            session.closed.set()

    async def _run(
        self, session: FakeSession, connection: ServerConnection, script: tuple[Step, ...]
    ) -> None:
        refusal = self._refusal or self._problem(connection, session.query)
        if refusal is not None:
            await session.close(refusal.code, error=refusal.error)
            return
        begin = {"type": "Begin", "id": str(uuid.uuid4()), "expires_at": int(time.time()) + 10800}
        await session.send(begin)
        player = asyncio.create_task(session.play(*script))
        try:
            async for message in connection:
                await session.receive(message)
        finally:
            player.cancel()
            await asyncio.gather(player, return_exceptions=True)

    def _problem(self, connection: ServerConnection, query: dict[str, str]) -> _Refusal | None:
        assert connection.request is not None
        authorization = connection.request.headers.get("Authorization")
        if not self._tokens.redeem(query.get("token")) and authorization != self.api_key:
            return _Refusal(1008, "Unauthorized Connection: Missing or invalid token")
        bad = _bad_parameter(query)
        return _Refusal(3006, f"Invalid connection parameter: {bad}") if bad else None


def _bad_parameter(query: dict[str, str]) -> str | None:
    checks: dict[str, Callable[[str], bool]] = {
        "sample_rate": lambda v: _is_int_at_least(v, 1),
        "encoding": lambda v: v in ("pcm_s16le", "pcm_mulaw"),
        "speech_model": lambda v: v in SPEECH_MODELS,
        "format_turns": lambda v: v in ("true", "false"),
        "end_of_turn_confidence_threshold": _is_fraction,
        "min_end_of_turn_silence_when_confident": lambda v: _is_int_at_least(v, 0),
        "max_turn_silence": lambda v: _is_int_at_least(v, 0),
        # Per-turn language detection: the multilingual model's only.
        "language_detection": lambda v: (
            v in ("true", "false")
            and query.get("speech_model") == "universal-streaming-multilingual"
        ),
        "token": lambda v: True,
    }
    if "sample_rate" not in query:
        return "sample_rate"
    for name, value in query.items():
        check = checks.get(name)
        known = check is not None or name in OTHER_PARAMETERS
        if not known or (check is not None and not check(value)):
            return name
    return None


def _is_int_at_least(value: str, minimum: int) -> bool:
    number = _int(value)
    return number is not None and number >= minimum


def _is_fraction(value: str) -> bool:
    try:
        return 0 <= float(value) <= 1
    except ValueError:
        return False


def _split(target: str) -> tuple[str, dict[str, str]]:
    parts = urlsplit(target)
    return parts.path, dict(parse_qsl(parts.query, keep_blank_values=True))


def _json_response(connection: ServerConnection, status: int, body: Any) -> Response:
    response = connection.respond(http.HTTPStatus(status), json.dumps(body))
    del response.headers["Content-Type"]
    response.headers["Content-Type"] = "application/json"
    return response


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
