"""One JSON error shape for the whole REST API.

    {"error": {"code": "invalid", "message": "name: must match …", "fields": {...}}}

``message`` always names the offending field when there is one, so a developer
reading a curl response knows what to fix without reading the docs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


def _flatten(detail: Any, prefix: str = "") -> list[tuple[str, str]]:
    if isinstance(detail, dict):
        pairs: list[tuple[str, str]] = []
        for key, value in detail.items():
            name = str(key) if key != "non_field_errors" else ""
            pairs += _flatten(value, f"{prefix}.{name}" if prefix and name else prefix or name)
        return pairs
    if isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            return [(prefix, str(item)) for item in detail]
        pairs = []
        for index, item in enumerate(detail):
            if item:
                pairs += _flatten(item, f"{prefix}[{index}]")
        return pairs
    return [(prefix, str(detail))]


def _with_field(field: str, text: str) -> str:
    # Nested validators may already name the exact path ("tools[2].name: …").
    if not field or text.startswith((f"{field}[", f"{field}.")):
        return text
    return f"{field}: {text}"


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        pairs = _flatten(exc.detail)
        message = "; ".join(_with_field(field, text) for field, text in pairs)
        fields: dict[str, list[str]] = {}
        for field, text in pairs:
            fields.setdefault(field or "non_field_errors", []).append(text)
        body = {"code": "invalid", "message": message, "fields": fields}
    elif isinstance(exc, Http404):
        body = {"code": "not_found", "message": str(exc) or "not found"}
    else:
        detail = getattr(exc, "detail", str(exc))
        code = getattr(detail, "code", None) or getattr(exc, "default_code", "error")
        body = {"code": str(code), "message": str(detail)}
    if response.status_code == status.HTTP_401_UNAUTHORIZED:
        response["WWW-Authenticate"] = 'Bearer realm="api"'
    response.data = {"error": body}
    return response


_FALLBACK = {
    404: ("not_found", "no such endpoint, or no such object in this workspace"),
    405: ("method_not_allowed", "this endpoint does not take that method"),
    500: ("internal", "internal error"),
}


class ApiNotFoundMiddleware:
    """Every answer under ``/api/`` is the JSON error shape, also when no view ran (an
    unknown route, an id that does not fit the route) or the server failed."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not request.path.startswith("/api/") or response.status_code not in _FALLBACK:
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        code, message = _FALLBACK[response.status_code]
        return JsonResponse(
            {"error": {"code": code, "message": message}}, status=response.status_code
        )
