// Runs url_and_text.js in node on the cases read from stdin (JSON), prints its answer.
import { readFileSync } from 'node:fs';

const source = readFileSync(new URL('./url_and_text.js', import.meta.url), 'utf8');
const probe = (0, eval)(`(${source})`);
process.stdout.write(JSON.stringify(probe(JSON.parse(readFileSync(0, 'utf8')))));
