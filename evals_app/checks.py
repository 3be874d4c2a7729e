"""What a test expects of each turn, checked; and the shapes tests and scenarios take."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

from engine.providers.base import LLM
from evals_app import judge, patterns, speech
from evals_app.conversation import NOT_HEARD, TIMEOUT, TOO_LONG, Reply

TEXT_MAX = 2000
EXPECTATIONS = (
    "tool_called", "tool_arguments", "tool_not_called", "reply_contains", "reply_matches",
    "judge",
)  # fmt: skip


def _refuse(path: str, message: str) -> ValidationError:
    return ValidationError({"turns": [f"{path}: {message}"]})


def _pattern(path: str, value: Any) -> str:
    problem = patterns.pattern_problem(value)
    if problem is not None:
        raise _refuse(path, problem)
    return str(value)


def _turn_clean(index: int, turn: Any) -> dict[str, Any]:
    path = f"turns[{index}]"
    if not isinstance(turn, dict) or not isinstance(turn.get("user"), str) or not turn["user"]:
        raise _refuse(path, "an object with the user's words in `user`")
    unknown = set(turn) - {"user", "spoken", *EXPECTATIONS}
    if unknown:
        known = ", ".join(("spoken", *EXPECTATIONS))
        raise _refuse(path, f"unknown field {sorted(unknown)[0]!r}; known: {known}")
    if turn.get("spoken", False) not in (True, False):
        raise _refuse(f"{path}.spoken", "true (the line is spoken and heard) or false")
    if turn.get("spoken") and len(turn["user"]) > speech.SPOKEN_TEXT_MAX:
        raise _refuse(
            f"{path}.user", f"a spoken line of at most {speech.SPOKEN_TEXT_MAX} characters"
        )
    for name in ("user", "tool_called", "tool_not_called", "reply_contains", "judge"):
        value = turn.get(name)
        if value is not None and (not isinstance(value, str) or len(value) > TEXT_MAX):
            raise _refuse(f"{path}.{name}", f"a text of at most {TEXT_MAX} characters")
    if "reply_matches" in turn:
        _pattern(f"{path}.reply_matches", turn["reply_matches"])
    arguments = turn.get("tool_arguments")
    if arguments is not None:
        if not isinstance(arguments, dict) or "tool_called" not in turn:
            raise _refuse(f"{path}.tool_arguments", "{argument: pattern}, with tool_called")
        for name, pattern in arguments.items():
            _pattern(f"{path}.tool_arguments.{name}", pattern)
    return dict(turn)


def turns_clean(turns: Any) -> list[dict[str, Any]]:
    if not isinstance(turns, list) or not 1 <= len(turns) <= settings.AGENT_TEST_TURNS_MAX:
        raise ValidationError({"turns": [f"a list of 1 to {settings.AGENT_TEST_TURNS_MAX} turns"]})
    cleaned = [_turn_clean(index, turn) for index, turn in enumerate(turns)]
    if any(turn.get("spoken") for turn in cleaned):
        speech.offline_speech_required("turns")
    return cleaned


def scenario_clean(scenario: Any) -> dict[str, Any]:
    if not isinstance(scenario, dict):
        raise ValidationError({"scenarios": ["each an object {persona, goal, criteria}"]})
    persona, goal = scenario.get("persona"), scenario.get("goal")
    criteria = scenario.get("criteria") or []
    max_turns = scenario.get("max_turns", 6)
    if not all(isinstance(text, str) and 0 < len(text) <= 1000 for text in (persona, goal)):
        raise ValidationError({"scenarios": ["persona and goal: texts of 1 to 1000 characters"]})
    if (
        not isinstance(criteria, list)
        or not all(isinstance(c, str) and 0 < len(c) <= TEXT_MAX for c in criteria)
        or len(criteria) > 10
    ):
        raise ValidationError({"scenarios": ["criteria: at most 10 texts"]})
    if not isinstance(max_turns, int) or not 1 <= max_turns <= settings.SIMULATION_TURNS_MAX:
        raise ValidationError({"scenarios": [f"max_turns: 1 to {settings.SIMULATION_TURNS_MAX}"]})
    mode = scenario.get("mode", "text")
    if mode not in ("text", "voice"):
        raise ValidationError({"scenarios": ["mode: text or voice"]})
    if mode == "voice":
        speech.offline_speech_required("scenarios")
    return {
        "persona": persona, "goal": goal, "criteria": criteria, "max_turns": max_turns,
        "mode": mode,
    }  # fmt: skip


# ---------------------------------------------------------------- checking a turn


def _check(name: str, passed: bool, detail: str) -> dict[str, Any]:
    return {"check": name, "passed": passed, "detail": detail}


TOO_SLOW = "the pattern took too long to match and was stopped"


async def _arguments_match(arguments: Any, wanted: dict[str, str]) -> bool | None:
    """Whether every argument matches its pattern; None when a pattern took too long."""
    if not isinstance(arguments, dict):
        return False
    for name, pattern in wanted.items():
        if name not in arguments:
            return False
        found = await patterns.search(pattern, str(arguments[name]))
        if not found:
            return found
    return True


async def _tool_checks(expected: dict[str, Any], reply: Reply) -> list[dict[str, Any]]:
    results = []
    called = [use.name for use in reply.tools]
    wanted = expected.get("tool_called")
    if wanted:
        uses = [use for use in reply.tools if use.name == wanted]
        argument_patterns = expected.get("tool_arguments") or {}
        outcomes = [await _arguments_match(use.arguments, argument_patterns) for use in uses]
        detail = f"called: {', '.join(called) or 'no tool'}"
        if uses and argument_patterns and not any(outcomes):
            detail = f"{wanted} was called with {uses[0].arguments!r}"
            if None in outcomes:
                detail = f"{detail}; {TOO_SLOW}"
        results.append(_check(f"tool_called {wanted}", any(outcomes), detail))
    unwanted = expected.get("tool_not_called")
    if unwanted:
        bad = [n for n in called if unwanted in ("*", n)]
        results.append(
            _check(f"tool_not_called {unwanted}", not bad, f"called: {', '.join(called) or 'none'}")
        )
    return results


async def turn_checks(
    expected: dict[str, Any], reply: Reply, heard: list[tuple[str, str]], llm: LLM
) -> list[dict[str, Any]]:
    """Each expectation of the turn: passed or not, and what was seen instead."""
    if reply.error:
        return [_check("reply", False, _unanswered(reply.error))]
    results = await _tool_checks(expected, reply)
    if expected.get("reply_contains"):
        wanted = expected["reply_contains"]
        results.append(
            _check(f"reply_contains {wanted!r}", wanted.lower() in reply.text.lower(), reply.text)
        )
    if expected.get("reply_matches"):
        pattern = expected["reply_matches"]
        found = await patterns.search(pattern, reply.text)
        detail = reply.text if found is not None else f"{TOO_SLOW}: {reply.text}"
        results.append(_check(f"reply_matches {pattern!r}", bool(found), detail))
    if expected.get("judge"):
        verdict = await judge.judge(llm, criterion=expected["judge"], turns=heard)
        results.append(_check(f"judge {expected['judge']!r}", verdict.passed, verdict.reason))
    return results


def _unanswered(error: str) -> str:
    if error == NOT_HEARD:
        return "the recogniser heard no words in the spoken line, so the agent got no turn"
    if error == TOO_LONG:
        return (
            f"the spoken line is longer than {settings.AGENT_TEST_SPOKEN_MAX_S} seconds "
            "(AGENT_TEST_SPOKEN_MAX_S): shorten it"
        )
    if error == TIMEOUT:
        return f"the agent did not answer within {settings.AGENT_TEST_TURN_TIMEOUT_S} seconds"
    return f"the agent did not answer ({error})"
