"""An agent's post-call analysis settings, and the JSON Schema the LLM fills from them.

Stored on the agent as ``{"summary": bool, "criteria": [{name, description}], "fields":
[{name, type, description}]}`` (docs/analysis.md); empty: no analysis.
"""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ValidationError

CRITERIA_MAX = 10
FIELDS_MAX = 20
DESCRIPTION_MAX = 500
FIELD_TYPES = ("string", "number", "integer", "boolean")
RESULTS = ("success", "failure", "unknown")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _refuse(message: str) -> ValidationError:
    return ValidationError({"analysis": [message]})


def _named(items: Any, what: str, limit: int, *, typed: bool) -> list[dict[str, str]]:
    if not isinstance(items, list) or len(items) > limit:
        raise _refuse(f"{what}: a list of at most {limit}")
    cleaned, seen = [], set()
    for index, item in enumerate(items):
        keys = {"name", "description", "type"} if typed else {"name", "description"}
        if not isinstance(item, dict) or set(item) - keys:
            raise _refuse(f"{what}[{index}]: an object with {', '.join(sorted(keys))}")
        name, description = item.get("name"), item.get("description", "")
        if not isinstance(name, str) or not _NAME.fullmatch(name) or name in seen:
            raise _refuse(f"{what}[{index}].name: a new name of letters, digits and _")
        if not isinstance(description, str) or len(description) > DESCRIPTION_MAX:
            raise _refuse(f"{what}[{index}].description: at most {DESCRIPTION_MAX} characters")
        if "\x00" in description:  # jsonb cannot hold one: the save would be a 500
            raise _refuse(f"{what}[{index}].description: no NUL characters")
        entry = {"name": name, "description": description.strip()}
        if typed:
            kind = item.get("type", "string")
            if kind not in FIELD_TYPES:
                raise _refuse(f"{what}[{index}].type: one of {', '.join(FIELD_TYPES)}")
            entry["type"] = kind
        seen.add(name)
        cleaned.append(entry)
    return cleaned


def analysis_settings_clean(value: Any) -> dict[str, Any]:
    """The settings as stored; ``{}`` when there is nothing to analyse."""
    if value in (None, {}):
        return {}
    if not isinstance(value, dict) or set(value) - {"summary", "criteria", "fields"}:
        raise _refuse('an object {"summary": true, "criteria": [...], "fields": [...]}')
    summary = value.get("summary", False)
    if not isinstance(summary, bool):
        raise _refuse("summary: true or false")
    criteria = _named(value.get("criteria", []), "criteria", CRITERIA_MAX, typed=False)
    fields = _named(value.get("fields", []), "fields", FIELDS_MAX, typed=True)
    if not (summary or criteria or fields):
        return {}
    return {"summary": summary, "criteria": criteria, "fields": fields}


def analysis_schema(settings: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of the one function the analysing LLM is asked to call."""
    properties: dict[str, Any] = {}
    if settings.get("summary"):
        properties["summary"] = {
            "type": "string",
            "description": "What happened in the conversation, in two to four sentences.",
        }
    criteria = settings.get("criteria", [])
    if criteria:
        verdict = {
            "type": "object",
            "properties": {
                "result": {"type": "string", "enum": list(RESULTS)},
                "reason": {"type": "string", "description": "Why, in one sentence."},
            },
            "required": ["result", "reason"],
        }
        properties["criteria"] = {
            "type": "object",
            "properties": {
                c["name"]: {**verdict, "description": c["description"]} for c in criteria
            },
            "required": [c["name"] for c in criteria],
        }
    fields = settings.get("fields", [])
    if fields:
        properties["data"] = {
            "type": "object",
            "properties": {
                f["name"]: {"type": [f["type"], "null"], "description": f["description"]}
                for f in fields
            },
            "required": [f["name"] for f in fields],
        }
    return {"type": "object", "properties": properties, "required": list(properties)}
