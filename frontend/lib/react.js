// React binding, loaded from the platform's URL:
//
//   import { useVoiceAgent } from "https://PLATFORM/react.js";
//
// A module served from a URL cannot `import "react"` (the browser does not know where the
// app's React is, and a second React would break hooks), so the hook finds the app's:
//   1. the React given to `bindReact(React)`, if the page called it;
//   2. `globalThis.React`, which a dev server setup can provide with one line in main.tsx:
//      `import * as React from "react"; Object.assign(globalThis, { React });`
//   3. the React DOM that started after this module: React DOM announces itself to the React
//      DevTools hook (`__REACT_DEVTOOLS_GLOBAL_HOOK__`) when it loads, and that announcement
//      carries the dispatcher that every hook call goes through (React's own `useMemo` is
//      `dispatcher.useMemo(...)`). A Vite build evaluates this URL import before the bundle,
//      so a production build needs nothing at all;
//   4. on Vite's dev server (`npm run dev`), which starts React DOM before this module: the
//      very module the app imported React from (`/node_modules/.vite/deps/react.js?v=…`,
//      found among the page's loaded resources), imported again by its exact URL, which
//      gives the same module, so the same React.
// With none of these (another dev server), the hook does not throw (a blank page that says
// nothing): it returns state "error" and a "notice" message with the line that fixes it.

import { bindReact as hookOn, NOTICE_ID } from "./react-hook.js";

const DEVTOOLS_HOOK = "__REACT_DEVTOOLS_GLOBAL_HOOK__";
const renderers = []; // React renderers seen (their devtools "internals")
let fromRenderer = null; // a React-like object made from the first renderer's dispatcher

function watchForReactDom() {
  let hook = globalThis[DEVTOOLS_HOOK];
  if (!hook) {
    // What the DevTools extension would install: React DOM only announces itself to one.
    let nextId = 0;
    hook = {
      renderers: new Map(),
      supportsFiber: true,
      inject(renderer) {
        hook.renderers.set(++nextId, renderer);
        return nextId;
      },
      onScheduleFiberRoot() {},
      onCommitFiberRoot() {},
      onCommitFiberUnmount() {},
      checkDCE() {},
    };
    try {
      globalThis[DEVTOOLS_HOOK] = hook;
    } catch {
      return;
    }
  }
  if (hook.renderers instanceof Map) renderers.push(...hook.renderers.values()); // loaded before us
  const inject = hook.inject;
  if (typeof inject !== "function") return;
  hook.inject = function (renderer) {
    renderers.push(renderer);
    return inject.apply(this, arguments);
  };
}

watchForReactDom();

/** The URL Vite's dev server served the app's React from, if this page is on one. */
function viteDevReactUrl() {
  const entries = globalThis.performance?.getEntriesByType?.("resource") ?? [];
  const origin = globalThis.location?.origin;
  for (const { name } of entries) {
    let url;
    try {
      url = new URL(name);
    } catch {
      continue;
    }
    if (url.origin === origin && /\/\.vite\/deps\/react\.js$/.test(url.pathname)) return url.href;
  }
  return null;
}

let devServerReact = null;
if (!globalThis.React && !renderers.some((renderer) => renderer?.currentDispatcherRef)) {
  const url = viteDevReactUrl();
  if (url) {
    try {
      const module = await import(/* @vite-ignore */ url);
      const react = module.default ?? module;
      if (typeof react?.useSyncExternalStore === "function") devServerReact = react;
    } catch (error) {
      console.warn("voice agent: could not reach the dev server's React", error);
    }
  }
}

/** React's hooks as the renderer's dispatcher serves them (React 18: `.current`, 19: `.H`). */
function reactFromRenderers() {
  if (fromRenderer) return fromRenderer;
  const ref = renderers.find((renderer) => renderer?.currentDispatcherRef)?.currentDispatcherRef;
  if (!ref) return null;
  const dispatcher = () => {
    const current = ref.H ?? ref.current;
    if (!current) throw new Error("useVoiceAgent is a hook: call it inside a React component");
    return current;
  };
  const hook = (name) => (...args) => dispatcher()[name](...args);
  fromRenderer = {
    useSyncExternalStore: hook("useSyncExternalStore"),
    useEffect: hook("useEffect"),
    useRef: hook("useRef"),
    useMemo: hook("useMemo"),
  };
  return fromRenderer;
}

/**
 * The hook, on the app's React (see above for how it is found).
 * @param {object} options see react.d.ts
 */
export function useVoiceAgent(options) {
  const React = boundReact ?? globalThis.React ?? reactFromRenderers() ?? devServerReact;
  if (!React) return withoutReact();
  return hookOn(React)(options);
}

const NO_REACT =
  "useVoiceAgent could not find your app's React: React DOM started before react.js " +
  "(as on a dev server). Add this line to src/main.tsx: " +
  '`import * as React from "react"; Object.assign(globalThis, { React });` ' +
  "or call `const useVoiceAgent = bindReact(React)` once and use the hook it returns.";
let noReactSaid = false;

/** What the hook gives when it cannot run: no hooks called, the reason on the page. */
function withoutReact() {
  if (!noReactSaid) console.error(`voice agent: ${NO_REACT}`);
  noReactSaid = true;
  const error = { code: "react_not_found", message: NO_REACT, readable: NO_REACT, fatal: true };
  const notice = { id: NOTICE_ID, role: "notice", text: NO_REACT, final: true, code: error.code };
  const nothing = () => {};
  return {
    state: "error",
    messages: [notice],
    transcript: "",
    error,
    microphone: "off",
    audio: "off",
    needsClick: false,
    cancel: nothing,
    reset: nothing,
    sendText: nothing,
    updateContext: nothing,
    start: nothing,
    stop: nothing,
    agent: null,
  };
}

let boundReact = null;

/**
 * Builds `useVoiceAgent` on the given React (18+); the plain `useVoiceAgent` uses it from
 * then on too.
 * @param {object} React
 */
export function bindReact(React) {
  const hook = hookOn(React);
  boundReact = React;
  return hook;
}
