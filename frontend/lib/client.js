// The browser library's entry point: `VoiceAgent.start(options)` and the default UI.
//
//   import { VoiceAgent } from "https://PLATFORM/client.js";
//   const agent = VoiceAgent.start({ element, apiKey: "pk_…", agent: "support" });
//
// Everything else (connection, audio, tools, state) lives in core.js.

import { AgentSession, readableError } from "./core.js";

export { AgentSession, readableError };

const PLATFORM_URL = new URL(import.meta.url).origin;

export class VoiceAgent extends AgentSession {
  /**
   * Starts a conversation and returns its handle at once; connecting happens in the background.
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
    if (ui) mountDefaultUI(target, agent);
    return agent.start();
  }
}

// ---------------------------------------------------------------- the default UI

const STATUS_TEXT = {
  idle: "",
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
.va-status { font-size: 13px; color: var(--va-muted, #6e6e73); min-height: 1.4em; }
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

function injectStyle() {
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
  const stop = element("button", "va-stop", "Stop");
  const reset = element("button", "va-reset", "New conversation");
  for (const button of [stop, reset]) button.type = "button";
  const actions = element("div", "va-actions");
  actions.append(stop, reset);
  root.append(status, list, error, form, actions);
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
    status.textContent = STATUS_TEXT[state.status] ?? "";
    if (partial.textContent !== state.transcript) partial.textContent = state.transcript;
    error.textContent = state.error?.readable ?? "";
    const live = state.status !== "stopped" && state.status !== "error";
    const noMicrophone = state.microphone === "denied" || state.microphone === "unavailable";
    form.hidden = !(agent.mode === "text" || noMicrophone);
    input.disabled = !live;
    stop.disabled = !live;
  };

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!input.value.trim()) return;
    agent.sendText(input.value);
    input.value = "";
  });
  stop.addEventListener("click", () => agent.stop());
  reset.addEventListener("click", () => {
    const { status: current } = agent.getSnapshot();
    if (current === "stopped" || current === "error") agent.start(); // a fresh conversation
    else agent.reset();
  });

  for (const message of agent.messages) showMessage(message);
  const unsubscribe = [
    agent.on("message", showMessage),
    agent.on("tool", showTool),
    agent.on("reset", clear),
    agent.subscribe(render),
  ];
  render();
  return () => {
    for (const off of unsubscribe) off();
    root.remove();
  };
}
