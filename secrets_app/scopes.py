"""What a secret key may do on the REST API. Every operation names one scope (a view's
``scopes``, per method); a key without it gets 403 ``missing_scope``. A key never makes,
rolls or changes a key to hold a scope it does not hold itself."""

from __future__ import annotations

from django.core.exceptions import ValidationError

SCOPES: dict[str, str] = {
    "keys": "create, change, roll and revoke API keys",
    "secrets": "create, replace and delete secrets (values are never readable)",
    "agents": "create, change and delete agents and their tool handlers",
    "versions": "publish agents, roll back, split traffic and pin keys to versions",
    "agent_tests": "write agents' tests and simulations and run them",
    "sessions:read": "list and read session records",
    "sessions:write": "end live sessions (includes sessions:read)",
    "session_tokens": "mint short-lived session tokens for browsers",
    "audit:read": "read the workspace's audit log",
    "usage:read": "read the workspace's usage figures and quotas",
    "knowledge": "create, read, search and delete knowledge bases and their documents",
    "mcp": "connect, list, refresh and delete MCP servers",
    "phone:write": "create, change and delete carrier accounts and phone numbers",
    "calls:write": "place outbound phone calls",
    "retention": "read and change how long session records are kept, and zero retention",
}
ALL = list(SCOPES)
# A new secret key may do everything but manage keys: a leaked key cannot outlive its roll.
DEFAULT = [scope for scope in SCOPES if scope != "keys"]
IMPLIED = {"sessions:write": ("sessions:read",)}


def clean_scopes(values: list[str]) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ValidationError("must be a list of scope names")
    unknown = sorted(set(values) - set(SCOPES))
    if unknown:
        raise ValidationError(f"unknown scope(s) {', '.join(unknown)}; known: {', '.join(SCOPES)}")
    return [scope for scope in SCOPES if scope in values]


def grants(scopes: list[str], wanted: str) -> bool:
    return wanted in scopes or any(wanted in IMPLIED.get(scope, ()) for scope in scopes)


def beyond(held: list[str], wanted: list[str]) -> list[str]:
    """The scopes of ``wanted`` that a key holding ``held`` does not grant."""
    return [scope for scope in wanted if not grants(held, scope)]
