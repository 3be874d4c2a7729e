// Error codes, the ones that end a conversation, and words a person understands.

import { CLOSE_CODES as CLOSE, ERROR_CODES as CODE } from "./protocol-generated.js";

// Close codes 4000-4099 are refusals: the socket is not reopened.
export const REFUSAL_CLOSE_CODES = {
  [CLOSE.NO_CONFIGURE]: CODE.CONFIGURE_TIMEOUT,
  [CLOSE.BAD_KEY]: CODE.INVALID_KEY,
  [CLOSE.SECRET_KEY]: CODE.SECRET_KEY_REFUSED,
  [CLOSE.ORIGIN]: CODE.ORIGIN_NOT_ALLOWED,
  [CLOSE.AGENT]: CODE.AGENT_NOT_ALLOWED,
  [CLOSE.INLINE_REFUSED]: CODE.INLINE_CONFIG_REFUSED,
  [CLOSE.ENDED]: CODE.SESSION_ENDED,
  [CLOSE.IDLE]: CODE.SESSION_IDLE,
  [CLOSE.TOO_LONG]: CODE.SESSION_TOO_LONG,
  [CLOSE.DISPLACED]: CODE.SESSION_DISPLACED,
  [CLOSE.TOO_MANY]: CODE.TOO_MANY_SESSIONS,
  [CLOSE.QUOTA_EXCEEDED]: CODE.QUOTA_EXCEEDED,
};
const RESUME_FAILURES = new Set([CODE.RESUME_UNAVAILABLE, CODE.RESUME_REFUSED]);
export const FATAL_ERRORS = new Set([...Object.values(REFUSAL_CLOSE_CODES), CODE.BAD_PROTOCOL, ...RESUME_FAILURES]);

export const READABLE = {
  [CODE.INVALID_KEY]: "This page's API key was refused (invalid, revoked or expired).",
  [CODE.SECRET_KEY_REFUSED]: "A secret key (sk_…) cannot be used in a web page; use a publishable key (pk_…).",
  [CODE.ORIGIN_NOT_ALLOWED]: "This website is not allowed to use this agent (origin not allowed for the key).",
  [CODE.AGENT_NOT_ALLOWED]: "This agent does not exist or is not allowed for this page's API key.",
  [CODE.TOO_MANY_SESSIONS]: "Too many conversations are open right now. Please try again in a minute.",
  [CODE.QUOTA_EXCEEDED]: "This service has used up its quota for now, so the conversation has ended. Please try again later.",
  [CODE.INLINE_CONFIG_REFUSED]:
    "This page's API key only serves saved agents; the page's own agent settings were refused.",
  [CODE.INLINE_CODE_REFUSED]: "This page's API key does not accept server-tool code from the page.",
  [CODE.CONFIGURE_TIMEOUT]: "The voice platform did not receive the session settings in time.",
  [CODE.SESSION_ENDED]: "This conversation was ended by the site.",
  [CODE.SESSION_IDLE]: "The conversation ended because nothing was said for a while.",
  [CODE.SESSION_TOO_LONG]: "The conversation reached its time limit.",
  [CODE.SESSION_DISPLACED]: "This conversation went on in another window or tab.",
  [CODE.KEY_REVOKED]: "This page's API key was revoked, so the conversation ended.",
  [CODE.KEY_EXPIRED]: "This page's API key expired, so the conversation ended.",
  [CODE.INVALID_TOKEN]: "The session token was refused (unknown, already used or expired).",
  [CODE.TOKEN_REQUIRED]: "This page must get a session token from its server first.",
  [CODE.RATE_LIMITED]: "Too many messages at once; please wait a moment and try again.",
  [CODE.BAD_PROTOCOL]: "This page speaks a protocol the voice platform does not know.",
  [CODE.RESUME_UNAVAILABLE]: "The connection was lost.",
  [CODE.RESUME_REFUSED]: "The connection was lost.",
  connection_lost: "The connection was lost.",
  connection_failed: "Could not connect to the voice platform. Check the network connection and try again.",
  microphone_denied:
    "Microphone access was denied. Allow the microphone in the browser's address bar and try again.",
  microphone_unavailable: "No microphone could be used. You can type your messages instead.",
  microphone_insecure: "The microphone needs a secure (https) page. You can type your messages instead.",
  audio_unavailable: "This browser cannot play the agent's voice; replies are shown as text.",
  audio_blocked:
    "The browser is holding the speaker and microphone until you click: click anywhere on the page to start the audio.",
  file_page:
    "This page was opened from a file (file://), and the voice platform only talks to pages " +
    "served from a web address. Serve this folder from localhost: run `python3 -m http.server 8080` " +
    "in it and open http://localhost:8080/ (a key without allowed origins accepts localhost).",
  [CODE.VOICE_UNAVAILABLE]: "The agent's chosen voice is not available here; it speaks with another voice.",
  [CODE.STT_FAILED]: "Speech recognition is not working right now. You can type your messages instead.",
  [CODE.TTS_FAILED]: "The agent's voice is not working right now; the reply is shown as text.",
  [CODE.LLM_FAILED]: "The agent could not answer just now. Please try again.",
  [CODE.NOT_VOICE_MODE]: "This conversation is in text mode; the microphone is not used.",
};

// Refusals whose server message says more than a fixed sentence could: what was refused and
// which of the key's switches (on which dashboard page) would allow it.
const SERVER_WORDS = new Set([CODE.INLINE_CONFIG_REFUSED, CODE.INLINE_CODE_REFUSED]);

/**
 * Words a person understands for an error code (the server's message as a fallback).
 * @param {string} code
 * @param {string} [message]
 * @returns {string}
 */
export function readableError(code, message = "") {
  if (code === CODE.VOICE_UNAVAILABLE && message) return `The agent's voice is not available: ${message}.`;
  if (SERVER_WORDS.has(code) && message) return `The voice platform refused this page: ${message}`;
  if (READABLE[code]) return READABLE[code];
  return message ? `Something went wrong: ${message}` : "Something went wrong.";
}

export function errorInfo(code, message = "") {
  return { code, message, readable: readableError(code, message) };
}

/**
 * `message` with the dashboard paths the platform names ("/w/1/keys/5/", when it has no
 * PUBLIC_URL) made absolute: the page is on another site than the platform.
 * @param {string} message
 * @param {string} platformUrl
 */
export function withPlatformLinks(message, platformUrl) {
  const origin = new URL(platformUrl).origin.replace(/^ws/, "http");
  return String(message).replace(/(^|\s)(\/w\/\S+)/g, (_, space, path) => `${space}${origin}${path}`);
}

/**
 * What a page should show now, in words: the sound held until a click (it outlives a later
 * warning such as voice_unavailable), then the latest error.
 * @param {{audio: string, error: object | null}} snapshot
 * @returns {{code: string, readable: string}[]}
 */
export function noticesOf({ audio, error }) {
  const notices = [];
  if (audio === "blocked") notices.push(errorInfo("audio_blocked"));
  if (error?.readable && error.code !== "audio_blocked") notices.push(error);
  return notices.map(({ code, readable }) => ({ code, readable }));
}

/** The library says every refusal and warning in the browser's console too. */
export function logError(error, fatal) {
  const line = `voice agent: ${error.readable} [${error.code}]`;
  if (fatal) console.error(line);
  else console.warn(line);
}
