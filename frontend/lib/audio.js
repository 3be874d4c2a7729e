// Audio in and out: the microphone's capture worklet and the playback worklet.

import { LIBRARY_URL } from "./location.js";

const AUDIO_START_WAIT_MS = 200; // how long the AudioContext may take to start by itself

const WORKLETS = {
  capture: new URL("./capture-worklet.js", LIBRARY_URL).href,
  playback: new URL("./playback-worklet.js", LIBRARY_URL).href,
};
const MIC_CONSTRAINTS = {
  audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true, channelCount: 1 },
};
const GESTURES = ["pointerdown", "keydown", "touchend"];

/** One AudioContext: the playback worklet (always) and the microphone's capture worklet. */
export class AudioIO {
  #frameMs;
  #onCapture;
  #onPlayback;
  #onRunning;
  #context = null;
  #loaded = null;
  #playback = null;
  #pending = []; // frames that arrived before the playback worklet
  #flushes = 0; // flushes the playback worklet has not confirmed yet
  #capture = null;
  #stream = null;
  #closed = false;
  #resumeOnGesture = () => this.#context?.resume().catch(() => {});

  /**
   * @param {{frameMs: number, onCapture: (pcm: ArrayBuffer, rms: number) => void,
   *          onPlayback: (message: object) => void, onRunning: () => void}} handlers
   */
  constructor({ frameMs = 40, onCapture, onPlayback, onRunning }) {
    this.#frameMs = frameMs;
    this.#onCapture = onCapture;
    this.#onPlayback = onPlayback;
    this.#onRunning = onRunning;
  }

  get running() {
    return this.#context?.state === "running";
  }

  /** Creates the context synchronously (inside the caller's user gesture, if any). */
  start(ttsRate) {
    const Context = globalThis.AudioContext ?? globalThis.webkitAudioContext;
    if (!Context) throw new Error("Web Audio is not available");
    const context = new Context({ latencyHint: "interactive" });
    this.#context = context;
    context.onstatechange = () => {
      if (context.state === "running") this.#stopWaitingForGesture();
      if (context.state === "running" && !this.#closed) this.#onRunning();
    };
    if (context.state !== "running") {
      for (const name of GESTURES) window.addEventListener(name, this.#resumeOnGesture, true);
    }
    this.#loaded = this.#load(ttsRate);
    return this.#loaded;
  }

  /** Whether the context runs, giving it a moment to start by itself. */
  async startsWithoutGesture() {
    if (this.running) return true;
    const timeout = new Promise((resolve) => setTimeout(resolve, AUDIO_START_WAIT_MS));
    await Promise.race([this.#context.resume().catch(() => {}), timeout]);
    return this.running;
  }

  async #load(ttsRate) {
    const { audioWorklet } = this.#context;
    await Promise.all([audioWorklet.addModule(WORKLETS.playback), audioWorklet.addModule(WORKLETS.capture)]);
    if (this.#closed) return;
    this.#playback = new AudioWorkletNode(this.#context, "va-playback", {
      numberOfInputs: 0,
      outputChannelCount: [1],
      processorOptions: { sourceRate: ttsRate },
    });
    this.#playback.port.onmessage = (event) => this.#fromPlayback(event.data);
    this.#playback.connect(this.#context.destination);
    for (const message of this.#pending.splice(0)) this.#playback.port.postMessage(message, [message.pcm]);
  }

  /** Asks for the microphone and starts sending its frames. Rejects with getUserMedia's error. */
  async openMicrophone() {
    if (!globalThis.isSecureContext || !navigator.mediaDevices?.getUserMedia) {
      throw Object.assign(new Error("getUserMedia is unavailable"), { name: "InsecureContextError" });
    }
    const stream = await navigator.mediaDevices.getUserMedia(MIC_CONSTRAINTS);
    this.#stream = stream;
    // A page that records may play sound (Chromium, Firefox and Safari all allow it once
    // capture is on): the context held since Start starts now, no click needed.
    if (!this.running && !this.#closed) this.#context.resume().catch(() => {});
    await this.#loaded;
    if (this.#closed) return stopTracks(stream);
    const source = this.#context.createMediaStreamSource(stream);
    this.#capture = new AudioWorkletNode(this.#context, "va-capture", {
      numberOfInputs: 1,
      numberOfOutputs: 1,
      outputChannelCount: [1],
      processorOptions: { frameMs: this.#frameMs },
    });
    this.#capture.port.onmessage = (event) => this.#onCapture(event.data.pcm, event.data.rms);
    source.connect(this.#capture);
    this.#capture.connect(this.#context.destination); // silent; keeps the node processing
  }

  /** Queue one frame of PCM16 (`newReply`: it starts a reply, so played counts restart). */
  play(pcm, newReply) {
    const message = { type: "frame", pcm, newReply };
    if (this.#playback) this.#playback.port.postMessage(message, [pcm]);
    else if (!this.#closed) this.#pending.push(message);
  }

  flush() {
    this.#pending = [];
    if (!this.#playback) return;
    this.#playback.port.postMessage({ type: "flush" });
    this.#flushes++;
  }

  #fromPlayback(message) {
    if (message.type === "flushed") this.#flushes--;
    else if (this.#flushes === 0) this.#onPlayback(message); // else: about audio a flush dropped
  }

  close() {
    if (this.#closed) return;
    this.#closed = true;
    this.#stopWaitingForGesture();
    if (this.#stream) stopTracks(this.#stream);
    this.#capture?.port.postMessage("stop");
    this.#playback?.port.postMessage({ type: "close" });
    this.#context?.close().catch(() => {});
  }

  #stopWaitingForGesture() {
    for (const name of GESTURES) window.removeEventListener(name, this.#resumeOnGesture, true);
  }
}

function stopTracks(stream) {
  for (const track of stream.getTracks()) track.stop();
}

export function microphoneErrorCode(error) {
  if (error?.name === "NotAllowedError" || error?.name === "SecurityError") return "microphone_denied";
  if (error?.name === "InsecureContextError") return "microphone_insecure";
  return "microphone_unavailable";
}

