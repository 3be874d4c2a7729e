"""Which of an agent's tools are the phone's system tools (``engine.tools.system``).

An agent enables a system tool by declaring a tool of its name (``end_call``,
``send_dtmf``, ``transfer_call``), as a browser tool (``client: true``), which is how
agents enabled the first two before they were a tool kind; the agent's description, if
any, is kept (it says when to use the tool). On a phone session each such declaration
becomes the ``system`` kind's tool with the platform's parameters; on a browser session
nothing changes (a page's own tool of that name stays the page's). ``transfer_call`` is
offered only with the destinations the agent allows, listed as the ``enum`` of its
``to`` parameter (E.164 numbers or SIP URIs; anything else is dropped): the LLM sees the
list, and a call naming anything else fails the schema check before it runs.
"""

from __future__ import annotations

from typing import Any

from engine.session.config import ToolDefinition
from engine.tools import system

TIMEOUT_S = 20.0  # a transfer waits for the carrier's REST API (15 s)

DESCRIPTIONS = {
    system.END_CALL: (
        "End the phone call. Say goodbye first: the call ends once what you are saying has "
        "been heard."
    ),
    system.SEND_DTMF: "Press keys on the phone keypad (tones into the call), e.g. for a menu.",
    system.TRANSFER_CALL: (
        "Transfer the caller to another line (a cold transfer: you leave the call). Tell the "
        "caller first."
    ),
}


def _parameters(name: str, destinations: list[str]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    if name == system.SEND_DTMF:
        properties = {"digits": {"type": "string", "pattern": system.DTMF_PATTERN}}
    elif name == system.TRANSFER_CALL:
        properties = {"to": {"type": "string", "enum": destinations}}
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def allowed_destinations(tool: ToolDefinition) -> list[str]:
    """The ``enum`` of a ``transfer_call`` declaration's ``to``, valid entries only."""
    to = (tool.parameters.get("properties") or {}).get("to")
    listed = to.get("enum") if isinstance(to, dict) else None
    if not isinstance(listed, list):
        return []
    return [str(entry) for entry in listed if system.transfer_destination(entry)]


def phone_tools(tools: list[ToolDefinition]) -> list[ToolDefinition]:
    """``tools`` as a phone session offers them: declared system tools become the kind's."""
    offered = []
    for tool in tools:
        if tool.name not in system.NAMES or not tool.client:
            offered.append(tool)
            continue
        destinations = allowed_destinations(tool) if tool.name == system.TRANSFER_CALL else []
        if tool.name == system.TRANSFER_CALL and not destinations:
            continue  # nowhere to transfer to: not offered
        offered.append(
            ToolDefinition(
                name=tool.name,
                description=tool.description or DESCRIPTIONS[tool.name],
                parameters=_parameters(tool.name, destinations),
                timeout_s=TIMEOUT_S,
                kind=system.SYSTEM,
            )
        )
    return offered
