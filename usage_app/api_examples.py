"""The usage report's example for the OpenAPI schema (Swagger UI shows it);
``tests/test_openapi.py`` checks it against its schema."""

from __future__ import annotations

from typing import Any

from core.api_examples import response

_DAY: dict[str, Any] = {
    "sessions": 14,
    "llm_requests": 61,
    "prompt_tokens": 38_412,
    "completion_tokens": 2_950,
    "estimated_llm_requests": 0,
    "stt_audio_ms": 1_284_300,
    "tts_characters": 9_840,
    "tts_audio_ms": 611_200,
    "server_tool_calls": 19,
    "tool_cpu_ms": 262,
    "client_tool_calls": 4,
    "phone_call_ms": 540_000,
}
_NEXT_DAY: dict[str, Any] = {**_DAY, "sessions": 9, "llm_requests": 40, "prompt_tokens": 24_077}

USAGE = [
    response(
        "Per day",
        {
            "from": "2025-06-01",
            "to": "2025-06-02",
            "group_by": "day",
            "rows": [{"day": "2025-06-01", **_DAY}, {"day": "2025-06-02", **_NEXT_DAY}],
            "total": {name: _DAY[name] + _NEXT_DAY[name] for name in _DAY},
            "quotas": [
                {
                    "metric": "voice_minutes",
                    "period": "month",
                    "period_start": "2025-06-01",
                    "limit": 600,
                    "used": 512.4,
                    "percent": 85,
                    "level": "warning",
                }
            ],
        },
    ),
    response(
        "Per agent",
        {
            "from": "2025-06-01",
            "to": "2025-06-02",
            "group_by": "agent",
            "rows": [
                {"agent": "support", "agent_name": "Support", **_DAY},
                {"agent": None, "agent_name": "inline config", **_NEXT_DAY},
            ],
            "total": {name: _DAY[name] + _NEXT_DAY[name] for name in _DAY},
            "quotas": [],
        },
    ),
]
