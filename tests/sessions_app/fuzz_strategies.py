"""Hypothesis strategies for the realtime protocol fuzzer: frames a client could send.

A ``Frame`` is one WebSocket frame (text or binary) and what we know of it: the message
type it was made from, and whether the decoder must refuse it (``valid=False``), must
accept it (``True``) or may do either (``None``: a random edit of the JSON text).
Whether the *session* answers with an error also depends on the phase (before or after
``configure``), which the test decides (``expectation``).

Huge values are built from a few drawn choices (a unit repeated n times) so the
examples stay within Hypothesis' buffer while the frames reach and pass every limit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from hypothesis import strategies as st

from engine import protocol as p

# Substituted by the test at send time: a real session id of this test run, its token.
SESSION_ID = "@session-id@"
RESUME_TOKEN = "@resume-token@"

Expect = Literal["error", "ok", "any"]


@dataclass(frozen=True)
class Frame:
    text: str | None = None
    data: bytes | None = None
    kind: str = "junk"  # the message type it was made from, "binary" or "junk"
    valid: bool | None = None  # must the decoder accept it? None: it may go either way
    how: str = "valid"  # the mutation, for failure messages

    def __repr__(self) -> str:  # Hypothesis prints falsifying examples with this
        if self.data is not None:
            return f"Frame(binary, {len(self.data)} bytes, {self.data[:16]!r}…)"
        text = self.text or ""
        shown = text if len(text) <= 160 else f"{text[:120]!r}…({len(text)} chars)"
        return f"Frame({self.how}, valid={self.valid}, {shown!r})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


def expectation(frame: Frame, *, configured: bool, mode: str) -> Expect:
    """What the session must answer: an ``error`` event, no protocol error, or anything."""
    if frame.data is not None:
        if len(frame.data) > p.BINARY_FRAME_MAX or not configured:
            return "error"
        return "ok" if mode == "voice" else "any"  # text mode refuses audio only once
    if frame.valid is None:
        return "any"
    if frame.valid and frame.kind == "ping":
        return "ok"  # answered with a pong, before configure too
    if not frame.valid or not configured:
        return "error"
    # Out of order once configured: a second configure, a late resume, a result for a
    # tool call that never happened (the echoing LLM calls no tools).
    return "error" if frame.kind in ("configure", "resume", "tool_result") else "ok"


# ---------------------------------------------------------------- values

# Few names on purpose: merged context variables stay under VARIABLES_MAX, so a valid
# `context` never earns an error.
NAMES = ["name", "city", "order_id", "a", "_", "Z9", "task_brief", "lang", "x" * 64]
plain = st.text(max_size=24)  # any Unicode but lone surrogates, NUL and RTL marks included
non_blank = plain.map(lambda s: s if s.strip() else s + "hi")
short_ids = st.text("0123456789abcdef-_", min_size=1, max_size=40)
finite = st.floats(allow_nan=False, allow_infinity=False)
small_ints = st.integers(-(2**53), 2**53)
json_values = st.recursive(
    st.none() | st.booleans() | small_ints | finite | plain,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(plain, inner, max_size=3),
    max_leaves=6,
)
odd_strings = st.sampled_from(
    ["", " ", "\x00", "a\x00b", "\ufeff", "\u202e", "\u3000", "{{name}}", "{{", "😀", "\\", '"',
     "</script>", "\r\n"]
)  # fmt: skip


def over(limit: int) -> st.SearchStrategy[str]:
    """Strings just past ``limit`` UTF-8 bytes, or far past it (multi-byte units too)."""
    units = st.sampled_from(["a", "é", "😀", "\x00", "{{a}}"])
    return st.builds(
        lambda unit, extra: unit * (limit // len(unit.encode()) + 1 + extra),
        units,
        st.sampled_from([0, 1, 1000]),
    )


# ---------------------------------------------------------------- valid messages

simple_parameters = st.dictionaries(
    st.sampled_from(NAMES[:-1]),
    st.sampled_from(["string", "number", "integer", "boolean", "string?", "number?"]),
    max_size=3,
)
client_tool = st.fixed_dictionaries(
    {"client": st.just(True)},
    optional={"description": plain, "parameters": simple_parameters,
              "timeoutMs": st.integers(p.TOOL_TIMEOUT_MS_MIN, p.TOOL_TIMEOUT_MS_MAX)},
)  # fmt: skip
server_tool = st.fixed_dictionaries(
    {"handler": st.sampled_from(["async () => 1", "(args) => ({ok: true})"])},
    optional={"parameters": simple_parameters},
)
tool_lists = st.lists(
    st.tuples(st.sampled_from(["track", "open_file", "t_1", "Weather"]), client_tool | server_tool),
    max_size=3,
    unique_by=lambda pair: pair[0],
).map(lambda pairs: [{"name": name, **tool} for name, tool in pairs])
variables = st.dictionaries(st.sampled_from(NAMES), plain, max_size=4)


# Valid `configure` messages (inline config; never an agent, which would have to exist).
configure_messages = st.fixed_dictionaries(
    {"type": st.just("configure"), "mode": st.sampled_from(["voice", "text"])},
    optional={"instructions": plain.map(lambda s: s + " {{name}}"), "greeting": plain,
              "voice": short_ids, "variables": variables, "tools": tool_lists,
              "audioReady": st.booleans()},
)  # fmt: skip


VALID: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "configure": configure_messages,
    "text": st.fixed_dictionaries({"type": st.just("text"), "text": non_blank}),
    "cancel": st.fixed_dictionaries(
        {"type": st.just("cancel")},
        optional={"playedMs": st.integers(0, 10_000) | st.sampled_from([2**31, 2**64, 10**30])},
    ),
    "reset": st.just({"type": "reset"}),
    "audio_ready": st.just({"type": "audio_ready"}),
    "context": st.fixed_dictionaries(
        {"type": st.just("context")}, optional={"variables": variables, "text": plain}
    ),
    "tool_result": st.fixed_dictionaries(
        {"type": st.just("tool_result"), "callId": non_blank | st.just("call_1")},
        optional={"result": json_values, "error": plain},
    ),
    "ping": st.fixed_dictionaries({"type": st.just("ping")}, optional={"t": small_ints | finite}),
    "resume": st.fixed_dictionaries(
        {
            "type": st.just("resume"),
            "sessionId": short_ids | st.just(SESSION_ID),
            "resumeToken": short_ids | st.just(RESUME_TOKEN),
            "lastSeq": st.integers(0, 50) | st.sampled_from([2**53, 2**64]),
        }
    ),
}
KINDS = sorted(VALID)

# ---------------------------------------------------------------- what breaks a field

# The JSON type of each field (and whether null is refused), for wrong-type mutations.
FIELDS: dict[str, dict[str, tuple[str, bool]]] = {
    "configure": {"agent": ("str", False), "instructions": ("str", False),
                  "greeting": ("str", False), "voice": ("str", False), "mode": ("mode", False),
                  "variables": ("dict", False), "tools": ("list", False),
                  "audioReady": ("bool", True)},
    "cancel": {"playedMs": ("int", False)},
    "text": {"text": ("str", True)},
    "context": {"variables": ("dict", False), "text": ("str", False)},
    "tool_result": {"callId": ("str", True), "result": ("any", False), "error": ("str", False)},
    "ping": {"t": ("number", True)},
    "resume": {"sessionId": ("str", True), "resumeToken": ("str", True),
               "lastSeq": ("int", True)},
    "reset": {}, "audio_ready": {},
}  # fmt: skip
REQUIRED = {"text": {"text"}, "tool_result": {"callId"},
            "resume": {"sessionId", "resumeToken", "lastSeq"}}  # fmt: skip
SNAKE_NAMES = ["played_ms", "call_id", "audio_ready", "session_id", "resume_token", "last_seq"]

_lists = st.lists(small_ints, max_size=2)
_dicts = st.dictionaries(plain, small_ints, max_size=2)
_WRONG: dict[str, st.SearchStrategy[Any]] = {
    "str": small_ints | finite | st.booleans() | _lists | _dicts,
    "int": plain | _lists | _dicts | st.booleans() | st.sampled_from([0.5, 1.0, -0.0, 1e300]),
    "number": plain | _lists | _dicts | st.booleans(),
    "bool": st.sampled_from([0, 1, "true", "false"]) | _lists,
    "dict": _lists | plain | small_ints,
    "list": _dicts | plain | small_ints,
    "mode": plain.filter(lambda s: s not in ("voice", "text")) | small_ints,
}

_bad_names = st.sampled_from(["", "1x", "a-b", "a b", "é", "x" * 65, "\ud800", "a\x00"])
_bad_variables = st.one_of(
    st.builds(lambda name: {name: "v"}, _bad_names),
    st.builds(lambda value: {"name": value}, over(p.VARIABLE_VALUE_MAX) | st.just("\udc80")),
    st.builds(lambda value: {"name": value}, small_ints | _lists | st.none()),
    st.builds(lambda n: {f"v{i}": "x" for i in range(n)}, st.sampled_from([65, 1000])),
)
_bad_tools = st.one_of(
    st.builds(lambda n: [{"name": f"t{i}", "client": True} for i in range(n)],
              st.sampled_from([p.TOOLS_MAX + 1, 500])),
    st.just([{"name": "a", "client": True}, {"name": "a", "client": True}]),
    st.builds(lambda name: [{"name": name, "client": True}], _bad_names),
    st.just([{"name": "a", "client": True, "handler": "() => 1"}]),
    st.just([{"name": "a"}]),
    st.just([{"name": "a", "client": False}]),
    st.just([{"name": "a", "handler": "   "}]),
    st.builds(lambda ms: [{"name": "a", "client": True, "timeoutMs": ms}],
              st.sampled_from([0, -1, p.TOOL_TIMEOUT_MS_MIN - 1, p.TOOL_TIMEOUT_MS_MAX + 1, 1.5])),
    st.builds(lambda d: [{"name": "a", "client": True, "description": d}],
              over(p.TOOL_DESCRIPTION_MAX)),
    st.just([{"name": "a", "client": True, "timeout_ms": 500}]),
    st.just(["a"]),
)  # fmt: skip
_blank = st.sampled_from(["", " ", "\t\n", "\u3000"])
_surrogate = st.sampled_from(["\ud800", "a\udfffb", "\udcff"])
# Values the field's type accepts but its limits do not.
_OUT_OF_RANGE: dict[tuple[str, str], st.SearchStrategy[Any]] = {
    ("text", "text"): _blank | over(p.TEXT_MAX) | _surrogate,
    ("configure", "instructions"): over(p.INSTRUCTIONS_MAX) | _surrogate,
    ("configure", "greeting"): over(p.GREETING_MAX) | _surrogate,
    ("configure", "agent"): over(p.SHORT_STRING_MAX) | _surrogate,
    ("configure", "voice"): over(p.SHORT_STRING_MAX) | _surrogate,
    ("configure", "mode"): st.sampled_from(["Voice", "TEXT", "", "voice "]),
    ("configure", "variables"): _bad_variables,
    ("configure", "tools"): _bad_tools,
    ("cancel", "playedMs"): st.sampled_from([-1, -(2**63), -(10**30)]),
    ("context", "variables"): _bad_variables,
    ("context", "text"): over(p.CONTEXT_TEXT_MAX) | _surrogate,
    ("tool_result", "callId"): _blank | over(p.SHORT_STRING_MAX) | _surrogate,
    ("resume", "sessionId"): _blank | over(p.SHORT_STRING_MAX) | _surrogate,
    ("resume", "resumeToken"): _blank | over(p.SHORT_STRING_MAX),
    ("resume", "lastSeq"): st.sampled_from([-1, -(2**63)]),
}


# ---------------------------------------------------------------- mutations


@st.composite
def _field_mutation(draw: st.DrawFn, kind: str, base: dict[str, Any]) -> tuple[dict, bool, str]:
    """A mutated copy of ``base``, whether it is still valid, and what was done."""
    op = draw(st.sampled_from(["drop", "extra", "snake", "wrong_type", "out_of_range", "type"]))
    message = dict(base)
    fields = FIELDS[kind]
    if op == "drop":
        key = draw(st.sampled_from(sorted(message)))
        del message[key]
        return message, key != "type" and key not in REQUIRED.get(kind, ()), f"drop {key}"
    if op == "wrong_type" and any(t != "any" for t, _ in fields.values()):
        key = draw(st.sampled_from(sorted(k for k, (t, _) in fields.items() if t != "any")))
        kind_of, null_refused = fields[key]
        wrong = _WRONG[kind_of] | st.none() if null_refused else _WRONG[kind_of]
        message[key] = draw(wrong)
        return message, False, f"wrong type {key}"
    ranged = sorted(k for (m, k) in _OUT_OF_RANGE if m == kind)
    if op == "out_of_range" and ranged:
        key = draw(st.sampled_from(ranged))
        message[key] = draw(_OUT_OF_RANGE[(kind, key)])
        return message, False, f"out of range {key}"
    if op == "type":
        message["type"] = draw(
            plain.filter(lambda s: s not in p.MESSAGE_TYPES)
            | st.sampled_from(["Text", "text ", "configure\x00", "tool-result", "PING"])
            | small_ints | st.none() | _lists
        )  # fmt: skip
        return message, False, "type"
    if op == "snake":
        message[draw(st.sampled_from(SNAKE_NAMES))] = 1
        return message, False, "snake_case field"
    name = draw((plain | st.sampled_from(["seq", "id", "TYPE", "ts", "t", "text"])).filter(
        lambda s: s not in fields and s != "type"
    ))  # fmt: skip
    message[name] = draw(json_values)
    return message, False, "extra field"


_RAW_TOKENS = ["NaN", "Infinity", "-Infinity", "1e309", "-1e309", "1E400", "1" + "0" * 5000,
               "01", "-", "+1", ".5", "0x10", "1.", "tru", "nul", "'x'", '"\\x41"', '"\\u12"',
               '"\\ud800"']  # fmt: skip


def _dumps(message: Any, *, ascii_only: bool = True, compact: bool = False) -> str:
    separators = (",", ":") if compact else None
    return json.dumps(message, ensure_ascii=ascii_only, separators=separators)


@st.composite
def message_frames(draw: st.DrawFn, kinds: list[str] | None = None) -> Frame:
    """A message of a known type: valid, or with one field-level mutation."""
    kind = draw(st.sampled_from(kinds or KINDS))
    base = draw(VALID[kind])
    message, valid, how = base, True, "valid"
    if draw(st.booleans()):
        message, valid, how = draw(_field_mutation(kind, base))
    text = _dumps(message, ascii_only=draw(st.booleans()), compact=draw(st.booleans()))
    if isinstance(message, dict) and message and draw(st.integers(0, 9)) == 0:
        # A duplicate key: the first occurrence holds the original value, the last wins.
        key = draw(st.sampled_from(sorted(message)))
        original = _dumps({key: base.get(key, 0)})[1:-1]
        text = "{" + original + ", " + text[1:]
        how += " (duplicate key)"
    return Frame(text=text, kind=kind, valid=valid, how=how)


@st.composite
def text_edits(draw: st.DrawFn) -> Frame:
    """A message's JSON text edited as text: truncated, padded, spliced, or made invalid."""
    frame = draw(message_frames())
    text = frame.text or ""
    op = draw(st.sampled_from(["truncate", "garbage", "bom", "whitespace", "splice", "token"]))
    if op == "truncate":
        return Frame(text[: draw(st.integers(0, len(text) - 1))], kind=frame.kind,
                     valid=False, how="truncated")  # fmt: skip
    if op == "garbage":
        tail = draw(st.sampled_from(["x", "}", "{}", "\x00", ",", "]", "//", "\ud800"]))
        return Frame(text + tail, kind=frame.kind, valid=False, how="trailing garbage")
    if op == "bom":
        return Frame("\ufeff" + text, kind=frame.kind, valid=False, how="BOM")
    if op == "whitespace":
        pad = draw(st.sampled_from([" ", "\n", "\t\r\n "]))
        return Frame(pad + text + pad, kind=frame.kind, valid=frame.valid, how=frame.how + " +ws")
    if op == "splice":
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 3))
        insert = draw(st.text(max_size=3))
        return Frame(text[:at] + insert + text[at + cut :], kind=frame.kind, how="spliced")
    token = draw(st.sampled_from(_RAW_TOKENS))
    field = draw(st.sampled_from(["t", "playedMs", "result", "lastSeq", "text"]))
    kind = {"t": "ping", "playedMs": "cancel", "result": "tool_result", "lastSeq": "resume",
            "text": "text"}[field]  # fmt: skip
    extra = ', "callId": "c"' if kind == "tool_result" else ""
    raw = f'{{"type": "{kind}", "{field}": {token}{extra}}}'
    return Frame(raw, kind=kind, valid=False, how=f"raw token {token[:12]}")


def _not_a_message(text: str) -> bool:
    """Junk that happens to decode as a message is not junk (astronomically rare)."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return True
    return not (isinstance(obj, dict) and obj.get("type") in p.MESSAGE_TYPES)


def _nested(depth: int, inner: str = "0") -> str:
    return "[" * depth + inner + "]" * depth


def _junk(text: str, how: str) -> Frame:
    return Frame(text, valid=False if _not_a_message(text) else None, how=how)


_classics = ["{}", '{"type": null}', '{"TYPE": "ping"}', "null", "[]", '""', "\ud800", "\x00",
             '{"type": "ping"', "{'type': 'ping'}"]  # fmt: skip
junk_frames = st.one_of(
    st.text(max_size=40).map(lambda s: _junk(s, "random text")),
    st.binary(max_size=40).map(lambda b: _junk(b.decode("utf-8", "surrogateescape"), "bytes")),
    json_values.filter(lambda v: not isinstance(v, dict)).map(
        lambda v: _junk(_dumps(v), "not an object")
    ),
    st.sampled_from(_classics).map(lambda s: _junk(s, "classic")),
    st.sampled_from([50, 900, 1000, 5000, 100_000]).map(
        lambda depth: _junk(_nested(depth), f"nested {depth}")
    ),
)


@st.composite
def big_frames(draw: st.DrawFn) -> Frame:
    """Frames near and past TEXT_FRAME_MAX, deep nesting and huge arrays inside messages."""
    op = draw(st.sampled_from(["too_large", "near_limit", "deep", "array", "many_keys"]))
    if op == "too_large":
        padding = draw(over(p.TEXT_FRAME_MAX))
        kind = draw(st.sampled_from(["text", "ping", "context"]))
        field = {"text": "text", "ping": "pad", "context": "text"}[kind]
        return Frame(_dumps({"type": kind, field: padding}, ascii_only=False), kind=kind,
                     valid=False, how="frame too large")  # fmt: skip
    if op == "near_limit":  # a frame just under the limit; its field is still too long
        size = p.TEXT_FRAME_MAX - 64 - draw(st.integers(0, 1000))
        return Frame(_dumps({"type": "text", "text": "a" * size}), kind="text", valid=False,
                     how="near frame limit")  # fmt: skip
    depth = draw(st.sampled_from([10, 200, 900, 990, 5000]))
    if op == "deep":
        field = draw(st.sampled_from(["result", "variables", "t", "tools"]))
        kind = {"result": "tool_result", "variables": "context", "t": "ping",
                "tools": "configure"}[field]  # fmt: skip
        call_id = '"callId": "c", ' if kind == "tool_result" else ""
        raw = f'{{"type": "{kind}", {call_id}"{field}": {_nested(depth)}}}'
        valid = None if kind == "tool_result" else False  # very deep JSON may be refused
        return Frame(raw, kind=kind, valid=valid, how=f"deep {field} {depth}")
    if op == "array":
        n = draw(st.sampled_from([1000, 50_000]))
        message = {"type": "tool_result", "callId": "c", "result": [0] * n}
        return Frame(_dumps(message, compact=True), kind="tool_result", valid=True, how="array")
    n = draw(st.sampled_from([65, 10_000]))
    message = {"type": "context", "variables": {f"v{i}": "" for i in range(n)}}
    return Frame(_dumps(message, compact=True), kind="context", valid=False, how="many keys")


_BINARY_SIZES = [0, 1, 2, 3, 319, 320, 640, 641, 4095, p.BINARY_FRAME_MAX - 1,
                 p.BINARY_FRAME_MAX, p.BINARY_FRAME_MAX + 1, p.BINARY_FRAME_MAX + 2,
                 2 * p.BINARY_FRAME_MAX, 1 << 20]  # fmt: skip


def _pcm(size: int, pattern: str, seed: int) -> bytes:
    if pattern == "zeros":
        return bytes(size)
    if pattern == "loud":  # full-scale samples: speech to the recogniser
        return (b"\xff\x7f\x01\x80" * (size // 4 + 1))[:size]
    if pattern == "json":
        return (b'{"type": "text", "text": "hi"}' * (size // 30 + 1))[:size]
    return bytes((seed + i * 7919) % 256 for i in range(min(size, 4096))).ljust(size, b"\xfe")


binary_frames = st.builds(
    lambda size, pattern, seed: Frame(data=_pcm(size, pattern, seed), kind="binary"),
    st.sampled_from(_BINARY_SIZES) | st.integers(0, 4000),
    st.sampled_from(["zeros", "loud", "json", "noise"]),
    st.integers(0, 255),
)


def any_frames(kinds: list[str] | None = None) -> st.SearchStrategy[Frame]:
    """Every kind of frame, weighted towards messages that look almost right."""
    return st.one_of(
        message_frames(kinds),
        message_frames(kinds),
        text_edits(),
        junk_frames,
        binary_frames,
        big_frames(),
    )


# A `configure` naming an agent the workspace does not have: refused, closed with 4004.
unknown_agents = st.builds(
    lambda slug: Frame(_dumps({"type": "configure", "agent": slug}), kind="configure",
                       valid=True, how="unknown agent"),
    short_ids | st.sampled_from(["\x00", "a\x00b", "../admin", "x" * 256, " ", "%00", "😀"]),
)  # fmt: skip
# Before `configure`, anything but a valid `configure` (which would start the session).
before_configure_frames = st.one_of(
    any_frames([k for k in KINDS if k != "configure"]).filter(
        lambda f: not (f.kind == "configure" and f.valid is not False)
    ),
    unknown_agents,
)


# ---------------------------------------------------------------- answers to a waiting call

CALL_ID = "@call-id@"  # substituted with the callId of the `tool_call` being answered


def _nested_lists(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


tool_outcomes = st.one_of(
    json_values,
    odd_strings,
    st.builds(_nested_lists, st.sampled_from([10, 200])),
    st.builds(lambda n: [0] * n, st.sampled_from([1000, 50_000])),
    st.builds(lambda unit, n: unit * n, st.sampled_from(["\x00", "a", "😀", "\\"]),
              st.sampled_from([1000, 60_000])),
    st.just({"\x00": "\x00", "": None, "nested": {"deeper": [1.5, -0.0, 2**63]}}),
)  # fmt: skip


@st.composite
def tool_result_frames(draw: st.DrawFn) -> Frame:
    """A `tool_result` for the waiting call: valid (result, error or neither) or mutated."""
    message: dict[str, Any] = {"type": "tool_result", "callId": CALL_ID}
    if draw(st.booleans()):
        message["result"] = draw(tool_outcomes)
    if draw(st.integers(0, 3)) == 0:
        message["error"] = draw(plain | st.sampled_from(["\x00", "x" * 100_000, ""]))
    valid, how = True, "valid"
    if draw(st.integers(0, 2)) == 0:
        message, valid, how = draw(_field_mutation("tool_result", message))
    text = _dumps(message, ascii_only=draw(st.booleans()))
    if len(text.encode("utf-8", "surrogatepass")) > p.TEXT_FRAME_MAX:
        valid, how = False, how + " (frame too large)"
    return Frame(text, kind="tool_result", valid=valid, how=how)


# ---------------------------------------------------------------- handshakes

KEY = "@publishable-key@"  # substituted with the workspace's publishable key
_bad_keys = st.sampled_from([KEY + "x", "", "pk_", "sk_live", "pk_\x00", "%00"]) | plain
queries = st.fixed_dictionaries(
    {"key": st.one_of(st.just(KEY), st.just(KEY), _bad_keys)},
    optional={
        "agent": st.sampled_from(["", "\x00", "../x", "a" * 300, "orders"]) | short_ids,
        "protocol": st.sampled_from(["v1", "voiceide"]) | st.sampled_from(["", "V1", "\x00"]),
    },
)
origins = st.one_of(
    st.just("http://localhost:3000"),
    st.just("http://localhost:3000"),
    st.sampled_from(["", "null", "https://evil.example", "http://localhost:3000/"]),
    plain,
)
