// The playground: the same client.js customers load, with every server event logged.
import { VoiceAgent } from "/client.js";

const LOG_LIMIT = 500;
const DETAIL_LIMIT = 400;
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
    text.textContent = detail.length > DETAIL_LIMIT ? detail.slice(0, DETAIL_LIMIT) + "…" : detail;
    item.dataset.type = type;
    item.append(time, name, text);
    log.append(item);
    while (log.children.length > LOG_LIMIT) log.firstElementChild.remove();
    log.scrollTop = log.scrollHeight;
  }

  function logEvent(event) {
    const { type, seq, ts, ...fields } = event;
    const detail = Object.keys(fields).length ? JSON.stringify(fields) : "";
    logLine(type, detail, type === "error");
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
      if (status === "stopped" || status === "error") stopButton.disabled = status === "stopped";
    });
    startButton.disabled = true;
    stopButton.disabled = false;
  });
  stopButton.addEventListener("click", () => { stop(); logLine("stop", ""); });
  root.querySelector('[data-action="clear"]').addEventListener("click", () => log.replaceChildren());
  addEventListener("pagehide", () => agent?.stop());
}
