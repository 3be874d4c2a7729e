// The agent's voice: PCM16 LE mono frames (24 kHz) in, the context's rate out.
//
// A growable ring buffer of source-rate samples, read at `sourceRate / sampleRate` samples
// per output sample with linear interpolation. Positions are absolute sample counts, so
// "played" is simply read position minus where the reply began.
//
// In:  {type: "frame", pcm: ArrayBuffer, newReply?: boolean}   {type: "flush"}   {type: "close"}
// Out: {type: "queued", samples, buffered}       a frame arrived
//      {type: "progress", played, buffered}      about every 20 ms while playing
//      {type: "drained", played}                 the buffer ran empty
//      {type: "flushed", played}                 after a flush
// `played` counts source samples of the current reply; `buffered` source samples not yet played.

const REPORT_EVERY_S = 0.02;

class PlaybackProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const sourceRate = options?.processorOptions?.sourceRate ?? 24000;
    this.step = sourceRate / sampleRate;
    this.ring = new Float32Array(sourceRate * 10);
    this.written = 0; // samples ever written
    this.readAt = 0; // fractional read position, same scale
    this.replyStart = 0;
    this.playing = false;
    this.sinceReport = 0;
    this.reportEvery = Math.round(REPORT_EVERY_S * sampleRate);
    this.closed = false;
    this.port.onmessage = (event) => this.receive(event.data);
  }

  receive(message) {
    if (message.type === "frame") this.write(new Int16Array(message.pcm), message.newReply);
    else if (message.type === "flush") this.flush();
    else if (message.type === "close") this.closed = true;
  }

  write(pcm, newReply) {
    if (newReply) this.replyStart = Math.max(this.written, Math.floor(this.readAt));
    this.reserve(pcm.length);
    const size = this.ring.length;
    for (let i = 0; i < pcm.length; i++) this.ring[(this.written + i) % size] = pcm[i] / 0x8000;
    this.written += pcm.length;
    this.port.postMessage({ type: "queued", samples: pcm.length, buffered: this.buffered() });
  }

  reserve(extra) {
    const from = Math.max(0, Math.floor(this.readAt) - 1);
    const needed = this.written - from + extra;
    if (needed <= this.ring.length) return;
    let size = this.ring.length;
    while (size < needed) size *= 2;
    const grown = new Float32Array(size);
    for (let at = from; at < this.written; at++) grown[at % size] = this.ring[at % this.ring.length];
    this.ring = grown;
  }

  flush() {
    const played = this.played();
    this.readAt = this.written;
    this.replyStart = this.written;
    this.playing = false;
    this.port.postMessage({ type: "flushed", played });
  }

  buffered() {
    return Math.max(0, this.written - Math.floor(this.readAt));
  }

  played() {
    return Math.max(0, Math.min(Math.floor(this.readAt), this.written) - this.replyStart);
  }

  process(_inputs, outputs) {
    if (this.closed) return false;
    const out = outputs[0][0];
    const size = this.ring.length;
    let i = 0;
    for (; i < out.length; i++) {
      const index = Math.floor(this.readAt);
      if (index >= this.written) break;
      const a = this.ring[index % size];
      const b = index + 1 < this.written ? this.ring[(index + 1) % size] : a;
      out[i] = a + (this.readAt - index) * (b - a);
      this.readAt += this.step;
    }
    out.fill(0, i);
    for (let c = 1; c < outputs[0].length; c++) outputs[0][c].set(out);
    this.report(i > 0, out.length);
    return true;
  }

  report(produced, frames) {
    if (produced && !this.playing) this.playing = true;
    if (!this.playing) return;
    if (this.buffered() === 0) {
      this.playing = false;
      this.sinceReport = 0;
      this.port.postMessage({ type: "drained", played: this.played() });
      return;
    }
    this.sinceReport += frames;
    if (this.sinceReport >= this.reportEvery) {
      this.sinceReport = 0;
      this.port.postMessage({ type: "progress", played: this.played(), buffered: this.buffered() });
    }
  }
}

registerProcessor("va-playback", PlaybackProcessor);
