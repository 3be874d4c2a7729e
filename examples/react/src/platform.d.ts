// Types of the module the platform serves at ${PLATFORM}/react.js, copied from the
// library's own react.d.ts and client.d.ts (frontend/lib/). The module is imported at run
// time from the platform, never bundled, so these declarations stand in for it.

/** The conversation's state. "idle" only before it starts. */
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

/** A tool run in the page; its result (or thrown error's message) goes back as `tool_result`. */
export interface ClientTool {
  description?: string;
  parameters?: ToolParameters;
  run(args: any, call: { callId: string; name: string }): unknown | Promise<unknown>;
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

export interface BargeInOptions {
  /** Microphone RMS (0…1) that counts as speech. Default 0.03. */
  threshold?: number;
  /** Speech over the agent for this long cancels its reply. Default 250. */
  minMs?: number;
}

export interface Message {
  /** Stable within a conversation (a key for lists). */
  id: number;
  role: "user" | "assistant";
  text: string;
  /** false while the assistant's reply streams. */
  final: boolean;
  /** The user cut this reply short (barge-in, cancel, a new turn). */
  interrupted?: boolean;
}

export interface AgentError {
  /** The server's code (`invalid_key`, `stt_failed`, …) or the library's own. */
  code: string;
  /** The technical message (may be ""). */
  message: string;
  /** Words a person understands. */
  readable: string;
}

export interface VoiceAgentConfig {
  agent?: string;
  instructions?: string;
  greeting?: string;
  voice?: string;
  /** Default "voice". */
  mode?: "voice" | "text";
  /** Changes are sent as context updates; they do not start a new conversation. */
  variables?: Record<string, string>;
}

export interface UseVoiceAgentOptions {
  /** A publishable key, "pk_…". */
  apiKey: string;
  /** A change of config (other than variables), tools, apiKey or platformUrl starts a new conversation. */
  config?: VoiceAgentConfig;
  tools?: Record<string, ServerTool>;
  /** The latest `run` functions are used; changing them does not reconnect. */
  clientTools?: Record<string, ClientTool>;
  /** Default: the origin react.js was loaded from. */
  platformUrl?: string;
  bargeIn?: boolean | BargeInOptions;
}

export interface UseVoiceAgentResult {
  state: Status;
  messages: readonly Message[];
  /** The user's partial speech, "" when none. */
  transcript: string;
  error: (AgentError & { fatal: boolean }) | null;
  microphone: "off" | "pending" | "on" | "denied" | "unavailable";
  cancel(): void;
  reset(): void;
  sendText(text: string): void;
  updateContext(variables?: Record<string, string>, note?: string): void;
  /** Connects again after `stop()` (a new conversation); mounting already starts one. */
  start(): void;
  stop(): void;
}

export type UseVoiceAgent = (options: UseVoiceAgentOptions) => UseVoiceAgentResult;

/** The module at ${PLATFORM}/react.js. */
export interface ReactLibrary {
  /** Builds the hook on your React (18+, for useSyncExternalStore). */
  bindReact(React: unknown): UseVoiceAgent;
  /** Works once `bindReact` was called, or when `globalThis.React` exists; throws otherwise. */
  useVoiceAgent: UseVoiceAgent;
}
