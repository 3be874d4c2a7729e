"""A test's patterns cannot pin an evals worker: nested repeats are refused when saved, and
any pattern is matched in a child process that is stopped past its time bound. The judge's
verdict is parsed in linear time."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from evals_app import checks, judge, patterns
from evals_app.conversation import Reply, ToolUse
from sessions_app import services as agent_services
from tests.conftest import api_client
from tests.factories import Tenant, order_tool

EVIL = "(a+)+$"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "turn",
    [
        {"user": "hi", "reply_matches": EVIL},
        {"user": "hi", "reply_matches": "x" * 501},
        {"user": "hi", "tool_called": "order", "tool_arguments": {"id": "(\\d*)*z"}},
    ],
)
def test_a_backtracking_or_long_pattern_is_refused_when_saved(
    owner: Tenant, turn: dict[str, Any]
) -> None:
    agent_services.agent_create(
        workspace=owner.workspace, name="Shop", slug="shop", mode="text",
        instructions="Help.", tools=[order_tool()],
    )  # fmt: skip
    response = api_client(owner.secret_key).post(
        "/api/v1/agents/shop/tests", {"name": "redos", "turns": [turn]}, format="json"
    )
    assert response.status_code == 400, response.content


def test_ordinary_patterns_pass_validation() -> None:
    for ok in (r"order \d+", r"^(yes|no)\b", r"[a-z]+@[a-z]+\.com", r"(ab)?c*"):
        assert patterns.pattern_problem(ok) is None, ok


def test_a_slow_match_is_stopped_and_fails_its_expectation(settings: Any) -> None:
    settings.AGENT_TEST_PATTERN_TIMEOUT_S = 1
    started = time.monotonic()
    # Saved before the check existed (or written to the row directly): still bounded.
    results = asyncio.run(
        checks.turn_checks(
            {"user": "x", "reply_matches": EVIL},
            Reply(text="a" * 40 + "!"),
            [],
            None,  # type: ignore[arg-type]
        )
    )
    assert time.monotonic() - started < 5
    assert results[0]["passed"] is False
    assert "took too long" in results[0]["detail"]


def test_patterns_still_match(settings: Any) -> None:
    reply = Reply(text="Order 42 is on its way", tools=[ToolUse("order", {"id": "42"})])
    expected = {
        "user": "x", "reply_matches": r"Order \d+", "tool_called": "order",
        "tool_arguments": {"id": r"^4\d$"},
    }  # fmt: skip
    results = asyncio.run(checks.turn_checks(expected, reply, [], None))  # type: ignore[arg-type]
    assert [r["passed"] for r in results] == [True, True], results


def test_the_judges_verdict_is_parsed_in_linear_time() -> None:
    assert judge._first_object('Sure: {"pass": true, "reason": "ok"} done') == {
        "pass": True,
        "reason": "ok",
    }
    started = time.monotonic()
    assert judge._first_object("{" * 200_000) is None
    assert judge._first_object('{"a":' + "[" * 200_000) is None
    assert time.monotonic() - started < 2
