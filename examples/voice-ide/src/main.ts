import { config, createClientTools, TEMPLATE_NAME } from "./agent";
import { clip, editorWindow, type LineDiff, type WriteResult } from "./edits";
import { PLATFORM_URL, PUBLISHABLE_KEY } from "./env";
import { Ide } from "./ide";
import { monaco } from "./monaco";
import type { ClientLibrary, VoiceAgentHandle } from "./platform";
import { runCode, type RunResult } from "./runner";
import { FILE_NAME, STARTER_CODE, TASK } from "./task";
import "./styles.css";

const CONTEXT_DEBOUNCE_MS = 600;
const LAST_ERROR_CHARS = 512;

const $ = <T extends HTMLElement>(selector: string) => document.querySelector<T>(selector)!;

// ?mode=text starts a typed conversation (no microphone).
const mode = new URLSearchParams(location.search).get("mode") === "text" ? "text" : "voice";

$("#task").textContent = TASK;
$("#file-name").textContent = FILE_NAME;
$("#template-name").textContent = TEMPLATE_NAME;

const ide = new Ide($("#editor"), STARTER_CODE);
let lastError = "";
let agent: VoiceAgentHandle | null = null;

// --- running the buffer ---------------------------------------------------------------------

const runButton = $<HTMLButtonElement>("#run");
const output = $("#output");

async function run(): Promise<RunResult> {
  runButton.disabled = true;
  output.replaceChildren(line("info", "Running…"));
  const result = await runCode(ide.getValue());
  output.replaceChildren(...result.logs.map((log) => line(log.level, log.text)));
  if (result.error) output.append(line("error", result.error));
  output.append(line("info", `${result.error ? "Failed" : "Done"} in ${result.ms} ms`));
  lastError = result.error ? clip(result.error, LAST_ERROR_CHARS) : "";
  scheduleContext();
  runButton.disabled = false;
  return result;
}

function line(level: string, text: string): HTMLElement {
  const element = document.createElement("div");
  element.className = `out-${level}`;
  element.textContent = text;
  return element;
}

runButton.addEventListener("click", () => void run());
ide.editor.addCommand(monaco.KeyMod.CtrlCmd | monaco.KeyCode.Enter, () => void run());

// --- context for the agent ------------------------------------------------------------------

let contextTimer: ReturnType<typeof setTimeout> | undefined;
let sentContext = "";

function contextVariables(): Record<string, string> {
  return {
    task: TASK,
    editor: editorWindow(ide.getValue(), ide.cursorLine()),
    last_error: lastError,
  };
}

function scheduleContext(): void {
  clearTimeout(contextTimer);
  contextTimer = setTimeout(() => {
    const variables = contextVariables();
    const serialized = JSON.stringify(variables);
    if (!agent || serialized === sentContext) return;
    sentContext = serialized;
    agent.updateContext(variables);
  }, CONTEXT_DEBOUNCE_MS);
}

ide.editor.onDidChangeModelContent(scheduleContext);
ide.editor.onDidChangeCursorPosition(scheduleContext);

// --- the agent ------------------------------------------------------------------------------

const toolLog = $("#tool-log");

function logTool(name: string, args: unknown, result: unknown): void {
  const entry = document.createElement("li");
  entry.textContent = `${name}(${JSON.stringify(args)}) → ${JSON.stringify(result)}`;
  toolLog.prepend(entry);
  console.info("[tool]", name, args, result);
}

const clientTools = createClientTools({
  openFile: () => {
    const result = ide.openFile();
    logTool("open_file", {}, { content: `${result.content.split("\n").length} lines` });
    return result;
  },
  writeFile: async (args) => {
    const result = await ide.writeFile(args);
    logTool("write_file", args, result);
    return result;
  },
});

async function startAgent(): Promise<void> {
  const panel = $("#agent");
  let lib: ClientLibrary;
  try {
    lib = await import(/* @vite-ignore */ `${PLATFORM_URL}/client.js`);
  } catch (err) {
    panel.textContent = `Could not load the voice library from ${PLATFORM_URL}: ${
      err instanceof Error ? err.message : String(err)
    }`;
    panel.classList.add("load-error");
    return;
  }
  const variables = contextVariables();
  sentContext = JSON.stringify(variables);
  agent = lib.VoiceAgent.start({
    element: panel,
    apiKey: PUBLISHABLE_KEY,
    platformUrl: PLATFORM_URL,
    mode,
    ...config,
    variables,
    clientTools,
  });
}

void startAgent();

// --- hooks for browser tests ----------------------------------------------------------------

declare global {
  interface Window {
    __ide: {
      getValue(): string;
      readonly lastDiffs: LineDiff[];
      readonly lastResult: WriteResult | null;
      setValue(text: string): void;
      highlightedLines(): number[];
      run(): Promise<RunResult>;
      readonly agent: VoiceAgentHandle | null;
    };
  }
}

window.__ide = {
  getValue: () => ide.getValue(),
  get lastDiffs() {
    return ide.lastDiffs;
  },
  get lastResult() {
    return ide.lastResult;
  },
  setValue: (text) => ide.setValue(text),
  highlightedLines: () => ide.highlightedLines(),
  run,
  get agent() {
    return agent;
  },
};
