"""The browser library's first hour, run in node against a scripted WebSocket: the
microphone's frames from Start are kept (at most 5 s, the oldest dropped) and go out, in
order and in messages of at most 1 s, as soon as the session is ready; a refusal's words;
the React hook's notices, and what it gives when it finds no React (no throw: a blank page
would say nothing)."""

from __future__ import annotations

from typing import Any

from tests.frontend.node import SCRIPTED_SOCKET, run_library_script

FRAME = 1280  # 40 ms of PCM16 at 16 kHz

SCRIPT = """
import { Connection, EARLY_AUDIO_MAX_BYTES } from "LIB/connection.js";
import { readableError, withPlatformLinks } from "LIB/errors.js";
import { withNotices } from "LIB/react-hook.js";
import { noticesOf } from "LIB/errors.js";

SOCKET
// Frame n holds the number n in every sample: what arrives says which frames went out.
const frame = (n) => new Int16Array(FRAME / 2).fill(n).buffer;
const report = { max: EARLY_AUDIO_MAX_BYTES };
const connection = new Connection({
  url: async () => "wss://platform.test/v1/session?key=pk_x",
  configure: async () => ({ type: "configure" }),
  onEvent() {}, onAudio() {}, onResumed() {}, onRetry() {}, onLost() {}, onRefused() {},
});
let n = 0;
for (; n < 50; n++) connection.sendAudio(frame(n));  // 2 s before the socket opens
await connection.open();
await tick();
for (; n < 250; n++) connection.sendAudio(frame(n));  // 8 s more while it starts: 10 s in all
report.beforeReady = sockets[0].sent.filter((m) => m instanceof Int16Array).length;
sockets[0].event({ type: "ready", seq: 1, ts: 0, sessionId: "s1", resumeToken: "r1" });
connection.sendAudio(frame(n++));  // after ready: as it comes
const audio = sockets[0].sent.filter((m) => m instanceof Int16Array);
report.sizes = audio.map((m) => m.byteLength);
report.frames = audio.flatMap((m) => {
  const seen = [];
  for (let i = 0; i < m.length; i += FRAME / 2) seen.push(m[i]);
  return seen;
});
report.firstMessageAfterConfigure = sockets[0].sent[0].type;

report.refused = readableError("inline_config_refused", "This key (pk_…ab12) refused X.");
report.fallback = readableError("inline_code_refused", "");
report.linked = withPlatformLinks("The key's settings: /w/3/keys/9/", "wss://voice.test");
const conversation = Object.freeze([{ id: 1, role: "user", text: "hi", final: true }]);
report.none = withNotices(conversation, noticesOf({ audio: "on", error: null })) === conversation;
const voice = { code: "voice_unavailable", readable: "No jess." };
report.notices = withNotices(conversation, noticesOf({ audio: "blocked", error: voice })).slice(1);
const logged = [];
console.error = (line) => logged.push(line);
const { useVoiceAgent } = await import("LIB/react.js");
const first = useVoiceAgent({ apiKey: "pk_x" });
useVoiceAgent({ apiKey: "pk_x" });  // a second render: said once in the console
report.noReact = { state: first.state, notice: first.messages[0], code: first.error.code };
report.noReactLogged = logged;
console.log(JSON.stringify(report));
process.exit(0);  // the connection's keep-alive timer would hold node open
""".replace("FRAME", str(FRAME)).replace("SOCKET", SCRIPTED_SOCKET)


def _run() -> dict[str, Any]:
    return run_library_script(SCRIPT)


def test_audio_from_start_is_kept_until_ready_then_sent_in_order() -> None:
    report = _run()
    assert report["max"] == 5 * 16000 * 2  # 5 s
    assert report["beforeReady"] == 0  # nothing went out before the session could take it
    kept = report["max"] // FRAME  # 125 frames: the last 5 s of the 10 s spoken
    assert report["frames"] == [*range(250 - kept, 250), 250]
    assert all(size <= 32000 for size in report["sizes"])  # at most 1 s a message
    assert report["sizes"] == [25 * FRAME] * 5 + [FRAME]  # five 1 s messages, then live 40 ms
    assert report["firstMessageAfterConfigure"] == "configure"


def test_refusals_are_said_in_the_platforms_words_with_its_links() -> None:
    report = _run()
    refused = "The voice platform refused this page: This key (pk_…ab12) refused X."
    assert report["refused"] == refused
    assert "does not accept server-tool code" in report["fallback"]
    assert report["linked"] == "The key's settings: https://voice.test/w/3/keys/9/"
    assert report["none"] is True
    # The click hint outlives a later warning: both are shown, the hint first.
    blocked, voice = report["notices"]
    assert (blocked["id"], blocked["role"], blocked["code"]) == (-1, "notice", "audio_blocked")
    assert "click anywhere on the page" in blocked["text"]
    assert voice == {"id": -2, "role": "notice", "text": "No jess.", "final": True,
                     "code": "voice_unavailable"}  # fmt: skip


def test_the_hook_without_react_says_the_fix_on_the_page_and_in_the_console() -> None:
    report = _run()
    fix = 'import * as React from "react"; Object.assign(globalThis, { React });'
    assert report["noReact"]["state"] == "error"
    assert report["noReact"]["code"] == "react_not_found"
    assert report["noReact"]["notice"]["role"] == "notice"
    assert fix in report["noReact"]["notice"]["text"]
    (line,) = report["noReactLogged"]
    assert line.startswith("voice agent: ") and fix in line
