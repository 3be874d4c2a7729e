"""The browser library's session tokens, run in node against a scripted WebSocket:
``getToken()`` is asked for every socket (the reconnect that resumes too), a fixed
``token`` goes in the URL instead of ``key``, and a failing ``getToken`` ends the attempt
in words instead of a hang."""

from __future__ import annotations

from tests.frontend.node import SCRIPTED_SOCKET, run_library_script

SCRIPT = """
import { Connection } from "LIB/connection.js";
import { sessionUrlSource } from "LIB/config.js";

SOCKET
const report = {};
let asked = 0;
const connection = new Connection({
  url: sessionUrlSource({ platformUrl: "https://platform.test", agent: "desk",
                          getToken: async () => `st_${++asked}` }),
  configure: async () => ({ type: "configure" }),
  onEvent() {}, onAudio() {}, onResumed() {}, onRetry() {}, onLost(code) { report.lost = code; },
  onRefused() {},
});
await connection.open();
await tick();
sockets[0].event({ type: "ready", seq: 1, ts: 0, sessionId: "s1", resumeToken: "r1" });
sockets[0].drop();
await tick(700);  // the first retry waits 500 ms
report.urls = sockets.map((s) => s.url);
report.first = sockets.map((s) => s.sent[0]?.type);
report.asked = asked;

const failing = new Connection({
  url: sessionUrlSource({ platformUrl: "https://platform.test",
                          getToken: async () => { throw new Error("server down"); } }),
  configure: async () => ({ type: "configure" }),
  onEvent() {}, onAudio() {}, onResumed() {}, onRetry() {}, onRefused() {},
  onLost(code) { report.failed = code; },
});
await failing.open();
report.fixed = await sessionUrlSource({ platformUrl: "https://platform.test", token: "st_x" })();
console.log(JSON.stringify(report));
process.exit(0);  // the connection's keep-alive timer would hold node open
""".replace("SOCKET", SCRIPTED_SOCKET)


def test_tokens_in_the_browser_library() -> None:
    report = run_library_script(SCRIPT)
    assert report["urls"] == [
        "wss://platform.test/v1/session?token=st_1&agent=desk",
        "wss://platform.test/v1/session?token=st_2&agent=desk",
    ]
    assert report["first"] == ["configure", "resume"] and report["asked"] == 2
    assert report["failed"] == "connection_failed"
    assert report["fixed"] == "wss://platform.test/v1/session?token=st_x"
