// The browser library's entry point: `VoiceAgent.start(options)` and the default UI.
//
//   import { VoiceAgent } from "https://PLATFORM/client.js";
//   const agent = VoiceAgent.start({ element, apiKey: "pk_…", agent: "support" });
//
// Everything else (connection, audio, tools, state) lives in core.js.

import { AgentSession, noticesOf, readableError } from "./core.js";
import { LIBRARY_URL } from "./location.js";

export { AgentSession, readableError };

const PLATFORM_URL = new URL(LIBRARY_URL).origin;

export class VoiceAgent extends AgentSession {
  /**
   * Renders the default UI and returns the conversation's handle at once. In voice mode the
   * UI waits for its Start button (the click that lets the browser play sound and open the
   * microphone) unless `autoStart`; text mode and `ui: false` connect right away.
   * @param {object} options  see `VoiceAgentOptions` in client.d.ts
   * @returns {VoiceAgent}
   */
  static start(options = {}) {
    const ui = options.ui ?? true;
    // An element, or a CSS selector for one ("#app", as in the seed's one-file page).
    const target =
      typeof options.element === "string" ? document.querySelector(options.element) : options.element;
    if (ui && target?.nodeType !== Node.ELEMENT_NODE) {
      throw new TypeError(
        "VoiceAgent.start: `element` (an HTMLElement or a selector that finds one) is required unless `ui: false`",
      );
    }
    const agent = new VoiceAgent({ platformUrl: PLATFORM_URL, ...options });
    if (!ui) return agent.start();
    mountDefaultUI(target, agent);
    const waitForStart = agent.mode === "voice" && !options.autoStart && !isFilePage();
    return waitForStart ? agent : agent.start();
  }
}

// ---------------------------------------------------------------- the default UI

function isFilePage() {
  return globalThis.location?.protocol === "file:";
}

const STATUS_TEXT = {
  idle: "Press Start to talk",
  connecting: "Connecting…",
  ready: "Ready",
  listening: "Listening…",
  thinking: "Thinking…",
  speaking: "Speaking…",
  stopped: "Conversation ended",
  error: "Not connected",
};

const TOOL_DONE = { completed: "✓", failed: "✗", timed_out: "✗", cancelled: "✗" };
const TOOL_NOTE = { failed: " (failed)", timed_out: " (timed out)", cancelled: " (cancelled)" };

const STYLE_ID = "va-style";
const STYLE = `
.va-root { font: 15px/1.4 system-ui, sans-serif; color: var(--va-text, #1d1d1f); display: flex;
  flex-direction: column; gap: 8px; max-width: 40rem; }
.va-bar { display: flex; align-items: center; gap: 8px; }
.va-status { font-size: 13px; color: var(--va-muted, #6e6e73); min-height: 1.4em; display: flex;
  align-items: center; gap: 6px; }
.va-status::before { content: ""; width: 8px; height: 8px; border-radius: 50%; background: #c7c7cc; }
.va-root[data-status="connecting"] .va-status::before { background: #ff9f0a; }
.va-root[data-status="listening"] .va-status::before { background: #30d158; }
.va-root[data-status="thinking"] .va-status::before { background: #bf5af2; }
.va-root[data-status="speaking"] .va-status::before { background: var(--va-user-bg, #0a84ff); }
.va-root[data-status="error"] .va-status::before { background: var(--va-error, #c5221f); }
.va-level { flex: 0 0 80px; height: 6px; border-radius: 3px; background: #e5e5ea; overflow: hidden; }
.va-level[hidden] { display: none; }
.va-level-bar { height: 100%; width: 0; background: #30d158; transition: width 80ms linear; }
.va-root button.va-start { background: var(--va-user-bg, #0a84ff); color: #fff; border-color: transparent;
  font-weight: 600; padding: 8px 18px; }
.va-root button[hidden] { display: none; }
.va-messages { list-style: none; margin: 0; padding: 0; display: flex; flex-direction: column; gap: 6px;
  max-height: var(--va-height, 24rem); overflow-y: auto; }
.va-messages > li { flex-shrink: 0; }
.va-message { padding: 6px 10px; border-radius: 12px; max-width: 85%; white-space: pre-wrap; }
.va-user { align-self: flex-end; background: var(--va-user-bg, #0a84ff); color: var(--va-user-text, #fff); }
.va-assistant { align-self: flex-start; background: var(--va-assistant-bg, #f0f0f3); }
.va-interrupted::after { content: " …"; }
.va-partial { align-self: flex-end; color: var(--va-muted, #6e6e73); font-style: italic; padding: 0 10px; }
.va-partial:empty, .va-error:empty { display: none; }
.va-tool { align-self: flex-start; font-size: 13px; color: var(--va-muted, #6e6e73); padding: 0 10px; }
.va-error { color: var(--va-error, #c5221f); font-size: 14px; }
.va-form { display: flex; gap: 6px; }
.va-form[hidden] { display: none; }
.va-input { flex: 1; font: inherit; padding: 6px 10px; border: 1px solid #c7c7cc; border-radius: 8px; }
.va-actions { display: flex; gap: 6px; }
.va-root button { font: inherit; padding: 6px 12px; border: 1px solid #c7c7cc; border-radius: 8px;
  background: #fff; cursor: pointer; }
.va-root button:disabled { opacity: 0.5; cursor: default; }
`;

let styleSheet = null;

function injectStyle() {
  // A constructed style sheet is not an inline <style>: a page's Content-Security-Policy
  // without 'unsafe-inline' still lets it apply.
  if (typeof CSSStyleSheet === "function" && "adoptedStyleSheets" in document) {
    if (!styleSheet) {
      styleSheet = new CSSStyleSheet();
      styleSheet.replaceSync(STYLE);
    }
    if (!document.adoptedStyleSheets.includes(styleSheet)) {
      document.adoptedStyleSheets = [...document.adoptedStyleSheets, styleSheet];
    }
    return;
  }
  if (document.getElementById(STYLE_ID)) return;
  const style = document.createElement("style");
  style.id = STYLE_ID;
  style.textContent = STYLE;
  document.head.append(style);
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/**
 * Renders the default UI for `agent` into `container`.
 * @param {HTMLElement} container
 * @param {AgentSession} agent
 * @returns {() => void} removes the UI and its listeners
 */
export function mountDefaultUI(container, agent) {
  injectStyle();
  const root = element("div", "va-root");
  const status = element("div", "va-status");
  status.setAttribute("role", "status");
  const level = element("div", "va-level");
  level.setAttribute("role", "meter");
  level.setAttribute("aria-label", "Microphone level");
  level.setAttribute("aria-valuemin", "0");
  level.setAttribute("aria-valuemax", "100");
  const levelBar = element("div", "va-level-bar");
  level.append(levelBar);
  const bar = element("div", "va-bar");
  bar.append(status, level);
  const list = element("ol", "va-messages");
  list.setAttribute("aria-live", "polite");
  const partial = element("li", "va-partial");
  list.append(partial);
  const error = element("div", "va-error");
  error.setAttribute("role", "alert");
  const form = element("form", "va-form");
  const input = element("input", "va-input");
  Object.assign(input, { type: "text", placeholder: "Type a message", autocomplete: "off" });
  input.setAttribute("aria-label", "Message");
  form.append(input, element("button", "va-send", "Send"));
  const start = element("button", "va-start", "Start");
  const stop = element("button", "va-stop", "Stop");
  const reset = element("button", "va-reset", "New conversation");
  for (const button of [start, stop, reset]) button.type = "button";
  const actions = element("div", "va-actions");
  actions.append(start, stop, reset);
  root.append(bar, list, error, form, actions);
  container.append(root);

  const rows = new Map(); // message id or "tool:" + callId → <li>
  /** The row for `key` (created at the end), with the list kept scrolled to the bottom. */
  const updateRow = (key, className, text) => {
    const stick = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
    let row = rows.get(key);
    if (!row) {
      rows.set(key, (row = element("li")));
      list.insertBefore(row, partial);
    }
    row.className = className;
    row.textContent = text;
    row.hidden = !text; // a reply that so far only called tools: its tool rows say it
    if (stick) list.scrollTop = list.scrollHeight;
  };
  const showMessage = (message) => {
    const interrupted = message.interrupted ? " va-interrupted" : "";
    updateRow(message.id, `va-message va-${message.role}${interrupted}`, message.text);
  };
  const showTool = ({ callId, name, status: toolStatus }) => {
    const mark = TOOL_DONE[toolStatus];
    const text = mark ? `${mark} ${name}${TOOL_NOTE[toolStatus] ?? ""}` : `Using ${name}…`;
    updateRow(`tool:${callId}`, "va-tool", text);
  };
  const clear = () => {
    for (const row of rows.values()) row.remove();
    rows.clear();
  };
  const render = () => {
    const state = agent.getSnapshot();
    root.dataset.status = state.status;
    status.textContent = STATUS_TEXT[state.status] ?? "";
    if (partial.textContent !== state.transcript) partial.textContent = state.transcript;
    error.textContent = noticesOf(state)
      .map((notice) => notice.readable)
      .join(" ");
    const live = !["idle", "stopped", "error"].includes(state.status);
    start.hidden = live || state.error?.code === "file_page";
    start.textContent = state.status === "idle" ? "Start" : "Start again";
    stop.hidden = reset.hidden = !live;
    level.hidden = state.microphone !== "on";
    form.hidden = !live; // typing works in voice mode too: the fallback when speech does not
    input.disabled = !live;
  };
  let shownLevel = 0;
  const showLevel = ({ rms }) => {
    // RMS of speech sits around 0.02-0.2: a square root spreads it over the bar.
    shownLevel = Math.max(Math.min(1, Math.sqrt(rms * 8)), shownLevel * 0.8);
    levelBar.style.width = `${Math.round(shownLevel * 100)}%`;
    level.setAttribute("aria-valuenow", String(Math.round(shownLevel * 100)));
  };

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!input.value.trim()) return;
    agent.sendText(input.value);
    input.value = "";
  });
  // This click is the user gesture that lets the browser play sound and open the microphone.
  start.addEventListener("click", () => agent.start());
  stop.addEventListener("click", () => agent.stop());
  reset.addEventListener("click", () => agent.reset());

  for (const message of agent.messages) showMessage(message);
  const unsubscribe = [
    agent.on("message", showMessage),
    agent.on("tool", showTool),
    agent.on("reset", clear),
    agent.on("level", showLevel),
    agent.subscribe(render),
  ];
  render();
  return () => {
    for (const off of unsubscribe) off();
    root.remove();
  };
}
