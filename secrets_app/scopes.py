"""What a secret key may do on the REST API. A key without ``keys`` cannot create keys."""

from __future__ import annotations

from django.core.exceptions import ValidationError

SCOPES: dict[str, str] = {
    "keys": "create, change, roll and revoke API keys",
    "secrets": "create, replace and delete secrets (values are never readable)",
    "agents": "create, change and delete agents and their tool handlers",
    "sessions:read": "list and read session records",
    "sessions:write": "end live sessions (includes sessions:read)",
    "session_tokens": "mint short-lived session tokens for browsers",
    "audit:read": "read the workspace's audit log",
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
