"""An LLM's verdict on a conversation, and the simulated user's next line: the two things
tests and simulations ask the workspace's LLM besides the agent's own replies."""

from __future__ import annotations

import json
from dataclasses import dataclass

from engine.providers.base import LLM, LLMDone, TextDelta

REASON_MAX = 500

JUDGE_PROMPT = (
    "You judge a conversation between a user and a voice agent against one criterion. "
    'Answer with JSON only: {"pass": true or false, "reason": "one sentence"}.'
)
USER_PROMPT = (
    "You play a user talking to a voice agent, to test it. Stay in character. Persona: "
    "{persona}\nYour goal: {goal}\nWrite only your next line, one or two sentences. When your "
    "goal is reached or cannot be reached, write only: [done]"
)
DONE = "[done]"


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str


async def complete(llm: LLM, messages: list[dict[str, str]]) -> str:
    parts = []
    async for event in llm.stream(messages=messages, tools=[]):
        if isinstance(event, TextDelta):
            parts.append(event.text)
        elif isinstance(event, LLMDone):
            break
    return "".join(parts).strip()


def transcript_text(turns: list[tuple[str, str]]) -> str:
    return "\n".join(f"{role}: {text}" for role, text in turns)


async def judge(llm: LLM, *, criterion: str, turns: list[tuple[str, str]]) -> Verdict:
    """Pass or fail, with the judge's reason; an answer that is not the JSON asked for fails,
    and says so."""
    answer = await complete(
        llm,
        [
            {"role": "system", "content": JUDGE_PROMPT},
            {
                "role": "user",
                "content": f"Criterion: {criterion}\n\nConversation:\n{transcript_text(turns)}",
            },
        ],
    )
    data = _first_object(answer)
    if not isinstance(data, dict) or not isinstance(data.get("pass"), bool):
        return Verdict(False, "the judge did not answer with a verdict")
    return Verdict(data["pass"], str(data.get("reason", ""))[:REASON_MAX])


def _first_object(answer: str) -> object:
    """The JSON object that starts at the answer's first ``{`` (linear in the answer)."""
    start = answer.find("{")
    if start < 0:
        return None
    try:
        return json.JSONDecoder().raw_decode(answer, start)[0]
    except (ValueError, RecursionError):
        return None


async def user_line(llm: LLM, *, persona: str, goal: str, turns: list[tuple[str, str]]) -> str:
    """The simulated user's next line (``DONE`` when it is finished). The agent's lines are
    the ``user`` side of the LLM's conversation, its own the ``assistant`` side."""
    messages = [{"role": "system", "content": USER_PROMPT.format(persona=persona, goal=goal)}]
    for role, text in turns:
        messages.append({"role": "assistant" if role == "user" else "user", "content": text})
    if len(messages) == 1:
        messages.append({"role": "user", "content": "(the agent is listening)"})
    return await complete(llm, messages)
