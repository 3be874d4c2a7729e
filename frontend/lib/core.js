// The connection, audio and state of one conversation, shared by client.js and react.js.
// Parts: errors.js (readable errors), events.js (emitter, store), config.js (what
// `configure` sends), connection.js (socket, resume, backoff), audio.js (worklets).
//
// Wire protocol: docs/protocol.md, "The realtime protocol (v1)".

import { AudioIO, microphoneErrorCode } from "./audio.js";
import {
  checkedPlatformUrl,
  hasCredential,
  pick,
  sessionUrlSource,
  stringValues,
  toolDeclarations,
  withoutUndefined,
} from "./config.js";
import { Connection } from "./connection.js";
import { errorInfo, FATAL_ERRORS, logError, READABLE, withPlatformLinks } from "./errors.js";
import { LIBRARY_URL } from "./location.js";
import { Emitter, Store } from "./events.js";
import {
  CLIENT_MESSAGES as MESSAGE,
  SERVER_EVENTS as EVENT,
  TOOL_STATUSES as TOOL_STATUS,
} from "./protocol-generated.js";

export { noticesOf, readableError } from "./errors.js";
export { functionSource, toolDeclarations } from "./config.js";
export { Emitter, Store } from "./events.js";

const DEFAULT_TTS_RATE = 24000;
const ERROR_TEXT_MAX = 1000;
const BARGE_IN = { threshold: 0.03, minMs: 250 };
// Microphone audio per message: fewer, larger messages cost the server less per second of
// audio; 20-100 ms (the server takes any size up to 64 KB).
const FRAME_MS = { default: 40, min: 20, max: 100 };

// ---------------------------------------------------------------- the session

/** @typedef {"idle"|"connecting"|"ready"|"listening"|"thinking"|"speaking"|"stopped"|"error"} Status */

const INITIAL = {
  status: "idle",
  messages: [],
  transcript: "",
  error: null,
  microphone: "off", // "off" | "pending" | "on" | "denied" | "unavailable"
  audio: "off", // "off" | "blocked" (waits for a click) | "on"
};

/**
 * One conversation with an agent: the connection, audio, client tools and the state.
 * `start()` connects (again after `stop()`: a new conversation). Listen with `on(name, fn)`;
 * read the state with `getSnapshot()` / `subscribe(fn)`.
 */
export class AgentSession extends Emitter {
  /** @type {(listener: () => void) => () => void} */ subscribe;
  /** @type {() => object} */ getSnapshot;
  #options;
  #store = new Store({ ...INITIAL });
  #connection = null;
  #audio = null;
  #running = false;
  #failed = false;
  #connected = false;
  #sessionReady = false; // a `ready` arrived since start()
  #phase = "idle"; // "idle" | "thinking" | "speaking"
  #nextMessageId = 1;
  #ttsRate = DEFAULT_TTS_RATE;
  #audioReported = false; // the server knows the page can play audio
  #newReply = false;
  #awaitingAudio = false; // the reply's audio is not all received yet
  #playing = false;
  #playedSamples = 0;
  #dropAudio = false; // after our cancel/reset, until the server confirms
  #voicedMs = 0;
  #pendingCalls = new Set();
  #stepCalls = new Set(); // tool calls of the current reply already listed in its steps
  #deferred = null; // events held back while start() runs

  /**
   * @param {object} options see client.d.ts (`VoiceAgentOptions`)
   */
  constructor(options = {}) {
    super();
    if (!hasCredential(options)) {
      throw new TypeError("voice agent: `apiKey` (a pk_… key), `token` or `getToken` is required");
    }
    const platformUrl = options.platformUrl ?? new URL(LIBRARY_URL).origin;
    checkedPlatformUrl(platformUrl); // a wrong URL is a mistake in the page: say so at once
    this.#options = {
      ...options,
      mode: options.mode ?? "voice",
      platformUrl,
      variables: stringValues(options.variables),
      bargeIn: options.bargeIn === false ? null : { ...BARGE_IN, ...Object(options.bargeIn) },
      frameMs: frameMs(options.frameMs),
    };
    this.subscribe = this.#store.subscribe;
    this.getSnapshot = this.#store.getSnapshot;
  }

  /** @returns {Status} */
  get status() {
    return this.#store.getSnapshot().status;
  }

  get messages() {
    return this.#store.getSnapshot().messages;
  }

  get mode() {
    return this.#options.mode;
  }

  get clientTools() {
    return this.#options.clientTools;
  }

  /** Client tools may be replaced while running (the declared names stay). */
  set clientTools(tools) {
    this.#options.clientTools = tools;
  }

  /** @protected Events raised while `start()` runs reach listeners added right after it. */
  emit(name, payload) {
    if (this.#deferred) this.#deferred.push([name, payload]);
    else super.emit(name, payload);
  }

  /** Connects in the background; returns `this`. */
  start() {
    if (this.#running) return this;
    this.#deferred = [];
    try {
      this.#begin();
    } finally {
      const deferred = this.#deferred;
      this.#deferred = null;
      queueMicrotask(() => {
        for (const [name, payload] of deferred) super.emit(name, payload);
      });
    }
    return this;
  }

  #begin() {
    this.#running = true;
    this.#failed = this.#connected = this.#sessionReady = false;
    this.#phase = "idle";
    this.#audioReported = this.#dropAudio = this.#playing = this.#awaitingAudio = false;
    this.#pendingCalls.clear();
    if (this.#store.getSnapshot().messages.length) this.emit("reset", {});
    this.#store.update({ ...INITIAL, status: this.status });
    this.#refreshStatus();
    if (globalThis.location?.protocol === "file:") {
      // The browser sends no usable origin for a file, so the platform would refuse it.
      this.#reportError(errorInfo("file_page"), { fatal: true });
      this.#shutdown({ failed: true });
      return;
    }
    const audioStarted = this.#options.mode === "voice" ? this.#startAudio() : null;
    this.#connection = new Connection({
      url: sessionUrlSource(this.#options),
      configure: () => this.#configureMessage(audioStarted),
      onEvent: (event) => this.#onEvent(event),
      onAudio: (pcm) => this.#onAudio(pcm),
      onResumed: () => this.#onConnected(),
      onRetry: () => this.#onReconnecting(),
      onLost: (code) => this.#onConnectionLost(code),
      onRefused: (code, closeCode) => this.#onRefused(code, closeCode),
    });
    // The socket and the microphone wait a microtask, so a stop() right away (React's
    // StrictMode mounts twice) costs neither a connection nor a permission prompt.
    const connection = this.#connection;
    queueMicrotask(() => {
      if (connection !== this.#connection) return;
      if (audioStarted) this.#openMicrophone(audioStarted);
      connection.open();
    });
  }

  /** Ends the conversation: closes the socket, the microphone and the audio. */
  stop() {
    this.#shutdown();
  }

  /** Stops the agent's current reply at once (barge-in). */
  cancel() {
    if (!this.#running || !this.#connection) return;
    const playedMs = this.#audio ? Math.round((this.#playedSamples * 1000) / this.#ttsRate) : undefined;
    this.#interruptReply();
    if (this.#connection.send(withoutUndefined({ type: MESSAGE.CANCEL, playedMs }), { queue: false })) {
      this.#dropAudio = true;
    }
    this.#awaitingAudio = false;
    this.#setPhase("idle");
  }

  /** Starts a new conversation on the same session: clears history here and on the server. */
  reset() {
    if (!this.#running) return;
    this.#flushPlayback();
    if (this.#connection.send({ type: MESSAGE.RESET })) this.#dropAudio = true;
    this.#clearConversation();
  }

  /** Sends a typed turn. */
  sendText(text) {
    const value = String(text ?? "").trim();
    if (!value || !this.#running) return;
    this.#connection.send({ type: MESSAGE.TEXT, text: value });
  }

  /**
   * Updates template variables (and adds an optional note to the conversation) without a reply.
   * @param {Record<string, string>} [variables]
   * @param {string} [note]
   */
  updateContext(variables, note) {
    const values = stringValues(variables);
    this.#options.variables = { ...this.#options.variables, ...values };
    if (!this.#running) return;
    this.#connection.send(withoutUndefined({ type: MESSAGE.CONTEXT, variables: values, text: note }));
  }

  // ------------------------------------------------------------ setup

  #startAudio() {
    this.#audio = new AudioIO({
      frameMs: this.#options.frameMs,
      onCapture: (pcm, rms) => this.#onCapture(pcm, rms),
      onPlayback: (message) => this.#onPlayback(message),
      onRunning: () => this.#onAudioRunning(),
    });
    let loaded;
    try {
      loaded = this.#audio.start(this.#ttsRate);
    } catch {
      this.#audio = null;
      this.#reportError(errorInfo("audio_unavailable"));
      this.#store.update({ microphone: "unavailable" });
      return null;
    }
    const audio = this.#audio;
    loaded.catch((error) => {
      if (audio !== this.#audio) return;
      console.error("voice agent: the audio worklets could not be loaded", error);
      this.#audio.close();
      this.#audio = null;
      this.#reportError(errorInfo("audio_unavailable", String(error?.message ?? error)));
    });
    this.#store.update({ microphone: "pending" });
    return audio;
  }

  async #openMicrophone(audio) {
    try {
      await audio.openMicrophone();
      if (audio !== this.#audio) return;
      this.#store.update({ microphone: "on" });
    } catch (error) {
      // Stopped meanwhile, or restarted with another microphone: not this one's business.
      if (!this.#running || (this.#audio !== null && audio !== this.#audio)) return;
      const code = microphoneErrorCode(error);
      this.#store.update({ microphone: code === "microphone_denied" ? "denied" : "unavailable" });
      this.#reportError(errorInfo(code, String(error?.message ?? error)));
    }
    this.#refreshStatus();
  }

  async #configureMessage(audio) {
    const o = this.#options;
    let audioReady;
    if (audio && audio === this.#audio) {
      audioReady = await audio.startsWithoutGesture();
      this.#audioReported = audioReady;
      if (audio === this.#audio) this.#setAudio(audioReady ? "on" : "blocked");
    }
    return withoutUndefined({
      type: MESSAGE.CONFIGURE,
      instructions: o.instructions,
      greeting: o.greeting,
      voice: o.voice,
      mode: o.mode,
      variables: o.variables,
      tools: o.tools || o.clientTools ? toolDeclarations(o.tools, o.clientTools) : undefined,
      audioReady,
    });
  }

  #onAudioRunning() {
    this.#setAudio("on");
    if (this.#audioReported || !this.#connection) return;
    this.#audioReported = true;
    this.#connection.send({ type: MESSAGE.AUDIO_READY });
  }

  #shutdown({ failed = false } = {}) {
    if (!this.#running) return;
    this.#running = false;
    this.#failed = failed;
    this.#connection?.close();
    this.#connection = null;
    this.#audio?.close();
    this.#audio = null;
    this.#pendingCalls.clear();
    this.#playing = false;
    this.#phase = "idle";
    this.#finishStreamingMessage();
    this.#store.update({ transcript: "", microphone: "off", audio: "off" });
    this.#refreshStatus();
  }

  /** "blocked": the browser holds sound and microphone until the user clicks. */
  #setAudio(audio) {
    const { error } = this.#store.getSnapshot();
    if (audio === "blocked") this.#reportError(errorInfo("audio_blocked"));
    else if (error?.code === "audio_blocked") this.#store.update({ error: null });
    this.#store.update({ audio });
    this.#refreshStatus();
  }

  // ------------------------------------------------------------ connection events

  #onConnected() {
    this.#connected = true;
    this.#dropAudio = false;
    this.#refreshStatus();
  }

  #onReconnecting() {
    this.#connected = false;
    this.#dropAudio = false;
    this.#awaitingAudio = false;
    this.#flushPlayback();
    this.#setPhase("idle"); // "connecting" meanwhile
  }

  #onConnectionLost(code) {
    this.#reportError(errorInfo(code), { fatal: true });
    this.#shutdown({ failed: true });
  }

  #onRefused(code, closeCode) {
    if (this.#failed || !this.#running) return; // the error event said why already
    const error = { ...errorInfo(code), message: `the platform closed the connection (${closeCode})` };
    this.#reportError(error, { fatal: true });
    this.#shutdown({ failed: true });
  }

  #onEvent(event) {
    this.emit("event", event);
    switch (event.type) {
      case EVENT.READY:
        if (event.notice?.message) console.warn(`voice agent: ${event.notice.message}`);
        this.#ttsRate = event.ttsSampleRate ?? DEFAULT_TTS_RATE;
        this.#sessionReady = true;
        this.#onConnected();
        break;
      case EVENT.GREETING:
        this.#beginReply();
        this.#addMessage("assistant", event.text ?? "", true);
        break;
      case EVENT.TRANSCRIPT:
        this.#store.update({ transcript: event.text ?? "" });
        this.emit("transcript", { text: event.text ?? "", final: false });
        break;
      case EVENT.TURN:
        this.#onTurn(event.text ?? "");
        break;
      case EVENT.THINKING:
        this.#setPhase("thinking");
        break;
      case EVENT.CHAT_DELTA:
        this.#streamAssistant(event.text ?? "");
        if (this.#phase === "idle") this.#setPhase("thinking"); // e.g. a reply resumed mid-way
        break;
      case EVENT.CHAT:
        this.#onChat(event.text ?? "", event.steps);
        break;
      case EVENT.TOOL_STATUS:
        this.#onToolStatus(event);
        break;
      case EVENT.TOOL_CALL:
        this.emit("tool", { ...pick(event, "callId", "name"), status: "called", arguments: event.arguments });
        this.#runClientTool(event);
        break;
      case EVENT.TTS_DONE:
      case EVENT.METRICS:
        if (event.type === EVENT.METRICS) this.emit("metrics", event);
        this.#awaitingAudio = false;
        if (!this.#playing) this.#setPhase("idle");
        break;
      case EVENT.CANCELLED:
        this.#interruptReply();
        this.#dropAudio = false;
        this.#setPhase("idle");
        break;
      case EVENT.RESET:
        this.#dropAudio = false;
        this.#clearConversation();
        break;
      case EVENT.ERROR:
        this.#onServerError(event);
        break;
    }
    this.#refreshStatus();
  }

  #onServerError({ code = "error", message = "" }) {
    const error = errorInfo(code, withPlatformLinks(message, this.#options.platformUrl));
    // Before the first `ready`, any error means the settings were refused: nothing would follow.
    const fatal = FATAL_ERRORS.has(code) || !this.#sessionReady;
    if (!this.#sessionReady && !READABLE[code]) {
      error.readable = `The voice platform refused this page's agent settings: ${error.message}`;
    }
    this.#reportError(error, { fatal });
    if (fatal) this.#shutdown({ failed: true });
  }

  #reportError(error, { fatal = false } = {}) {
    logError(error, fatal);
    this.#store.update({ error: { ...error, fatal } });
    this.emit("error", error);
  }

  // ------------------------------------------------------------ the conversation

  #onTurn(text) {
    const { error } = this.#store.getSnapshot();
    if (error && !error.fatal && !error.code.startsWith("microphone")) this.#store.update({ error: null });
    this.#store.update({ transcript: "" });
    this.emit("transcript", { text, final: true });
    this.#addMessage("user", text, true);
    this.#beginReply();
    this.#setPhase("thinking");
  }

  #beginReply() {
    this.#stepCalls.clear();
    this.#dropAudio = false;
    this.#newReply = true;
    this.#playedSamples = 0;
    this.#awaitingAudio = Boolean(this.#audio);
  }

  #onChat(text, steps) {
    const last = this.messages.at(-1);
    const streaming = last?.role === "assistant" && !last.final;
    const stepsField = Array.isArray(steps) && steps.length ? { steps: Object.freeze([...steps]) } : {};
    if (streaming) this.#replaceLast({ ...last, text: text || last.text, final: true, ...stepsField });
    else if (text) this.#addMessage("assistant", text, true, stepsField);
    if (!this.#awaitingAudio && !this.#playing) this.#setPhase("idle");
  }

  #streamAssistant(delta) {
    const last = this.messages.at(-1);
    if (last?.role === "assistant" && !last.final) this.#replaceLast({ ...last, text: last.text + delta });
    else this.#addMessage("assistant", delta, false);
  }

  /** Stops playback; the reply being written or heard is marked as interrupted. */
  #interruptReply() {
    const last = this.messages.at(-1);
    const cut = last?.role === "assistant" && (!last.final || this.#playing || this.#awaitingAudio);
    if (cut && !last.interrupted) this.#replaceLast({ ...last, final: true, interrupted: true });
    this.#flushPlayback();
    this.#awaitingAudio = false;
  }

  #finishStreamingMessage() {
    const last = this.messages.at(-1);
    if (last?.role === "assistant" && !last.final) this.#replaceLast({ ...last, final: true });
  }

  #addMessage(role, text, final, extra = {}) {
    const message = Object.freeze({ id: this.#nextMessageId++, role, text, final, ...extra });
    this.#store.update({ messages: Object.freeze([...this.messages, message]) });
    this.emit("message", message);
  }

  #replaceLast(message) {
    const frozen = Object.freeze(message);
    this.#store.update({ messages: Object.freeze([...this.messages.slice(0, -1), frozen]) });
    this.emit("message", frozen);
  }

  #clearConversation() {
    this.#awaitingAudio = false;
    this.#pendingCalls.clear();
    this.#setPhase("idle");
    const { error, messages, transcript } = this.#store.getSnapshot();
    if (!messages.length && !transcript && !error) return;
    this.#store.update({ messages: Object.freeze([]), transcript: "", error: error?.fatal ? error : null });
    this.emit("reset", {});
  }

  // ------------------------------------------------------------ tools

  #onToolStatus({ callId, name, status }) {
    if (status !== TOOL_STATUS.STARTED) this.#pendingCalls.delete(callId); // cancelled or timed out: too late
    else this.#addStep(callId, name);
    this.emit("tool", { callId, name, status });
  }

  /** The reply being written lists its tool calls in `steps` (as `chat` will). */
  #addStep(callId, name) {
    if (this.#stepCalls.has(callId)) return;
    this.#stepCalls.add(callId);
    const step = `Using ${name}`;
    const last = this.messages.at(-1);
    if (last?.role === "assistant" && !last.final) {
      this.#replaceLast({ ...last, steps: Object.freeze([...(last.steps ?? []), step]) });
    } else {
      this.#addMessage("assistant", "", false, { steps: Object.freeze([step]) });
    }
  }

  async #runClientTool({ callId, name, arguments: args }) {
    this.#pendingCalls.add(callId);
    let reply;
    try {
      const tool = this.#options.clientTools?.[name];
      if (typeof tool?.run !== "function") throw new Error(`this page has no client tool named ${name}`);
      const result = await tool.run(args ?? {}, { callId, name });
      reply = { type: MESSAGE.TOOL_RESULT, callId, result: result === undefined ? null : result };
      JSON.stringify(reply); // a cycle or a BigInt becomes the tool's error below
    } catch (error) {
      const text = String(error?.message || error).slice(0, ERROR_TEXT_MAX);
      reply = { type: MESSAGE.TOOL_RESULT, callId, error: text || "the tool failed" };
    }
    if (this.#pendingCalls.delete(callId)) this.#connection?.send(reply);
  }

  // ------------------------------------------------------------ audio

  #onCapture(pcm, rms) {
    this.#connection?.sendAudio(pcm);
    this.emit("level", { rms });
    const bargeIn = this.#options.bargeIn;
    if (!bargeIn || !this.#playing || this.#dropAudio) {
      this.#voicedMs = 0;
      return;
    }
    // Speech over the agent: net voiced time, so short dips between syllables do not reset it.
    const frame = this.#options.frameMs;
    const step = rms >= bargeIn.threshold ? frame : -frame;
    this.#voicedMs = Math.max(0, this.#voicedMs + step);
    if (this.#voicedMs >= bargeIn.minMs) {
      this.#voicedMs = 0;
      this.cancel();
    }
  }

  #onAudio(pcm) {
    if (this.#dropAudio || !this.#audio) return;
    this.#audio.play(pcm, this.#newReply);
    if (this.#newReply) this.#playedSamples = 0;
    this.#newReply = false;
    this.#playing = true;
    this.#setPhase("speaking");
  }

  #onPlayback(message) {
    switch (message.type) {
      case "queued":
        this.emit("audio", { samples: message.samples });
        break;
      case "progress":
        this.#playedSamples = message.played;
        this.#playing = true;
        this.#setPhase("speaking");
        break;
      case "drained":
        this.#playedSamples = message.played;
        this.#playing = false;
        if (!this.#awaitingAudio) this.#setPhase("idle");
        break;
    }
    this.#refreshStatus();
  }

  #flushPlayback() {
    if (!this.#audio) return;
    this.#audio.flush();
    this.#playing = false;
    this.#voicedMs = 0;
  }

  // ------------------------------------------------------------ status

  #setPhase(phase) {
    this.#phase = phase;
    this.#refreshStatus();
  }

  #refreshStatus() {
    const status = this.#computeStatus();
    if (status === this.#store.getSnapshot().status) return;
    this.#store.update({ status });
    this.emit("status", status);
  }

  /** @returns {Status} */
  #computeStatus() {
    if (!this.#running) return this.#failed ? "error" : "stopped";
    if (!this.#connected) return "connecting";
    if (this.#phase !== "idle") return this.#phase;
    const { microphone, audio } = this.#store.getSnapshot();
    return microphone === "on" && audio !== "blocked" ? "listening" : "ready";
  }
}

/** The microphone's frame length: a whole number of ms within FRAME_MS, else a TypeError. */
function frameMs(value) {
  if (value === undefined || value === null) return FRAME_MS.default;
  if (!Number.isInteger(value) || value < FRAME_MS.min || value > FRAME_MS.max) {
    throw new TypeError(`voice agent: frameMs must be a whole number from ${FRAME_MS.min} to ${FRAME_MS.max}`);
  }
  return value;
}
