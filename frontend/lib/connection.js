// One conversation's socket: configure or resume, seq de-duplication, backoff, keep-alive.

import { FATAL_ERRORS, REFUSAL_CLOSE_CODES } from "./errors.js";

const RETRY_DELAYS_MS = [500, 1000, 2000, 4000, 8000, 10000];
const KEEPALIVE_MS = 25000; // a ping when nothing else was sent, for idle proxies


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
  #retryTimer = null;
  #keepAlive = null;
  #lastSentAt = 0;
  #closed = false;

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

  sendAudio(pcm) {
    if (this.#audioOpen && this.#socket?.readyState === WebSocket.OPEN) {
      this.#socket.send(pcm);
      this.#lastSentAt = Date.now();
    }
  }

  close() {
    this.#closed = true;
    clearTimeout(this.#retryTimer);
    clearInterval(this.#keepAlive);
    const socket = this.#socket;
    this.#socket = null;
    if (socket && socket.readyState <= WebSocket.OPEN) socket.close(1000, "stopped");
  }

  #transmit(message) {
    this.#socket.send(JSON.stringify(message));
    this.#lastSentAt = Date.now();
  }

  async #opened(socket) {
    let first;
    if (this.#sessionId && this.#resumeToken) {
      const [sessionId, resumeToken, lastSeq] = [this.#sessionId, this.#resumeToken, this.#lastSeq];
      first = { type: "resume", sessionId, resumeToken, lastSeq };
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
    clearInterval(this.#keepAlive);
    this.#keepAlive = setInterval(() => {
      if (Date.now() - this.#lastSentAt < KEEPALIVE_MS) return;
      this.send({ type: "ping", t: Date.now() }, { queue: false });
    }, KEEPALIVE_MS / 5);
    if (this.#resuming) this.#transmit({ type: "ping", t: Date.now() }); // its pong confirms the resume
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
    if (resuming && !this.#resuming) this.#handlers.onResumed();
    if (!fresh) return;
    if (event.type === "ready") {
      this.#sessionId = event.sessionId;
      this.#resumeToken = event.resumeToken;
      this.#everReady = this.#audioOpen = true;
      this.#attempts = 0;
    }
    this.#handlers.onEvent(event);
  }

  /** Whether `event` is new; updates lastSeq. Anything but an error confirms a resume. */
  #fresh(event) {
    const resuming = this.#resuming;
    if (event.type !== "error") {
      this.#resuming = false;
      if (resuming) this.#attempts = 0;
    }
    if (typeof event.seq !== "number") return true;
    if (event.seq > this.#lastSeq) {
      this.#lastSeq = event.seq;
      return true;
    }
    // A refused resume answers on a fresh sequence: its error is new even with a low seq.
    return resuming && event.type === "error" && FATAL_ERRORS.has(event.code);
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
    const delay = RETRY_DELAYS_MS[this.#attempts++];
    this.#handlers.onRetry();
    this.#retryTimer = setTimeout(() => this.open(), delay);
  }
}

