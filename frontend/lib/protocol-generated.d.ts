// Generated from engine/protocol.py by `python manage.py protocol_js`: do not edit.

export declare const SERVER_EVENTS: {
  readonly READY: "ready";
  readonly GREETING: "greeting";
  readonly TRANSCRIPT: "transcript";
  readonly TURN: "turn";
  readonly THINKING: "thinking";
  readonly CHAT_DELTA: "chat_delta";
  readonly CHAT: "chat";
  readonly TOOL_CALL: "tool_call";
  readonly TOOL_STATUS: "tool_status";
  readonly TTS_DONE: "tts_done";
  readonly CANCELLED: "cancelled";
  readonly METRICS: "metrics";
  readonly RESET: "reset";
  readonly PONG: "pong";
  readonly RECONNECT: "reconnect";
  readonly ERROR: "error";
};
export type ServerEventType = "cancelled" | "chat" | "chat_delta" | "error" | "greeting" | "metrics" | "pong" | "ready" | "reconnect" | "reset" | "thinking" | "tool_call" | "tool_status" | "transcript" | "tts_done" | "turn";

export declare const CLIENT_MESSAGES: {
  readonly CONFIGURE: "configure";
  readonly CANCEL: "cancel";
  readonly RESET: "reset";
  readonly TEXT: "text";
  readonly CONTEXT: "context";
  readonly TOOL_RESULT: "tool_result";
  readonly PING: "ping";
  readonly AUDIO_READY: "audio_ready";
  readonly RESUME: "resume";
};
export type ClientMessageType = "audio_ready" | "cancel" | "configure" | "context" | "ping" | "reset" | "resume" | "text" | "tool_result";

export declare const ERROR_CODES: {
  readonly BAD_JSON: "bad_json";
  readonly BAD_MESSAGE: "bad_message";
  readonly UNKNOWN_TYPE: "unknown_type";
  readonly INVALID: "invalid";
  readonly FRAME_TOO_LARGE: "frame_too_large";
  readonly NOT_CONFIGURED: "not_configured";
  readonly ALREADY_CONFIGURED: "already_configured";
  readonly NOT_VOICE_MODE: "not_voice_mode";
  readonly UNKNOWN_TOOL_CALL: "unknown_tool_call";
  readonly CONTEXT_LIMIT: "context_limit";
  readonly RATE_LIMITED: "rate_limited";
  readonly LLM_FAILED: "llm_failed";
  readonly STT_FAILED: "stt_failed";
  readonly TTS_FAILED: "tts_failed";
  readonly VOICE_UNAVAILABLE: "voice_unavailable";
  readonly INTERNAL: "internal";
  readonly SERVICE_UNAVAILABLE: "service_unavailable";
  readonly RESUME_UNAVAILABLE: "resume_unavailable";
  readonly RESUME_REFUSED: "resume_refused";
  readonly CONFIGURE_TIMEOUT: "configure_timeout";
  readonly BAD_PROTOCOL: "bad_protocol";
  readonly INVALID_KEY: "invalid_key";
  readonly INVALID_TOKEN: "invalid_token";
  readonly TOKEN_REQUIRED: "token_required";
  readonly SECRET_KEY_REFUSED: "secret_key_refused";
  readonly ORIGIN_NOT_ALLOWED: "origin_not_allowed";
  readonly AGENT_NOT_ALLOWED: "agent_not_allowed";
  readonly INLINE_CONFIG_REFUSED: "inline_config_refused";
  readonly INLINE_CODE_REFUSED: "inline_code_refused";
  readonly TOO_MANY_SESSIONS: "too_many_sessions";
  readonly TOO_MANY_SESSIONS_FROM_ADDRESS: "too_many_sessions_from_address";
  readonly TOO_MANY_CONNECTIONS: "too_many_connections";
  readonly TOO_MANY_MESSAGES: "too_many_messages";
  readonly AUDIO_TOO_FAST: "audio_too_fast";
  readonly QUOTA_EXCEEDED: "quota_exceeded";
  readonly KEY_REVOKED: "key_revoked";
  readonly KEY_EXPIRED: "key_expired";
  readonly SESSION_ENDED: "session_ended";
  readonly SESSION_IDLE: "session_idle";
  readonly SESSION_TOO_LONG: "session_too_long";
  readonly SESSION_DISPLACED: "session_displaced";
};
export type ErrorCode = "agent_not_allowed" | "already_configured" | "audio_too_fast" | "bad_json" | "bad_message" | "bad_protocol" | "configure_timeout" | "context_limit" | "frame_too_large" | "inline_code_refused" | "inline_config_refused" | "internal" | "invalid" | "invalid_key" | "invalid_token" | "key_expired" | "key_revoked" | "llm_failed" | "not_configured" | "not_voice_mode" | "origin_not_allowed" | "quota_exceeded" | "rate_limited" | "resume_refused" | "resume_unavailable" | "secret_key_refused" | "service_unavailable" | "session_displaced" | "session_ended" | "session_idle" | "session_too_long" | "stt_failed" | "token_required" | "too_many_connections" | "too_many_messages" | "too_many_sessions" | "too_many_sessions_from_address" | "tts_failed" | "unknown_tool_call" | "unknown_type" | "voice_unavailable";

export declare const CLOSE_CODES: {
  readonly NORMAL: 1000;
  readonly GOING_AWAY: 1001;
  readonly NO_STATUS: 1005;
  readonly ABNORMAL: 1006;
  readonly SERVER_ERROR: 1011;
  readonly RESTART: 1012;
  readonly NO_CONFIGURE: 4000;
  readonly BAD_KEY: 4001;
  readonly SECRET_KEY: 4002;
  readonly ORIGIN: 4003;
  readonly AGENT: 4004;
  readonly INLINE_REFUSED: 4008;
  readonly ENDED: 4009;
  readonly IDLE: 4010;
  readonly TOO_LONG: 4011;
  readonly DISPLACED: 4012;
  readonly TOO_MANY: 4029;
  readonly QUOTA_EXCEEDED: 4030;
  readonly TRY_AGAIN: 4503;
  readonly RESUME_REFUSED: 4001;
};
export type CloseCode = 1000 | 1001 | 1005 | 1006 | 1011 | 1012 | 4000 | 4001 | 4002 | 4003 | 4004 | 4008 | 4009 | 4010 | 4011 | 4012 | 4029 | 4030 | 4503;

export declare const TOOL_STATUSES: {
  readonly STARTED: "started";
  readonly COMPLETED: "completed";
  readonly FAILED: "failed";
  readonly TIMED_OUT: "timed_out";
  readonly CANCELLED: "cancelled";
};
export type ToolStatus = "cancelled" | "completed" | "failed" | "started" | "timed_out";
