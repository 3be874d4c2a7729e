"""Examples of the agents, sessions and session-token operations for the OpenAPI schema
(Swagger UI shows them). Placeholders only: no example holds a working key or token.
``tests/test_openapi.py`` checks each against its schema and sends each request example to
the API."""

from __future__ import annotations

from typing import Any

from core.api_examples import invalid, request, response

# ---------------------------------------------------------------- agents

_TRACK_ORDER = {
    "name": "track_order",
    "description": "Look up an order by its number",
    "parameters": {"order_number": "string"},
    "handler": "async (args, ctx) => {\n"
    "  const r = await ctx.fetch(`https://api.example.com/orders/${args.order_number}`,\n"
    "                            {headers: {Authorization: `Bearer ${ctx.secrets.ORDERS_KEY}`}});\n"
    "  return await r.json();\n"
    "}",
}
_SHOW_ORDER = {
    "name": "show_order",
    "description": "Show the order on the customer's screen",
    "parameters": {"order_number": "string"},
    "client": True,
}
_AGENT_INPUT: dict[str, Any] = {
    "name": "Support",
    "slug": "support",
    "instructions": "You are the voice of Example Shop's support. Answer in one or two short "
    "sentences. Look orders up with track_order, then show them with show_order.",
    "greeting": "Hi, this is Example Shop. How can I help?",
    "voice": "joe",
    "vocabulary": ["Example Shop", "ORD"],
    "idle_timeout_s": 120,
    "tools": [_TRACK_ORDER, _SHOW_ORDER],
    "analysis": {
        "summary": True,
        "criteria": [{"name": "resolved", "description": "The caller learnt where the order is."}],
        "fields": [
            {"name": "order_number", "type": "string", "description": "The order asked about."}
        ],
    },
}
_AGENT: dict[str, Any] = {
    "id": 7,
    **_AGENT_INPUT,
    "mode": "voice",
    "llm_model": "",
    "llm_provider": "",
    "stt_provider": "",
    "tts_provider": "",
    "empty_reply": "",
    "language": "",
    "max_session_s": None,
    "llm_fallbacks": [],
    "tts_fallbacks": [],
    "zero_retention": False,
    "record_audio": False,
    "preemptive_generation": True,
    "tools": [
        {**_TRACK_ORDER, "client": False, "handler_sha256": "3f1c…9a0e", "reads_secrets": True},
        _SHOW_ORDER,
    ],
    "drafts": False,
    "require_tests": False,
    "published_version": 1,
    "created_at": "2025-06-03T09:20:00Z",
    "updated_at": "2025-06-03T09:20:00Z",
}
_SAVED_TOOLS_NOTE = (
    "A server tool is stored with `handler_sha256` (its pin) and `reads_secrets` (whether it "
    "may read secrets marked readable by code)."
)
# One agent's answers add what it needs that the workspace does not have yet (saved anyway).
_WARNING = {
    "field": "tools[0].handler",
    "message": "The tool track_order reads the secret ORDERS_API_KEY, which this workspace "
    "does not have: ctx.secrets.ORDERS_API_KEY is undefined until you add it on the Secrets "
    "page (/w/3/secrets/).",
}
_AGENT_DETAIL: dict[str, Any] = {**_AGENT, "warnings": []}
_WARNINGS_NOTE = (
    f"{_SAVED_TOOLS_NOTE} `warnings`: what the agent needs that the workspace does not have "
    "yet (a secret its handlers read, a speech provider's key, a language model); the agent "
    "is saved anyway."
)

AGENT_LIST = [response("An agent", _AGENT)]
AGENT_DETAIL = [response("An agent", _AGENT_DETAIL, description=_WARNINGS_NOTE)]
AGENT_CREATE = [
    request("A support agent with a server tool and a client tool", _AGENT_INPUT),
    response(
        "The saved agent, with a warning",
        {**_AGENT, "warnings": [_WARNING]},
        201,
        description=_WARNINGS_NOTE,
    ),
    invalid("tools[0].handler", "SyntaxError: Unexpected end of input"),
]
AGENT_REPLACE = [
    request(
        "Name and slug with the fields that change",
        {**_AGENT_INPUT, "greeting": "Example Shop, hi!"},
    ),
    response("The saved agent", {**_AGENT_DETAIL, "greeting": "Example Shop, hi!"}),
]
AGENT_UPDATE = [
    request(
        "A new greeting and a longer idle timeout",
        {"greeting": "Example Shop, hi!", "idle_timeout_s": 300},
    ),
    response(
        "The saved agent",
        {**_AGENT_DETAIL, "greeting": "Example Shop, hi!", "idle_timeout_s": 300},
    ),
]

# ---------------------------------------------------------------- session records

_SESSION: dict[str, Any] = {
    "id": "5b0e7a52-3f7d-4c57-9a43-1f2d8e6c0b91",
    "agent": "support",
    "agent_version": 3,
    "origin": "https://shop.example.com",
    "end_user": "customer-1042",
    "mode": "voice",
    "started_at": "2025-06-03T14:02:11Z",
    "ended_at": "2025-06-03T14:04:37Z",
    "close_code": 1000,
    "turn_count": 1,
    "tool_call_count": 1,
    "live": False,
}
_USAGE = {
    "llm_requests": 2,
    "prompt_tokens": 812,
    "completion_tokens": 41,
    "estimated_llm_requests": 0,
    "stt_audio_ms": 4960,
    "tts_characters": 118,
    "tts_audio_ms": 7420,
    "server_tool_calls": 1,
    "tool_cpu_ms": 14,
    "client_tool_calls": 0,
}
# One spoken turn, from the user's last word (0 ms): the recogniser's end of turn and final
# transcript, an LLM round that called track_order, a second that wrote the reply.
_TURN = {
    "turn_id": 1,
    "source": "speech",
    "outcome": "completed",
    "end_of_utterance_ms": 212.0,
    "stt_final_ms": 48.3,
    "llm_first_token_ms": 279.5,
    "tts_first_byte_ms": 96.2,
    "first_audio_ms": 1118.9,
    "turn_ms": 3120.3,
    "llm_rounds": 2,
    "tools": [{"name": "track_order", "status": "completed", "ms": 190.4}],
    "timeline": [
        {"stage": "end_of_utterance", "start_ms": 0.0, "end_ms": 212.0},
        {"stage": "stt_final", "start_ms": 212.0, "end_ms": 260.3},
        {"stage": "tool:track_order", "start_ms": 541.2, "end_ms": 731.6},
        {"stage": "llm_first_token", "start_ms": 733.0, "end_ms": 1012.5},
        {"stage": "tts_first_byte", "start_ms": 1015.0, "end_ms": 1111.2},
        {"stage": "first_audio", "start_ms": 1118.9, "end_ms": 1118.9},
        {"stage": "turn", "start_ms": 0.0, "end_ms": 3380.6},
    ],
    "llm": {"provider": "platform:llama3.2", "retries": 0, "fallback_reason": None},
    "tts": {"provider": "local", "retries": 0, "fallback_reason": None},
    "usage": _USAGE,
}
_SESSION_DETAIL: dict[str, Any] = {
    **_SESSION,
    "zero_retention": False,
    "transcript": [
        {"role": "user", "text": "Where is my order 1042?", "created_at": "2025-06-03T14:02:19Z"},
        {
            "role": "assistant",
            "text": "Order 1042 has shipped and arrives on Thursday.",
            "created_at": "2025-06-03T14:02:22Z",
        },
    ],
    "turns": [_TURN],
    "tool_calls": [
        {
            "call_id": "call_0",
            "name": "track_order",
            "arguments": {"order_number": "1042"},
            "status": "completed",
            "result": '{"status": "shipped", "eta": "Thursday"}',
            "error": "",
            "duration_ms": 190.4,
            "created_at": "2025-06-03T14:02:20Z",
        }
    ],
    "usage": {**_USAGE, "phone_call_ms": 0},  # a browser session's
    "analysis": {
        "status": "completed",
        "summary": "The caller asked where order 1042 was; it has shipped and arrives Thursday.",
        "criteria": [
            {"name": "resolved", "result": "success", "reason": "The caller got the date."}
        ],
        "data": {"order_number": "1042"},
        "error": "",
        "requested_at": "2025-06-03T14:03:01Z",
        "completed_at": "2025-06-03T14:03:04Z",
    },
    "recording": {
        "url": "https://platform.example.com/recordings/eyJyIjoiOWIxZ…:1uQm2x:Qk3v…",
        "expires_at": "2025-06-03T14:10:00Z",
        "duration_ms": 46000,
        "size_bytes": 2944044,
        "truncated": False,
        "started_at": "2025-06-03T14:02:14Z",
    },
}

SESSION_PAGE = [
    response(
        "A page of sessions",
        {
            "next": "https://platform.example.com/api/v1/sessions?cursor=cD0yMDI1LTA2",
            "previous": None,
            "results": [
                {
                    **_SESSION,
                    "id": "0c6f51d8-8f0e-4a8e-b7a1-52e2d9c4a310",
                    "ended_at": None,
                    "close_code": None,
                    "turn_count": 3,
                    "tool_call_count": 0,
                    "live": True,
                },
                _SESSION,
            ],
        },
    )
]
SESSION_DETAIL = [response("A finished session", _SESSION_DETAIL)]
SESSION_END = [
    response(
        "The ended session",
        {**_SESSION, "ended_at": "2025-06-03T14:03:05Z", "close_code": 4009},
    )
]

# ---------------------------------------------------------------- session tokens

TOKEN_CREATE = [
    request(
        "A token for one customer on one site",
        {
            "agent": "support",
            "variables": {"customer_name": "Ada", "plan": "pro"},
            "page_variables": ["cart_total"],
            "end_user": "customer-1042",
            "origin": "https://shop.example.com",
            "ttl_s": 60,
        },
    ),
    response(
        "The token",
        {"token": "st_…", "expires_at": "2025-06-03T14:03:11Z", "agent": "support"},
        201,
        description="Hand `token` to the page, which connects with `?token=…` within the minute.",
    ),
    invalid("agent", "no agent with this slug"),
]
