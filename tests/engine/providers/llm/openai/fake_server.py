"""A fake OpenAI-compatible chat-completions server on a real socket, scripted per request.

It speaks the wire format adapters meet in production: HTTP/1.1 with keep-alive, chunked
``text/event-stream`` bodies of ``data: {chat.completion.chunk}`` events ending in
``data: [DONE]``, OpenAI-style error bodies, plain JSON completions. Each request takes
the next scripted response from a queue (or the default one); a response is a list of
steps, played in order::

    async with FakeOpenAIServer() as server:
        server.script(Text("Hel"), Text("lo"), Finish("stop"), Usage(5, 2), Done())
        server.script(*tool_call(0, "call_1", "get_weather", '{"city"', ': "Paris"}'),
                      Finish("tool_calls"), Done())
        server.script(Delay(5))                   # a provider that goes silent
        server.script(Together(barrier), Text("Hi"), Done())  # once all are asked
        server.script(HttpError(429, "Rate limit reached"))
        llm = OpenAICompatibleLLM(server.base_url, api_key="sk-test")
        ...
        assert server.requests[0].json["model"] == "gpt-4o-mini"

Streaming steps send their HTTP headers first, lazily, so ``Delay`` or ``Cut`` before
any of them happen before the status line (``Together`` likewise). ``HttpError``,
``JsonBody`` and ``PlainBody`` are whole responses and must come before any streaming step.

Run it on its own for other processes (it then echoes the last user message)::

    python -m tests.engine.providers.llm.openai.fake_server --port 8765
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from tests.fakes.lifecycle import ServerLifecycle

# ---------------------------------------------------------------- steps


@dataclass(frozen=True)
class Text:
    """One chunk whose ``delta.content`` is ``text``."""

    text: str


@dataclass(frozen=True)
class Echo:
    """One chunk repeating the request's last user message, after ``prefix``."""

    prefix: str = ""


@dataclass(frozen=True)
class ToolCallStart:
    """The first delta of a tool call: index, id, name, empty arguments (``id=None`` omits it)."""

    index: int
    id: str | None
    name: str


@dataclass(frozen=True)
class ToolCallArgs:
    """A further delta carrying a fragment of the call's JSON arguments."""

    index: int
    fragment: str


@dataclass(frozen=True)
class ArgsFrom:
    """A delta carrying a call's JSON arguments made by ``make`` from the request's last
    user message: a model that takes the arguments from what it was told (or heard)."""

    index: int
    make: Callable[[str], str]


@dataclass(frozen=True)
class Finish:
    """An empty delta with ``finish_reason`` (``None`` sends an explicit null)."""

    reason: str | None = "stop"


@dataclass(frozen=True)
class Usage:
    """The ``stream_options.include_usage`` chunk: empty choices and token counts.

    Sent only when the request asked for it (``stream_options: {"include_usage": true}``),
    as OpenAI does; a request that did not ask gets no usage at all.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class Done:
    """``data: [DONE]``."""


@dataclass(frozen=True)
class Comment:
    """An SSE comment line, as proxies send for keep-alive."""

    text: str = "keep-alive"


@dataclass(frozen=True)
class Chunk:
    """One ``data:`` event with exactly this JSON body (odd shapes, mid-stream errors)."""

    body: Any


@dataclass(frozen=True)
class Raw:
    """Bytes written verbatim into the response body (framing and malformed-stream tests)."""

    data: bytes


@dataclass(frozen=True)
class Delay:
    seconds: float


@dataclass(frozen=True)
class Together:
    """Send nothing more until ``barrier.parties`` responses have reached this step: the
    replies to several requests go on at once, however late the last request came."""

    barrier: asyncio.Barrier


@dataclass(frozen=True)
class Cut:
    """Drop the TCP connection right here, without finishing the HTTP message."""


@dataclass(frozen=True)
class HttpError:
    """A whole error response; ``body`` replaces the OpenAI-style error object when given."""

    status: int
    message: str = "The fake server was told to fail."
    type: str | None = None
    code: str | None = None
    body: Any = None


@dataclass(frozen=True)
class JsonBody:
    """A whole non-streaming JSON response (see ``completion_body``)."""

    body: Any
    status: int = 200


@dataclass(frozen=True)
class PlainBody:
    """A whole response of any content type: a proxy's HTML page, a login wall, plain text."""

    data: bytes
    status: int = 200
    content_type: str = "text/html; charset=utf-8"


Step = (
    Text
    | Echo
    | ToolCallStart
    | ToolCallArgs
    | ArgsFrom
    | Finish
    | Usage
    | Done
    | Comment
    | Chunk
    | Raw
    | Delay
    | Together
    | Cut
    | HttpError
    | JsonBody
    | PlainBody
)
StepLike = Step | Iterable[Step]

# An ``envelope`` value that removes the key from every chunk instead of setting it.
OMIT = object()
# The AssemblyAI gateway's habit: chunks with null ids, models and usage.
GATEWAY_ENVELOPE: Mapping[str, Any] = {"id": None, "model": None, "usage": None}


def tool_call(index: int, call_id: str | None, name: str, *fragments: str) -> list[Step]:
    """A tool call as OpenAI streams it: the start, then one delta per arguments fragment."""
    return [ToolCallStart(index, call_id, name), *(ToolCallArgs(index, f) for f in fragments)]


def text_reply(*chunks: str, usage: Usage | None = None) -> list[Step]:
    """A complete, well-behaved text answer."""
    return [*(Text(c) for c in chunks), Finish("stop"), *([usage] if usage else []), Done()]


def completion_body(
    content: str | None = None,
    *,
    tool_calls: Sequence[tuple[str, str, str]] = (),
    finish_reason: str | None = "stop",
    model: str | None = "fake-model",
    usage: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """A ``chat.completion`` object; ``tool_calls`` are ``(id, name, arguments)`` triples."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in tool_calls
        ]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": dict(usage) if usage is not None else None,
    }


def error_body(message: str, *, error_type: str, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error object, as sent with 4xx/5xx statuses."""
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


# ---------------------------------------------------------------- requests


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes
    received_at: float = field(default_factory=time.monotonic)  # once its body was read

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class _Script:
    steps: list[Step]
    envelope: Mapping[str, Any] = field(default_factory=dict)


def _flatten(steps: Iterable[StepLike]) -> list[Step]:
    flat: list[Step] = []
    for step in steps:
        if isinstance(step, list | tuple):
            flat.extend(_flatten(step))
        else:
            flat.append(step)  # type: ignore[arg-type]
    return flat


async def read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    request_line = await reader.readline()
    if not request_line.strip():
        return None
    method, target, _version = request_line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length") or 0)
    body = await reader.readexactly(length) if length else b""
    return RecordedRequest(method=method, path=target, headers=headers, body=body)


def _last_user_text(request: RecordedRequest) -> str:
    try:
        messages = request.json.get("messages") or []
    except (ValueError, AttributeError):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content if isinstance(content, str) else ""
    return ""


# ---------------------------------------------------------------- one response


class _Response:
    """Plays one script onto the connection. ``run`` says whether to keep it open."""

    def __init__(
        self,
        writer: asyncio.StreamWriter,
        request: RecordedRequest,
        script: _Script,
        response_id: str,
    ) -> None:
        self.writer = writer
        self.request = request
        self.script = script
        self.response_id = response_id
        self.started = False
        try:
            body = request.json if request.body else {}
        except ValueError:
            body = {}
        self.model = body.get("model") if isinstance(body, dict) else None
        options = body.get("stream_options") if isinstance(body, dict) else None
        self.include_usage = bool(isinstance(options, dict) and options.get("include_usage"))

    async def run(self) -> bool:
        for step in self.script.steps:
            if isinstance(step, Delay):
                await asyncio.sleep(step.seconds)
            elif isinstance(step, Together):
                await step.barrier.wait()
            elif isinstance(step, Cut):
                self.writer.transport.abort()
                return False
            elif isinstance(step, HttpError | JsonBody | PlainBody):
                if self.started:
                    raise ValueError(f"{step!r} must come before any streaming step")
                await self._send_whole(step)
                return True
            elif isinstance(step, Usage) and not self.include_usage:
                continue  # nobody asked for it
            else:
                await self._start_stream()
                await self._send_chunk(self._render(step))
        await self._start_stream()
        self.writer.write(b"0\r\n\r\n")  # last chunk of the chunked body
        await self.writer.drain()
        return True

    async def _send_whole(self, step: HttpError | JsonBody | PlainBody) -> None:
        if isinstance(step, PlainBody):
            await send_body(self.writer, step.status, step.data, step.content_type)
            return
        body = step.body
        if isinstance(step, HttpError) and body is None:
            kind = step.type or ("server_error" if step.status >= 500 else "invalid_request_error")
            body = error_body(step.message, error_type=kind, code=step.code)
        await send_json(self.writer, step.status, body)

    async def _start_stream(self) -> None:
        if self.started:
            return
        self.started = True
        self.writer.write(
            b"HTTP/1.1 200 OK\r\n"
            b"Content-Type: text/event-stream; charset=utf-8\r\n"
            b"Cache-Control: no-cache\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        # OpenAI opens every stream with the role and an empty content string.
        await self._send_chunk(self._event(self._chunk({"role": "assistant", "content": ""})))

    async def _send_chunk(self, data: bytes) -> None:
        if data:
            self.writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await self.writer.drain()

    def _render(self, step: Step) -> bytes:
        if isinstance(step, Text):
            return self._event(self._chunk({"content": step.text}))
        if isinstance(step, Echo):
            return self._event(
                self._chunk({"content": step.prefix + _last_user_text(self.request)})
            )
        if isinstance(step, ToolCallStart):
            call: dict[str, Any] = {"index": step.index, "id": step.id, "type": "function"}
            call["function"] = {"name": step.name, "arguments": ""}
            if step.id is None:
                del call["id"]
            return self._event(self._chunk({"tool_calls": [call]}))
        if isinstance(step, ToolCallArgs | ArgsFrom):
            fragment = (
                step.fragment
                if isinstance(step, ToolCallArgs)
                else step.make(_last_user_text(self.request))
            )
            call = {"index": step.index, "function": {"arguments": fragment}}
            return self._event(self._chunk({"tool_calls": [call]}))
        return self._render_control(step)

    def _render_control(self, step: Step) -> bytes:
        if isinstance(step, Finish):
            return self._event(self._chunk({}, finish_reason=step.reason))
        if isinstance(step, Usage):
            chunk = self._chunk(None)
            chunk["usage"] = {
                "prompt_tokens": step.prompt_tokens,
                "completion_tokens": step.completion_tokens,
                "total_tokens": step.prompt_tokens + step.completion_tokens,
            }
            return self._event(chunk)
        if isinstance(step, Done):
            return b"data: [DONE]\n\n"
        if isinstance(step, Comment):
            return b": %s\n\n" % step.text.encode()
        if isinstance(step, Chunk):
            return self._event(step.body)
        if isinstance(step, Raw):
            return step.data
        raise TypeError(f"not a streaming step: {step!r}")

    def _chunk(
        self, delta: dict[str, Any] | None, finish_reason: str | None = None
    ) -> dict[str, Any]:
        choices = (
            []
            if delta is None
            else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
        )
        chunk: dict[str, Any] = {
            "id": self.response_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model or "fake-model",
            "system_fingerprint": None,
            "choices": choices,
        }
        if self.include_usage:
            chunk["usage"] = None
        for key, value in self.script.envelope.items():
            if value is OMIT:
                chunk.pop(key, None)
            elif not (key == "usage" and delta is None):  # never clobber the usage chunk
                chunk[key] = value
        return chunk

    @staticmethod
    def _event(body: Any) -> bytes:
        return b"data: " + json.dumps(body).encode() + b"\n\n"


async def send_json(writer: asyncio.StreamWriter, status: int, body: Any) -> None:
    await send_body(writer, status, json.dumps(body).encode(), "application/json")


async def send_body(
    writer: asyncio.StreamWriter, status: int, payload: bytes, content_type: str
) -> None:
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Unknown"
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n".encode()
        + payload
    )
    await writer.drain()


# ---------------------------------------------------------------- the server


class FakeOpenAIServer(ServerLifecycle):
    """Serves ``POST …/chat/completions`` on 127.0.0.1 and an ephemeral port by default.

    With nothing scripted and no ``default``, a request gets an HTTP 500 saying so, which
    makes a test that forgot a script fail loudly instead of hanging.
    """

    def __init__(
        self, *, host: str = "127.0.0.1", port: int = 0, default: Sequence[StepLike] = ()
    ) -> None:
        self.host = host
        self.port = port
        self.requests: list[RecordedRequest] = []
        self.connections_opened = 0
        self._default = _Script(_flatten(default)) if default else None
        self._scripts: deque[_Script] = deque()
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[Any]] = set()
        self._ids = itertools.count(1)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pending_scripts(self) -> int:
        return len(self._scripts)

    def forget_scripts(self) -> None:
        """Drop responses nobody asked for (a long-lived server shared by several tests)."""
        self._scripts.clear()

    def script(self, *steps: StepLike, envelope: Mapping[str, Any] | None = None) -> None:
        """Queue one response for the next request. Nested lists of steps are flattened into
        this same response, so call ``script`` once per response."""
        self._scripts.append(_Script(_flatten(steps), dict(envelope or {})))

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._on_connection, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self.connections_opened += 1
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away; that is its right
        except asyncio.CancelledError:
            # Only stop() cancels us. Swallowed because 3.11's start_server callback
            # logs a spurious error for a handler task that ends cancelled.
            pass
        finally:
            self._handlers.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (request := await read_request(reader)) is not None:
            self.requests.append(request)
            if request.method != "POST" or not request.path.endswith("/chat/completions"):
                await send_json(writer, 404, error_body("Unknown path", error_type="not_found"))
                continue
            response = _Response(writer, request, self._next_script(), self._next_id())
            if not await response.run() or request.headers.get("connection") == "close":
                return

    def _next_script(self) -> _Script:
        if self._scripts:
            return self._scripts.popleft()
        if self._default is not None:
            return self._default
        return _Script([HttpError(500, "fake server: no scripted response left")])

    def _next_id(self) -> str:
        return f"chatcmpl-fake-{next(self._ids)}"


DEFAULT_SCRIPT: list[Step] = [
    Echo("You said: "),
    Finish("stop"),
    Usage(prompt_tokens=10, completion_tokens=5),
    Done(),
]


async def _serve_forever(host: str, port: int) -> None:
    async with FakeOpenAIServer(host=host, port=port, default=DEFAULT_SCRIPT) as server:
        print(f"fake OpenAI server on {server.base_url}", flush=True)
        await asyncio.Event().wait()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_forever(args.host, args.port))


if __name__ == "__main__":
    main()
