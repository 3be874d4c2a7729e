"""The OpenAPI schema says what every response is, errors included.

Every operation names the key scope it needs (``x-scope``, and a sentence in its
description), read from the view's ``scopes``, the table the API itself enforces.
Every operation documents the JSON error shape for the answers any request may get: 401
(no or a bad key), 403 (a scope the key lacks), 429 (``Retry-After``), 400 for requests with
a body or query parameters, 404 for paths with an id. ``tests/test_openapi.py`` checks
real responses against it with schemathesis.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from rest_framework import serializers


class ErrorDetail(serializers.Serializer):  # type: ignore[type-arg]
    code = serializers.CharField(help_text="invalid, not_found, throttled, missing_scope, …")
    message = serializers.CharField(help_text="What is wrong, naming the field if there is one.")
    # The wire name: DRF's metaclass takes declared fields off the class, so this does not
    # shadow ``Serializer.fields`` at run time; the stubs cannot know that.
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="For `invalid`: the messages per field.",
    )


class ErrorOutput(serializers.Serializer):  # type: ignore[type-arg]
    error = ErrorDetail()


_ERRORS = {
    "401": "No key, or an unknown, revoked or expired one (or a pk_ key).",
    "403": "The key lacks the scope this operation needs.",
    "429": "Too many requests: wait the seconds in `Retry-After`.",
}


def _error_examples(scope: str | None) -> dict[str, tuple[str, str]]:
    """(code, message) the API answers with, per status, for the documented errors."""
    return {
        "401": ("invalid_key", "unknown, revoked or expired API key"),
        "403": (
            "missing_scope",
            f"this key lacks the scope {scope!r}; create a key with it in the dashboard",
        ),
        "429": ("throttled", "Request was throttled. Expected available in 12 seconds."),
    }


class ApiSchema(AutoSchema):
    def _scope(self) -> str | None:
        from secrets_app.authentication import operation_scope

        return operation_scope(self.view, self.method)

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation: dict[str, Any] | None = super().get_operation(*args, **kwargs)
        if operation is None or not self.path.startswith("/api/v1/"):
            return operation
        scope = self._scope()
        if scope is not None:
            operation["x-scope"] = scope
            needs = f"Needs a secret key with the scope `{scope}`."
            description = operation.get("description")
            operation["description"] = f"{description}\n\n{needs}" if description else needs
        return operation

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        if direction != "response" or not self.path.startswith("/api/v1/"):
            return responses
        errors = dict(_ERRORS)
        takes_input = self.method in ("POST", "PUT", "PATCH") or hasattr(
            self.view, "paginator_class"
        )
        if takes_input or self.get_override_parameters():  # query parameters can be wrong
            errors["400"] = "The request is invalid: `message` names the field."
        if "{" in self.path:
            errors["404"] = "No such object in this workspace."
        examples = _error_examples(self._scope())
        for code, description in errors.items():
            if code not in responses:
                response = self._get_response_for_code(  # type: ignore[no-untyped-call]  # unannotated in drf-spectacular
                    ErrorOutput, code, direction=direction
                )
                responses[code] = {**response, "description": description}
                self._add_error_example(responses[code], examples.get(code))
        return responses

    @staticmethod
    def _add_error_example(response: dict[str, Any], example: tuple[str, str] | None) -> None:
        media = response["content"]["application/json"]
        if example is not None and not media.get("examples"):
            code, message = example
            value = {"error": {"code": code, "message": message}}
            media["examples"] = {code: {"value": value, "summary": message}}


# Subclassing registers the scheme (drf-spectacular's unannotated __init_subclass__).
class SecretKeyScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "secrets_app.authentication.SecretKeyAuthentication"
    name = "secretKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        scheme: dict[str, Any] = build_bearer_security_scheme_object(
            header_name="Authorization", token_prefix="Bearer"
        )
        scheme["description"] = "A secret key: `Authorization: Bearer sk_…`."
        return scheme
