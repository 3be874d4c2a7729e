// The ChaCha20 block function of RFC 8439 (section 2.3), for crypto.getRandomValues.
// tools_app/sandbox.py passes this function expression to the prelude; the tests run it
// alone against every test vector of the RFC (tests/tools_app/test_chacha20.py).
//
// It runs after handler code has had its chance to change globals and prototypes, so it
// uses nothing a handler could replace: only operators and typed-array element access.
(function chacha20Block(key, counter, nonce, out, scratch) {
  'use strict';

  // key: Uint32Array(8), counter: a 32-bit integer, nonce: Uint32Array(3) (words are
  // little-endian, as the RFC reads them), out: Uint8Array(64) receives the block,
  // scratch: Uint32Array(32), the caller's, so that nothing here looks up a global.
  const state = scratch;
  const W = 16; // the working copy lives in scratch[16..31]
  state[0] = 0x61707865;
  state[1] = 0x3320646e;
  state[2] = 0x79622d32;
  state[3] = 0x6b206574;
  for (let i = 0; i < 8; i += 1) state[4 + i] = key[i];
  state[12] = counter;
  state[13] = nonce[0];
  state[14] = nonce[1];
  state[15] = nonce[2];
  for (let i = 0; i < 16; i += 1) scratch[W + i] = state[i];
  const rotate = (value, bits) => (value << bits) | (value >>> (32 - bits));
  const quarterRound = (a, b, c, d) => {
    const x = scratch;
    a += W; b += W; c += W; d += W;
    x[a] += x[b]; x[d] = rotate(x[d] ^ x[a], 16);
    x[c] += x[d]; x[b] = rotate(x[b] ^ x[c], 12);
    x[a] += x[b]; x[d] = rotate(x[d] ^ x[a], 8);
    x[c] += x[d]; x[b] = rotate(x[b] ^ x[c], 7);
  };
  for (let round = 0; round < 10; round += 1) {
    quarterRound(0, 4, 8, 12);
    quarterRound(1, 5, 9, 13);
    quarterRound(2, 6, 10, 14);
    quarterRound(3, 7, 11, 15);
    quarterRound(0, 5, 10, 15);
    quarterRound(1, 6, 11, 12);
    quarterRound(2, 7, 8, 13);
    quarterRound(3, 4, 9, 14);
  }
  for (let i = 0; i < 16; i += 1) {
    const word = (scratch[W + i] + state[i]) >>> 0;
    out[i * 4] = word & 0xff;
    out[i * 4 + 1] = (word >>> 8) & 0xff;
    out[i * 4 + 2] = (word >>> 16) & 0xff;
    out[i * 4 + 3] = (word >>> 24) & 0xff;
  }
  return out;
})
