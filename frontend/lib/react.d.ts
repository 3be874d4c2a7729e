// Types for https://PLATFORM/react.js (and `voice-agent/react` of the npm package).
//
//   import { useVoiceAgent } from "https://PLATFORM/react.js";
//
// TypeScript cannot read a URL: with the npm package installed
// (npm install https://PLATFORM/sdk/voice-agent.tgz), one line in src/vite-env.d.ts
// gives the URL import these types:
//   declare module "*/react.js" { export * from "voice-agent/react"; }

import type {
  AgentError,
  AgentSession,
  BargeInOptions,
  ClientTool,
  Message,
  ServerTool,
  Status,
} from "./client.js";

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
  /** A publishable key, "pk_…". Give this, `token` or `getToken`. */
  apiKey?: string;
  /** A session token ("st_…") your server minted (POST /api/v1/session-tokens); single use. */
  token?: string;
  /** Asks your server for a fresh session token; called for every connection, a reconnect that resumes too. */
  getToken?: () => Promise<string>;
  /** A change of config (other than variables), tools, apiKey or platformUrl starts a new conversation. */
  config?: VoiceAgentConfig;
  tools?: Record<string, ServerTool>;
  /** The latest `run` functions are used; changing them does not reconnect. */
  clientTools?: Record<string, ClientTool>;
  /** Default: the origin react.js was loaded from. */
  platformUrl?: string;
  bargeIn?: boolean | BargeInOptions;
  /** Default true: while an error or a hint holds (a refused key, "click anywhere on the
   *  page to start the audio", a denied microphone), `messages` ends with one entry of role
   *  "notice" saying it in words, so an app that renders only `messages` shows it. false:
   *  left out, for an app that renders `error` itself. */
  notices?: boolean;
}

export interface UseVoiceAgentResult {
  state: Status;
  messages: readonly Message[];
  /** The user's partial speech, "" when none. */
  transcript: string;
  error: (AgentError & { fatal: boolean }) | null;
  microphone: "off" | "pending" | "on" | "denied" | "unavailable";
  /** "blocked": the browser waits for a click before it plays sound or records. */
  audio: "off" | "blocked" | "on";
  /** The browser holds sound and microphone until the user clicks anywhere on the page
   *  (`audio === "blocked"`); a click starts them, nothing else is needed. */
  needsClick: boolean;
  cancel(): void;
  reset(): void;
  sendText(text: string): void;
  updateContext(variables?: Record<string, string>, note?: string): void;
  /** Connects again after `stop()` (a new conversation); mounting already starts one. */
  start(): void;
  stop(): void;
  /** The underlying session, e.g. for `agent.on("metrics", …)`; null only when the hook
   *  found no React (state "error", error code `react_not_found`). */
  agent: AgentSession | null;
}

export type UseVoiceAgent = (options: UseVoiceAgentOptions) => UseVoiceAgentResult;

/** Builds the hook on your React (18+, for useSyncExternalStore). */
export function bindReact(React: unknown): UseVoiceAgent;

/** The hook on your app's React: from the npm package, the React it imports; from the
 *  platform's URL, the React found by itself (see react.js). */
export const useVoiceAgent: UseVoiceAgent;
