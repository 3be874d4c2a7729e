"""Talking to one MCP server with the official SDK, every byte through the egress guard.

The SDK makes its own HTTP requests; it is given an ``httpx.AsyncClient`` whose transport
is ``egress.transport.GuardedTransport``, bound to the server's origin: public addresses
only, the name resolved once and pinned, requests to any other host (a redirect's
included) refused, secret references in the headers expanded only for the secrets'
allowed hosts, responses capped. No Django here: the caller gives ``ServerAccess``.

Each operation opens its own MCP session (initialize, the request, close) under one
deadline: a server that is down, refuses, or hangs costs at most that long, and a refusal
by the guard ends the wait at once (``GuardedTransport.failed``) rather than at the
deadline. What fails is an ``McpUnavailable`` whose message is a sentence fit for a page
and for the LLM to say: it names the server, never an address or a header.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, TypeVar

import httpx
from mcp import ClientSession, types
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

import egress
from egress.secret_refs import SecretBinding
from egress.transport import GuardedTransport

Transport = Literal["streamable_http", "sse"]
CLIENT_INFO = types.Implementation(name="voice-agent-platform", version="1")
T = TypeVar("T")
CLOSE_GRACE_S = 1.0  # once the answer is in: how long closing the session may take


class McpUnavailable(Exception):
    """The server could not be used; the message is one sentence, safe to show and say."""


class McpTimedOut(McpUnavailable):
    """The server did not answer within the deadline."""


@dataclass(frozen=True)
class ServerAccess:
    """How to reach one server: what the platform sends it, and the limits."""

    name: str  # the connection's name, as the customer gave it (for messages)
    url: str
    transport: Transport
    policy: egress.Policy
    headers: dict[str, str] = field(default_factory=dict)  # secret references, not values
    secrets: Sequence[SecretBinding] = ()
    max_response_bytes: int = 1024 * 1024
    resolver: egress.guard.Lookup | None = None  # tests: a scripted DNS


@dataclass(frozen=True)
class ListedTool:
    name: str
    description: str
    input_schema: dict[str, Any]


async def tools_list(
    access: ServerAccess,
    *,
    timeout_s: float,
    max_tools: int,
    max_bytes: int = 2 * 1024 * 1024,
    description_max: int = 1024,
) -> list[ListedTool]:
    """The server's tools (every page of them, up to ``max_tools``), each description cut
    to ``description_max`` as its page arrives; a list whose names, descriptions and
    schemas come to more than ``max_bytes`` across its pages is refused."""

    async def listing(session: ClientSession) -> list[ListedTool]:
        found: list[ListedTool] = []
        cursor: str | None = None
        held = 0
        while len(found) < max_tools:
            page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
            for tool in page.tools[: max_tools - len(found)]:
                listed = ListedTool(
                    tool.name, (tool.description or "")[:description_max], dict(tool.inputSchema)
                )
                held += _size(listed)
                if held > max_bytes:
                    raise McpUnavailable(
                        _sentence(access, f"its tool list is larger than {max_bytes} bytes")
                    )
                found.append(listed)
            cursor = page.nextCursor
            if not cursor:
                break
        return found

    return await _with_session(access, timeout_s, listing)


async def tool_call(
    access: ServerAccess, name: str, arguments: dict[str, Any], *, timeout_s: float
) -> types.CallToolResult:
    async def calling(session: ClientSession) -> types.CallToolResult:
        return await session.call_tool(
            name, arguments, read_timeout_seconds=timedelta(seconds=timeout_s)
        )

    return await _with_session(access, timeout_s, calling)


def _size(tool: ListedTool) -> int:
    schema = json.dumps(tool.input_schema, ensure_ascii=False)
    return len(tool.name.encode()) + len(tool.description.encode()) + len(schema.encode())


def result_text(result: types.CallToolResult) -> str:
    """What the LLM gets: the structured result when there is one, else the text parts
    (other kinds of content named, not carried: an image means nothing to a voice turn)."""
    if result.structuredContent is not None:
        return json.dumps(result.structuredContent, ensure_ascii=False)
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        else:
            parts.append(f"[{block.type} content omitted]")
    return json.dumps({"content": "\n".join(parts)}, ensure_ascii=False)


def error_text(result: types.CallToolResult) -> str:
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    return " ".join(texts).strip() or "the tool reported an error"


# --- one session ------------------------------------------------------------------


async def _with_session(
    access: ServerAccess, timeout_s: float, work: Callable[[ClientSession], Awaitable[T]]
) -> T:
    try:
        transport = GuardedTransport(
            access.url,
            access.policy,
            secrets=access.secrets,
            max_response_bytes=access.max_response_bytes,
            resolver=access.resolver,
        )
    except (egress.InvalidURL, egress.EgressRefused) as exc:
        raise McpUnavailable(_sentence(access, str(exc))) from None

    answers: list[T] = []
    answered, garbled = asyncio.Event(), asyncio.Event()

    async def session_work() -> T:
        async with _session(access, transport, timeout_s, garbled) as session:
            await session.initialize()
            answers.append(await work(session))
            answered.set()
        return answers[0]

    task = asyncio.ensure_future(session_work())
    refused = asyncio.ensure_future(transport.failed.wait())
    got = asyncio.ensure_future(answered.wait())
    unreadable = asyncio.ensure_future(garbled.wait())
    try:
        done, _ = await asyncio.wait(
            {task, refused, got, unreadable}, timeout=timeout_s, return_when="FIRST_COMPLETED"
        )
        if got in done:
            # The answer is in: closing the session (a DELETE the server may never answer)
            # gets a moment, not the rest of the deadline, and cannot lose the answer.
            await asyncio.wait({task}, timeout=CLOSE_GRACE_S)
            return answers[0]
        if task in done:
            return task.result()
        if refused in done:
            raise McpUnavailable(_sentence(access, transport.refused or "it refused"))
        if unreadable in done:
            # The SDK drops an answer it cannot parse (and would wait for it to the end).
            unread = "its answer could not be read (not MCP, or nested too deeply)"
            raise McpUnavailable(_sentence(access, transport.refused or unread))
        raise McpTimedOut(f"The tool server {access.name!r} did not answer within {timeout_s:g} s.")
    except McpUnavailable:
        raise
    except Exception as exc:
        ours = _ours(exc)
        if ours is not None:
            raise ours from None
        raise McpUnavailable(_sentence(access, transport.refused or _why(exc))) from None
    finally:
        for pending in (task, refused, got, unreadable):
            pending.cancel()
        with contextlib.suppress(BaseException):
            await task
        await transport.aclose()


@contextlib.asynccontextmanager
async def _session(
    access: ServerAccess, transport: GuardedTransport, timeout_s: float, garbled: asyncio.Event
) -> AsyncIterator[ClientSession]:
    timeout = httpx.Timeout(timeout_s)

    async def on_message(message: object) -> None:
        if isinstance(message, Exception):  # what the SDK could not parse
            garbled.set()
        await asyncio.sleep(0)

    def client(
        headers: dict[str, str] | None = None,
        timeout: httpx.Timeout | None = timeout,
        auth: httpx.Auth | None = None,
    ) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=transport,
            headers=headers,
            timeout=timeout,
            follow_redirects=False,
            trust_env=False,
        )

    if access.transport == "sse":
        streams = sse_client(
            access.url, headers=access.headers, timeout=timeout_s,
            sse_read_timeout=timeout_s, httpx_client_factory=client,
        )  # fmt: skip
    else:
        streams = streamable_http_client(access.url, http_client=client(access.headers))
    async with streams as (read, write, *_):
        async with ClientSession(
            read, write, read_timeout_seconds=timedelta(seconds=timeout_s),
            client_info=CLIENT_INFO, message_handler=on_message,
        ) as session:  # fmt: skip
            yield session


def _ours(exc: BaseException) -> McpUnavailable | None:
    """Our own refusal from inside the SDK's task groups, if that is what ``exc`` is."""
    if isinstance(exc, McpUnavailable):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        return next(filter(None, map(_ours, exc.exceptions)), None)
    return None


def _sentence(access: ServerAccess, why: str) -> str:
    return f"The tool server {access.name!r} could not be used: {why.rstrip('.')}."


def _why(exc: BaseException) -> str:
    """In words, without the exception's own text (it may quote headers or addresses)."""
    if isinstance(exc, BaseExceptionGroup):
        inner = exc.exceptions[0] if exc.exceptions else exc
        return _why(inner)
    if isinstance(exc, httpx.HTTPStatusError):
        return f"it answered HTTP {exc.response.status_code}"
    if isinstance(exc, httpx.TimeoutException):
        return "it did not answer in time"
    if isinstance(exc, httpx.HTTPError):
        return "the connection failed"
    from mcp.shared.exceptions import McpError

    if isinstance(exc, McpError):
        return f"it answered with an error ({exc.error.code})"
    return f"it did not speak MCP as expected ({type(exc).__name__})"
