"""A fake of OpenAI's ``POST /v1/audio/speech`` on a real socket.

It checks the request as OpenAI does (``Authorization: Bearer``, JSON ``model``, ``input``,
``voice``, ``response_format``), answers errors with OpenAI's error object (a wrong key gets
OpenAI's "Incorrect API key provided" quoting the key half-masked) and streams
``speech_pcm(input)`` as a chunked body of raw PCM16, a few chunks apart::

    async with FakeOpenAISpeechServer(api_key="sk-key") as server:
        tts = OpenAITTS(api_key="sk-key", base_url=server.base_url)
        server.inject(HttpError(429, "Rate limit reached"))
        server.inject(Cut(after_frames=2))        # drop the socket mid-body
        server.inject(Hang(after_frames=0))       # silence before the status line
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from tests.engine.providers.llm.openai.fake_server import (
    FakeOpenAIServer,
    HttpError,
    RecordedRequest,
    error_body,
    read_request,
    send_json,
)
from tests.fakes.ws_server import FRAMES, Cut, Garbage, Hang, OddFrames, play, speech_pcm
from tests.fakes.ws_server import split_frames as split_chunks

VOICES = (
    "alloy",
    "ash",
    "ballad",
    "coral",
    "echo",
    "fable",
    "onyx",
    "nova",
    "sage",
    "shimmer",
    "verse",
    "marin",
    "cedar",
)
MAX_INPUT = 4096
CHUNK_GAP_S = 0.005


@dataclass
class HttpConnection:
    requests: list[RecordedRequest] = field(default_factory=list)
    closed: asyncio.Event = field(default_factory=asyncio.Event)  # the client is gone


class FakeOpenAISpeechServer(FakeOpenAIServer):
    """The chat fake's server, answering ``/audio/speech`` instead; faults replace scripts."""

    def __init__(self, *, api_key: str = "sk-test-key", chunks: int = FRAMES) -> None:
        super().__init__()
        self.api_key = api_key
        self.chunks = chunks
        self.connections: list[HttpConnection] = []
        self._faults: deque[Any] = deque()

    def inject(self, *faults: Any) -> None:
        """Queue one fault (or ``HttpError``) per coming request."""
        self._faults.extend(faults)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = HttpConnection()
        self.connections.append(connection)
        try:
            while (request := await read_request(reader)) is not None:
                connection.requests.append(request)
                self.requests.append(request)
                if not await self._answer(reader, writer, request):
                    return
        finally:
            connection.closed.set()

    async def _answer(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: RecordedRequest
    ) -> bool:
        """Answer one request; False when the connection must end."""
        fault = self._faults.popleft() if self._faults else None
        refusal = self._refusal(request)
        if refusal is None and isinstance(fault, HttpError):
            refusal = fault
        if refusal is not None:
            kind = refusal.type or (
                "server_error" if refusal.status >= 500 else "invalid_request_error"
            )
            body = error_body(refusal.message, error_type=kind, code=refusal.code)
            await send_json(writer, refusal.status, body)
            return True
        chunks = split_chunks(speech_pcm(request.json["input"]), self.chunks)
        return await _Body(reader, writer).stream(chunks, fault)

    def _refusal(self, request: RecordedRequest) -> HttpError | None:
        if request.method != "POST" or not request.path.endswith("/audio/speech"):
            return HttpError(404, "Invalid URL", code="unknown_url")
        key = request.headers.get("authorization", "").removeprefix("Bearer ")
        if key != self.api_key:
            return HttpError(401, _incorrect_key_message(key), code="invalid_api_key")
        return _body_problem(request)


def _incorrect_key_message(key: str) -> str:
    masked = f"{key[:3]}{'*' * 10}{key[-4:]}" if len(key) > 8 else "****"
    return (
        f"Incorrect API key provided: {masked}. You can find your API key at "
        "https://platform.openai.com/account/api-keys."
    )


def _body_problem(request: RecordedRequest) -> HttpError | None:
    try:
        body = request.json
    except ValueError:
        return HttpError(400, "We could not parse the JSON body of your request.")
    if not isinstance(body, dict):
        return HttpError(400, "The request body must be a JSON object.")
    for name in ("model", "input", "voice"):
        if not isinstance(body.get(name), str) or not body[name]:
            return HttpError(400, f"Missing required parameter: '{name}'.", code="missing")
    if body["voice"] not in VOICES:
        supported = ", ".join(f"'{voice}'" for voice in VOICES)
        message = f"Invalid value: '{body['voice']}'. Supported values are: {supported}."
        return HttpError(400, message, code="invalid_value")
    if len(body["input"]) > MAX_INPUT:
        return HttpError(400, f"input is longer than {MAX_INPUT} characters.")
    if body.get("response_format") != "pcm":
        return HttpError(400, "this fake only speaks response_format 'pcm'.")
    return None


class _Body:
    """A chunked body of raw PCM; the headers go out with the first chunk."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.started = False

    async def stream(self, chunks: list[bytes], fault: Any) -> bool:
        if isinstance(fault, OddFrames):
            chunks = split_chunks(b"".join(chunks), len(chunks), odd=True)
        if not await play(chunks, fault, self.send, self.misbehave):
            return False
        await self.send(b"")
        return True

    async def send(self, chunk: bytes) -> None:
        if not self.started:
            self.started = True
            self.writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: audio/pcm\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
        self.writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))  # b"" is the last chunk
        await self.writer.drain()
        await asyncio.sleep(CHUNK_GAP_S)  # so the client reads each chunk on its own

    async def misbehave(self, fault: Any) -> None:
        if isinstance(fault, Cut):
            self.writer.transport.abort()
            return
        if isinstance(fault, Garbage):
            raise ValueError("raw PCM has no garbage to send; use Cut or OddFrames")
        assert isinstance(fault, Hang)
        with contextlib.suppress(ConnectionError):
            while await self.reader.read(1024):
                pass  # silent until the client hangs up
