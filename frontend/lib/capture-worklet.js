// Microphone → PCM16 LE mono 16 kHz, posted to the main thread in frames of `frameMs`
// (processorOptions; 40 ms by default).
//
// Runs in the AudioWorkletGlobalScope (`sampleRate` is the context's rate). The input is
// low-passed below 8 kHz (two cascaded biquads), then resampled by linear interpolation:
// a simple decimator, enough for speech recognition. Each frame goes out as
// `{pcm: ArrayBuffer (32 bytes a ms), rms: number}`; `rms` (0…1) feeds client-side barge-in.

const TARGET_RATE = 16000;
const SAMPLES_PER_MS = TARGET_RATE / 1000;

/** RBJ cookbook low-pass biquad (Q = 1/√2). */
class LowPass {
  constructor(cutoff, rate) {
    const w = (2 * Math.PI * cutoff) / rate;
    const alpha = Math.sin(w) / Math.SQRT2;
    const a0 = 1 + alpha;
    this.b0 = (1 - Math.cos(w)) / 2 / a0;
    this.b1 = (1 - Math.cos(w)) / a0;
    this.b2 = this.b0;
    this.a1 = (-2 * Math.cos(w)) / a0;
    this.a2 = (1 - alpha) / a0;
    this.x1 = this.x2 = this.y1 = this.y2 = 0;
  }

  next(x) {
    const y = this.b0 * x + this.b1 * this.x1 + this.b2 * this.x2 - this.a1 * this.y1 - this.a2 * this.y2;
    this.x2 = this.x1;
    this.x1 = x;
    this.y2 = this.y1;
    this.y1 = y;
    return y;
  }
}

class CaptureProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.frameSamples = (options?.processorOptions?.frameMs ?? 40) * SAMPLES_PER_MS;
    this.step = sampleRate / TARGET_RATE; // input samples per output sample
    const cutoff = 0.45 * TARGET_RATE;
    // Two cascaded biquads: a 4th-order low-pass against aliasing (none needed at 16 kHz).
    this.filters = sampleRate > TARGET_RATE ? [1, 2].map(() => new LowPass(cutoff, sampleRate)) : [];
    this.position = 0; // where the next output sample lies, in input samples from this block's start
    this.previous = 0; // the last (filtered) input sample of the previous block
    this.block = new Float32Array(128);
    this.frame = new Int16Array(this.frameSamples);
    this.filled = 0;
    this.energy = 0;
    this.stopped = false;
    this.port.onmessage = (event) => {
      if (event.data === "stop") this.stopped = true;
    };
  }

  process(inputs) {
    if (this.stopped) return false;
    const channels = inputs[0];
    if (!channels || channels.length === 0) return true;
    const n = channels[0].length;
    if (this.block.length < n) this.block = new Float32Array(n);
    const block = this.block;
    for (let i = 0; i < n; i++) {
      let x = channels[0][i];
      if (channels.length > 1) {
        for (let c = 1; c < channels.length; c++) x += channels[c][i];
        x /= channels.length;
      }
      for (const filter of this.filters) x = filter.next(x);
      block[i] = x;
    }
    // block[-1] is this.previous, so positions from -1 up to (not including) n - 1 resolve here.
    while (this.position < n - 1) {
      const index = Math.floor(this.position);
      const frac = this.position - index;
      const a = index < 0 ? this.previous : block[index];
      this.push(a + frac * (block[index + 1] - a));
      this.position += this.step;
    }
    this.position -= n;
    this.previous = block[n - 1];
    return true;
  }

  push(sample) {
    const clamped = Math.max(-1, Math.min(1, sample));
    this.frame[this.filled++] = clamped < 0 ? clamped * 0x8000 : clamped * 0x7fff;
    this.energy += clamped * clamped;
    if (this.filled === this.frameSamples) {
      const pcm = this.frame.buffer;
      this.port.postMessage({ pcm, rms: Math.sqrt(this.energy / this.frameSamples) }, [pcm]);
      this.frame = new Int16Array(this.frameSamples);
      this.filled = 0;
      this.energy = 0;
    }
  }
}

registerProcessor("va-capture", CaptureProcessor);
