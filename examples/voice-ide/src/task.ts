// The exercise: shown in the brief panel, loaded into the editor, and sent to the agent as
// the `task` context variable.

export const FILE_NAME = "index.js";

export const TASK =
  "Implement chunk(array, size) in index.js: split the array into groups of `size` items, " +
  "the last group possibly shorter, without changing the input. Throw a RangeError when " +
  "size is not a positive integer. Press Run: every check at the bottom should print PASS.";

export const STARTER_CODE = `// index.js — split an array into groups of \`size\` items.
function chunk(array, size) {
  // TODO
}

// Checks: press Run (or Ctrl+Enter) and read the output.
function check(name, actual, expected) {
  const pass = JSON.stringify(actual) === JSON.stringify(expected);
  console.log(\`\${pass ? "PASS" : "FAIL"} \${name}: \${JSON.stringify(actual)}\`);
}

check("even", chunk([1, 2, 3, 4], 2), [[1, 2], [3, 4]]);
check("remainder", chunk([1, 2, 3, 4, 5], 2), [[1, 2], [3, 4], [5]]);
check("empty", chunk([], 3), []);
`;
