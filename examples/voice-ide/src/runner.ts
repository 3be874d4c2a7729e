// Runs the editor's JavaScript in a throwaway Web Worker: away from the page (no DOM, no
// access to the agent or the editor), with console output captured and a hard time limit.
// Network globals are removed inside the worker; that is a courtesy, not a security
// boundary (a worker can still reach the network through import()).

export const RUN_TIME_LIMIT_MS = 2000;
const MAX_LOG_LINES = 500;
const MAX_LOG_LINE_CHARS = 2000;

export interface LogLine {
  level: "log" | "info" | "warn" | "error" | "debug";
  text: string;
}

export interface RunResult {
  logs: LogLine[];
  /** The first uncaught error, or the time-out, as one line; null when the run was clean. */
  error: string | null;
  timedOut: boolean;
  ms: number;
}

// The worker's own code. The user's code is evaluated with an indirect eval (global
// scope) under the name main.js, so errors point at its lines. The run is over once the
// code, its returned promise and every timer it started are done.
const WORKER_SOURCE = String.raw`
"use strict";
const post = self.postMessage.bind(self);
const realSetTimeout = self.setTimeout.bind(self);
const realClearTimeout = self.clearTimeout.bind(self);
const realSetInterval = self.setInterval.bind(self);
const realClearInterval = self.clearInterval.bind(self);
const timers = new Set();
let evaluated = false;

for (const name of ["fetch", "XMLHttpRequest", "WebSocket", "EventSource", "importScripts",
                    "Worker", "SharedWorker", "BroadcastChannel", "indexedDB", "caches"]) {
  try { Object.defineProperty(self, name, { value: undefined, configurable: false }); } catch {}
}

function format(value) {
  if (typeof value === "string") return value;
  if (value instanceof Error) return value.name + ": " + value.message;
  if (typeof value === "function") return "[Function " + (value.name || "anonymous") + "]";
  if (typeof value === "bigint") return value + "n";
  if (value === undefined || typeof value === "symbol") return String(value);
  if (value instanceof Map) return "Map(" + format([...value]) + ")";
  if (value instanceof Set) return "Set(" + format([...value]) + ")";
  const seen = new WeakSet();
  try {
    return JSON.stringify(value, (key, item) => {
      if (typeof item === "bigint") return item + "n";
      if (typeof item === "function") return "[Function " + (item.name || "anonymous") + "]";
      if (item === undefined) return "undefined";
      if (typeof item === "object" && item !== null) {
        if (seen.has(item)) return "[Circular]";
        seen.add(item);
      }
      return item;
    }) ?? String(value);
  } catch {
    return String(value);
  }
}

function describe(error) {
  if (!(error instanceof Error)) return "Uncaught " + format(error);
  const where = /main\.js:(\d+):(\d+)/.exec(error.stack || "");
  return error.name + ": " + error.message + (where ? " (line " + where[1] + ")" : "");
}

const report = (error) => post({ type: "error", message: describe(error) });

for (const level of ["log", "info", "warn", "error", "debug"]) {
  console[level] = (...args) => post({ type: "log", level, text: args.map(format).join(" ") });
}

function settle() {
  realSetTimeout(() => { if (evaluated && timers.size === 0) post({ type: "done" }); }, 0);
}

self.setTimeout = (callback, ms, ...args) => {
  const id = realSetTimeout(() => {
    timers.delete(id);
    try { if (typeof callback === "function") callback(...args); } catch (e) { report(e); }
    settle();
  }, ms);
  timers.add(id);
  return id;
};
self.clearTimeout = (id) => { timers.delete(id); realClearTimeout(id); settle(); };
self.setInterval = (callback, ms, ...args) => {
  const id = realSetInterval(() => {
    try { if (typeof callback === "function") callback(...args); } catch (e) { report(e); }
  }, ms);
  timers.add(id);
  return id;
};
self.clearInterval = (id) => { timers.delete(id); realClearInterval(id); settle(); };
self.addEventListener("unhandledrejection", (event) => { event.preventDefault(); report(event.reason); });

self.onmessage = async (event) => {
  self.onmessage = null;
  try {
    const completion = (0, eval)(event.data + "\n//# sourceURL=main.js");
    if (completion && typeof completion.then === "function") await completion;
  } catch (e) {
    report(e);
  }
  evaluated = true;
  settle();
};
`;

let workerUrl: string | null = null;

export function runCode(code: string, timeLimitMs: number = RUN_TIME_LIMIT_MS): Promise<RunResult> {
  workerUrl ??= URL.createObjectURL(new Blob([WORKER_SOURCE], { type: "text/javascript" }));
  const worker = new Worker(workerUrl, { name: "run" });
  const started = performance.now();
  const logs: LogLine[] = [];
  let error: string | null = null;

  return new Promise((resolve) => {
    const finish = (timedOut: boolean) => {
      clearTimeout(timer);
      worker.terminate();
      if (timedOut) {
        error ??= `Timed out: still running after ${timeLimitMs / 1000} s (an endless loop, or a timer that never stops?)`;
      }
      resolve({ logs, error, timedOut, ms: Math.round(performance.now() - started) });
    };
    const timer = setTimeout(() => finish(true), timeLimitMs);
    worker.onmessage = ({ data }) => {
      if (data.type === "log") addLog(logs, data.level, data.text);
      else if (data.type === "error") error ??= data.message;
      else if (data.type === "done") finish(false);
    };
    // A syntax error in the worker's own source, or a worker that could not start.
    worker.onerror = (event) => {
      event.preventDefault();
      error ??= event.message || "The code could not be run.";
      finish(false);
    };
    worker.postMessage(code);
  });
}

function addLog(logs: LogLine[], level: LogLine["level"], text: string) {
  if (logs.length > MAX_LOG_LINES) return;
  if (logs.length === MAX_LOG_LINES) {
    logs.push({ level: "warn", text: "… more output was left out" });
    return;
  }
  const line = text.length > MAX_LOG_LINE_CHARS ? `${text.slice(0, MAX_LOG_LINE_CHARS)}…` : text;
  logs.push({ level, text: line });
}
