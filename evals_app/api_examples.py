"""Examples of the agent-test and simulation operations for the OpenAPI schema
(``tests/test_openapi.py`` checks each against its schema and sends each request example)."""

from __future__ import annotations

from typing import Any

from core.api_examples import request, response

_TEST: dict[str, Any] = {
    "name": "looks up an order",
    "turns": [
        {
            "user": "Where is my order 1234?",
            "tool_called": "track_order",
            "tool_arguments": {"order_number": "^1234$"},
            "reply_contains": "shipped",
        },
        {"user": "Thanks, bye!", "tool_not_called": "*", "judge": "The agent says goodbye."},
    ],
    "tool_results": {"track_order": {"status": "shipped"}},
}
_RUN: dict[str, Any] = {
    "id": "0b7e2a52-8d7c-4a8e-9f61-1f3c0d5e7a90",
    "agent": "support",
    "version": None,
    "spoken": False,
    "status": "failed",
    "message": "0 of 1 tests passed",
    "results": [
        {
            "test": "looks up an order",
            "passed": False,
            "turns": [
                {
                    "user": "Where is my order 1234?",
                    "spoken": False,
                    "reply": "Let me check that.",
                    "error": "",
                    "tools": [],
                    "checks": [
                        {"check": "tool_called track_order", "passed": False,
                         "detail": "called: no tool"},
                    ],
                }
            ],
        }
    ],
    "created_at": "2025-06-03T09:20:00Z",
    "finished_at": "2025-06-03T09:20:04Z",
}  # fmt: skip
_SCENARIO: dict[str, Any] = {
    "persona": "A hurried customer who gives the order number only when asked.",
    "goal": "Find out when order 1234 arrives.",
    "criteria": ["The agent asks for the order number before looking it up."],
    "max_turns": 4,
    "mode": "text",
}
_SIMULATION: dict[str, Any] = {
    "id": "5d1f7c0e-2b9a-4f4e-8a3b-6c2d9e0f1a2b",
    "batch": "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
    "version": None,
    **_SCENARIO,
    "status": "passed",
    "message": "1 of 1 criteria met",
    "transcript": [
        {"role": "user", "text": "When does my order arrive?"},
        {"role": "assistant", "text": "Which order number is it?"},
    ],
    "verdicts": [
        {
            "criterion": _SCENARIO["criteria"][0],
            "passed": True,
            "reason": "It asked for the number first.",
        }
    ],
    "created_at": "2025-06-03T09:20:00Z",
    "finished_at": "2025-06-03T09:20:09Z",
}

TEST_LIST = [response("An agent's tests", {**_TEST, "created_at": "2025-06-03T09:20:00Z"})]
TEST_SAVE = [
    request("A test with two turns", _TEST),
    response("Saved", {**_TEST, "created_at": "2025-06-03T09:20:00Z"}, 201),
]
RUN_LIST = [response("Runs", _RUN)]
RUN_CREATE = [
    request("Against the draft", {}),
    response("Queued", {**_RUN, "status": "queued", "message": "", "results": [],
                        "finished_at": None}, 202),
]  # fmt: skip
_SPOKEN_TURN: dict[str, Any] = {
    "user": "What is the weather in Berlin?",
    "spoken": True,
    "heard": "What is the weather in Borland?",
    "reply": "I could not find Borland.",
    "error": "",
    "tools": [{"name": "get_weather", "arguments": {"city": "Borland"}}],
    "checks": [
        {"check": "tool_called get_weather", "passed": False,
         "detail": "get_weather was called with {'city': 'Borland'}"},
    ],
}  # fmt: skip
RUN_DETAIL = [
    response("A failed run", _RUN),
    response(
        "A spoken turn: what was heard next to what was written",
        {**_RUN, "spoken": True, "results": [
            {"test": "weather by voice", "passed": False, "turns": [_SPOKEN_TURN]}
        ]},
    ),
]  # fmt: skip
SIMULATION_LIST = [
    response("Simulations", _SIMULATION),
    response(
        "In voice mode",
        {**_SIMULATION, "mode": "voice", "transcript": [
            {"role": "user", "text": "When does my order arrive?",
             "heard": "When does my order arrive?"},
            {"role": "assistant", "text": "Which order number is it?", "audio_ms": 1420},
        ]},
    ),
]  # fmt: skip
SIMULATION_CREATE = [
    request("One scenario", {"scenarios": [_SCENARIO]}),
    response("Queued", {**_SIMULATION, "status": "queued", "message": "", "transcript": [],
                        "verdicts": [], "finished_at": None}, 202),
]  # fmt: skip
