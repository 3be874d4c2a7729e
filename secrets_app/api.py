"""REST API for keys and secrets. Parse, call a service, render; nothing else here."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from platform_site.pagination import AuditPages
from platform_site.serializers import StrictSerializer, clean_with, django_errors_as_drf
from secrets_app import scopes as key_scopes
from secrets_app import selectors, services
from secrets_app.audit import actor_for_request
from secrets_app.authentication import request_workspace
from secrets_app.models import ApiKey, AuditEvent, Secret, User
from secrets_app.validators import (
    clean_agent_slugs,
    clean_hosts,
    clean_origins,
    validate_secret_name,
    validate_secret_value,
)

# ---------------------------------------------------------------- keys


class KeyOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    status = serializers.ChoiceField(
        choices=["active", "revoked", "expired"], source="current_status", read_only=True
    )
    created_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="email", read_only=True, allow_null=True
    )
    created_by_key = serializers.CharField(
        source="created_by_key.display", default=None, allow_null=True, read_only=True
    )

    class Meta:
        model = ApiKey
        fields = [
            "id", "kind", "label", "display", "prefix", "last4", "publishable_key",
            "allowed_origins", "allowed_agents", "allow_inline_config", "allow_inline_tool_code",
            "tokens_only", "scopes", "status", "created_at", "created_by", "created_by_key",
            "last_used_at", "revoked_at", "expires_at", "rolled_from",
        ]  # fmt: skip


class KeySettingsInput(StrictSerializer):
    # DRF's metaclass takes declared fields off the class: this does not shadow Field.label.
    label = serializers.CharField(  # type: ignore[assignment]
        max_length=100, required=False, allow_blank=True
    )
    allowed_origins = serializers.ListField(child=serializers.CharField(), required=False)
    allowed_agents = serializers.ListField(child=serializers.CharField(), required=False)
    allow_inline_config = serializers.BooleanField(required=False)
    allow_inline_tool_code = serializers.BooleanField(required=False)
    tokens_only = serializers.BooleanField(required=False)
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=list(key_scopes.SCOPES)),
        required=False,
        help_text="Secret keys: " + "; ".join(f"{k}: {v}" for k, v in key_scopes.SCOPES.items()),
    )

    def validate_allowed_origins(self, value: list[str]) -> list[str]:
        return clean_with(clean_origins, value)

    def validate_allowed_agents(self, value: list[str]) -> list[str]:
        return clean_with(clean_agent_slugs, value)


class KeyCreateInput(KeySettingsInput):
    kind = serializers.ChoiceField(choices=ApiKey.Kind.choices)
    expires_at = serializers.DateTimeField(required=False, allow_null=True)


def _key_with_plaintext(key: ApiKey, plaintext: str) -> dict[str, Any]:
    return {**KeyOutput(key).data, "key": plaintext}


KEYS_SCOPE = {"GET": "keys", "POST": "keys", "PATCH": "keys"}
SECRETS_SCOPE = dict.fromkeys(("GET", "POST", "PUT", "PATCH", "DELETE"), "secrets")


class KeyListCreateApi(APIView):
    scopes = KEYS_SCOPE

    @extend_schema(responses=KeyOutput(many=True))
    def get(self, request: Request) -> Response:
        keys = selectors.api_key_list(workspace=request_workspace(request))
        return Response(KeyOutput(keys, many=True).data)

    @extend_schema(request=KeyCreateInput, responses={201: KeyOutput})
    def post(self, request: Request) -> Response:
        data = KeyCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        with django_errors_as_drf():
            key, plaintext = services.api_key_create(
                actor=actor_for_request(request),
                workspace=request_workspace(request),
                **data.validated_data,
            )
        return Response(_key_with_plaintext(key, plaintext), status=status.HTTP_201_CREATED)


class KeyDetailApi(APIView):
    scopes = KEYS_SCOPE

    @extend_schema(responses=KeyOutput)
    def get(self, request: Request, key_id: int) -> Response:
        key = selectors.api_key_get(workspace=request_workspace(request), key_id=key_id)
        return Response(KeyOutput(key).data)

    @extend_schema(request=KeySettingsInput, responses=KeyOutput)
    def patch(self, request: Request, key_id: int) -> Response:
        key = selectors.api_key_get(workspace=request_workspace(request), key_id=key_id)
        data = KeySettingsInput(data=request.data)
        data.is_valid(raise_exception=True)
        key = services.api_key_update(
            actor=actor_for_request(request), key=key, **data.validated_data
        )
        return Response(KeyOutput(key).data)


class KeyRollInput(StrictSerializer):
    expires_at = serializers.DateTimeField(
        required=False, allow_null=True, help_text="Until when the old key keeps working."
    )


class KeyRollApi(APIView):
    scopes = KEYS_SCOPE

    @extend_schema(request=KeyRollInput, responses={201: KeyOutput})
    def post(self, request: Request, key_id: int) -> Response:
        key = selectors.api_key_get(workspace=request_workspace(request), key_id=key_id)
        data = KeyRollInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            new_key, plaintext = services.api_key_roll(
                actor=actor_for_request(request), key=key, **data.validated_data
            )
        except services.KeyRejected as rejected:
            raise serializers.ValidationError({"key": [rejected.reason]}) from None
        return Response(_key_with_plaintext(new_key, plaintext), status=status.HTTP_201_CREATED)


class KeyRevokeApi(APIView):
    scopes = KEYS_SCOPE

    @extend_schema(request=None, responses=KeyOutput)
    def post(self, request: Request, key_id: int) -> Response:
        key = selectors.api_key_get(workspace=request_workspace(request), key_id=key_id)
        return Response(
            KeyOutput(services.api_key_revoke(actor=actor_for_request(request), key=key)).data
        )


# ---------------------------------------------------------------- the audit log


class AuditEventOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    actor = serializers.CharField(source="actor_label")

    class Meta:
        model = AuditEvent
        fields = ["id", "created_at", "actor", "action", "target", "details", "address"]


class AuditPageOutput(serializers.Serializer):  # type: ignore[type-arg]
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = AuditEventOutput(many=True)


class AuditEventListApi(APIView):
    scopes = {"GET": "audit:read"}
    paginator_class = AuditPages

    @extend_schema(
        parameters=[OpenApiParameter("cursor", str, description="from `next` or `previous`")],
        responses=AuditPageOutput,
    )
    def get(self, request: Request) -> Response:
        paginator = self.paginator_class()
        events = selectors.audit_event_list(workspace=request_workspace(request))
        page = paginator.paginate_queryset(events, request, view=self)
        return paginator.get_paginated_response(AuditEventOutput(page, many=True).data)


# ---------------------------------------------------------------- secrets


class SecretOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = Secret
        fields = ["name", "allowed_hosts", "readable_by_code", "created_at", "updated_at"]


class SecretValueInput(StrictSerializer):
    value = serializers.CharField(
        trim_whitespace=False, validators=[validate_secret_value], write_only=True
    )
    allowed_hosts = serializers.ListField(child=serializers.CharField(), required=False)
    readable_by_code = serializers.BooleanField(required=False, default=False)

    def validate_allowed_hosts(self, value: list[str]) -> list[str]:
        return clean_with(clean_hosts, value)


class SecretCreateInput(SecretValueInput):
    name = serializers.CharField(validators=[validate_secret_name])


class SecretHostsInput(StrictSerializer):
    allowed_hosts = serializers.ListField(child=serializers.CharField())
    readable_by_code = serializers.BooleanField(required=False)

    def validate_allowed_hosts(self, value: list[str]) -> list[str]:
        return clean_with(clean_hosts, value)


def _secret_saved(secret: Secret, created: bool) -> Response:
    code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return Response(SecretOutput(secret).data, status=code)


class SecretListCreateApi(APIView):
    scopes = SECRETS_SCOPE

    @extend_schema(responses=SecretOutput(many=True))
    def get(self, request: Request) -> Response:
        secrets = selectors.secret_list(workspace=request_workspace(request))
        return Response(SecretOutput(secrets, many=True).data)

    @extend_schema(request=SecretCreateInput, responses={201: SecretOutput, 200: SecretOutput})
    def post(self, request: Request) -> Response:
        data = SecretCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        with django_errors_as_drf():
            secret, created = services.secret_set(
                actor=actor_for_request(request),
                workspace=request_workspace(request),
                name=values["name"],
                value=values["value"],
                allowed_hosts=values.get("allowed_hosts", []),
                readable_by_code=values["readable_by_code"],
            )
        return _secret_saved(secret, created)


class SecretDetailApi(APIView):
    scopes = SECRETS_SCOPE

    @extend_schema(responses=SecretOutput)
    def get(self, request: Request, name: str) -> Response:
        secret = selectors.secret_get(workspace=request_workspace(request), name=name)
        return Response(SecretOutput(secret).data)

    @extend_schema(request=SecretValueInput, responses={201: SecretOutput, 200: SecretOutput})
    def put(self, request: Request, name: str) -> Response:
        data = SecretValueInput(data=request.data)
        data.is_valid(raise_exception=True)
        clean_with(validate_secret_name, name)
        with django_errors_as_drf():
            secret, created = services.secret_set(
                actor=actor_for_request(request),
                workspace=request_workspace(request),
                name=name,
                value=data.validated_data["value"],
                allowed_hosts=data.validated_data.get("allowed_hosts", []),
                readable_by_code=data.validated_data["readable_by_code"],
            )
        return _secret_saved(secret, created)

    @extend_schema(request=SecretHostsInput, responses=SecretOutput)
    def patch(self, request: Request, name: str) -> Response:
        secret = selectors.secret_get(workspace=request_workspace(request), name=name)
        data = SecretHostsInput(data=request.data)
        data.is_valid(raise_exception=True)
        secret = services.secret_update_hosts(
            actor=actor_for_request(request), secret=secret, **data.validated_data
        )
        return Response(SecretOutput(secret).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, name: str) -> Response:
        secret = selectors.secret_get(workspace=request_workspace(request), name=name)
        services.secret_delete(actor=actor_for_request(request), secret=secret)
        return Response(status=status.HTTP_204_NO_CONTENT)
