import { describe, expect, it } from "vitest";
import {
  changedLines,
  diffLines,
  editorWindow,
  MAX_DIFFS,
  numberLines,
  spliceRange,
  writeFile,
  type WriteResult,
} from "./edits";

const FILE = ["function add(a, b) {", "  return a - b;", "}", "", "console.log(add(1, 2));"].join(
  "\n",
);

function ok(result: WriteResult) {
  if (!result.ok) throw new Error(`expected ok, got: ${result.error}`);
  return result;
}

function error(result: WriteResult) {
  if (result.ok) throw new Error("expected an error");
  return result.error;
}

describe("numberLines (open_file)", () => {
  it("prefixes every line with L<n>: and keeps indentation as it is", () => {
    expect(numberLines("a\n  b\n")).toBe("L1:a\nL2:  b\nL3:");
  });

  it("shows an empty buffer as one empty line", () => {
    expect(numberLines("")).toBe("L1:");
  });

  it("reads Windows line ends as plain lines", () => {
    expect(numberLines("a\r\nb")).toBe("L1:a\nL2:b");
  });
});

describe("writeFile with content", () => {
  it("replaces the buffer and reports the changed line", () => {
    const content = FILE.replace("a - b", "a + b");
    const outcome = writeFile(FILE, { content });
    expect(outcome.text).toBe(content);
    expect(ok(outcome.result)).toEqual({
      ok: true,
      mode: "replace",
      lineCount: 5,
      diffs: [{ op: "replace", line: 2, before: "  return a - b;", after: "  return a + b;" }],
    });
  });

  it("reports added and removed lines with their numbers", () => {
    const outcome = writeFile("a\nb\nc\nd", { content: "a\nx\nc\ny\nz" });
    expect(ok(outcome.result).diffs).toEqual([
      { op: "replace", line: 2, before: "b", after: "x" },
      { op: "replace", line: 4, before: "d", after: "y" },
      { op: "insert", line: 5, after: "z" },
    ]);
    const removal = writeFile("a\nb\nc", { content: "a\nc" });
    expect(ok(removal.result).diffs).toEqual([{ op: "delete", line: 2, before: "b" }]);
  });

  it("reports nothing when the content is the same", () => {
    expect(ok(writeFile(FILE, { content: FILE }).result).diffs).toEqual([]);
  });

  it("drops L<n>: prefixes pasted back from open_file", () => {
    const outcome = writeFile("old", { content: "L1:const a = 1;\nL2:  a;\n" });
    expect(outcome.text).toBe("const a = 1;\n  a;");
  });

  it("keeps text that only looks numbered on some lines", () => {
    const content = "L1:x\nnot numbered";
    expect(writeFile("", { content }).text).toBe(content);
  });

  it("shortens long results: at most MAX_DIFFS entries, the count of the rest in more", () => {
    const content = Array.from({ length: MAX_DIFFS + 5 }, (_, i) => `line ${i} ${"x".repeat(300)}`);
    const result = ok(writeFile("", { content: content.join("\n") }).result);
    expect(result.diffs).toHaveLength(MAX_DIFFS);
    expect(result.more).toBe(5);
    expect(result.diffs[0].after!.length).toBeLessThanOrEqual(120);
  });

  it("refuses content that is not a string", () => {
    const outcome = writeFile(FILE, { content: 42 as unknown as string });
    expect(error(outcome.result)).toMatch(/content must be a string/);
    expect(outcome.text).toBe(FILE);
  });
});

describe("writeFile with lineEdits", () => {
  it("replaces, inserts and deletes by the original line numbers", () => {
    const outcome = writeFile(FILE, {
      lineEdits: [
        { op: "replace", line: 2, text: "  return a + b;" },
        { op: "insert", line: 1, text: "// Adds two numbers." },
        { op: "delete", line: 4 },
      ],
    });
    expect(outcome.text).toBe(
      ["// Adds two numbers.", "function add(a, b) {", "  return a + b;", "}", "console.log(add(1, 2));"].join(
        "\n",
      ),
    );
    expect(ok(outcome.result)).toEqual({
      ok: true,
      mode: "lineEdits",
      lineCount: 5,
      diffs: [
        { op: "insert", line: 1, after: "// Adds two numbers." },
        { op: "replace", line: 3, before: "  return a - b;", after: "  return a + b;" },
        { op: "delete", line: 5, before: "" },
      ],
    });
  });

  it("inserts before by default and after on request, keeping the order given", () => {
    const outcome = writeFile("a\nb", {
      lineEdits: [
        { op: "insert", line: 2, text: "after-1", position: "after" },
        { op: "insert", line: 2, text: "after-2", position: "after" },
        { op: "insert", line: 2, text: "before-1" },
        { op: "insert", line: 2, text: "before-2", position: "before" },
      ],
    });
    expect(outcome.text).toBe("a\nbefore-1\nbefore-2\nb\nafter-1\nafter-2");
  });

  it("combines a replace with inserts around the same line", () => {
    const outcome = writeFile("a\nb\nc", {
      lineEdits: [
        { op: "replace", line: 2, text: "B" },
        { op: "insert", line: 2, text: "above", position: "before" },
        { op: "insert", line: 2, text: "below", position: "after" },
      ],
    });
    expect(outcome.text).toBe("a\nabove\nB\nbelow\nc");
  });

  it("takes multi-line text, ignoring one trailing newline", () => {
    const outcome = writeFile(FILE, {
      lineEdits: [{ op: "insert", line: 4, text: "function greet() {\n  return 'hi';\n}\n" }],
    });
    expect(outcome.text.split("\n").slice(3, 7)).toEqual([
      "function greet() {",
      "  return 'hi';",
      "}",
      "",
    ]);
    expect(changedLines(outcome.allDiffs)).toEqual([4, 5, 6]);
  });

  it("appends with insert at the line after the last one", () => {
    const outcome = writeFile("a\nb", { lineEdits: [{ op: "insert", line: 3, text: "c" }] });
    expect(outcome.text).toBe("a\nb\nc");
    expect(ok(outcome.result).diffs).toEqual([{ op: "insert", line: 3, after: "c" }]);
  });

  it("edits an empty buffer", () => {
    const outcome = writeFile("", { lineEdits: [{ op: "replace", line: 1, text: "hello" }] });
    expect(outcome.text).toBe("hello");
  });

  it("can delete every line", () => {
    const outcome = writeFile("a\nb", {
      lineEdits: [
        { op: "delete", line: 1 },
        { op: "delete", line: 2 },
      ],
    });
    expect(outcome.text).toBe("");
    expect(ok(outcome.result).diffs).toEqual([
      { op: "delete", line: 1, before: "a" },
      { op: "delete", line: 1, before: "b" },
    ]);
  });

  it("replacing a line with the same text reports no diff", () => {
    const outcome = writeFile("a\nb", { lineEdits: [{ op: "replace", line: 1, text: "a" }] });
    expect(ok(outcome.result).diffs).toEqual([]);
  });
});

describe("writeFile refuses invalid calls and changes nothing", () => {
  const cases: Array<[string, unknown, RegExp]> = [
    ["line out of range", [{ op: "replace", line: 9, text: "x" }], /line 9 is out of range; the file has 5 lines/],
    ["line zero", [{ op: "delete", line: 0 }], /line 0 is out of range/],
    ["insert past the end", [{ op: "insert", line: 7, text: "x" }], /insert accepts 1-6; 6 appends/],
    ["fractional line", [{ op: "delete", line: 1.5 }], /line must be a whole number/],
    ["line as a string", [{ op: "delete", line: "2" }], /line must be a whole number/],
    ["unknown op", [{ op: "modify", line: 1, text: "x" }], /unknown op "modify"; use "replace", "insert" or "delete"/],
    ["missing text", [{ op: "replace", line: 1 }], /replace needs "text"/],
    ["insert without text", [{ op: "insert", line: 1 }], /insert needs "text"/],
    ["bad position", [{ op: "insert", line: 1, text: "x", position: "above" }], /position must be "before" or "after"/],
    ["same line twice", [{ op: "replace", line: 2, text: "x" }, { op: "delete", line: 2 }], /lineEdits\[0\] and lineEdits\[1\] both change line 2/],
    ["empty list", [], /non-empty array/],
    ["not a list", { op: "delete", line: 1 }, /non-empty array/],
    ["not an object", ["delete line 1"], /lineEdits\[0\] must be an object/],
  ];

  it.each(cases)("%s", (_name, lineEdits, message) => {
    const outcome = writeFile(FILE, { lineEdits: lineEdits as never });
    expect(error(outcome.result)).toMatch(message);
    expect(error(outcome.result)).toMatch(/Nothing was changed\.$/);
    expect(outcome.text).toBe(FILE);
    expect(outcome.allDiffs).toEqual([]);
  });

  it("names the edit at fault even when the others are fine (all are checked first)", () => {
    const outcome = writeFile(FILE, {
      lineEdits: [
        { op: "replace", line: 1, text: "ok" },
        { op: "replace", line: 99, text: "not ok" },
      ],
    });
    expect(error(outcome.result)).toMatch(/^lineEdits\[1\]: line 99/);
    expect(outcome.text).toBe(FILE);
  });

  it("asks for exactly one of content and lineEdits", () => {
    expect(error(writeFile(FILE, {}).result)).toMatch(/Pass content .* or lineEdits/);
    expect(error(writeFile(FILE, undefined).result)).toMatch(/Pass content/);
    expect(
      error(writeFile(FILE, { content: "x", lineEdits: [{ op: "delete", line: 1 }] }).result),
    ).toMatch(/either content or lineEdits, not both/);
  });
});

describe("diffLines", () => {
  it("finds an insertion in the middle instead of rewriting what follows", () => {
    const diffs = diffLines(["a", "b", "c", "d"], ["a", "b", "new", "c", "d"]);
    expect(diffs).toEqual([{ op: "insert", line: 3, after: "new" }]);
  });

  it("highlights only inserted and replaced lines", () => {
    const diffs = diffLines(["a", "b", "c"], ["x", "b", "d", "e"]);
    expect(changedLines(diffs)).toEqual([1, 3, 4]);
  });
});

describe("spliceRange", () => {
  it("is the smallest replacement between the two texts", () => {
    expect(spliceRange("hello world", "hello there world")).toEqual({
      start: 6,
      end: 6,
      text: "there ",
    });
    expect(spliceRange("abc", "abc")).toEqual({ start: 3, end: 3, text: "" });
    expect(spliceRange("aXc", "ac")).toEqual({ start: 1, end: 2, text: "" });
  });

  it("turns the old text into the new one", () => {
    const pairs = [
      ["", "abc"],
      ["abc", ""],
      ["aaa", "aa"],
      ["line1\nline2\n", "line1\nnew\nline2\n"],
    ];
    for (const [before, after] of pairs) {
      const { start, end, text } = spliceRange(before, after);
      expect(before.slice(0, start) + text + before.slice(end)).toBe(after);
    }
  });
});

describe("editorWindow (the editor context variable)", () => {
  it("sends the whole numbered buffer when it fits", () => {
    expect(editorWindow("a\nb", 1)).toBe("L1:a\nL2:b");
  });

  it("sends the lines around the cursor within the byte limit, saying which ones", () => {
    const text = Array.from({ length: 400 }, (_, i) => `const value${i} = ${i};`).join("\n");
    const window = editorWindow(text, 200, 2048);
    expect(new TextEncoder().encode(window).length).toBeLessThanOrEqual(2048);
    const [note, ...lines] = window.split("\n");
    const match = note.match(/^\(lines (\d+)-(\d+) of 400; call open_file for the whole file\)$/);
    expect(match).not.toBeNull();
    const [first, last] = [Number(match![1]), Number(match![2])];
    expect(first).toBeLessThan(200);
    expect(last).toBeGreaterThan(200);
    expect(lines[0]).toBe(`L${first}:const value${first - 1} = ${first - 1};`);
    expect(lines).toHaveLength(last - first + 1);
    expect(lines).toContain("L200:const value199 = 199;");
  });

  it("counts bytes, not characters", () => {
    const text = Array.from({ length: 300 }, () => "ééééé").join("\n");
    const window = editorWindow(text, 1, 512);
    expect(new TextEncoder().encode(window).length).toBeLessThanOrEqual(512);
    expect(window.split("\n")[1]).toBe("L1:ééééé");
  });

  it("cuts a single huge line to fit", () => {
    const window = editorWindow(`short\n${"y".repeat(5000)}\nshort`, 2, 1024);
    expect(new TextEncoder().encode(window).length).toBeLessThanOrEqual(1024);
    expect(window).toMatch(/L2:y+…/);
  });

  it("keeps the cursor line in range", () => {
    const text = Array.from({ length: 500 }, (_, i) => `line ${i + 1}`).join("\n");
    expect(editorWindow(text, 10_000, 256).split("\n").at(-1)).toBe("L500:line 500");
    expect(editorWindow(text, 0, 256).split("\n")[1]).toBe("L1:line 1");
  });
});
