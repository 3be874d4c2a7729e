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
//      so a production build needs nothing at all; a dev server loads React first, hence 2.

import { bindReact as hookOn } from "./react-hook.js";

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
  const React = boundReact ?? globalThis.React ?? reactFromRenderers();
  if (!React) {
    throw new Error(
      "useVoiceAgent could not find your app's React: React DOM started before react.js " +
        "(as on a dev server). Add this line to src/main.tsx: " +
        '`import * as React from "react"; Object.assign(globalThis, { React });` ' +
        "or call `const useVoiceAgent = bindReact(React)` once and use the hook it returns.",
    );
  }
  return hookOn(React)(options);
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
