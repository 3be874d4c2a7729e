// The playground: the same client.js customers load, with every server event logged.
import { VoiceAgent } from "/client.js";
import { eventLabel } from "./event_labels.js";

const LOG_LIMIT = 500;
const DETAIL_LIMIT = 400; // longer details are folded: the first part shows, a click shows all
const FULL_LIMIT = 20000; // what an unfolded detail keeps
const root = document.querySelector("#playground");

if (root) {
  const form = root.querySelector(".playground-controls");
  const startButton = form.querySelector('[data-action="start"]');
  const stopButton = form.querySelector('[data-action="stop"]');
  const log = root.querySelector("#event-log");
  const element = root.querySelector("#playground-agent");
  const sessionLine = root.querySelector(".playground-session");
  let agent = null;

  const clock = () => new Date().toLocaleTimeString([], { hour12: false }) +
    "." + String(Date.now() % 1000).padStart(3, "0");

  function logLine(type, detail, isError = false) {
    const item = document.createElement("li");
    const time = document.createElement("time");
    const name = document.createElement("span");
    const text = document.createElement("span");
    time.textContent = clock();
    name.className = isError ? "type error" : "type";
    name.textContent = type;
    text.className = "detail";
    if (detail.length > DETAIL_LIMIT) text.append(folded(detail));
    else text.textContent = detail;
    item.dataset.type = type;
    item.append(time, name, text);
    log.append(item);
    while (log.children.length > LOG_LIMIT) log.firstElementChild.remove();
    log.scrollTop = log.scrollHeight;
  }

  /** A long detail: its beginning, and all of it (up to FULL_LIMIT) a click away. */
  function folded(detail) {
    const fold = document.createElement("details");
    const summary = document.createElement("summary");
    const full = document.createElement("div");
    const preview = `${detail.slice(0, DETAIL_LIMIT)}… (${detail.length} characters: show all)`;
    summary.textContent = preview;
    full.textContent = detail.length > FULL_LIMIT
      ? `${detail.slice(0, FULL_LIMIT)}… (cut at ${FULL_LIMIT} characters)`
      : detail;
    fold.append(summary, full);
    fold.addEventListener("toggle", () => {
      summary.textContent = fold.open ? "Show less" : preview;
    });
    return fold;
  }

  function logEvent(event) {
    const { type, seq, ts, ...fields } = event;
    const [label, note] = eventLabel(event);
    const json = Object.keys(fields).length ? JSON.stringify(fields) : "";
    logLine(label, [note, json].filter(Boolean).join(" "), type === "error");
    if (type === "ready") showSession(event.sessionId);
  }

  function showSession(sessionId) {
    const link = sessionLine.querySelector("a");
    link.href = `${root.dataset.sessions}${sessionId}/`;
    link.textContent = sessionId;
    sessionLine.hidden = false;
  }

  function stop() {
    agent?.stop();
    agent = null;
    startButton.disabled = false;
    stopButton.disabled = true;
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    stop();
    element.replaceChildren();
    sessionLine.hidden = true;
    const choice = { agent: form.elements.agent.value, mode: form.elements.mode.value };
    logLine("start", JSON.stringify(choice));
    // The Start button above was the click that unlocks audio: no second Start inside.
    agent = VoiceAgent.start({ element, apiKey: root.dataset.key, autoStart: true, ...choice });
    agent.on("event", logEvent);
    agent.on("status", (status) => {
      // The conversation ended (here, or by itself): Start again, nothing to stop.
      if (status === "stopped" || status === "error") {
        startButton.disabled = false;
        stopButton.disabled = true;
      }
    });
    startButton.disabled = true;
    stopButton.disabled = false;
  });
  stopButton.addEventListener("click", () => { stop(); logLine("stop", ""); });
  root.querySelector('[data-action="clear"]').addEventListener("click", () => log.replaceChildren());
  addEventListener("pagehide", () => agent?.stop());
}
