"""OpenAI-compatible chat completions (OpenAI, Ollama ``/v1``, vLLM, the AssemblyAI LLM gateway).

One ``POST {base_url}/chat/completions`` with ``stream: true`` per round, read as server-sent
events. Nothing here is vendor specific beyond the ``assemblyai`` flavor, which papers over
the gateway's non-OpenAI habits (Claude-style finish reasons, null envelope fields, a raw
API key, and Anthropic's refusal of blank text). The adapter never retries: it raises
``ProviderError`` saying whether a retry could help, and the caller decides.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import aiohttp

import egress
from engine.protocol import SURROGATE, ErrorCode
from engine.providers import base, http_pool
from engine.providers.base import (
    LLM,
    Capabilities,
    LLMDone,
    LLMEvent,
    ProviderError,
    TextDelta,
    ToolCall,
    ToolCallsRequested,
    ToolSpec,
)
from engine.providers.spec import ProviderSpec, Setting, secret_setting
from engine.settings import env_float

logger = logging.getLogger(__name__)

ERROR_CODE = ErrorCode.LLM_FAILED
FLAVORS = ("auto", "openai", "assemblyai")
_MAX_PROVIDER_MESSAGE = 200
_BLANK_CONTENT_STAND_IN = "..."

# Claude-style reasons (the gateway passes them through) mapped onto OpenAI's vocabulary.
# Harmless for real OpenAI servers, which never send the left-hand names.
_FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "function_call": "tool_calls",
}

# SSE ends lines with CRLF, LF or CR, and nothing else: splitting on every Unicode line
# break (as str.splitlines does) would cut a JSON payload holding a raw U+2028.
_SSE_LINE_END = re.compile(rb"\r\n|\r|\n")

# ---------------------------------------------------------------- the adapter


class OpenAICompatibleLLM(LLM):
    name = "openai"
    capabilities = Capabilities(tools=True)

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        model: str = "gpt-4o-mini",
        timeout_s: float = 30.0,
        flavor: str = "auto",
        egress_policy: egress.Policy | None = None,
    ) -> None:
        """``egress_policy``: given for a workspace's own endpoint (the customer typed the
        URL, so the egress guard's rules apply); None for the platform's ``LLM_BASE_URL``."""
        if flavor not in FLAVORS:
            raise ValueError(f"flavor must be one of {', '.join(FLAVORS)}, got {flavor!r}")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.flavor = _detect_flavor(self.base_url) if flavor == "auto" else flavor
        self._api_key = api_key or None
        self._timeout = http_pool.timeout(timeout_s)
        self._pool: http_pool.Pool = "llm" if egress_policy is None else "customer"
        self._policy = egress.OPERATOR if egress_policy is None else egress_policy

    async def stream(
        self,
        *,
        messages: list[dict[str, Any]],
        tools: list[ToolSpec],
        model: str | None = None,
    ) -> AsyncIterator[LLMEvent]:
        session = http_pool.shared_session(self._pool, self._policy)
        try:
            async with session.post(
                self._url(),
                json=self._request_body(messages, tools, model),
                headers=self._headers(),
                timeout=self._timeout,
                allow_redirects=False,
            ) as response:
                await _raise_for_status(response)
                async for event in self._events(response):
                    yield event
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise self._transport_error(exc) from exc

    def _url(self) -> str:
        """The endpoint as the egress guard reads it; address literals and ports are judged
        here, names where the pool connects (``egress.pinned_http``)."""
        try:
            return egress.check(
                f"{self.base_url}/chat/completions", schemes=("https", "http"), policy=self._policy
            ).url
        except egress.InvalidURL:
            message = "the LLM base URL is not an http(s) URL"
            raise ProviderError(message, code=ERROR_CODE, reason=base.REASON_UNREACHABLE) from None
        except egress.EgressRefused as exc:
            raise _refused(str(exc)) from None

    def _transport_error(self, exc: Exception) -> ProviderError:
        if isinstance(exc, aiohttp.ClientConnectorError) and not self._policy.allow_private:
            # Refused, unresolvable or closed: one sentence, whichever (no network map).
            shown = egress.where(exc.host, exc.port or 0)
            return _refused(str(egress.refusal(shown, self._policy)))
        return _transport_error(exc)

    def _request_body(
        self, messages: list[dict[str, Any]], tools: list[ToolSpec], model: str | None
    ) -> dict[str, Any]:
        gateway = self.flavor == "assemblyai"
        body: dict[str, Any] = {
            "model": model or self.model,
            "messages": [_pad_blank_content(m) for m in messages] if gateway else messages,
            "stream": True,
        }
        if not gateway:
            # The gateway documents no stream_options; its usage is optional anyway.
            body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = [_tool_payload(spec) for spec in tools]
        return body

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream, application/json"}
        if self._api_key:
            # The gateway wants the bare key; everyone else the OAuth bearer form.
            scheme = "" if self.flavor == "assemblyai" else "Bearer "
            headers["Authorization"] = f"{scheme}{self._api_key}"
        return headers

    async def _events(self, response: aiohttp.ClientResponse) -> AsyncIterator[LLMEvent]:
        state = _ResponseState()
        content_type = response.headers.get("content-type", "").lower()
        if content_type.startswith("application/json"):
            # Some gateways ignore ``stream: true`` for some models and answer in one body.
            for delta in state.feed_completion(_parse_json(await response.read())):
                yield delta
        elif content_type.startswith("text/html"):  # a proxy's page or a wrong base URL
            raise _not_a_stream(content_type)
        else:
            async for payload in _sse_payloads(response.content.iter_any()):
                for delta in state.feed_payload(payload):
                    yield delta
            if not state.saw_chunk and not content_type.startswith("text/event-stream"):
                raise _not_a_stream(content_type)
            state.check_complete(clean_end_is_complete=self.flavor == "assemblyai")
        for event in state.final_events():
            yield event


def _detect_flavor(base_url: str) -> str:
    host = urlparse(base_url).hostname or ""
    return "assemblyai" if "assemblyai" in host else "openai"


# ---------------------------------------------------------------- request side


def _tool_payload(spec: ToolSpec) -> dict[str, Any]:
    # Several servers (vLLM, Claude behind gateways) reject a schema without a type.
    parameters = spec.parameters or {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": parameters,
        },
    }


def _pad_blank_content(message: dict[str, Any]) -> dict[str, Any]:
    """Claude behind the gateway refuses whitespace-only text; send a neutral stand-in."""
    content = message.get("content")
    if isinstance(content, str) and not content.strip():
        return {**message, "content": _BLANK_CONTENT_STAND_IN}
    if isinstance(content, list):
        parts = [_pad_blank_part(part) for part in content]
        return {**message, "content": parts}
    return message


def _pad_blank_part(part: Any) -> Any:
    if isinstance(part, dict) and part.get("type") == "text":
        text = part.get("text")
        if not isinstance(text, str) or not text.strip():
            return {**part, "text": _BLANK_CONTENT_STAND_IN}
    return part


# ---------------------------------------------------------------- response side


async def _sse_payloads(chunks: AsyncIterator[bytes]) -> AsyncIterator[str]:
    """The ``data`` of each server-sent event; comments and other fields are dropped."""
    data_lines: list[str] = []
    async for line in _sse_lines(chunks):
        if not line:
            if data_lines:
                yield "\n".join(data_lines)
                data_lines = []
            continue
        field_name, _, value = line.partition(":")
        if field_name == "data":
            data_lines.append(value[1:] if value.startswith(" ") else value)
    if data_lines:  # the stream ended without the blank line closing its last event
        yield "\n".join(data_lines)


async def _sse_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[str]:
    buffer = b""
    async for chunk in chunks:
        buffer += chunk
        start = 0
        while match := _SSE_LINE_END.search(buffer, start):
            if match.group() == b"\r" and match.end() == len(buffer):
                break  # a CR at the edge may be the first half of a CRLF
            yield buffer[start : match.start()].decode("utf-8", errors="replace")
            start = match.end()
        buffer = buffer[start:]
    if buffer.rstrip(b"\r"):
        yield buffer.rstrip(b"\r").decode("utf-8", errors="replace")


@dataclass
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def add(self, delta: dict[str, Any]) -> None:
        if delta.get("id"):
            self.id = _well_formed(str(delta["id"]))
        function = delta.get("function") or {}
        self.name = self.name or _well_formed(str(function.get("name") or ""))
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            self.arguments.append(_well_formed(arguments))
        elif arguments is not None:  # an already-decoded object replaces any fragments
            self.arguments = [json.dumps(arguments)]

    def finished(self) -> ToolCall:
        if not self.name:
            raise _malformed("the LLM stream sent a tool call without a name")
        call_id = self.id or f"call_{uuid.uuid4().hex[:24]}"
        return ToolCall(id=call_id, name=self.name, arguments="".join(self.arguments) or "{}")


class _ResponseState:
    """What one response has said so far; every field the provider may null is optional."""

    def __init__(self) -> None:
        self.calls: dict[int, _PendingCall] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, int] = {}
        self.saw_done = False
        self.saw_chunk = False

    def feed_payload(self, payload: str) -> list[TextDelta]:
        if self.saw_done:
            return []  # keep draining so the connection goes back to the pool
        if payload.strip() == "[DONE]":
            self.saw_done = True
            return []
        deltas: list[TextDelta] = []
        for chunk in _parse_chunks(payload):
            deltas += self.feed_chunk(chunk)
        return deltas

    def feed_chunk(self, chunk: Any) -> list[TextDelta]:
        if not isinstance(chunk, dict):
            raise _malformed("the LLM stream sent an event that is not a JSON object")
        if chunk.get("error") is not None:
            message = _provider_message(chunk)
            raise ProviderError(
                f"LLM provider error: {message}",
                code=ERROR_CODE,
                retryable=True,
                reason=base.REASON_SERVER_ERROR,
            )
        self.saw_chunk = True
        self.usage = _int_usage(chunk.get("usage")) or self.usage
        choice = _first_choice(chunk.get("choices"))
        if choice is None:
            return []
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])
        delta = choice.get("delta")
        delta = delta if isinstance(delta, dict) else {}
        for call_delta in delta.get("tool_calls") or []:
            self._add_call_delta(call_delta)
        text = _text_of(delta.get("content"))
        return [TextDelta(text)] if text else []

    def feed_completion(self, body: Any) -> list[TextDelta]:
        """A whole ``chat.completion`` body, replayed as if it had been one chunk."""
        if not isinstance(body, dict):
            raise _malformed("the LLM response is not a JSON object")
        choice = _first_choice(body.get("choices"))
        if choice is None and body.get("error") is None:
            raise _malformed("the LLM response has no choices")
        if choice is not None:
            message = dict(choice.get("message") or {})
            calls = message.get("tool_calls") or []
            message["tool_calls"] = [
                {"index": i, **call} for i, call in enumerate(calls) if isinstance(call, dict)
            ]
            choice = {"delta": message, "finish_reason": choice.get("finish_reason")}
        deltas = self.feed_chunk({**body, "choices": [choice] if choice else []})
        self.saw_done = True
        return deltas

    def check_complete(self, *, clean_end_is_complete: bool) -> None:
        if self.saw_done or self.finish_reason is not None:
            return
        if clean_end_is_complete and self.saw_chunk:
            return
        raise ProviderError(
            "the LLM stream ended before the response was complete",
            code=ERROR_CODE,
            retryable=True,
            reason=base.REASON_BROKEN,
        )

    def final_events(self) -> list[LLMEvent]:
        calls = tuple(call.finished() for _, call in sorted(self.calls.items()))
        reason = (self.finish_reason or "stop").lower()
        reason = _FINISH_REASONS.get(reason, reason)
        # Some servers (older Ollama) say "stop" after tool calls; the calls are what count.
        if calls:
            return [ToolCallsRequested(calls=calls), LLMDone("tool_calls", dict(self.usage))]
        if reason == "tool_calls":
            reason = "stop"
        return [LLMDone(reason, dict(self.usage))]

    def _add_call_delta(self, delta: Any) -> None:
        if not isinstance(delta, dict):
            raise _malformed("the LLM stream sent a tool call that is not a JSON object")
        index = delta.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            index = self._index_without_one(delta.get("id"))
        self.calls.setdefault(index, _PendingCall()).add(delta)

    def _index_without_one(self, call_id: Any) -> int:
        """Servers that omit ``index`` either repeat the call's id or mean the last call."""
        if call_id:
            for index, call in self.calls.items():
                if call.id == str(call_id):
                    return index
            return max(self.calls, default=-1) + 1
        return max(self.calls, default=0)


def _parse_chunks(payload: str) -> list[Any]:
    try:
        return [json.loads(payload)]
    except json.JSONDecodeError:
        pass
    except RecursionError:  # nested past the parser's depth: no chunk of OpenAI's shape
        raise _malformed("the LLM stream sent an event that is not valid JSON") from None
    # Servers that forget the blank line between events glue several data lines together.
    try:
        return [json.loads(line) for line in payload.split("\n") if line.strip()]
    except (json.JSONDecodeError, RecursionError):
        raise _malformed("the LLM stream sent an event that is not valid JSON") from None


def _parse_json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise _malformed("the LLM response is not valid JSON") from None


def _first_choice(choices: Any) -> dict[str, Any] | None:
    if not isinstance(choices, list):
        return None
    dicts = [choice for choice in choices if isinstance(choice, dict)]
    first = [choice for choice in dicts if choice.get("index", 0) == 0]
    candidates = first or dicts
    return candidates[0] if candidates else None


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        content = "".join(
            part.get("text") or ""
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return _well_formed(content) if isinstance(content, str) else ""


def _well_formed(text: str) -> str:
    """``text`` with each lone surrogate as U+FFFD, as a browser decodes it."""
    return SURROGATE.sub("\ufffd", text)


# Anthropic's names, as some gateways pass them through, in OpenAI's vocabulary.
_USAGE_NAMES = {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens"}


def _int_usage(usage: Any) -> dict[str, int]:
    if not isinstance(usage, dict):
        return {}
    counts = {
        key: value
        for key, value in usage.items()
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0
    }
    for theirs, ours in _USAGE_NAMES.items():
        if theirs in counts:
            counts.setdefault(ours, counts[theirs])
    return counts


# ---------------------------------------------------------------- failures


def _malformed(message: str) -> ProviderError:
    return ProviderError(message, code=ERROR_CODE, retryable=False, reason=base.REASON_BAD_RESPONSE)


def _not_a_stream(content_type: str) -> ProviderError:
    # The media type only (bounded); the body is never quoted.
    media_type = content_type.split(";", 1)[0].strip()[:60] or "no content type"
    logger.warning("LLM provider answered %s instead of an event stream", media_type)
    return _malformed(
        f"the LLM provider answered with {media_type}, not an event stream (check LLM_BASE_URL)"
    )


async def _raise_for_status(response: aiohttp.ClientResponse) -> None:
    status = response.status
    if status < 300:
        return
    body = await response.read()
    try:
        message = _provider_message(json.loads(body))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        message = ""  # an HTML page from a proxy says nothing useful
    message = message or response.reason or "no error message"
    retryable = status in (408, 429) or status >= 500
    logger.warning("LLM provider answered HTTP %s (retryable=%s)", status, retryable)
    raise ProviderError(
        f"LLM provider returned HTTP {status}: {message}",
        code=ERROR_CODE,
        retryable=retryable,
        reason=base.status_reason(status),
    )


def _provider_message(body: Any) -> str:
    """The human part of an error body: OpenAI, vLLM, Ollama and gateway shapes."""
    if not isinstance(body, dict):
        return ""
    error = body.get("error")
    if isinstance(error, dict):
        candidate = error.get("message")
    elif isinstance(error, str):
        candidate = error
    else:
        candidate = body.get("message") or body.get("detail")
    if not isinstance(candidate, str):
        return ""
    # Bounded because some providers quote the offending input back.
    text = " ".join(candidate.split())
    if len(text) > _MAX_PROVIDER_MESSAGE:
        text = text[: _MAX_PROVIDER_MESSAGE - 1] + "…"
    return text


def _refused(sentence: str) -> ProviderError:
    logger.warning("LLM request refused by the egress guard")
    return ProviderError(sentence, code=ERROR_CODE, retryable=True, reason=base.REASON_UNREACHABLE)


def _transport_error(exc: Exception) -> ProviderError:
    reason, retryable = base.REASON_BAD_RESPONSE, False
    if isinstance(exc, TimeoutError):  # aiohttp's timeouts are TimeoutErrors too
        message, retryable = "the LLM provider did not answer in time", True
        reason = base.REASON_TIMEOUT
    elif isinstance(exc, aiohttp.InvalidURL | aiohttp.NonHttpUrlClientError):
        message, reason = "the LLM base URL is not an http(s) URL", base.REASON_UNREACHABLE
    elif isinstance(exc, aiohttp.ClientConnectorError):
        # The dashboard's detail names the address (a page only hears the fixed sentence).
        message, retryable = f"could not connect to {egress.where(exc.host, exc.port or 0)}", True
        reason = base.REASON_UNREACHABLE
    elif isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ClientConnectionError):
        message, retryable = "the connection to the LLM provider broke", True
        reason = base.REASON_BROKEN
    else:
        message = "the LLM response could not be read"
    logger.warning("LLM request failed: %s (%s)", message, type(exc).__name__)
    return ProviderError(message, code=ERROR_CODE, retryable=retryable, reason=reason)


# The platform's own endpoint, for workspaces without an LLM connection of their own.
BASE_URL = Setting("LLM_BASE_URL")
API_KEY = secret_setting("LLM_API_KEY")
MODEL = Setting("LLM_MODEL", "gpt-4o-mini")
TIMEOUT_S = Setting("LLM_TIMEOUT_S", 30.0, env_float)


def _options() -> dict[str, Any]:
    """The platform's endpoint from its settings; empty when ``LLM_BASE_URL`` is unset (the
    platform has no LLM of its own: sessions get the offline stand-in)."""
    base_url = BASE_URL.value()
    if not base_url:
        return {}
    return {
        "base_url": base_url,
        "api_key": API_KEY.value(),
        "model": MODEL.value(),
        "timeout_s": TIMEOUT_S.value(),
    }


def _own_account(connection: Any) -> dict[str, Any]:
    """A workspace's LLM connection (``secrets_app``'s ``LLMConnection``)."""
    return {
        "base_url": connection.base_url,
        "api_key": connection.api_key,
        "model": connection.model,
        "timeout_s": TIMEOUT_S.value(),
    }


# Its address, key and model come from a workspace's LLM connection, or from the platform's
# LLM_* settings (``sessions_app.workspace_providers`` chooses).
PROVIDER = ProviderSpec(
    kind="llm",
    name="openai",
    label="OpenAI-compatible",
    adapter=OpenAICompatibleLLM,
    settings=(BASE_URL, API_KEY, MODEL, TIMEOUT_S),
    options=_options,
    own_account=_own_account,
)
