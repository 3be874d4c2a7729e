"""Small makers of OpenAPI examples (drf-spectacular's ``OpenApiExample``), so each app's
examples read as what is sent and what comes back."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample


def request(name: str, value: Any, *, description: str = "") -> OpenApiExample:
    return OpenApiExample(name, value=value, description=description, request_only=True)


def response(name: str, value: Any, status: int = 200, *, description: str = "") -> OpenApiExample:
    """A response example for ``status``. For a list (``many=True``) the value is one item:
    drf-spectacular shows it inside the list."""
    return OpenApiExample(
        name, value=value, description=description, response_only=True, status_codes=[status]
    )


def invalid(field: str, message: str) -> OpenApiExample:
    """The 400 answer naming ``field``, as the API writes it."""
    body = {
        "error": {"code": "invalid", "message": f"{field}: {message}", "fields": {field: [message]}}
    }
    return response(f"Invalid {field}", body, 400)
