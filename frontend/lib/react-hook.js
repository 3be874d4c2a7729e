// The React hook, built on a given React: `bindReact(React)` returns `useVoiceAgent`.
// No side effects here: react.js (the URL entry) and the npm package both build on it.
//
// The hook reads the core's store through useSyncExternalStore, connects on mount and
// stops on unmount.
//
// An app that renders only `state` and `messages` (the seed's App) still shows why nothing
// happens: while a hint or an error holds ("click to start the audio", a refused key, a
// denied microphone), `messages` ends with entries of role "notice" saying it in words.
// `notices: false` leaves them out, for an app that renders `error` itself.

import { AgentSession, noticesOf, toolDeclarations } from "./core.js";
import { LIBRARY_URL } from "./location.js";

const PLATFORM_URL = new URL(LIBRARY_URL).origin;
const CONFIG_FIELDS = ["agent", "instructions", "greeting", "voice", "mode"];
const HOOKS_USED = ["useSyncExternalStore", "useEffect", "useRef", "useMemo"];
const hooks = new WeakMap(); // React → its useVoiceAgent
// Notices' message ids count down from -1 (conversation messages count up from 1).
export const NOTICE_ID = -1;

/**
 * Builds `useVoiceAgent` on the given React (which needs useSyncExternalStore, i.e. React 18+).
 * @param {object} React  the React module, or any object with its hooks
 * @returns {(options: object) => object}
 */
export function bindReact(React) {
  if (!HOOKS_USED.every((name) => typeof React?.[name] === "function")) {
    throw new TypeError("bindReact(React) needs React 18 or newer (useSyncExternalStore)");
  }
  if (!hooks.has(React)) hooks.set(React, createHook(React));
  return hooks.get(React);
}

/** The session's settings: `config` fields, and the same fields given at the top level. */
function sessionOptions(options) {
  const top = Object.fromEntries(CONFIG_FIELDS.map((name) => [name, options[name]]));
  const config = { ...top, ...options.config };
  return {
    apiKey: options.apiKey,
    token: options.token,
    getToken: options.getToken,
    platformUrl: options.platformUrl ?? PLATFORM_URL,
    ...Object.fromEntries(CONFIG_FIELDS.map((name) => [name, config[name]])),
    variables: config.variables ?? options.variables,
    tools: options.tools,
    clientTools: options.clientTools,
    bargeIn: options.bargeIn,
  };
}

/** The conversation, with the hints and errors that hold as last "notice" entries. */
export function withNotices(messages, notices) {
  if (!notices.length) return messages;
  const entries = notices.map(({ code, readable }, index) =>
    Object.freeze({ id: NOTICE_ID - index, role: "notice", text: readable, final: true, code }),
  );
  return Object.freeze([...messages, ...entries]);
}

/** What makes a new conversation: all but variables (sent as context) and `run` functions. */
function sessionKey(settings) {
  const { apiKey, token, platformUrl, agent, instructions, greeting, voice, mode, bargeIn } = settings;
  const tools = toolDeclarations(settings.tools, settings.clientTools);
  // getToken (a function) is left out: a new function each render must not restart the session.
  return JSON.stringify([apiKey, token, platformUrl, agent, instructions, greeting, voice, mode, bargeIn, tools]);
}

function createHook(React) {
  const { useSyncExternalStore, useEffect, useRef, useMemo } = React;

  return function useVoiceAgent(options = {}) {
    const settings = sessionOptions(options);
    const key = sessionKey(settings);
    // No side effects here: the session connects in the effect (safe under StrictMode).
    // eslint-disable-next-line react-hooks/exhaustive-deps -- `key` stands for `settings`
    const session = useMemo(() => new AgentSession(settings), [key]);
    session.clientTools = settings.clientTools; // the latest closures run

    const state = useSyncExternalStore(session.subscribe, session.getSnapshot, session.getSnapshot);
    const notices = options.notices !== false;
    const messages = useMemo(
      () => (notices ? withNotices(state.messages, noticesOf(state)) : state.messages),
      [notices, state.messages, state.error, state.audio],
    );

    useEffect(() => {
      session.start();
      return () => session.stop();
    }, [session]);

    const variables = JSON.stringify(settings.variables ?? {});
    const sentVariables = useRef(variables);
    useEffect(() => {
      if (sentVariables.current === variables) return;
      sentVariables.current = variables;
      session.updateContext(JSON.parse(variables));
    }, [session, variables]);

    const actions = useMemo(
      () => ({
        cancel: () => session.cancel(),
        reset: () => session.reset(),
        sendText: (text) => session.sendText(text),
        updateContext: (values, note) => session.updateContext(values, note),
        start: () => session.start(),
        stop: () => session.stop(),
      }),
      [session],
    );

    return {
      state: state.status,
      messages,
      transcript: state.transcript,
      error: state.error,
      microphone: state.microphone,
      audio: state.audio,
      needsClick: state.audio === "blocked",
      ...actions,
      agent: session,
    };
  };
}
