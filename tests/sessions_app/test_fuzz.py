"""Bad input on the realtime WebSocket, fuzzed: over 10,000 frames, and nothing breaks.

Hypothesis writes one script per session: frames before ``configure`` (every one must be
answered with an ``error``, or refused with its close code), a start (``configure``, or
``resume`` of a session an earlier script dropped), then a batch of frames (valid,
mutated, junk, binary, oversized, out of order) sent back to back, each followed by a
sentinel ``ping``, so the events between two ``pong``s are that frame's answer. Then a
normal turn must still get the fake LLM's reply, and at the end a fresh session's too.

The oracle: the consumer never raises (the communicator would re-raise it), nothing is
logged at ERROR or with a traceback, every server frame is valid UTF-8 JSON (a real
server cannot send anything else), seqs run without gaps, every error code and close
code is a documented one, no valid frame is refused as malformed.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as fuzz_settings
from hypothesis import strategies as st

from engine import protocol
from engine.protocol import CloseCode
from engine.providers.http_pool import close_shared_sessions
from realtime import resume
from tests.engine.providers.llm.openai.fake_server import (
    DEFAULT_SCRIPT,
    Done,
    FakeOpenAIServer,
    Finish,
    tool_call,
)
from tests.factories import Tenant
from tests.sessions_app import fuzz_strategies as fs
from tests.sessions_app.wsclient import Client

pytestmark = pytest.mark.django_db(transaction=True)

FRAMES_REQUIRED = 10_000
SESSIONS = int(os.environ.get("FUZZ_SESSIONS", "115"))  # more: a deeper local run
BATCH = (90, 130)  # frames after the start, per session
SENTINEL = 2**61 + 7_777_777  # ping `t` of the sentinels; no strategy draws it

# Every code a client may meet in an `error` event (docs/protocol.md, "Error codes").
ERROR_CODES = {
    "bad_json", "bad_message", "unknown_type", "invalid", "frame_too_large", "not_configured",
    "unknown_tool_call", "already_configured", "resume_unavailable", "resume_refused",
    "not_voice_mode", "llm_failed", "stt_failed", "tts_failed", "agent_not_allowed",
    "inline_config_refused", "too_many_sessions", "configure_timeout", "invalid_key",
    "secret_key_refused", "origin_not_allowed", "bad_protocol", "inline_code_refused",
    "context_limit", "too_many_messages", "audio_too_fast",
}  # fmt: skip
MALFORMED = {"bad_json", "bad_message", "unknown_type", "invalid", "frame_too_large"}
REFUSALS = {
    "invalid_key": CloseCode.BAD_KEY,
    "secret_key_refused": CloseCode.SECRET_KEY,
    "origin_not_allowed": CloseCode.ORIGIN,
    "bad_protocol": CloseCode.NO_CONFIGURE,
    "resume_refused": CloseCode.RESUME_REFUSED,
    "agent_not_allowed": CloseCode.AGENT,
    "inline_config_refused": CloseCode.INLINE_REFUSED,
    "inline_code_refused": CloseCode.INLINE_REFUSED,
    "too_many_sessions": CloseCode.TOO_MANY,
    "configure_timeout": CloseCode.NO_CONFIGURE,
}

sent = {"frames": 0}  # every fuzzed frame of this module, sentinels and starts not counted
seen: Counter[str] = Counter()  # expectations and error codes met, printed at the end


# ---------------------------------------------------------------- scripts


@dataclass
class Script:
    before: list[fs.Frame]
    config: dict[str, Any]
    resume: bool  # resume a session an earlier script dropped, if there is one
    resume_last_seq: int  # offset from the last seq that session sent (may claim more)
    during: list[fs.Frame]
    drop: bool  # end with an unclean close (1006) instead of a clean one


scripts = st.builds(
    Script,
    before=st.lists(fs.before_configure_frames, max_size=6),
    config=fs.configure_messages,
    resume=st.booleans(),
    resume_last_seq=st.sampled_from([0, -1, -3, 50]) | st.integers(-1000, 3),
    during=st.lists(fs.any_frames(), min_size=BATCH[0], max_size=BATCH[1]),
    drop=st.booleans(),
)


@dataclass
class Dropped:
    session_id: str
    resume_token: str
    last_seq: int
    mode: str


# ---------------------------------------------------------------- a client that checks


class FuzzClient(Client):
    """Reads like ``Client`` and refuses what no real server could send."""

    async def send_frame(self, frame: fs.Frame) -> None:
        if frame.data is not None:
            await self.ws.send_input({"type": "websocket.receive", "bytes": frame.data})
        else:  # straight to the app: send_to() refuses an empty frame
            await self.ws.send_input({"type": "websocket.receive", "text": frame.text})

    async def _receive(self, timeout: float) -> dict[str, Any] | bytes | None:
        output = await self.ws.receive_output(timeout)
        if output["type"] == "websocket.close":
            self.close_code = output.get("code")
            assert self.close_code in CLOSE_CODES, f"closed with code {self.close_code}"
            return None
        if output.get("bytes") is not None:
            return output["bytes"]  # type: ignore[no-any-return]  # audio: not kept
        text = output["text"]
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise AssertionError(f"a text frame that is not UTF-8: {text[:200]!r}") from None
        event = json.loads(text, parse_constant=_not_json)
        if "kind" in event:  # protocol=voiceide: {"id", "seq", "timestamp", "kind": {name: data}}
            (name, data), *_ = event["kind"].items()
            event = {"type": name, "seq": event["seq"], "ts": event["timestamp"], **data}
        assert isinstance(event, dict) and {"type", "seq", "ts"} <= set(event), text[:200]
        self.events.append(event)
        return event

    async def disconnect(self, code: int = 1000) -> None:
        await self.ws.disconnect(code=code, timeout=10)


def _not_json(constant: str) -> None:
    raise AssertionError(f"the server sent {constant}, which is not JSON")


CLOSE_CODES = {1000, CloseCode.DISPLACED, *REFUSALS.values()}


# ---------------------------------------------------------------- one session


@dataclass
class Fuzzer:
    tenant: Tenant
    caplog: pytest.LogCaptureFixture  # its records are the running test phase's
    dropped: list[Dropped] = field(default_factory=list)
    turns: int = 0
    sentinel: int = SENTINEL  # pongs replayed by a resume must not pass for new ones

    @property
    def url(self) -> str:
        return f"/v1/session?key={self.tenant.publishable_key}"

    async def connect(self) -> FuzzClient:
        client = FuzzClient(self.url)
        await client.__aenter__()
        self.sentinel += 1 << 20
        return client

    async def session(self, script: Script) -> None:
        logged = len(self.caplog.records)
        client = await self.connect()
        ready = await self.before_configure(client, script.before)
        if ready is None and client.close_code is not None:
            await client.disconnect()
            client = await self.connect()  # refused with its close code: start over
        ids = _ids(ready) if ready else await self.start(client, script)
        problems = await self.batch(client, script.during, ids)
        assert not problems, "\n".join(problems[:10])
        if client.close_code is None:
            await self.normal_turn(client)
            if script.drop:
                last_seq = max(event["seq"] for event in client.events)
                self.dropped.append(Dropped(ids["sessionId"], ids["resumeToken"], last_seq,
                                            ids["mode"]))  # fmt: skip
            await client.disconnect(1006 if script.drop else 1000)
        else:
            await client.disconnect()
            await self.fresh_session_turn()
        assert_quiet(self.caplog.records[logged:])

    async def before_configure(
        self, client: FuzzClient, frames: list[fs.Frame]
    ) -> dict[str, Any] | None:
        """Each frame gets exactly one answer: an error, a pong to a ping, or (a lucky
        edit) ``ready``."""
        for frame in frames:
            await client.send_frame(self.substitute(frame, during=None))
            sent["frames"] += 1
            event = await client.next(timeout=10)
            assert event is not None, f"closed without an error after {frame!r}"
            if event["type"] == "pong":
                assert fs.expectation(frame, configured=False, mode="") == "ok", frame
                continue
            if event["type"] == "ready":
                assert fs.expectation(frame, configured=False, mode="") != "error", frame
                return event
            assert event["type"] == "error", (frame, event)
            assert event["code"] in ERROR_CODES, (frame, event)
            if event["code"] in REFUSALS:
                assert await client.closed(timeout=10) == REFUSALS[event["code"]], frame
                return None
        return None

    async def start(self, client: FuzzClient, script: Script) -> dict[str, Any]:
        if script.resume and self.dropped:
            return await self.resume(client, script)
        await client.send(script.config)
        while (event := await client.next(timeout=10)) is not None:
            if event["type"] == "ready":
                return _ids(event)
            if event["type"] == "error":  # random tool parameters may be refused
                assert event["code"] == "invalid", event
                await client.send({"type": "configure", "mode": "text"})
        raise AssertionError(f"closed ({client.close_code}) before ready: {client.events}")

    async def resume(self, client: FuzzClient, script: Script) -> dict[str, Any]:
        dropped = self.dropped.pop(0)
        last_seq = max(0, dropped.last_seq + script.resume_last_seq)
        ids = {"sessionId": dropped.session_id, "resumeToken": dropped.resume_token}
        await client.send({"type": "resume", **ids, "lastSeq": last_seq})
        await client.send({"type": "ping", "t": self.sentinel - 1})
        refused = None  # the first answer tells: a refusal, or the replay (or the pong)
        try:
            while (event := await client.next(timeout=5)) is not None:
                if refused is None:
                    refused = event["type"] == "error" and event["code"] == "resume_unavailable"
                    if refused:
                        continue
                if event["type"] == "pong" and event.get("t") == self.sentinel - 1:
                    if not refused:
                        return {**ids, "mode": dropped.mode}
                    # A refused resume (only for a lastSeq past what the session sent,
                    # answered with resume_unavailable; the ping is answered anyway):
                    # a new session then.
                    assert last_seq > dropped.last_seq, client.events
                    self.dropped.append(dropped)
                    await client.send({"type": "configure", "mode": "text"})
                    return _ids(await client.until("ready"))
                if event["seq"] > dropped.last_seq and event["type"] == "error":  # not replayed
                    raise AssertionError(f"an error that is not a replay: {event}")
        except TimeoutError:
            raise AssertionError(
                f"resume with lastSeq {last_seq} (the session had sent {dropped.last_seq}) "
                f"is never answered: {client.events}"
            ) from None
        raise AssertionError(f"closed ({client.close_code}) on resume: {client.events}")

    async def batch(
        self, client: FuzzClient, frames: list[fs.Frame], ids: dict[str, Any]
    ) -> list[str]:
        first = len(client.events)
        windows = await self.exchange(client, [self.substitute(f, during=ids) for f in frames])
        expected = [fs.expectation(f, configured=True, mode=ids["mode"]) for f in frames]
        problems = _judged(frames, expected, windows, closed=client.close_code is not None)
        seqs = [event["seq"] for event in client.events[first:]]
        if seqs and seqs != list(range(seqs[0], seqs[0] + len(seqs))):
            problems.append(f"seqs with gaps or repeats: {seqs[:50]}")
        return problems

    async def exchange(
        self, client: FuzzClient, frames: list[fs.Frame]
    ) -> list[list[dict[str, Any]]]:
        """Send every frame and its sentinel back to back, then read each frame's answer."""
        self.sentinel += 1 << 20
        for index, frame in enumerate(frames):
            await client.send_frame(frame)
            await client.send({"type": "ping", "t": self.sentinel + index})
        sent["frames"] += len(frames)
        windows: list[list[dict[str, Any]]] = [[]]
        while len(windows) <= len(frames):
            event = await client.next(timeout=15)
            if event is None:
                break
            if event["type"] == "pong" and event.get("t") == self.sentinel + len(windows) - 1:
                windows.append([])
            else:
                windows[-1].append(event)
        return windows

    def substitute(self, frame: fs.Frame, *, during: dict[str, Any] | None) -> fs.Frame:
        text = frame.text
        if text is None or (fs.SESSION_ID not in text and fs.RESUME_TOKEN not in text):
            return frame
        session_id = (
            during["sessionId"]
            if during
            else (self.dropped[-1].session_id if self.dropped else "no-such-session")
        )
        token = during["resumeToken"] if during else "not-the-token"
        text = text.replace(fs.SESSION_ID, session_id).replace(fs.RESUME_TOKEN, token)
        return fs.Frame(text, kind=frame.kind, valid=frame.valid, how=frame.how)

    async def normal_turn(self, client: FuzzClient) -> None:
        """A typed turn gets the echo; a late spoken turn may cancel it once or twice."""
        for _attempt in range(3):
            self.turns += 1
            words = f"fuzz check {self.turns}"
            await client.send({"type": "text", "text": words})
            ours = False  # a `cancelled` before our `turn` is a fuzzed turn that ours ended
            while (event := await client.next(timeout=15)) is not None:
                if event["type"] == "chat" and event["text"] == f"You said: {words}":
                    return
                ours = ours or (event["type"] == "turn" and event["text"] == words)
                if ours and event["type"] == "cancelled":
                    break
            assert client.close_code is None, (
                f"closed ({client.close_code}) during a turn: {client.events[-6:]}"
            )
        raise AssertionError("a normal turn never got its reply")

    async def answer_tool_call(self, client: FuzzClient, frames: list[fs.Frame]) -> None:
        """A turn whose client tool call gets the fuzzed answers, then a valid one."""
        self.turns += 1
        words = f"use the tool {self.turns}"
        await client.send({"type": "text", "text": words})
        call_id = (await client.until("tool_call", timeout=10))["callId"]
        frames = [*frames, fs.Frame(json.dumps({"type": "tool_result", "callId": fs.CALL_ID}),
                                    kind="tool_result", valid=True)]  # fmt: skip
        expected: list[fs.Expect] = []
        for frame in frames:  # the first valid answer settles the call; the rest are late
            expected.append("ok" if frame.valid and "ok" not in expected else "error")
        texts = [fs.Frame((f.text or "").replace(fs.CALL_ID, call_id), how=f.how) for f in frames]
        windows = await self.exchange(client, texts)
        problems = _judged(frames, expected, windows, closed=client.close_code is not None)
        assert not problems, "\n".join(problems[:10])
        reply = next((e for w in windows for e in w if e["type"] == "chat"), None)
        reply = reply or await client.until("chat", timeout=10)
        assert reply["text"] == f"You said: {words}" and reply["steps"] == ["Using open_file"]

    async def fresh_session_turn(self) -> None:
        client = await self.connect()
        await client.send({"type": "configure", "mode": "text"})
        await client.until("ready")
        await self.normal_turn(client)
        await client.disconnect()


def _ids(ready: dict[str, Any]) -> dict[str, Any]:
    return {key: ready[key] for key in ("sessionId", "resumeToken", "mode")}


def _judged(
    frames: list[fs.Frame], expected: list[fs.Expect], windows: list[list[dict]], *, closed: bool
) -> list[str]:
    """What is wrong with each frame's answer (the events between its sentinel pongs)."""
    problems = []
    for index, (frame, expect, window) in enumerate(zip(frames, expected, windows, strict=False)):
        codes = [event["code"] for event in window if event["type"] == "error"]
        seen.update([f"expect {expect}", *(f"code {code}" for code in codes)])
        if unknown := set(codes) - ERROR_CODES:
            problems.append(f"frame {index} {frame!r}: undocumented error codes {unknown}")
        elif expect == "error" and not codes and not closed:
            problems.append(f"frame {index} {frame!r}: no error")
        elif expect == "ok" and (refused := set(codes) & (MALFORMED | {"unknown_tool_call"})):
            problems.append(f"frame {index} {frame!r}: a valid frame was refused: {refused}")
    return problems


def assert_quiet(records: list[logging.LogRecord]) -> None:
    loud = [
        f"{r.name} {r.levelname}: {r.getMessage()[:300]}"
        for r in records
        if r.levelno >= logging.ERROR or r.exc_info or "Traceback" in r.getMessage()
    ]
    assert not loud, "logged:\n" + "\n".join(loud[:10])


# ---------------------------------------------------------------- fixtures


@pytest.fixture
def fuzz_site(settings: Any, caplog: pytest.LogCaptureFixture) -> None:
    settings.SESSION_LIMIT_PER_WORKSPACE = 10_000  # dropped sessions wait for resume
    # Rate limits have tests of their own (test_limits.py); here every fuzzed frame must
    # reach the protocol, from one address in a burst.
    settings.WS_CONNECTIONS_PER_MINUTE = settings.SESSIONS_PER_ADDRESS = 10_000
    settings.TURNS_PER_MINUTE = settings.LLM_REQUESTS_PER_MINUTE = 100_000
    settings.CONTEXT_NOTES_MAX = 100_000
    settings.WS_MESSAGES_PER_SECOND, settings.AUDIO_MAX_SPEED = 100_000, 100.0
    settings.LLM_API_KEY = "test-llm-key"
    caplog.set_level(logging.WARNING)  # on the root logger: sessions_app, channels, asyncio…


# ---------------------------------------------------------------- the tests

FUZZ = fuzz_settings(
    derandomize=True,  # the same frames on every run: CI failures reproduce
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    print_blob=False,
    phases=(Phase.explicit, Phase.generate) if os.environ.get("FUZZ_NO_SHRINK") else tuple(Phase),
)
OPEN_FILE = {"name": "open_file", "client": True, "parameters": {"path": "string"},
             "timeoutMs": 60_000}  # fmt: skip
TOOL_CONFIG = {"type": "configure", "mode": "text", "tools": [OPEN_FILE]}


@contextlib.contextmanager
def event_loop_with_llm(settings: Any) -> Iterator[tuple[asyncio.Runner, FakeOpenAIServer]]:
    """One loop for every example (Hypothesis calls a synchronous test) and the fake LLM."""
    with asyncio.Runner() as runner:
        llm = FakeOpenAIServer(default=DEFAULT_SCRIPT)  # echoes: "You said: <last user text>"
        runner.run(llm.start())
        settings.LLM_BASE_URL = llm.base_url
        try:
            yield runner, llm
        finally:
            runner.run(resume.hosts_end_all())  # sessions dropped on purpose
            runner.run(close_shared_sessions())  # this loop's LLM connections
            runner.run(llm.stop())
    gc.collect()  # "Task exception was never retrieved" is logged when a task is collected


# 115 sessions took 119 s on a 2-core machine at load 13 (the suite-wide 120 s cut it there,
# mid-example, which Hypothesis then reports as flaky data): three times that.
@pytest.mark.timeout(360)
def test_ten_thousand_bad_frames_then_normal_turns(owner, settings, fuzz_site, caplog):
    sent["frames"] = 0
    fuzzer = Fuzzer(owner, caplog)
    with event_loop_with_llm(settings) as (runner, _llm):

        @fuzz_settings(FUZZ, max_examples=SESSIONS)
        @given(script=scripts)
        def one_session(script: Script) -> None:
            runner.run(fuzzer.session(script))

        one_session()
        runner.run(fuzzer.fresh_session_turn())
    assert_quiet(caplog.records)
    print(f"fuzzed {sent['frames']} frames: {dict(sorted(seen.items()))}")
    assert sent["frames"] >= FRAMES_REQUIRED


def test_fuzzed_answers_to_a_waiting_client_tool(owner, settings, fuzz_site, caplog):
    fuzzer = Fuzzer(owner, caplog)
    with event_loop_with_llm(settings) as (runner, llm):
        client = runner.run(fuzzer.connect())
        runner.run(client.send(TOOL_CONFIG))
        runner.run(client.until("ready"))

        @fuzz_settings(FUZZ, max_examples=40)
        @given(frames=st.lists(fs.tool_result_frames(), max_size=6))
        def one_call(frames: list[fs.Frame]) -> None:
            llm.forget_scripts()
            llm.script(*tool_call(0, "call_1", "open_file", '{"path": "a.py"}'),
                       Finish("tool_calls"), Done())  # fmt: skip
            runner.run(fuzzer.answer_tool_call(client, frames))

        one_call()
        runner.run(client.disconnect())
    assert_quiet(caplog.records)


def test_fuzzed_handshakes_get_a_session_or_a_refusal_with_its_code(owner, fuzz_site, caplog):
    async def handshake(query: dict[str, str], origin: str) -> None:
        query = {
            name: value.replace(fs.KEY, owner.publishable_key) for name, value in query.items()
        }
        client = FuzzClient(f"/v1/session?{urlencode(query)}", origin=origin or None)
        await client.__aenter__()
        await client.send({"type": "text", "text": "hello?"})  # before configure
        event = await client.next()
        assert event is not None and event["type"] == "error", (query, origin, event)
        if event["code"] != "not_configured":  # not accepted: refused, and closed with its code
            assert await client.closed() == REFUSALS[event["code"]], (query, origin, event)
        # 1 s, as every other test gives it: on the Redis channel layer a consumer refused
        # within ~2 ms of its start does not end (a cancel lost in redis-py; see the report).
        await client.ws.disconnect(timeout=1)

    with asyncio.Runner() as runner:

        @fuzz_settings(FUZZ, max_examples=80)
        @given(query=fs.queries, origin=fs.origins)
        def one_handshake(query: dict[str, str], origin: str) -> None:
            runner.run(handshake(query, origin))

        one_handshake()
    assert_quiet(caplog.records)


@fuzz_settings(FUZZ, max_examples=1000)
@given(frame=fs.any_frames())
def test_decode_refuses_with_a_protocol_error_only(frame: fs.Frame) -> None:
    """Fast, and without a socket: the decoder's half of the contract, frame by frame."""
    if frame.text is None:
        return
    try:
        protocol.decode(frame.text)
    except protocol.ProtocolError as error:
        assert frame.valid is not True, (frame, error.code, error.message)
        assert error.code in MALFORMED
        event = {"type": "error", "seq": 1, "ts": 0, "code": error.code, "message": error.message}
        protocol.V1Codec().encode(event).encode("utf-8")  # what the client gets is sendable
        assert len(error.message) < 400
    else:
        assert frame.valid is not False, frame


def test_the_outsider_cannot_resume_or_hear_a_fuzzed_session(owner, outsider, settings):
    """Another workspace's key, with the right session id and token, gets nothing."""

    async def scenario() -> None:
        ours = Client(f"/v1/session?key={owner.publishable_key}")
        async with ours, Client(f"/v1/session?key={outsider.publishable_key}") as theirs:
            await ours.send({"type": "configure", "mode": "text"})
            ready = await ours.until("ready")
            await ours.send({"type": "text", "text": "secret plans"})
            await ours.until("chat")
            await ours.ws.disconnect(code=1006)  # dropped: resumable, by its own workspace only
            ids = {"sessionId": ready["sessionId"], "resumeToken": ready["resumeToken"]}
            await theirs.send({"type": "resume", **ids, "lastSeq": 0})
            refusal = await theirs.next()
            assert (refusal["type"], refusal["code"]) == ("error", "resume_unavailable")
            assert await theirs.ws.receive_nothing(timeout=0.3)
            assert all("secret plans" not in json.dumps(event) for event in theirs.events)

    with event_loop_with_llm(settings) as (runner, _llm):
        runner.run(scenario())
