"""Run customer tool handlers (JavaScript) in a fresh V8 context per call.

The only module that imports the V8 engine (mini-racer). A handler is the source
of one function expression, ``async (args, ctx) => …`` or a plain function;
``ctx`` holds ``secrets`` and ``fetch``, which goes out only through the injected
``fetcher`` (the egress proxy).

How a call runs: a new context gets the runtime in ``sandbox_prelude.js``, then
the handler starts. JavaScript never calls back into Python. Requests for the
host (fetches, digests) are queued inside the context and pulled by Python with
``__sandbox.drain()``; answers go in with ``__sandbox.step()``, which also fires
due timers. Python only ever runs the context through mini-racer's cancelable
evaluation, so it never blocks on a busy isolate, and a runaway handler (a
``while(true){}`` anywhere, even after an ``await``) is ended by freeing the
context, which happens in ``finally`` on every path.

Data crosses into the context as JSON string literals (``json.dumps`` of a
string: ASCII, quote-safe), decoded there with ``JSON.parse``; the handler source
is passed the same way and compiled inside the context, never pasted into code
(the one exception: ``check_syntax`` re-parses source that already failed to
parse, only to learn the line of the error).

Never log handler arguments, results, secrets or console output.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from py_mini_racer import JSEvalException, JSOOMException, JSParseException, MiniRacer

__all__ = ["Fetcher", "SandboxLimits", "SandboxResult", "check_syntax", "run_handler"]

Fetcher = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Sends one request for ``ctx.fetch``.

Request: ``{"url", "method", "headers": [[name, value], ...], "body": str | None}``
(``url`` is an absolute http(s) URL as parsed by the sandbox; names are lower
case). Response: ``{"status": int, "headers": [[name, value], ...], "body": str,
"url": str}``. Raising rejects the handler's promise with ``str(exception)``, so
that text must be safe to show.
"""


@dataclass(frozen=True)
class SandboxLimits:
    wall_time_s: float = 30.0
    heap_bytes: int = 64 * 1024 * 1024
    """The V8 heap limit; also the budget for array buffers, which live outside it."""
    max_fetches: int = 50
    max_concurrent_fetches: int = 6
    """More fetches than this wait for a free slot."""
    max_result_bytes: int = 64 * 1024
    max_console_bytes: int = 16 * 1024

    def __post_init__(self) -> None:
        for name, limit in vars(self).items():
            if not limit > 0:
                raise ValueError(f"SandboxLimits.{name} must be positive, got {limit!r}")


@dataclass(frozen=True)
class SandboxResult:
    ok: bool
    result_json: str | None
    """The handler's return value as JSON (``undefined`` becomes ``null``). When it
    is longer than ``max_result_bytes`` it is replaced by
    ``{"truncated": true, "preview": "<start of the JSON text>"}``, itself within
    the limit, and ``truncated`` is set."""
    error: str | None
    """Short and meant for the model: ``TypeError: x is not a function``,
    ``timed out after 30 s``, ``memory limit exceeded``, ..."""
    timed_out: bool
    console: str
    """What the handler logged, up to ``max_console_bytes`` (then a marker line).
    Lines logged after the last exchange with a context that was then stopped
    (timeout, memory) are lost."""
    fetch_count: int
    """Requests handed to the fetcher (refused ones are not counted)."""
    truncated: bool


DEFAULT_LIMITS = SandboxLimits()
MEMORY_EXCEEDED = "memory limit exceeded"
CONSOLE_TRUNCATED = "[console output truncated]\n"
# Fetches, digests and the like, per call: bounds the work a handler can make
# Python do between two await points.
MAX_HOST_OPS = 10_000
CLOSE_GRACE_S = 1.0
CHECK_LIMITS = SandboxLimits(wall_time_s=1.0, heap_bytes=16 * 1024 * 1024)
_MAX_ERROR_CHARS = 1000
_DIGESTS = {"SHA-1": "sha1", "SHA-256": "sha256", "SHA-384": "sha384", "SHA-512": "sha512"}
_PRELUDE = Path(__file__).with_name("sandbox_prelude.js").read_text(encoding="utf-8")


def _entropy(size: int) -> bytes:
    """Key material for the context's crypto.getRandomValues (a seam for tests)."""
    return os.urandom(size)


class _Failed(Exception):
    """Ends a call early; the message is the result's ``error``."""


async def run_handler(
    source: str,
    args: dict[str, Any],
    *,
    secrets: dict[str, str],
    fetcher: Fetcher,
    limits: SandboxLimits = DEFAULT_LIMITS,
) -> SandboxResult:
    """Run one handler call in a new V8 context and report how it went.

    Whatever the handler does (throws, loops, allocates, misuses fetch) ends as a
    ``SandboxResult``; only bugs in this module raise. ``args`` and ``secrets``
    must be JSON-serialisable.
    """
    args_json, secrets_json = json.dumps(args), json.dumps(secrets)
    call = _Call(fetcher=fetcher, limits=limits)
    outcome: dict[str, Any] | None = None
    error: str | None = None
    timed_out = memory_exceeded = False
    context = MiniRacer()
    try:
        async with asyncio.timeout(limits.wall_time_s):
            await _install_runtime(context, limits)
            outcome = await call.drive(context, source, args_json, secrets_json)
    except TimeoutError:
        timed_out = True
    except JSOOMException:
        memory_exceeded = True
    except _Failed as failure:
        error = str(failure)
    except JSEvalException as exc:
        error = f"the sandbox runtime failed: {_first_line(str(exc))}"
    finally:
        call.cancel_fetches()
        memory_exceeded = memory_exceeded or context.was_hard_memory_limit_reached()
        await _close(context)
    common = {"console": call.console.text(), "fetch_count": call.fetch_count}
    if memory_exceeded:
        return _failure(MEMORY_EXCEEDED, **common)
    if timed_out:
        message = f"timed out after {limits.wall_time_s:g} s"
        return _failure(message, timed_out=True, **common)
    if error is not None or outcome is None:
        return _failure(error or "the handler did not finish", **common)
    if not outcome["ok"]:
        return _failure(_clip(str(outcome["error"])), **common)
    result_json, truncated = _fit_result(outcome, limits.max_result_bytes)
    return SandboxResult(
        ok=True,
        result_json=result_json,
        error=None,
        timed_out=False,
        truncated=truncated,
        **common,
    )


def check_syntax(source: str) -> str | None:
    """None if ``source`` is one function expression, else why not (for the dashboard).

    Evaluates the source in a throwaway context with tight limits. Blocks for up
    to about a second; from async code, prefer ``asyncio.to_thread(check_syntax, …)``.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_check_syntax(source))
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-check") as pool:
        return pool.submit(asyncio.run, _check_syntax(source)).result()


async def _check_syntax(source: str) -> str | None:
    context = MiniRacer()
    try:
        async with asyncio.timeout(CHECK_LIMITS.wall_time_s):
            await _install_runtime(context, CHECK_LIMITS)
            raw = await context.eval_cancelable(f"__sandbox.check({_js(source)})")
            report = json.loads(str(raw))
            if report["error"] is None:
                return None
            line = await _syntax_error_line(context, source) if report["syntax"] else None
            if line is not None and line > source.count("\n") + 1:
                return "SyntaxError: Unexpected end of input"  # it tripped on our ")"
            return report["error"] + ("" if line is None else f" (line {line})")
    except TimeoutError:
        return "evaluating the handler source took too long"
    except JSOOMException:
        return MEMORY_EXCEEDED
    finally:
        await _close(context)


async def _syntax_error_line(context: MiniRacer, source: str) -> int | None:
    # The source already failed to parse inside the context, so this identical
    # text fails too and runs nothing; only the engine's parse error has a line.
    try:
        await context.eval_cancelable("(" + source + "\n)")
    except JSParseException as exc:
        found = re.match(r"<anonymous>:(\d+):", str(exc))
        return int(found.group(1)) if found else None
    return None


class _Call:
    """The host side of one handler call: host operations, console, counters."""

    def __init__(self, *, fetcher: Fetcher, limits: SandboxLimits) -> None:
        self._fetcher = fetcher
        self._limits = limits
        self._replies: asyncio.Queue[list[Any]] = asyncio.Queue()
        self._fetch_slots = asyncio.Semaphore(limits.max_concurrent_fetches)
        self._fetch_tasks: set[asyncio.Task[None]] = set()
        self._unanswered = 0
        self._fetches_asked = 0
        self._host_ops = 0
        self.fetch_count = 0
        self.console = _Console(limits.max_console_bytes)

    async def drive(
        self, context: MiniRacer, source: str, args_json: str, secrets_json: str
    ) -> dict[str, Any]:
        """Start the handler, then trade host work for answers until it settles."""
        start = f"__sandbox.start({_js(source)}, {_js(args_json)}, {_js(secrets_json)})"
        await context.eval_cancelable(start)
        while True:
            state = _decode_state(await context.eval_cancelable("__sandbox.drain()"))
            self.console.add(state["console"], cut=state["consoleCut"])
            if context.was_hard_memory_limit_reached():
                raise _Failed(MEMORY_EXCEEDED)
            for op in state["ops"]:
                self._start_op(op)
            if state["outcome"] is not None:
                return state["outcome"]
            replies = await self._next_replies(state["timer"])
            await context.eval_cancelable(f"__sandbox.step({_js(json.dumps(replies))})")

    def cancel_fetches(self) -> None:
        for task in self._fetch_tasks:
            task.cancel()

    async def _next_replies(self, timer_ms: float | None) -> list[list[Any]]:
        """Answers that are ready, after waiting for the first one or the next timer."""
        replies = []
        if self._replies.empty():
            if timer_ms is None and self._unanswered == 0:
                raise _Failed("the handler's promise never settled (no fetch or timer was pending)")
            delay = None if timer_ms is None else max(0.0, timer_ms / 1000 - time.time())
            try:
                async with asyncio.timeout(delay):
                    replies.append(await self._replies.get())
            except TimeoutError:
                return []  # a timer is due; an answer that raced it stays queued
        while not self._replies.empty():
            replies.append(self._replies.get_nowait())
        return replies

    def _start_op(self, op: dict[str, Any]) -> None:
        self._host_ops += 1
        if self._host_ops > MAX_HOST_OPS:
            raise _Failed(f"too many fetch or crypto calls (limit {MAX_HOST_OPS})")
        kind, op_id = op.get("op"), op.get("id")
        if kind == "fetch":
            self._start_fetch(op_id, op.get("request"))
        elif kind == "digest":
            self._replies.put_nowait([op_id, *_digest(op.get("algorithm"), op.get("data"))])
        else:
            self._replies.put_nowait([op_id, False, "unsupported operation"])

    def _start_fetch(self, op_id: Any, request: Any) -> None:
        self._fetches_asked += 1
        limit = self._limits.max_fetches
        if self._fetches_asked > limit:
            self._replies.put_nowait([op_id, False, f"too many fetches (limit {limit})"])
            return
        if not _is_request(request):
            self._replies.put_nowait([op_id, False, "invalid fetch request"])
            return
        self.fetch_count += 1
        self._unanswered += 1
        task = asyncio.create_task(self._fetch(op_id, request))
        self._fetch_tasks.add(task)
        task.add_done_callback(self._fetch_tasks.discard)

    async def _fetch(self, op_id: Any, request: dict[str, Any]) -> None:
        try:
            async with self._fetch_slots:
                response = await self._fetcher(request)
            reply = [op_id, True, _response_payload(response, request["url"])]
        except Exception as exc:  # the fetcher's message is meant for the handler
            reply = [op_id, False, str(exc) or type(exc).__name__]
        # Together, so that "nothing pending" is never seen while a reply is due.
        self._unanswered -= 1
        self._replies.put_nowait(reply)


class _Console:
    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._parts: list[str] = []
        self._size = 0
        self._cut = False

    def add(self, text: str, *, cut: bool) -> None:
        if text and not self._cut:
            data = text.encode("utf-8", "replace")
            room = self._limit - self._size
            if len(data) > room:
                data, self._cut = data[:room], True
            self._parts.append(data.decode("utf-8", "ignore"))
            self._size += len(data)
        self._cut = self._cut or cut

    def text(self) -> str:
        return "".join(self._parts) + (CONSOLE_TRUNCATED if self._cut else "")


async def _install_runtime(context: MiniRacer, limits: SandboxLimits) -> None:
    context.set_hard_memory_limit(limits.heap_bytes)
    context.set_soft_memory_limit(limits.heap_bytes * 3 // 4)
    config = {
        "heapBytes": limits.heap_bytes,
        "maxResultBytes": limits.max_result_bytes,
        "maxConsoleBytes": limits.max_console_bytes,
        "randomKey": _entropy(32).hex(),
    }
    await context.eval_cancelable(f"({_PRELUDE}\n)({json.dumps(config)})")


async def _close(context: MiniRacer) -> None:
    """Free the context, which also stops any JavaScript still running in it.

    Done on a helper thread: some V8 builtins (Object.keys of a huge string, say)
    only notice they were stopped when they finish, seconds later. The event loop
    must not block on that, and the call waits at most CLOSE_GRACE_S for it.
    """
    loop = asyncio.get_running_loop()
    closed = loop.create_future()

    def close() -> None:
        try:
            context.close()
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is gone; nobody waits
                loop.call_soon_threadsafe(_settle, closed)

    threading.Thread(target=close, name="sandbox-close", daemon=True).start()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(CLOSE_GRACE_S):
            await asyncio.shield(closed)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _js(text: str) -> str:
    """A JavaScript string literal for ``text`` (JSON strings are; ASCII only)."""
    return json.dumps(text)


def _decode_state(raw: Any) -> dict[str, Any]:
    try:
        state = json.loads(raw)
        valid = (
            isinstance(state, dict)
            and isinstance(state.get("ops"), list)
            and all(isinstance(op, dict) for op in state["ops"])
            and isinstance(state.get("console"), str)
            and isinstance(state.get("consoleCut"), bool)
            and (state.get("timer") is None or isinstance(state["timer"], int | float))
            and _is_outcome(state.get("outcome"))
        )
    except (TypeError, ValueError):
        valid = False
    if not valid:
        raise _Failed("the handler broke the sandbox runtime")
    return state


def _is_outcome(outcome: Any) -> bool:
    if outcome is None:
        return True
    if not isinstance(outcome, dict):
        return False
    if outcome.get("ok") is True:
        return isinstance(outcome.get("json"), str) and isinstance(outcome.get("cut"), bool)
    return outcome.get("ok") is False and isinstance(outcome.get("error"), str)


def _is_request(request: Any) -> bool:
    return (
        isinstance(request, dict)
        and isinstance(request.get("url"), str)
        and isinstance(request.get("method"), str)
        and isinstance(request.get("headers"), list)
        and all(_is_header(pair) for pair in request["headers"])
        and (request.get("body") is None or isinstance(request["body"], str))
    )


def _is_header(pair: Any) -> bool:
    return isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)


def _response_payload(response: Any, request_url: str) -> dict[str, Any]:
    if not isinstance(response, dict):
        raise ValueError("invalid response from the fetch proxy")
    status, headers = response.get("status"), response.get("headers", [])
    body, url = response.get("body", ""), response.get("url") or request_url
    valid = (
        isinstance(status, int)
        and not isinstance(status, bool)
        and 100 <= status <= 599
        and isinstance(headers, list | tuple)
        and all(isinstance(p, list | tuple) and len(p) == 2 for p in headers)
        and all(isinstance(x, str) for p in headers for x in p)
        and isinstance(body, str)
        and isinstance(url, str)
    )
    if not valid:
        raise ValueError("invalid response from the fetch proxy")
    return {"status": status, "headers": [list(p) for p in headers], "body": body, "url": url}


def _digest(algorithm: Any, data: Any) -> tuple[bool, str]:
    name = _DIGESTS.get(algorithm) if isinstance(algorithm, str) else None
    if name is None or not isinstance(data, str):
        return False, "unsupported digest"
    try:
        digest = hashlib.new(name, base64.b64decode(data, validate=True)).digest()
    except binascii.Error:
        return False, "invalid digest input"
    return True, base64.b64encode(digest).decode("ascii")


def _fit_result(outcome: dict[str, Any], limit: int) -> tuple[str, bool]:
    text: str = outcome["json"]
    encoded = text.encode("utf-8", "replace")
    if not outcome["cut"] and len(encoded) <= limit:
        return text, False
    budget = limit
    while True:
        preview = encoded[: max(budget, 0)].decode("utf-8", "ignore")
        envelope = json.dumps({"truncated": True, "preview": preview}, ensure_ascii=False)
        overflow = len(envelope.encode("utf-8")) - limit
        if overflow <= 0 or budget <= 0:
            return envelope, True
        budget -= overflow


def _failure(
    error: str, *, console: str, fetch_count: int, timed_out: bool = False
) -> SandboxResult:
    return SandboxResult(
        ok=False,
        result_json=None,
        error=error,
        timed_out=timed_out,
        console=console,
        fetch_count=fetch_count,
        truncated=False,
    )


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return _clip(lines[0] if lines else "unknown error")


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_ERROR_CHARS else text[:_MAX_ERROR_CHARS] + "..."
