"""The regular expressions of ``reply_matches`` and ``tool_arguments``: checked when a test
is saved (a length cap, compiled, no quantifier nested in a quantified group, the shape
that backtracks catastrophically), and matched in a child process that is killed past
``AGENT_TEST_PATTERN_TIMEOUT_S`` (and limited in CPU), so no pattern pins a worker."""

from __future__ import annotations

import asyncio
import json
import re
import resource
import sys
from re import _parser as sre_parse  # type: ignore[attr-defined]  # stdlib's own parser
from typing import Any

from django.conf import settings

PATTERN_MAX = 500
TEXT_MAX = 100_000  # the longest text a pattern is matched against (the rest is cut)
_REPEATS = {sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT, sre_parse.POSSESSIVE_REPEAT}
_CHILD = (
    "import json, re, sys\n"
    "pattern, text = json.load(sys.stdin)\n"
    "print(json.dumps(re.search(pattern, text) is not None))\n"
)


def _repeats(items: Any, inside: bool) -> bool:
    """True when a repeat (of more than one) sits inside another repeat."""
    for op, arg in items:
        if op in _REPEATS:
            _low, high, sub = arg
            many = high is sre_parse.MAXREPEAT or high > 1
            if many and inside:
                return True
            if _repeats(sub, inside or many):
                return True
        elif op is sre_parse.SUBPATTERN:
            if _repeats(arg[-1], inside):
                return True
        elif op is sre_parse.BRANCH:
            if any(_repeats(branch, inside) for branch in arg[1]):
                return True
        elif op in (sre_parse.ASSERT, sre_parse.ASSERT_NOT):
            if _repeats(arg[1], inside):
                return True
        elif op is sre_parse.GROUPREF_EXISTS:
            if any(branch is not None and _repeats(branch, inside) for branch in arg[1:]):
                return True
    return False


def pattern_problem(value: Any) -> str | None:
    """Why ``value`` is not a pattern a test may use; None when it is."""
    if not isinstance(value, str) or len(value) > PATTERN_MAX:
        return f"a regular expression of at most {PATTERN_MAX} characters"
    try:
        re.compile(value)
        parsed = sre_parse.parse(value)
    except re.error as error:
        return f"not a regular expression ({error})"
    if _repeats(parsed, False):
        return (
            "a repeat inside a repeated group, such as (a+)+, can take hours to match: "
            "write it without the nesting"
        )
    return None


async def search(pattern: str, text: str) -> bool | None:
    """Whether ``pattern`` is found in ``text``; None when matching took too long."""
    seconds = int(settings.AGENT_TEST_PATTERN_TIMEOUT_S)

    def _limit_cpu() -> None:  # in the child, before it runs: a backstop to the kill
        resource.setrlimit(resource.RLIMIT_CPU, (seconds + 1, seconds + 1))

    child = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-S", "-c", _CHILD,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, preexec_fn=_limit_cpu,
    )  # fmt: skip
    try:
        async with asyncio.timeout(seconds):
            out, _ = await child.communicate(json.dumps([pattern, text[:TEXT_MAX]]).encode())
    except TimeoutError:
        child.kill()
        await child.wait()
        return None
    if child.returncode != 0:
        return None
    return bool(json.loads(out))
