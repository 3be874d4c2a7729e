// What node's own URL and TextDecoder make of the cases read from stdin (JSON
// {urls: [[input, base|null]], texts: [hex]}); the same shape the sandbox answers with.
import { readFileSync } from 'node:fs';

const cases = JSON.parse(readFileSync(0, 'utf8'));
const parts = ['href', 'protocol', 'username', 'password', 'host', 'hostname', 'port',
  'pathname', 'search', 'hash', 'origin'];
const url = ([input, base]) => {
  try {
    const parsed = base === null ? new URL(input) : new URL(input, base);
    return Object.fromEntries(parts.map((name) => [name, parsed[name]]));
  } catch (error) {
    return { error: error.name };
  }
};
const bytes = (hex) => Uint8Array.from(hex.match(/../g) ?? [], (pair) => parseInt(pair, 16));
const text = (hex) => {
  const input = bytes(hex);
  let fatal;
  try {
    fatal = new TextDecoder('utf-8', { fatal: true }).decode(input);
  } catch (error) {
    fatal = { error: error.name };
  }
  return [new TextDecoder().decode(input), fatal,
    new TextDecoder('utf-8', { ignoreBOM: true }).decode(input)];
};
process.stdout.write(JSON.stringify({ urls: cases.urls.map(url), texts: cases.texts.map(text) }));
