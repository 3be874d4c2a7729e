"""Examples for the MCP servers' OpenAPI schema (Swagger UI shows them);
``tests/test_openapi.py`` checks them against their schemas and sends the requests."""

from __future__ import annotations

from typing import Any

from core.api_examples import request, response

SERVER_ID = "3c9a7e21-8b4d-4f6a-9e2c-1d0b5a6f7e8d"

_SERVER: dict[str, Any] = {
    "id": SERVER_ID,
    "name": "crm",
    "url": "https://mcp.example.com/mcp",
    "transport": "streamable_http",
    "headers": [{"name": "Authorization", "value": "Bearer {{secret:CRM_TOKEN}}"}],
    "tools": [
        {
            "name": "find_customer",
            "description": "Find a customer by email or phone number.",
            "input_schema": {
                "type": "object",
                "properties": {"email": {"type": "string"}},
                "required": ["email"],
            },
            "problem": "",
        }
    ],
    "tools_refreshed_at": "2025-06-01T09:30:02Z",
    "last_error": "",
    "created_at": "2025-06-01T09:30:00Z",
}

SERVER_LIST = [response("A connected server", _SERVER)]
SERVER_CREATE = [
    request("A server", {"name": "crm", "url": "https://mcp.example.com/mcp"}),
    response("Connected, its tools listed", _SERVER, 201),
]
SERVER_DETAIL = [response("A connected server", _SERVER)]
SERVER_REFRESHED = [
    response(
        "The server could not be reached",
        {**_SERVER, "last_error": "The tool server 'crm' did not answer within 10 s."},
    )
]
_AGENT_TOOLS = {"tools": [{"server": SERVER_ID, "tool": "find_customer", "timeout_ms": 5000}]}
AGENT_TOOLS = [
    request("None (a server's tools are offered only by name)", {"tools": []}),
    response("One tool, with its own timeout", _AGENT_TOOLS),
]
