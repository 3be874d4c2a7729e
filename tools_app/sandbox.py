"""Run customer tool handlers (JavaScript) in a fresh V8 context per call.

The only module that imports the V8 engine (mini-racer), and it is only ever imported
inside a jailed sandbox worker process (``tools_app.jail``): never in a web process, a
Celery task process or anything else that holds credentials. Limits that must hold
whatever the JavaScript does (wall time, CPU time, memory, the number of fetches) are
enforced outside V8, by the kernel and by the parent process that can kill the worker;
the ones here (V8 heap, result and console sizes) make ordinary failures readable.

How a call runs: a context is prepared ahead with the runtime in ``sandbox_prelude.js``;
when the call arrives the handler starts. JavaScript never calls back into Python.
Requests for the host (fetches, digests) are queued inside the context and pulled with
``__sandbox.drain()``; answers go in with ``__sandbox.step()``, which also fires due
timers. Data crosses into the context as JSON string literals, decoded there with
``JSON.parse``; the handler source is passed the same way and compiled inside the
context, never pasted into code.

Never log handler arguments, results, secrets or console output.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import os
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from py_mini_racer import JSEvalException, JSOOMException, JSParseException, MiniRacer

from tools_app.calls import SandboxLimits, SandboxResult, is_fetch_request, is_header_pair

__all__ = ["FetchRefused", "Fetcher", "PreparedContext", "run_prepared", "syntax_error"]

Fetcher = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Sends one request for ``ctx.fetch`` to the parent.

Request: ``{"url", "method", "headers": [[name, value], ...], "body": str | None}``.
Response: ``{"status": int, "headers": [[name, value], ...], "body": base64 str,
"url": str}``. Raising ``FetchRefused`` rejects the handler's promise with its message.
"""

MEMORY_EXCEEDED = "memory limit exceeded"
CONSOLE_TRUNCATED = "[console output truncated]\n"
NOT_ONE_FUNCTION = (
    "the handler must be a single function expression, like async (args, ctx) => { ... }"
)
# Digests and the like, per call: bounds the work a handler can make the worker do
# between two await points. Fetches are counted by the parent.
MAX_HOST_OPS = 10_000
STEP_REPLY_BYTES = 256 * 1024  # fetch answers handed to the handler in one step
_MAX_ERROR_CHARS = 1000
_DIGESTS = {"SHA-1": "sha1", "SHA-256": "sha256", "SHA-384": "sha384", "SHA-512": "sha512"}
_PRELUDE = Path(__file__).with_name("sandbox_prelude.js").read_text(encoding="utf-8")
_CHACHA20 = Path(__file__).with_name("chacha20.js").read_text(encoding="utf-8")
_PARSE_ERROR = re.compile(r"<anonymous>:(\d+): (.*)")


class FetchRefused(Exception):
    """The parent refused or could not make a request; the message is for the handler."""


class _Failed(Exception):
    """Ends a call early; the message is the result's ``error``."""


def _entropy(size: int) -> bytes:
    """Key material for the context's crypto.getRandomValues (a seam for tests)."""
    return os.urandom(size)


class PreparedContext:
    """A V8 context with the runtime installed, ready for exactly one handler call."""

    def __init__(self, context: MiniRacer, limits: SandboxLimits) -> None:
        self.context = context
        self.limits = limits

    @classmethod
    async def open(cls, limits: SandboxLimits) -> PreparedContext:
        context = MiniRacer()
        context.set_hard_memory_limit(limits.heap_bytes)
        context.set_soft_memory_limit(limits.heap_bytes * 3 // 4)
        config = {**limits.engine_config(), "randomKey": _entropy(32).hex()}
        try:
            install = f"({_PRELUDE}\n)({json.dumps(config)}, ({_CHACHA20}\n))"
            await context.eval_cancelable(install)
        except BaseException:
            context.close()
            raise
        return cls(context, limits)

    def close(self) -> None:
        self.context.close()


async def run_prepared(
    prepared: PreparedContext,
    source: str,
    args_json: str,
    secrets_json: str,
    *,
    fetcher: Fetcher,
) -> SandboxResult:
    """Run one handler call in ``prepared`` (which is spent afterwards: close it).

    Whatever the handler does (throws, allocates, misuses fetch) ends as a
    ``SandboxResult``; a handler that never ends is the parent's to stop.
    """
    context, limits = prepared.context, prepared.limits
    call = _Call(fetcher=fetcher, limits=limits)
    outcome: dict[str, Any] | None = None
    error: str | None = None
    memory_exceeded = False
    try:
        outcome = await call.drive(context, source, args_json, secrets_json)
    except JSOOMException:
        memory_exceeded = True
    except _Failed as failure:
        error = str(failure)
    except JSEvalException as exc:
        error = f"the sandbox runtime failed: {_first_line(str(exc))}"
    finally:
        call.cancel_fetches()
        memory_exceeded = memory_exceeded or context.was_hard_memory_limit_reached()
    console = call.console.text()
    if memory_exceeded:
        return SandboxResult.failure(MEMORY_EXCEEDED, console=console)
    if error is not None or outcome is None:
        return SandboxResult.failure(error or "the handler did not finish", console=console)
    if not outcome["ok"]:
        return SandboxResult.failure(_clip(str(outcome["error"])), console=console)
    result_json, truncated = _fit_result(outcome, limits.max_result_bytes)
    return SandboxResult(
        ok=True,
        result_json=result_json,
        error=None,
        timed_out=False,
        truncated=truncated,
        console=console,
        fetch_count=0,
    )


async def syntax_error(source: str) -> str | None:
    """Why V8 cannot parse ``source`` as an expression, with the line; None if it can.

    The source goes in parentheses after ``throw 0;`` in a script: V8 parses the whole
    script first (a parse error names its line), and when it parses, the ``throw`` is
    the first thing that runs, so nothing of the source ever does.
    """
    context = MiniRacer()
    try:
        parse_error = await _parse_error(context, f"throw 0;\n({source}\n)")
    finally:
        context.close()
    if parse_error is None:
        return None
    line, message = parse_error
    if line - 1 > source.count("\n") + 1:
        return "SyntaxError: Unexpected end of input"  # it tripped on our ")"
    return f"{message} (line {line - 1})"


async def _parse_error(context: MiniRacer, script: str) -> tuple[int, str] | None:
    try:
        await context.eval_cancelable(script)
    except JSParseException as exc:
        found = _PARSE_ERROR.match(str(exc))
        if found is None:
            return 1, "SyntaxError"
        return int(found.group(1)), _clip(found.group(2))
    except JSEvalException:
        return None  # the leading `throw 0` ran: the whole script parsed
    return None


class _Call:
    """The worker side of one handler call: host operations and console."""

    def __init__(self, *, fetcher: Fetcher, limits: SandboxLimits) -> None:
        self._fetcher = fetcher
        self._replies: asyncio.Queue[list[Any]] = asyncio.Queue()
        self._fetch_tasks: set[asyncio.Task[None]] = set()
        self._unanswered = 0
        self._host_ops = 0
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
            outcome: dict[str, Any] | None = state["outcome"]
            if outcome is not None:
                return outcome
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
        # One large body per step: each crosses into V8 as text, parsed and decoded there,
        # and several at once would hold all their copies together (a worker's memory
        # is sized for one body in flight plus every body the handler keeps).
        size = sum(_reply_size(reply) for reply in replies)
        while not self._replies.empty() and size < STEP_REPLY_BYTES:
            reply = self._replies.get_nowait()
            replies.append(reply)
            size += _reply_size(reply)
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
        if not is_fetch_request(request):
            self._replies.put_nowait([op_id, False, "invalid fetch request"])
            return
        self._unanswered += 1
        task = asyncio.create_task(self._fetch(op_id, request))
        self._fetch_tasks.add(task)
        task.add_done_callback(self._fetch_tasks.discard)

    async def _fetch(self, op_id: Any, request: dict[str, Any]) -> None:
        try:
            reply = [op_id, True, _response_payload(await self._fetcher(request))]
        except FetchRefused as exc:
            reply = [op_id, False, str(exc) or "the request was refused"]
        except ValueError:
            reply = [op_id, False, "invalid response from the fetch proxy"]
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
    checked: dict[str, Any] = state
    return checked


def _is_outcome(outcome: Any) -> bool:
    if outcome is None:
        return True
    if not isinstance(outcome, dict):
        return False
    if outcome.get("ok") is True:
        return isinstance(outcome.get("json"), str) and isinstance(outcome.get("cut"), bool)
    return outcome.get("ok") is False and isinstance(outcome.get("error"), str)


def _reply_size(reply: list[Any]) -> int:
    payload = reply[2] if len(reply) > 2 else None
    return len(payload["body"]) if isinstance(payload, dict) else 0


def _response_payload(response: Any) -> dict[str, Any]:
    if not isinstance(response, dict):
        raise ValueError("invalid response")
    status, headers = response.get("status"), response.get("headers")
    body, url = response.get("body"), response.get("url")
    valid = (
        isinstance(status, int)
        and not isinstance(status, bool)
        and 100 <= status <= 599
        and isinstance(headers, list)
        and all(is_header_pair(pair) for pair in headers)
        and isinstance(body, str)
        and isinstance(url, str)
    )
    if not valid:
        raise ValueError("invalid response")
    return {"status": status, "headers": headers, "body": body, "url": url}


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


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return _clip(lines[0] if lines else "unknown error")


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_ERROR_CHARS else text[:_MAX_ERROR_CHARS] + "..."
