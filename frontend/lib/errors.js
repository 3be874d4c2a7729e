// Error codes, the ones that end a conversation, and words a person understands.

// Close codes 4000-4099 are refusals: the socket is not reopened.
export const REFUSAL_CLOSE_CODES = {
  4000: "configure_timeout",
  4001: "invalid_key",
  4002: "secret_key_refused",
  4003: "origin_not_allowed",
  4004: "agent_not_allowed",
  4008: "inline_config_refused",
  4009: "session_ended",
  4010: "session_idle",
  4011: "session_too_long",
  4029: "too_many_sessions",
  4030: "quota_exceeded",
};
const RESUME_FAILURES = new Set(["resume_unavailable", "resume_refused"]);
export const FATAL_ERRORS = new Set([...Object.values(REFUSAL_CLOSE_CODES), "bad_protocol", ...RESUME_FAILURES]);

export const READABLE = {
  invalid_key: "This page's API key was refused (invalid, revoked or expired).",
  secret_key_refused: "A secret key (sk_…) cannot be used in a web page; use a publishable key (pk_…).",
  origin_not_allowed: "This website is not allowed to use this agent (origin not allowed for the key).",
  agent_not_allowed: "This agent does not exist or is not allowed for this page's API key.",
  too_many_sessions: "Too many conversations are open right now. Please try again in a minute.",
  quota_exceeded: "This service has used up its quota for now, so the conversation has ended. Please try again later.",
  inline_config_refused:
    "This page's API key only serves saved agents; the page's own agent settings were refused.",
  configure_timeout: "The voice platform did not receive the session settings in time.",
  session_ended: "This conversation was ended by the site.",
  session_idle: "The conversation ended because nothing was said for a while.",
  session_too_long: "The conversation reached its time limit.",
  key_revoked: "This page's API key was revoked, so the conversation ended.",
  key_expired: "This page's API key expired, so the conversation ended.",
  invalid_token: "The session token was refused (unknown, already used or expired).",
  token_required: "This page must get a session token from its server first.",
  rate_limited: "Too many messages at once; please wait a moment and try again.",
  bad_protocol: "This page speaks a protocol the voice platform does not know.",
  resume_unavailable: "The connection was lost.",
  resume_refused: "The connection was lost.",
  connection_lost: "The connection was lost.",
  connection_failed: "Could not connect to the voice platform. Check the network connection and try again.",
  microphone_denied:
    "Microphone access was denied. Allow the microphone in the browser's address bar and try again.",
  microphone_unavailable: "No microphone could be used. You can type your messages instead.",
  microphone_insecure: "The microphone needs a secure (https) page. You can type your messages instead.",
  audio_unavailable: "This browser cannot play the agent's voice; replies are shown as text.",
  audio_blocked:
    "The browser is holding the speaker and microphone until you click: click Start (or anywhere on the page).",
  file_page:
    "This page was opened from a file (file://), and the voice platform only talks to pages " +
    "served from a web address. Serve this folder from localhost: run `python3 -m http.server 8080` " +
    "in it and open http://localhost:8080/ (a key without allowed origins accepts localhost).",
  voice_unavailable: "The agent's chosen voice is not available here; it speaks with another voice.",
  stt_failed: "Speech recognition is not working right now. You can type your messages instead.",
  tts_failed: "The agent's voice is not working right now; the reply is shown as text.",
  llm_failed: "The agent could not answer just now. Please try again.",
  not_voice_mode: "This conversation is in text mode; the microphone is not used.",
};

/**
 * Words a person understands for an error code (the server's message as a fallback).
 * @param {string} code
 * @param {string} [message]
 * @returns {string}
 */
export function readableError(code, message = "") {
  if (code === "voice_unavailable" && message) return `The agent's voice is not available: ${message}.`;
  if (READABLE[code]) return READABLE[code];
  return message ? `Something went wrong: ${message}` : "Something went wrong.";
}

export function errorInfo(code, message = "") {
  return { code, message, readable: readableError(code, message) };
}
