"""Examples of the agent-version operations for the OpenAPI schema (``tests/test_openapi.py``
checks each against its schema and sends each request example)."""

from __future__ import annotations

from typing import Any

from core.api_examples import request, response

_VERSION: dict[str, Any] = {
    "number": 3,
    "note": "shorter greeting",
    "digest": "5be0…c1d2",
    "created_by": "owner@example.com",
    "created_at": "2025-06-03T09:20:00Z",
    "published": True,
    "split_percent": 0,
}
_CONFIG: dict[str, Any] = {
    "name": "Support",
    "instructions": "You are the voice of Example Shop's support.",
    "greeting": "Hi, Example Shop here.",
    "voice": "",
    "mode": "voice",
    "llm_model": "",
    "llm_provider": "",
    "stt_provider": "",
    "tts_provider": "",
    "llm_fallbacks": [],
    "tts_fallbacks": [],
    "tools": [],
    "vocabulary": [],
    "empty_reply": "",
    "idle_timeout_s": None,
    "max_session_s": None,
    "knowledge_mode": "tool",
    "knowledge_timeout_ms": None,
    "tool_filler": "",
    "tool_filler_after_ms": None,
    "knowledge_base_ids": [],
}

VERSION_LIST = [response("An agent's versions", _VERSION)]
VERSION_DETAIL = [response("Version 3", {**_VERSION, "config": _CONFIG})]
VERSION_DIFF = [
    response(
        "The greeting changed",
        {
            "name": "greeting",
            "before": "Hi, this is Example Shop. How can I help?",
            "after": "Hi, Example Shop here.",
            "lines": [
                "@@ -1 +1 @@",
                "-Hi, this is Example Shop. How can I help?",
                "+Hi, Example Shop here.",
            ],
        },
    )
]
PUBLISH = [
    request("Publish the draft", {"note": "shorter greeting"}),
    response("Version 3, published", _VERSION, 201),
    response(
        "Tests required",
        {
            "error": {
                "code": "tests_required",
                "message": "the draft's tests have not passed: run 12 failed 1 of 3 cases",
            }
        },
        409,
    ),
]
ROLLBACK = [
    request("Back to version 1", {"version": 1}),
    response("Version 1, published again", {**_VERSION, "number": 1, "note": "before versions"}),
]
SPLIT = [
    request("A tenth of new sessions to version 1", {"version": 1, "percent": 10}),
    response("The versions, with the split", {**_VERSION, "published": False, "split_percent": 10}),
]
PIN = [
    request("Pin the key to version 1", {"version": 1}),
    response("Pinned", {"key": 12, "version": 1}),
]
