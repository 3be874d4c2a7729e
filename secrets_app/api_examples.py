"""Examples of the keys, secrets and audit-log operations for the OpenAPI schema (Swagger UI
shows them). Placeholders only: no example holds anything that could be a working key.
``tests/test_openapi.py`` checks each against its schema and sends each request example to
the API."""

from __future__ import annotations

from typing import Any

from core.api_examples import invalid, request, response

# ---------------------------------------------------------------- keys

_PUBLISHABLE_KEY: dict[str, Any] = {
    "id": 12,
    "kind": "publishable",
    "label": "Shop website",
    "display": "pk_Ab12…Yz89",
    "prefix": "pk_Ab12",
    "last4": "Yz89",
    "publishable_key": "pk_…",
    "allowed_origins": ["https://shop.example.com"],
    "allowed_agents": ["support"],
    "allow_inline_config": False,
    "allow_inline_tool_code": False,
    "tokens_only": False,
    "scopes": [],
    "status": "active",
    "created_at": "2025-06-03T09:14:07Z",
    "created_by": "owner@example.com",
    "created_by_key": None,
    "last_used_at": "2025-06-03T10:02:00Z",
    "revoked_at": None,
    "expires_at": None,
    "rolled_from": None,
}
_SECRET_KEY: dict[str, Any] = {
    **_PUBLISHABLE_KEY,
    "id": 13,
    "kind": "secret",
    "label": "Order backend",
    "display": "sk_Cd34…Wx56",
    "prefix": "sk_Cd34",
    "last4": "Wx56",
    "publishable_key": "",
    "allowed_origins": [],
    "allowed_agents": [],
    "scopes": ["sessions:read", "session_tokens"],
    "created_by": None,
    "created_by_key": "sk_Ef78…Uv90",
    "last_used_at": None,
}
_NEW_KEY_NOTE = "`key` is the plaintext, shown this once: store it now."

KEY_LIST = [response("A publishable key", _PUBLISHABLE_KEY), response("A secret key", _SECRET_KEY)]
KEY_DETAIL = [response("A publishable key", _PUBLISHABLE_KEY)]
KEY_CREATE = [
    request(
        "A publishable key for one site",
        {
            "kind": "publishable",
            "label": "Shop website",
            "allowed_origins": ["https://shop.example.com"],
            "allowed_agents": ["support"],
        },
    ),
    request(
        "A secret key for a backend that mints session tokens",
        {"kind": "secret", "label": "Order backend", "scopes": ["sessions:read", "session_tokens"]},
    ),
    response("The new key", {**_SECRET_KEY, "key": "sk_…"}, 201, description=_NEW_KEY_NOTE),
    invalid("scopes.0", '"nope" is not a valid choice.'),
]
KEY_UPDATE = [
    request(
        "Serve a second site, through session tokens only",
        {
            "allowed_origins": ["https://shop.example.com", "https://help.example.com"],
            "tokens_only": True,
        },
    ),
    response(
        "The changed key",
        {
            **_PUBLISHABLE_KEY,
            "allowed_origins": ["https://shop.example.com", "https://help.example.com"],
            "tokens_only": True,
        },
    ),
]
KEY_ROLL = [
    request("Keep the old key a day", {"expires_at": "2025-06-04T09:00:00Z"}),
    response(
        "The successor",
        {
            **_SECRET_KEY,
            "id": 14,
            "display": "sk_Gh12…St34",
            "prefix": "sk_Gh12",
            "last4": "St34",
            "rolled_from": 13,
            "key": "sk_…",
        },
        201,
        description=_NEW_KEY_NOTE,
    ),
]
KEY_REVOKE = [
    response(
        "The revoked key",
        {**_SECRET_KEY, "status": "revoked", "revoked_at": "2025-06-03T11:30:00Z"},
    )
]

# ---------------------------------------------------------------- the audit log

AUDIT_PAGE = [
    response(
        "A page of the audit log",
        {
            "next": "https://platform.example.com/api/v1/audit-events?cursor=cD0yMDI1LTA2",
            "previous": None,
            "results": [
                {
                    "id": 31,
                    "created_at": "2025-06-03T11:30:00Z",
                    "actor": "owner@example.com",
                    "action": "key.revoked",
                    "target": "sk_Cd34…Wx56",
                    "details": {},
                    "address": "203.0.113.7",
                },
                {
                    "id": 30,
                    "created_at": "2025-06-03T10:12:44Z",
                    "actor": "API key sk_Ef78…Uv90",
                    "action": "secret.created",
                    "target": "ORDERS_KEY",
                    "details": {"allowed_hosts": ["api.example.com"], "readable_by_code": False},
                    "address": "198.51.100.20",
                },
            ],
        },
    )
]

# ---------------------------------------------------------------- secrets

_SECRET: dict[str, Any] = {
    "name": "ORDERS_KEY",
    "allowed_hosts": ["api.example.com"],
    "readable_by_code": False,
    "created_at": "2025-06-03T10:12:44Z",
    "updated_at": "2025-06-03T10:12:44Z",
}
_VALUE = "replace-with-your-orders-api-key"

SECRET_LIST = [response("A secret (never its value)", _SECRET)]
SECRET_DETAIL = [response("A secret (never its value)", _SECRET)]
SECRET_CREATE = [
    request(
        "A key of your orders API, sent only to it",
        {"name": "ORDERS_KEY", "value": _VALUE, "allowed_hosts": ["api.example.com"]},
    ),
    response("Created", _SECRET, 201),
    response("Replaced", {**_SECRET, "updated_at": "2025-06-20T08:00:00Z"}, 200),
    invalid(
        "name",
        "must be 1-64 characters of A-Z, 0-9 and _, starting with a letter (like STRIPE_KEY)",
    ),
]
SECRET_REPLACE = [
    request("A new value", {"value": _VALUE, "allowed_hosts": ["api.example.com"]}),
    response("Replaced", {**_SECRET, "updated_at": "2025-06-20T08:00:00Z"}, 200),
    response("Created", _SECRET, 201),
]
SECRET_HOSTS = [
    request(
        "Also the orders API's regional hosts",
        {"allowed_hosts": ["api.example.com", "*.orders.example.com"]},
    ),
    response(
        "The secret",
        {
            **_SECRET,
            "allowed_hosts": ["api.example.com", "*.orders.example.com"],
            "updated_at": "2025-06-20T08:00:00Z",
        },
    ),
]
