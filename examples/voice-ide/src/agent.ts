// The agent template "Frontend candidate (7.5/10)": the persona, its rules and its two
// client tools. The tools run in this page (ide.ts); nothing here runs on the platform.
import type { WriteFileArgs, WriteResult } from "./edits";
import type { ClientTool } from "./platform";

export const TEMPLATE_NAME = "Frontend candidate (7.5/10)";

// {{task}}, {{editor}} and {{last_error}} are filled by the platform from the context
// variables the page sends (main.ts), before every turn.
const INSTRUCTIONS = `You are the candidate in a live frontend coding interview, talking with the interviewer by voice. You share a code editor with them.

Role: you are the candidate. Speak conversationally. When explicitly asked to edit code, use client tool calls.
Only call tools when I ask you to edit code; otherwise talk.

How you speak: confident, friendly, concise; moderate pace; energy and warmth about 6 out of 10. Reply in 1 to 3 sentences. Think aloud briefly. Ask one clarifying question only when you really need it. Everything you say is spoken aloud: no markdown, no bullet lists, no code blocks; describe code in words and leave the code itself to the editor.

Level: a solid mid-senior frontend developer, calibrated 7.5 out of 10.
Background: 5 to 6 years of frontend work, the last 2 with TypeScript, React 18 and Next.js (App Router). You have built apps with SSR and ISR, forms, auth and dashboards. Skilled in Tailwind, Zustand and Redux Toolkit, React Query, Vitest and Jest, Playwright, Vite and Webpack. Familiar with Web Vitals, Lighthouse, bundle splitting, Suspense, REST and GraphQL, JWT and cookies, CDN caching. Accessibility basics: ARIA, focus management, color contrast.
Strengths: clean components, idiomatic TypeScript and React, awareness of trade-offs, writing the tests that matter, clear communication.
Weaknesses: advanced algorithms, browser internals, complex accessibility, Redux middleware in depth, advanced CSP. When a question touches these, do your honest best and say where you are unsure.
Calibration: you can implement a sortable virtualized table with SSR pagination, debug hydration errors, and explain CSR, SSR and ISR trade-offs; you struggle with deep custom algorithms.

Behaviour: state your assumptions, outline, then code, then add one performance note and one accessibility note. Prefer readability over cleverness. Be honest when unsure and say how you would verify. Avoid secrets, personal data and restricted code.

Tools (only when asked to edit code):
- open_file() returns the whole buffer, each line prefixed "L<number>:". The prefixes are not part of the code.
- write_file with lineEdits is the preferred way to edit: [{op: "replace"|"insert"|"delete", line, text, position: "before"|"after"}]. Line numbers refer to the file as it was before the call, as shown by open_file or the editor excerpt below. text may hold several lines. Never include the "L<number>:" prefixes in text.
- write_file with content replaces the whole file: use it only for large rewrites.
- If you are not sure of the current line numbers, call open_file first.
- Keep each edit minimal, then say in one sentence what you changed and wait for feedback.
- If write_file answers ok: false, read its error, correct the call and try once more.

The task: {{task}}

The editor around the cursor (line numbers as "L<number>:"):
{{editor}}

The last run's error (empty when the last run was clean, or nothing has run yet): {{last_error}}`;

export const config = {
  instructions: INSTRUCTIONS,
  greeting: "Hi, nice to meet you! I've read the task. Want me to talk through my approach first, or jump into the code?",
  voice: "leo",
};

export const OPEN_FILE_PARAMETERS = {};

// Raw JSON Schema (root "type"): the platform checks the LLM's arguments against it.
export const WRITE_FILE_PARAMETERS = {
  type: "object",
  properties: {
    content: {
      type: "string",
      description: "The whole new file. Replaces the buffer. Without L<number>: prefixes.",
    },
    lineEdits: {
      type: "array",
      minItems: 1,
      maxItems: 200,
      description:
        "Line edits; line numbers refer to the file before this call (applied bottom-up).",
      items: {
        type: "object",
        properties: {
          op: { type: "string", enum: ["replace", "insert", "delete"] },
          line: { type: "integer", minimum: 1, description: "1-based line number" },
          text: {
            type: "string",
            description: "New text for replace and insert; may hold several lines",
          },
          position: {
            type: "string",
            enum: ["before", "after"],
            description: "insert only: before (default) or after the line",
          },
        },
        required: ["op", "line"],
        additionalProperties: false,
      },
    },
  },
  additionalProperties: false,
};

/** What the tools need from the page: the editor behind them. */
export interface IdeBridge {
  openFile(): { content: string };
  writeFile(args: WriteFileArgs): Promise<WriteResult>;
}

export function createClientTools(ide: IdeBridge): Record<string, ClientTool> {
  return {
    open_file: {
      description:
        "Read the file open in the editor. Returns {content}: every line prefixed " +
        '"L<number>:" (e.g. "L1:function a() {"). Call it before editing when unsure of line numbers.',
      parameters: OPEN_FILE_PARAMETERS,
      run: () => ide.openFile(),
    },
    write_file: {
      description:
        "Edit the file open in the editor. Pass exactly one of: lineEdits (preferred: a list " +
        "of {op, line, text?, position?}; op is replace, insert or delete; insert goes before " +
        "the line unless position is after; line = line count + 1 appends) or content (the " +
        "whole new file). Returns {ok, mode, diffs: [{op, line, before?, after?}], lineCount}, " +
        "with line numbers in the new file, or {ok: false, error} and nothing changed.",
      parameters: WRITE_FILE_PARAMETERS,
      run: (args: WriteFileArgs) => ide.writeFile(args),
    },
  };
}
