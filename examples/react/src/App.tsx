// App.tsx — the custom UI. The agent itself lives in agent.ts.
import { useMemo, useState, type FormEvent } from "react";
import { config, createClientTools, tools, type ShownOrder } from "./agent";
import { PLATFORM_URL, PUBLISHABLE_KEY } from "./env";
import { useVoiceAgent } from "./voice";

// ?mode=text starts a typed conversation (no microphone).
const mode = new URLSearchParams(location.search).get("mode") === "text" ? "text" : "voice";
const agentConfig = { ...config, mode } as const;

const STATE_LABELS: Record<string, string> = {
  idle: "Starting…",
  connecting: "Connecting…",
  ready: "Ready",
  listening: "Listening…",
  thinking: "Thinking…",
  speaking: "Speaking…",
  stopped: "Stopped",
  error: "Something went wrong",
};

export default function App() {
  const [order, setOrder] = useState<ShownOrder | null>(null);
  const [draft, setDraft] = useState("");
  const clientTools = useMemo(() => createClientTools(setOrder), []);
  const { state, messages, transcript, error, sendText, cancel, reset } = useVoiceAgent({
    apiKey: PUBLISHABLE_KEY,
    platformUrl: PLATFORM_URL,
    config: agentConfig,
    tools,
    clientTools,
    notices: false, // this page shows `error` itself
  });
  const offline = state === "idle" || state === "connecting" || state === "stopped";

  function send(event: FormEvent) {
    event.preventDefault();
    const text = draft.trim();
    if (!text) return;
    sendText(text);
    setDraft("");
  }

  function startOver() {
    reset();
    setOrder(null);
  }

  return (
    <main className="voice-agent">
      <header>
        <h1>Order help</h1>
        <div className="status" data-state={state} aria-live="polite">
          {STATE_LABELS[state] ?? state}
        </div>
      </header>

      {error && (
        <div className="error" role="alert">
          {error.readable || error.message}
        </div>
      )}

      {order && (
        <section className="order-card" aria-label="Your order">
          <div className="order-id">Order {order.orderId}</div>
          <div className="order-status">{order.status}</div>
          {order.eta && <div className="order-eta">Arrives {order.eta}</div>}
          {order.items && <div className="order-items">{order.items}</div>}
        </section>
      )}

      <section className="messages" aria-live="polite">
        {messages.map((m) => (
          <div
            key={m.id}
            className={`message ${m.role}${m.final ? "" : " streaming"}${m.interrupted ? " interrupted" : ""}`}
          >
            {m.text}
          </div>
        ))}
        {transcript && <div className="message user partial">{transcript}</div>}
      </section>

      <form className="composer" onSubmit={send}>
        <input
          className="text-input"
          value={draft}
          onChange={(e) => setDraft(e.target.value)}
          placeholder={mode === "text" ? "Type a message" : "Speak, or type a message"}
          aria-label="Message"
          disabled={offline}
        />
        <button className="send" type="submit" disabled={offline || !draft.trim()}>
          Send
        </button>
      </form>

      <div className="controls">
        <button className="stop" onClick={cancel} disabled={state !== "speaking" && state !== "thinking"}>
          Stop
        </button>
        <button className="reset" onClick={startOver}>
          New conversation
        </button>
      </div>
    </main>
  );
}
