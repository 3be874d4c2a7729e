"""What one LLM request may carry: the oldest turns are left out past a byte budget.

The instructions and the running turn (the user's message, the assistant's tool calls and
their results so far) are always sent whole; earlier turns go, oldest first and whole (a
tool call never loses its result), until the request fits. A short note tells the model
that something was left out.
"""

from __future__ import annotations

import json
from typing import Any

TRIMMED_NOTE = "(Earlier parts of this conversation were left out to keep the request short.)"


def _size(messages: list[dict[str, Any]]) -> int:
    return len(json.dumps(messages, ensure_ascii=False).encode())


def _groups(history: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """History cut before each user message: each group is one turn with what followed it."""
    groups: list[list[dict[str, Any]]] = [[]]
    for message in history:
        if message.get("role") == "user" and groups[-1]:
            groups.append([])
        groups[-1].append(message)
    return [group for group in groups if group]


def fit_history(
    system: list[dict[str, Any]], history: list[dict[str, Any]], max_bytes: int
) -> list[dict[str, Any]]:
    """``system + history``, less the oldest turns if that is over ``max_bytes``."""
    messages = system + history
    if _size(messages) <= max_bytes:
        return messages
    groups = _groups(history)
    running = groups.pop() if groups else []
    note = [{"role": "system", "content": TRIMMED_NOTE}]
    budget = max_bytes - _size(system + note + running)
    kept: list[list[dict[str, Any]]] = []
    for group in reversed(groups):  # newest first
        size = _size(group)
        if size > budget:
            break
        kept.insert(0, group)
        budget -= size
    return system + note + [m for group in kept for m in group] + running
