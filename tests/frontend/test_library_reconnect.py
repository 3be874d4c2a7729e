"""The browser library acts on ``reconnect`` (its web process is shutting down) at once:
a new socket that resumes from the last event seen, no retry delay; the old socket's late
frames are ignored, and it is closed once the new one has resumed. A socket closed because
another tab resumed its session is not reopened."""

from __future__ import annotations

from tests.frontend.node import SCRIPTED_SOCKET, run_library_script

SCRIPT = """
import { Connection } from "LIB/connection.js";

SOCKET
const report = { events: [], retried: 0, lost: null };
const connection = new Connection({
  url: "wss://platform.test/v1/session?key=pk_x",
  configure: async () => ({ type: "configure" }),
  onEvent(event) { report.events.push(event.seq); },
  onAudio() {}, onResumed() { report.resumed = true; },
  onRetry() { report.retried += 1; }, onLost(code) { report.lost = code; }, onRefused() {},
});
await connection.open();
await tick();
const [first] = sockets;
first.event({ type: "ready", seq: 1, ts: 0, sessionId: "s1", resumeToken: "r1" });
first.event({ type: "chat", seq: 2, ts: 0, text: "Hi" });
const asked = Date.now();
first.event({ type: "reconnect", seq: 3, ts: 0 });
await tick(5);
report.openedAfterMs = Date.now() - asked;
await tick();
first.event({ type: "chat", seq: 4, ts: 0, text: "late, on the old socket" });
report.oldOpenWhileResuming = first.readyState === 1;
const second = sockets[1];
second.event({ type: "chat", seq: 4, ts: 0, text: "replayed" });
second.event({ type: "pong", seq: 5, ts: 0 });
report.oldClosed = first.readyState === 3;  // closed by the library once resumed
report.sockets = sockets.length;
report.resume = second.sent[0];
console.log(JSON.stringify(report));
process.exit(0);  // the connection's keep-alive timer would hold node open
""".replace("SOCKET", SCRIPTED_SOCKET)


def test_a_reconnect_event_moves_the_session_to_a_new_socket_at_once() -> None:
    report = run_library_script(SCRIPT)
    assert report["sockets"] == 2
    assert report["openedAfterMs"] < 100  # not the 500 ms of a retry after a lost socket
    assert report["resume"] == {
        "type": "resume", "sessionId": "s1", "resumeToken": "r1", "lastSeq": 3
    }  # fmt: skip
    assert report["events"] == [1, 2, 3, 4, 5]  # each once; the old socket's late 4 ignored
    assert report["resumed"] and report["retried"] == 0 and report["lost"] is None
    assert report["oldOpenWhileResuming"] and report["oldClosed"]


DROPPED = """
import { Connection } from "LIB/connection.js";

SOCKET
const connections = [];
for (let i = 0; i < 20; i++) {
  const connection = new Connection({
    url: `wss://platform.test/v1/session?key=pk_${i}`,
    configure: async () => ({ type: "configure" }),
    onEvent() {}, onAudio() {}, onResumed() {}, onRetry() {}, onLost() {}, onRefused() {},
  });
  await connection.open();
  connections.push(connection);
}
await tick();
const firsts = [...sockets];
firsts.forEach((socket, i) => socket.event({ type: "ready", seq: 1, ts: 0,
  sessionId: `s${i}`, resumeToken: `r${i}` }));
const dropped = Date.now();
const back = new Map();
const seen = sockets.length;
const watch = setInterval(() => {
  for (const socket of sockets.slice(seen)) {
    if (!back.has(socket.url)) back.set(socket.url, Date.now() - dropped);
  }
}, 5);
firsts.forEach((socket) => socket.drop());
await tick(700);
clearInterval(watch);
console.log(JSON.stringify({ delays: [...back.values()] }));
process.exit(0);
""".replace("SOCKET", SCRIPTED_SOCKET)


def test_sessions_of_a_dropped_process_come_back_spread_over_the_first_backoff_step() -> None:
    delays = run_library_script(DROPPED)["delays"]
    assert len(delays) == 20  # every session tried again within the first step (≤ 0.5 s)
    assert all(240 <= delay <= 600 for delay in delays), delays  # half the step to all of it
    assert max(delays) - min(delays) >= 50, delays  # not all in the same instant


DISPLACED = """
import { Connection } from "LIB/connection.js";
import { CLOSE_CODES } from "LIB/protocol-generated.js";
import { READABLE } from "LIB/errors.js";

SOCKET
const report = { retried: 0, lost: null, refused: null };
const connection = new Connection({
  url: "wss://platform.test/v1/session?key=pk_x",
  configure: async () => ({ type: "configure" }),
  onEvent() {}, onAudio() {}, onResumed() {},
  onRetry() { report.retried += 1; }, onLost(code) { report.lost = code; },
  onRefused(code, closeCode) { report.refused = [code, closeCode, READABLE[code]]; },
});
await connection.open();
await tick();
sockets[0].event({ type: "ready", seq: 1, ts: 0, sessionId: "s1", resumeToken: "r1" });
sockets[0].drop(CLOSE_CODES.DISPLACED);
await tick(800);  // past the first retry step
report.sockets = sockets.length;
console.log(JSON.stringify(report));
process.exit(0);
""".replace("SOCKET", SCRIPTED_SOCKET)


def test_a_session_resumed_in_another_tab_is_not_taken_back() -> None:
    report = run_library_script(DISPLACED)
    assert report["sockets"] == 1 and report["retried"] == 0 and report["lost"] is None
    assert report["refused"] == [
        "session_displaced", 4012, "This conversation went on in another window or tab."
    ]  # fmt: skip
