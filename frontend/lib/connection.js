// One conversation's socket: configure or resume, seq de-duplication, backoff, keep-alive.

import { FATAL_ERRORS, REFUSAL_CLOSE_CODES } from "./errors.js";
import { CLIENT_MESSAGES as MESSAGE, CLOSE_CODES as CLOSE, SERVER_EVENTS as EVENT } from "./protocol-generated.js";

const RETRY_DELAYS_MS = [500, 1000, 2000, 4000, 8000, 10000];
const KEEPALIVE_MS = 25000; // a ping when nothing else was sent, for idle proxies
// Microphone audio kept while the session is not ready yet (from Start to `ready`, or
// while a dropped connection resumes): at most 5 s of PCM16 at 16 kHz, the oldest dropped
// past it. It goes out at once when the session is ready, in messages of at most 1 s; the
// platform's audio burst allowance (10 s, docs/limits.md) takes it.
export const EARLY_AUDIO_MAX_BYTES = 5 * 16000 * 2;
const EARLY_AUDIO_MESSAGE_BYTES = 16000 * 2;


/**
 * One conversation's socket, reopened after an unexpected close: `resume` when the
 * session exists, `configure` otherwise. Events already seen (seq ≤ lastSeq) are dropped.
 */
export class Connection {
  #url; // the URL, or an async function giving each socket's URL (a fresh session token)
  #configure; // async () => configure message
  #handlers; // {onEvent, onAudio, onResumed, onRetry, onLost, onRefused}
  #socket = null;
  #sessionId = null;
  #resumeToken = null;
  #lastSeq = 0;
  #attempts = 0;
  #everReady = false;
  #resuming = false; // this socket sent resume and has accepted nothing yet
  #established = false; // configure or resume sent on this socket
  #audioOpen = false; // the server takes microphone audio on this socket
  #outbox = [];
  #earlyAudio = []; // microphone frames from before the session was ready
  #earlyAudioBytes = 0;
  #retryTimer = null;
  #keepAlive = null;
  #lastSentAt = 0;
  #closed = false;
  #moved = null; // the socket a `reconnect` left, closed once the new one has resumed

  /**
   * @param {object} o
   * @param {string | (() => Promise<string>)} o.url
   * @param {() => Promise<object>} o.configure  the `configure` message for a new session
   * @param {(event: object) => void} o.onEvent  each new JSON event
   * @param {(pcm: ArrayBuffer) => void} o.onAudio
   * @param {() => void} o.onResumed  the server answered a resume with something other than an error
   * @param {() => void} o.onRetry  the socket closed; trying again soon
   * @param {(code: string) => void} o.onLost  gave up: connection_lost / connection_failed
   * @param {(code: string, closeCode: number) => void} o.onRefused  closed with 4000-4099
   */
  constructor({ url, configure, ...handlers }) {
    this.#url = url;
    this.#configure = configure;
    this.#handlers = handlers;
  }

  get audioOpen() {
    return this.#audioOpen;
  }

  async open() {
    if (this.#closed) return;
    let url;
    try {
      url = typeof this.#url === "function" ? await this.#url() : this.#url;
    } catch (error) {
      console.error("voice agent: getToken() failed", error);
      this.#closed = true;
      this.#handlers.onLost("connection_failed");
      return;
    }
    if (this.#closed) return;
    let socket;
    try {
      socket = new WebSocket(url);
    } catch (error) {
      console.error("voice agent: cannot open the WebSocket", error);
      this.#closed = true;
      this.#handlers.onLost("connection_failed");
      return;
    }
    socket.binaryType = "arraybuffer";
    socket.onopen = () => this.#opened(socket);
    socket.onmessage = (message) => this.#received(socket, message.data);
    socket.onclose = (event) => this.#socketClosed(socket, event.code);
    this.#socket = socket;
    this.#established = this.#audioOpen = this.#resuming = false;
  }

  /**
   * Send a JSON message now, or keep it until the socket is (re)established.
   * @returns {boolean} whether it went out now
   */
  send(message, { queue = true } = {}) {
    if (this.#closed) return false;
    if (this.#established && this.#socket?.readyState === WebSocket.OPEN) {
      this.#transmit(message);
      return true;
    }
    if (queue) this.#outbox.push(message);
    return false;
  }

  /** Sends a microphone frame, or keeps it (bounded) until the session is ready. */
  sendAudio(pcm) {
    if (this.#closed) return;
    if (this.#audioOpen && this.#socket?.readyState === WebSocket.OPEN) {
      this.#socket.send(pcm);
      this.#lastSentAt = Date.now();
      return;
    }
    this.#earlyAudio.push(pcm);
    this.#earlyAudioBytes += pcm.byteLength;
    while (this.#earlyAudioBytes > EARLY_AUDIO_MAX_BYTES) {
      this.#earlyAudioBytes -= this.#earlyAudio.shift().byteLength;
    }
  }

  /** What the microphone said before the session was ready, in messages of at most 1 s. */
  #sendEarlyAudio() {
    const frames = this.#earlyAudio.splice(0);
    this.#earlyAudioBytes = 0;
    let chunk = [];
    let size = 0;
    const flush = () => {
      if (!size) return;
      const joined = new Uint8Array(size);
      let at = 0;
      for (const frame of chunk) {
        joined.set(new Uint8Array(frame), at);
        at += frame.byteLength;
      }
      this.#socket.send(joined.buffer);
      chunk = [];
      size = 0;
    };
    for (const frame of frames) {
      if (size + frame.byteLength > EARLY_AUDIO_MESSAGE_BYTES) flush();
      chunk.push(frame);
      size += frame.byteLength;
    }
    flush();
    this.#lastSentAt = Date.now();
  }

  close() {
    this.#closed = true;
    this.#earlyAudio = [];
    this.#earlyAudioBytes = 0;
    clearTimeout(this.#retryTimer);
    clearInterval(this.#keepAlive);
    const socket = this.#socket;
    this.#socket = null;
    if (socket && socket.readyState <= WebSocket.OPEN) socket.close(CLOSE.NORMAL, "stopped");
  }

  #transmit(message) {
    this.#socket.send(JSON.stringify(message));
    this.#lastSentAt = Date.now();
  }

  async #opened(socket) {
    let first;
    if (this.#sessionId && this.#resumeToken) {
      const [sessionId, resumeToken, lastSeq] = [this.#sessionId, this.#resumeToken, this.#lastSeq];
      first = { type: MESSAGE.RESUME, sessionId, resumeToken, lastSeq };
      this.#resuming = true;
    } else {
      first = await this.#configure();
      this.#lastSeq = 0; // a new session counts from 1
    }
    if (socket !== this.#socket || socket.readyState !== WebSocket.OPEN) return;
    this.#transmit(first);
    this.#established = true;
    this.#audioOpen = this.#resuming;
    for (const message of this.#outbox.splice(0)) this.#transmit(message);
    if (this.#audioOpen) this.#sendEarlyAudio();
    clearInterval(this.#keepAlive);
    this.#keepAlive = setInterval(() => {
      if (Date.now() - this.#lastSentAt < KEEPALIVE_MS) return;
      this.send({ type: MESSAGE.PING, t: Date.now() }, { queue: false });
    }, KEEPALIVE_MS / 5);
    if (this.#resuming) this.#transmit({ type: MESSAGE.PING, t: Date.now() }); // its pong confirms the resume
  }

  #received(socket, data) {
    if (socket !== this.#socket) return;
    if (typeof data !== "string") {
      this.#handlers.onAudio(data);
      return;
    }
    let event;
    try {
      event = JSON.parse(data);
    } catch {
      console.error("voice agent: the platform sent a frame that is not JSON");
      return;
    }
    const resuming = this.#resuming;
    const fresh = this.#fresh(event);
    if (resuming && !this.#resuming) {
      this.#handlers.onResumed();
      this.#moved?.close(CLOSE.NORMAL, "moved"); // the session lives on this socket now
      this.#moved = null;
    }
    if (!fresh) return;
    if (event.type === EVENT.READY) {
      this.#sessionId = event.sessionId;
      this.#resumeToken = event.resumeToken;
      this.#everReady = this.#audioOpen = true;
      this.#attempts = 0;
      this.#sendEarlyAudio(); // the user's first words, spoken while the session started
    }
    this.#handlers.onEvent(event);
    if (event.type === EVENT.RECONNECT) this.#move();
  }

  /**
   * The platform's process is shutting down (a deploy): open a new socket now, which
   * resumes on another process. The old socket's frames and close are ignored from now on;
   * it is closed once the new one has resumed (the old process has handed the session over).
   */
  #move() {
    this.#moved = this.#socket;
    clearInterval(this.#keepAlive);
    this.#attempts = 0;
    this.open();
  }

  /** Whether `event` is new; updates lastSeq. Anything but an error confirms a resume. */
  #fresh(event) {
    const resuming = this.#resuming;
    if (event.type !== EVENT.ERROR) {
      this.#resuming = false;
      if (resuming) this.#attempts = 0;
    }
    if (typeof event.seq !== "number") return true;
    if (event.seq > this.#lastSeq) {
      this.#lastSeq = event.seq;
      return true;
    }
    // A refused resume answers on a fresh sequence: its error is new even with a low seq.
    return resuming && event.type === EVENT.ERROR && FATAL_ERRORS.has(event.code);
  }

  #socketClosed(socket, code) {
    if (socket !== this.#socket || this.#closed) return;
    this.#socket = null;
    this.#established = this.#audioOpen = false;
    clearInterval(this.#keepAlive);
    if (code >= 4000 && code < 4100) {
      this.#closed = true;
      this.#handlers.onRefused(REFUSAL_CLOSE_CODES[code] ?? "refused", code);
      return;
    }
    if (this.#attempts >= RETRY_DELAYS_MS.length) {
      this.#closed = true;
      this.#handlers.onLost(this.#everReady ? "connection_lost" : "connection_failed");
      return;
    }
    // Equal jitter (half the step, plus up to half again at random): the sessions a dropped
    // process held do not all come back in the same instant.
    const step = RETRY_DELAYS_MS[this.#attempts++];
    const delay = step / 2 + Math.random() * (step / 2);
    this.#handlers.onRetry();
    this.#retryTimer = setTimeout(() => this.open(), delay);
  }
}

