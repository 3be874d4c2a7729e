// The editor behind the agent's tools: write_file calls wait EDIT_DEBOUNCE_MS for more to
// come, then land in Monaco together (one undo step) with the changed lines highlighted.
import { changedLines, diffLines, numberLines, spliceRange, splitLines, writeFile } from "./edits";
import type { LineDiff, WriteFileArgs, WriteResult } from "./edits";
import { monaco } from "./monaco";

export const EDIT_DEBOUNCE_MS = 400;
export const HIGHLIGHT_MS = 1500;

interface PendingWrite {
  args: WriteFileArgs;
  resolve: (result: WriteResult) => void;
}

export class Ide {
  readonly editor: monaco.editor.IStandaloneCodeEditor;
  /** The diffs of the last write_file that succeeded, as the LLM received them. */
  lastDiffs: LineDiff[] = [];
  lastResult: WriteResult | null = null;
  private pending: PendingWrite[] = [];
  private flushTimer: ReturnType<typeof setTimeout> | undefined;
  private highlights: monaco.editor.IEditorDecorationsCollection;
  private highlightTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(container: HTMLElement, text: string) {
    const model = monaco.editor.createModel(text, "javascript");
    model.setEOL(monaco.editor.EndOfLineSequence.LF);
    this.editor = monaco.editor.create(container, {
      model,
      automaticLayout: true,
      minimap: { enabled: false },
      fontSize: 14,
      scrollBeyondLastLine: false,
      tabSize: 2,
      theme: "vs-dark",
    });
    this.highlights = this.editor.createDecorationsCollection();
  }

  getValue(): string {
    return this.editor.getValue();
  }

  /** open_file: what the editor holds once the writes already asked for have landed. */
  openFile(): { content: string } {
    this.flush();
    return { content: numberLines(this.getValue()) };
  }

  /** write_file: answered when the edit is in the editor, after the debounce. */
  writeFile(args: WriteFileArgs): Promise<WriteResult> {
    return new Promise((resolve) => {
      this.pending.push({ args, resolve });
      clearTimeout(this.flushTimer);
      this.flushTimer = setTimeout(() => this.flush(), EDIT_DEBOUNCE_MS);
    });
  }

  /** Replaces the buffer as the agent would (one undo step, highlighted). */
  setValue(text: string): void {
    this.replaceText(text);
  }

  highlightedLines(): number[] {
    return this.highlights
      .getRanges()
      .map((range) => range.startLineNumber)
      .sort((a, b) => a - b);
  }

  cursorLine(): number {
    return this.editor.getPosition()?.lineNumber ?? 1;
  }

  private flush(): void {
    clearTimeout(this.flushTimer);
    const batch = this.pending.splice(0);
    if (batch.length === 0) return;
    // Each write sees the ones before it; the editor changes once.
    let text = this.getValue();
    const results = batch.map(({ args }) => {
      const outcome = writeFile(text, args);
      text = outcome.text;
      return outcome.result;
    });
    this.replaceText(text);
    batch.forEach(({ resolve }, index) => resolve(results[index]));
    this.lastResult = results[results.length - 1];
    const lastOk = results.filter((result) => result.ok).pop();
    if (lastOk) this.lastDiffs = lastOk.diffs;
  }

  private replaceText(text: string): void {
    const model = this.editor.getModel()!;
    const old = model.getValue();
    if (text === old) return;
    const { start, end, text: inserted } = spliceRange(old, text);
    const range = monaco.Range.fromPositions(model.getPositionAt(start), model.getPositionAt(end));
    this.editor.pushUndoStop();
    this.editor.executeEdits("agent", [{ range, text: inserted, forceMoveMarkers: true }]);
    this.editor.pushUndoStop();
    this.highlight(changedLines(diffLines(splitLines(old), splitLines(text))));
  }

  private highlight(lines: number[]): void {
    clearTimeout(this.highlightTimer);
    this.highlights.set(
      lines.map((line) => ({
        range: new monaco.Range(line, 1, line, 1),
        options: {
          isWholeLine: true,
          className: "agent-edit",
          linesDecorationsClassName: "agent-edit-gutter",
          overviewRuler: {
            color: "#e2b93d",
            position: monaco.editor.OverviewRulerLane.Full,
          },
        },
      })),
    );
    if (lines.length > 0) this.editor.revealLinesInCenterIfOutsideViewport(lines[0], lines.at(-1)!);
    this.highlightTimer = setTimeout(() => this.highlights.clear(), HIGHLIGHT_MS);
  }
}
