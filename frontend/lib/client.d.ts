// Types for https://PLATFORM/client.js (the voice agent browser library).
// The protocol's names (event types, error and close codes, tool statuses) are generated
// from the server's (protocol-generated.d.ts, `manage.py protocol_js`).

import type {
  ErrorCode,
  ServerEventType,
  ToolStatus as WireToolStatus,
} from "./protocol-generated.js";

export type { CloseCode, ErrorCode, ServerEventType } from "./protocol-generated.js";

/** The conversation's state. "idle" only before `start()`. */
export type Status =
  | "idle"
  | "connecting"
  | "ready"
  | "listening"
  | "thinking"
  | "speaking"
  | "stopped"
  | "error";

/** Tool parameters: simplified (`{city: "string", limit: "number?"}`) or raw JSON Schema. */
export type ToolParameters = Record<string, unknown>;

/** A tool run on the platform: `handler` is serialised with `toString()` and runs in its sandbox. */
export interface ServerTool {
  description?: string;
  parameters?: ToolParameters;
  /** `async (args, ctx) => result`; it must not close over page variables. A string is sent as is. */
  handler: ((args: any, ctx: any) => unknown) | string;
  /** 100…60000 ms */
  timeoutMs?: number;
}

/** `ctx` of a server tool's handler, in the platform's sandbox (README, "Server tools"). */
export interface ToolContext {
  secrets: Record<string, string>;
  fetch(
    url: string,
    init?: { method?: string; headers?: Record<string, string>; body?: string },
  ): Promise<{
    ok: boolean;
    status: number;
    url: string;
    headers: { get(name: string): string | null };
    text(): Promise<string>;
    json(): Promise<any>;
  }>;
}

/** A tool run in the page; its result (or thrown error's message) goes back as `tool_result`. */
export interface ClientTool {
  description?: string;
  parameters?: ToolParameters;
  run(args: any, call: { callId: string; name: string }): unknown | Promise<unknown>;
  timeoutMs?: number;
}

export interface BargeInOptions {
  /** Microphone RMS (0…1) that counts as speech. Default 0.03. */
  threshold?: number;
  /** Speech over the agent for this long cancels its reply. Default 250. */
  minMs?: number;
}

/** The options of `new AgentSession()` (and of `VoiceAgent.start` without the UI ones). */
export interface SessionOptions {
  /** A publishable key, "pk_…". Give this, `token` or `getToken`. */
  apiKey?: string;
  /** A session token ("st_…") your server minted (POST /api/v1/session-tokens); single use. */
  token?: string;
  /** Asks your server for a fresh session token; called for every connection, a reconnect that resumes too. */
  getToken?: () => Promise<string>;
  /** A saved agent's slug. */
  agent?: string;
  instructions?: string;
  greeting?: string;
  voice?: string;
  /** {{name}} values for the instructions and greeting. With a session token, only the names in the token's `page_variables` (the token's own variables are fixed). */
  variables?: Record<string, string>;
  /** Default "voice". */
  mode?: "voice" | "text";
  tools?: Record<string, ServerTool>;
  clientTools?: Record<string, ClientTool>;
  /** Default: the origin the library was loaded from. `https://` or `wss://` (kept secure),
   *  `http://` or `ws://` (not from an https page); anything else throws a TypeError. */
  platformUrl?: string;
  /** Client-side barge-in while the agent speaks; default on. */
  bargeIn?: boolean | BargeInOptions;
  /** Microphone audio per message, in ms: a whole number from 20 to 100; default 40.
   *  Fewer, larger messages cost the platform less; anything else throws a TypeError. */
  frameMs?: number;
}

export interface VoiceAgentOptions extends SessionOptions {
  /** Where the default UI is rendered; required unless `ui: false`. */
  element?: HTMLElement | string; // an element, or a CSS selector for one
  /** Default true; false: no UI, use `on()` / `getSnapshot()`; it connects at once. */
  ui?: boolean;
  /** Voice mode with the default UI waits for its Start button (the click that lets the
   *  browser play sound and open the microphone); true connects at once. Default false. */
  autoStart?: boolean;
}

export interface Message {
  /** Stable within a conversation (a key for lists); -1 for the React hook's notice. */
  id: number;
  /** "notice": only in the React hook's `messages` (see `UseVoiceAgentOptions.notices`):
   *  the error or hint that holds, in words, as the last entry. */
  role: "user" | "assistant" | "notice";
  text: string;
  /** false while the assistant's reply streams. */
  final: boolean;
  /** The user cut this reply short (barge-in, cancel, a new turn). */
  interrupted?: boolean;
  /** The tools this reply used, like `["Using get_weather"]` (assistant messages). */
  steps?: readonly string[];
  /** A notice's error code (`audio_blocked`, `inline_config_refused`, …). */
  code?: string;
}

export interface AgentError {
  /** The server's code (`invalid_key`, `stt_failed`, …) or the library's own:
   *  `microphone_denied`, `microphone_unavailable`, `microphone_insecure`, `audio_unavailable`,
   *  `audio_blocked` (the browser waits for a click), `file_page` (opened from file://),
   *  `connection_lost`, `connection_failed`, `react_not_found` (react.js found no React).
   *  Every error is also written to the browser's console (console.error when it ends the
   *  conversation, console.warn otherwise). */
  code: ErrorCode | LibraryErrorCode;
  /** The technical message (may be ""). */
  message: string;
  /** Words a person understands; shown by the default UI. */
  readable: string;
}

/** The library's own error codes, beside the server's (`ErrorCode`). */
export type LibraryErrorCode =
  | "microphone_denied"
  | "microphone_unavailable"
  | "microphone_insecure"
  | "audio_unavailable"
  | "audio_blocked"
  | "file_page"
  | "connection_lost"
  | "connection_failed"
  | "react_not_found"
  | "refused"
  | "error";

/** A tool call's status as the server sends it, or "called" (this page was asked to run it). */
export type ToolStatus = WireToolStatus | "called";

export interface ToolEvent {
  callId: string;
  name: string;
  /** "called": the platform asked this page to run a client tool (`arguments` set). */
  status: ToolStatus;
  arguments?: Record<string, unknown>;
}

/** A server event as it arrived (README, "The realtime protocol (v1)"). */
export interface ServerEvent {
  type: ServerEventType;
  seq: number;
  ts: number;
  [field: string]: unknown;
}

export interface MetricsEvent extends ServerEvent {
  type: "metrics";
  turnId: number;
  source: "speech" | "text";
  outcome: string;
  endOfUtteranceMs: number | null;
  sttFinalMs: number | null;
  llmFirstTokenMs: number | null;
  ttsFirstByteMs: number | null;
  firstAudioMs: number | null;
  turnMs: number | null;
  llmRounds: number;
  tools: { name: string; status: string; ms: number }[];
  /** The stages that happened, in ms from the user's last word (or the typed text), by start. */
  timeline: { stage: string; startMs: number; endMs: number }[];
  /** What the session consumed since the previous turn ended (audio in ms). */
  usage: {
    llmRequests: number;
    promptTokens: number;
    completionTokens: number;
    /** Requests whose provider reported no usage: their tokens are estimated. */
    estimatedLlmRequests: number;
    sttAudioMs: number;
    ttsCharacters: number;
    ttsAudioMs: number;
    serverToolCalls: number;
    toolCpuMs: number;
    clientToolCalls: number;
  };
}

export interface AgentEvents {
  status: Status;
  /** Partial speech (`final: false`); `final: true` when the turn is taken (typed turns too). */
  transcript: { text: string; final: boolean };
  /** A new message, or a new version of one (same `id`) while it streams. */
  message: Message;
  tool: ToolEvent;
  metrics: MetricsEvent;
  error: AgentError;
  /** Every server JSON event (after de-duplication). */
  event: ServerEvent;
  /** A frame reached the playback worklet. */
  audio: { samples: number };
  /** The microphone's level (RMS, 0…1) for each frame sent (`frameMs`). */
  level: { rms: number };
  /** The conversation was cleared (`reset()`, or `start()` after `stop()`). */
  reset: Record<string, never>;
}

/** What `getSnapshot()` returns; a new object whenever something changed. */
export interface Snapshot {
  status: Status;
  messages: readonly Message[];
  /** The user's partial speech, "" when none. */
  transcript: string;
  /** The latest error (`fatal`: the conversation ended with it), null when none. */
  error: (AgentError & { fatal: boolean }) | null;
  microphone: "off" | "pending" | "on" | "denied" | "unavailable";
  /** "blocked": the browser plays nothing and records nothing until the user clicks. */
  audio: "off" | "blocked" | "on";
}

/** One conversation: the connection, audio, client tools and the state (core.js). */
export class AgentSession {
  constructor(options: SessionOptions);
  readonly status: Status;
  readonly messages: readonly Message[];
  readonly mode: "voice" | "text";
  /** Replace the client tools' implementations while running (the declared names stay). */
  clientTools: Record<string, ClientTool> | undefined;

  /** Connects in the background (again after `stop()`: a new conversation). */
  start(): this;
  /** Closes the socket (1000), stops the microphone, closes the AudioContext. */
  stop(): void;
  /** Stops the current reply at once: playback is flushed and `cancel {playedMs}` sent. */
  cancel(): void;
  /** Clears the conversation here and on the server. */
  reset(): void;
  /** A typed turn (in any mode). */
  sendText(text: string): void;
  /** Updates variables (and adds an optional note to the conversation) without a reply. */
  updateContext(variables?: Record<string, string>, note?: string): void;

  /** Returns the unsubscribe function. */
  on<K extends keyof AgentEvents>(name: K, listener: (payload: AgentEvents[K]) => void): () => void;

  /** For React's useSyncExternalStore. */
  subscribe(listener: () => void): () => void;
  getSnapshot(): Snapshot;
}

export class VoiceAgent extends AgentSession {
  /** Starts a conversation; returns at once, connecting happens in the background. */
  static start(options: VoiceAgentOptions): VoiceAgent;
}

/** Renders the default UI for `agent` into `container`; returns a function that removes it. */
export function mountDefaultUI(container: HTMLElement, agent: AgentSession): () => void;

/** The human-readable text for an error code. */
export function readableError(code: string, message?: string): string;
