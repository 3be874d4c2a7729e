// Runs tools_app/chacha20.js (the sandbox's ChaCha20 block function) on cases read from
// stdin as JSON [{key, nonce, counter, plaintext}] (hex) and prints the ciphertexts (hex).
import { readFileSync } from 'node:fs';

const source = readFileSync(new URL('../../../tools_app/chacha20.js', import.meta.url), 'utf8');
const chacha20Block = (0, eval)(`(${source})`);
const bytes = (hex) => Uint8Array.from(hex.match(/../g) ?? [], (pair) => parseInt(pair, 16));
const words = (raw) => Uint32Array.from({ length: raw.length / 4 },
  (_, i) => raw[i * 4] | (raw[i * 4 + 1] << 8) | (raw[i * 4 + 2] << 16) | (raw[i * 4 + 3] << 24));
const hex = (array) => Buffer.from(array).toString('hex');

const encrypt = ({ key, nonce, counter, plaintext }) => {
  const input = bytes(plaintext);
  const output = new Uint8Array(input.length);
  const block = new Uint8Array(64);
  const scratch = new Uint32Array(32);
  for (let offset = 0; offset < input.length; offset += 64) {
    chacha20Block(words(bytes(key)), counter + offset / 64, words(bytes(nonce)), block, scratch);
    for (let i = offset; i < Math.min(offset + 64, input.length); i += 1) {
      output[i] = input[i] ^ block[i - offset];
    }
  }
  return hex(output);
};

const cases = JSON.parse(readFileSync(0, 'utf8'));
process.stdout.write(JSON.stringify(cases.map(encrypt)));
