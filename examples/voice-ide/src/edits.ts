// The logic of the two client tools, open_file and write_file, on plain strings.
// No Monaco here: ide.ts feeds the editor's text in and puts the result back, and
// edits.test.ts checks it under Node.
//
// Line numbers are 1-based everywhere. A buffer is "\n"-separated lines; a trailing
// newline makes a last, empty line, exactly as Monaco counts them.

export type EditOp = "replace" | "insert" | "delete";

export interface LineEdit {
  op: EditOp;
  /** A line of the buffer as it was before this write_file call. */
  line: number;
  /** Replacement or inserted text; may hold several lines ("\n"). */
  text?: string;
  /** Inserts only: "before" (default) or "after" `line`. */
  position?: "before" | "after";
}

export interface WriteFileArgs {
  content?: string;
  lineEdits?: LineEdit[];
}

/**
 * One changed line. `line` counts in the buffer after the write: the new line's number
 * for "insert" and "replace"; for "delete", the number the removed line had in the new
 * numbering (the line that followed it now has that number).
 */
export interface LineDiff {
  op: EditOp;
  line: number;
  before?: string;
  after?: string;
}

export type WriteResult =
  | {
      ok: true;
      mode: "replace" | "lineEdits";
      diffs: LineDiff[];
      /** Lines in the buffer after the write. */
      lineCount: number;
      /** Changed lines left out of `diffs` to keep the result short. */
      more?: number;
    }
  | { ok: false; error: string };

export interface WriteOutcome {
  result: WriteResult;
  /** The new buffer (the old one, unchanged, when the result is not ok). */
  text: string;
  /** Every diff, not cut short: the editor highlights from these. */
  allDiffs: LineDiff[];
}

export const MAX_DIFFS = 30;
export const MAX_DIFF_TEXT = 120;
export const EDITOR_WINDOW_BYTES = 2048;

export function splitLines(text: string): string[] {
  return text.replace(/\r\n?/g, "\n").split("\n");
}

/** open_file's view: every line prefixed `L<n>:` with nothing added after the colon. */
export function numberLines(text: string): string {
  return splitLines(text)
    .map((line, index) => `L${index + 1}:${line}`)
    .join("\n");
}

export function writeFile(text: string, args: WriteFileArgs | null | undefined): WriteOutcome {
  const rejected = (error: string): WriteOutcome => ({
    result: { ok: false, error: `${error} Nothing was changed.` },
    text,
    allDiffs: [],
  });
  const hasContent = args?.content !== undefined && args?.content !== null;
  const hasEdits = args?.lineEdits !== undefined && args?.lineEdits !== null;
  if (hasContent && hasEdits) return rejected("Pass either content or lineEdits, not both.");
  if (!hasContent && !hasEdits) {
    return rejected("Pass content (the whole new file) or lineEdits (a list of line edits).");
  }
  const oldLines = splitLines(text);
  let newLines: string[];
  let allDiffs: LineDiff[];
  if (hasContent) {
    if (typeof args!.content !== "string") return rejected("content must be a string.");
    newLines = stripLinePrefixes(splitLines(args!.content));
    allDiffs = diffLines(oldLines, newLines);
  } else {
    const problem = validateEdits(args!.lineEdits, oldLines.length);
    if (problem) return rejected(problem);
    ({ lines: newLines, diffs: allDiffs } = applyEdits(oldLines, args!.lineEdits as LineEdit[]));
  }
  const shown = allDiffs.slice(0, MAX_DIFFS).map(shortened);
  const result: WriteResult = {
    ok: true,
    mode: hasContent ? "replace" : "lineEdits",
    diffs: shown,
    lineCount: newLines.length,
  };
  if (allDiffs.length > shown.length) result.more = allDiffs.length - shown.length;
  return { result, text: newLines.join("\n"), allDiffs };
}

/** Lines an insert or replace left in the new buffer: what the editor highlights. */
export function changedLines(diffs: LineDiff[]): number[] {
  const lines = diffs.filter((d) => d.op !== "delete").map((d) => d.line);
  return [...new Set(lines)].sort((a, b) => a - b);
}

// --- line edits -----------------------------------------------------------------------------

const OPS: readonly string[] = ["replace", "insert", "delete"];

/** Every problem is found before anything is applied; the message is meant for the LLM. */
export function validateEdits(edits: unknown, lineCount: number): string | null {
  if (!Array.isArray(edits) || edits.length === 0) {
    return "lineEdits must be a non-empty array of {op, line, text?, position?}.";
  }
  const changedBy = new Map<number, number>();
  for (const [index, edit] of edits.entries()) {
    const at = `lineEdits[${index}]`;
    if (typeof edit !== "object" || edit === null) return `${at} must be an object.`;
    const { op, line, text, position } = edit as Record<string, unknown>;
    if (typeof op !== "string" || !OPS.includes(op)) {
      return `${at}: unknown op ${JSON.stringify(op)}; use "replace", "insert" or "delete".`;
    }
    if (typeof line !== "number" || !Number.isInteger(line)) {
      return `${at}: line must be a whole number (lines start at 1).`;
    }
    const last = op === "insert" ? lineCount + 1 : lineCount;
    if (line < 1 || line > last) {
      return (
        `${at}: line ${line} is out of range; the file has ${lineCount} ` +
        `line${lineCount === 1 ? "" : "s"}` +
        (op === "insert" ? ` (insert accepts 1-${last}; ${last} appends).` : ` (1-${last}).`)
      );
    }
    if (op !== "delete" && typeof text !== "string") {
      return `${at}: ${op} needs "text" (a string; use "" for an empty line).`;
    }
    if (position !== undefined && position !== "before" && position !== "after") {
      return `${at}: position must be "before" or "after".`;
    }
    if (op !== "insert") {
      const earlier = changedBy.get(line);
      if (earlier !== undefined) {
        return (
          `lineEdits[${earlier}] and ${at} both change line ${line}; ` +
          `use one replace with several lines of text instead.`
        );
      }
      changedBy.set(line, index);
    }
  }
  return null;
}

/**
 * Applies validated edits. All line numbers refer to the buffer before the call (the
 * effect of applying them from the bottom up); inserts at the same place keep their order.
 */
export function applyEdits(
  oldLines: string[],
  edits: LineEdit[],
): { lines: string[]; diffs: LineDiff[] } {
  const count = oldLines.length;
  const before = new Map<number, string[]>();
  const after = new Map<number, string[]>();
  const changed = new Map<number, LineEdit>();
  const push = (map: Map<number, string[]>, line: number, text: string) =>
    map.set(line, [...(map.get(line) ?? []), ...editLines(text)]);
  for (const edit of edits) {
    if (edit.op !== "insert") changed.set(edit.line, edit);
    else if (edit.line > count) push(after, count, edit.text ?? "");
    else push(edit.position === "after" ? after : before, edit.line, edit.text ?? "");
  }

  const lines: string[] = [];
  const diffs: LineDiff[] = [];
  const insert = (texts: string[] = []) => {
    for (const text of texts) {
      lines.push(text);
      diffs.push({ op: "insert", line: lines.length, after: text });
    }
  };
  for (let number = 1; number <= count; number++) {
    const old = oldLines[number - 1];
    insert(before.get(number));
    const edit = changed.get(number);
    if (!edit) {
      lines.push(old);
    } else if (edit.op === "delete") {
      diffs.push({ op: "delete", line: lines.length + 1, before: old });
    } else {
      const [first, ...rest] = editLines(edit.text ?? "");
      lines.push(first);
      if (first !== old) diffs.push({ op: "replace", line: lines.length, before: old, after: first });
      insert(rest);
    }
    insert(after.get(number));
  }
  return { lines, diffs };
}

/** An edit's text as lines; one trailing newline is taken as the end of the last line. */
function editLines(text: string): string[] {
  return splitLines(text.replace(/\r?\n$/, ""));
}

/** LLMs sometimes paste open_file's view back: drop `L1:`, `L2:`… when every line has them. */
export function stripLinePrefixes(lines: string[]): string[] {
  // A trailing newline after the last numbered line leaves one empty, unnumbered line.
  const body = lines.length > 1 && lines[lines.length - 1] === "" ? lines.slice(0, -1) : lines;
  const numbered = body.every((line, index) => line.startsWith(`L${index + 1}:`));
  if (!numbered || (body.length === 1 && body[0] === "")) return lines;
  return body.map((line, index) => line.slice(`L${index + 1}:`.length));
}

// --- whole-file diff ------------------------------------------------------------------------

const MAX_DIFF_CELLS = 4_000_000;

/** A line diff of two buffers in the LineDiff format (LCS; a plain block past a size limit). */
export function diffLines(oldLines: string[], newLines: string[]): LineDiff[] {
  let start = 0;
  while (
    start < oldLines.length &&
    start < newLines.length &&
    oldLines[start] === newLines[start]
  ) {
    start++;
  }
  let oldEnd = oldLines.length;
  let newEnd = newLines.length;
  while (oldEnd > start && newEnd > start && oldLines[oldEnd - 1] === newLines[newEnd - 1]) {
    oldEnd--;
    newEnd--;
  }
  const oldMiddle = oldLines.slice(start, oldEnd);
  const newMiddle = newLines.slice(start, newEnd);
  const script =
    oldMiddle.length * newMiddle.length <= MAX_DIFF_CELLS
      ? editScript(oldMiddle, newMiddle)
      : [...oldMiddle.map(() => "-" as const), ...newMiddle.map(() => "+" as const)];
  return hunksToDiffs(script, oldMiddle, newMiddle, start);
}

type Step = "=" | "-" | "+";

function editScript(a: string[], b: string[]): Step[] {
  const n = a.length;
  const m = b.length;
  // lcs[i][j]: longest common subsequence of a[i:] and b[j:], in one flat array.
  const lcs = new Uint32Array((n + 1) * (m + 1));
  const at = (i: number, j: number) => i * (m + 1) + j;
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[at(i, j)] =
        a[i] === b[j] ? lcs[at(i + 1, j + 1)] + 1 : Math.max(lcs[at(i + 1, j)], lcs[at(i, j + 1)]);
    }
  }
  const steps: Step[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      steps.push("=");
      i++;
      j++;
    } else if (lcs[at(i + 1, j)] >= lcs[at(i, j + 1)]) {
      steps.push("-");
      i++;
    } else {
      steps.push("+");
      j++;
    }
  }
  while (i++ < n) steps.push("-");
  while (j++ < m) steps.push("+");
  return steps;
}

/** Runs of removed and added lines between equal ones: paired as replaces, the rest as is. */
function hunksToDiffs(steps: Step[], a: string[], b: string[], offset: number): LineDiff[] {
  const diffs: LineDiff[] = [];
  let i = 0;
  let j = 0;
  let k = 0;
  while (k < steps.length) {
    if (steps[k] === "=") {
      i++;
      j++;
      k++;
      continue;
    }
    const removed: string[] = [];
    const added: string[] = [];
    const firstNew = offset + j + 1;
    for (; k < steps.length && steps[k] !== "="; k++) {
      if (steps[k] === "-") removed.push(a[i++]);
      else added.push(b[j++]);
    }
    const paired = Math.min(removed.length, added.length);
    for (let p = 0; p < paired; p++) {
      diffs.push({ op: "replace", line: firstNew + p, before: removed[p], after: added[p] });
    }
    for (let p = paired; p < added.length; p++) {
      diffs.push({ op: "insert", line: firstNew + p, after: added[p] });
    }
    for (let p = paired; p < removed.length; p++) {
      diffs.push({ op: "delete", line: firstNew + paired, before: removed[p] });
    }
  }
  return diffs;
}

function shortened(diff: LineDiff): LineDiff {
  const cut = (text: string | undefined) =>
    text !== undefined && text.length > MAX_DIFF_TEXT ? `${text.slice(0, MAX_DIFF_TEXT - 1)}…` : text;
  const short: LineDiff = { op: diff.op, line: diff.line };
  if (diff.before !== undefined) short.before = cut(diff.before);
  if (diff.after !== undefined) short.after = cut(diff.after);
  return short;
}

// --- editor plumbing ------------------------------------------------------------------------

/**
 * The smallest single replacement turning `oldText` into `newText`, as character offsets
 * into `oldText`: applying it leaves the cursor and scroll of untouched text alone.
 */
export function spliceRange(
  oldText: string,
  newText: string,
): { start: number; end: number; text: string } {
  let start = 0;
  const shorter = Math.min(oldText.length, newText.length);
  while (start < shorter && oldText[start] === newText[start]) start++;
  let oldEnd = oldText.length;
  let newEnd = newText.length;
  while (oldEnd > start && newEnd > start && oldText[oldEnd - 1] === newText[newEnd - 1]) {
    oldEnd--;
    newEnd--;
  }
  return { start, end: oldEnd, text: newText.slice(start, newEnd) };
}

const encoder = new TextEncoder();
const byteLength = (text: string) => encoder.encode(text).length;

/**
 * The `editor` context variable: the numbered buffer when it fits in `maxBytes` (UTF-8),
 * else the lines around the cursor that fit, under a note saying which lines they are.
 */
export function editorWindow(
  text: string,
  cursorLine: number,
  maxBytes: number = EDITOR_WINDOW_BYTES,
): string {
  const numbered = numberLines(text).split("\n");
  const whole = numbered.join("\n");
  if (byteLength(whole) <= maxBytes) return whole;
  const total = numbered.length;
  const note = (first: number, last: number) =>
    `(lines ${first}-${last} of ${total}; call open_file for the whole file)`;
  const budget = maxBytes - byteLength(note(total, total)) - 1;
  const cursor = Math.min(Math.max(Math.round(cursorLine), 1), total) - 1;
  let first = cursor;
  let last = cursor;
  let size = byteLength(numbered[cursor]);
  if (size > budget) {
    numbered[cursor] = truncateBytes(numbered[cursor], budget);
    size = byteLength(numbered[cursor]);
  }
  for (let grew = true; grew; ) {
    grew = false;
    for (const next of [last + 1, first - 1]) {
      if (next < 0 || next >= total || (next >= first && next <= last)) continue;
      const cost = byteLength(numbered[next]) + 1;
      if (size + cost > budget) continue;
      size += cost;
      if (next > last) last = next;
      else first = next;
      grew = true;
    }
  }
  return [note(first + 1, last + 1), ...numbered.slice(first, last + 1)].join("\n");
}

function truncateBytes(text: string, maxBytes: number): string {
  let end = Math.min(text.length, maxBytes);
  while (end > 0 && byteLength(text.slice(0, end)) + 3 > maxBytes) end--;
  return `${text.slice(0, end)}…`;
}

export function clip(text: string, maxChars: number): string {
  return text.length <= maxChars ? text : `${text.slice(0, maxChars - 1)}…`;
}
