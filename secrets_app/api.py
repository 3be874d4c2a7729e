"""REST API for keys and secrets. Parse, call a service, render; nothing else here."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.pagination import AuditPages
from core.serializers import StrictSerializer, clean_with, django_errors_as_drf
from secrets_app import api_examples as examples
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


class NewKeyOutput(KeyOutput):
    key = serializers.CharField(help_text="The plaintext, shown this once: store it now.")

    class Meta(KeyOutput.Meta):
        fields = [*KeyOutput.Meta.fields, "key"]


def _key_with_plaintext(key: ApiKey, plaintext: str) -> dict[str, Any]:
    return {**KeyOutput(key).data, "key": plaintext}


# Refusals about who acts: the key's scopes, the person's verification (403).
FORBIDDEN_KEY_REFUSALS = {"missing_scope", "email_unverified"}


@contextmanager
def key_refusals() -> Iterator[None]:
    """A key service's refusal in the API's error shape: 403 for what the caller may not
    do, 401 for a calling key revoked a moment ago, 400 for the key's own state (and for
    invalid input)."""
    try:
        with django_errors_as_drf():
            yield
    except services.KeyRejected as rejected:
        if rejected.code in FORBIDDEN_KEY_REFUSALS:
            raise exceptions.PermissionDenied(rejected.reason, code=rejected.code) from None
        if rejected.code == "invalid_key":
            raise exceptions.AuthenticationFailed(rejected.reason, code=rejected.code) from None
        raise serializers.ValidationError({"key": [rejected.reason]}) from None


KEYS_SCOPE = {"GET": "keys", "POST": "keys", "PATCH": "keys"}
SECRETS_SCOPE = dict.fromkeys(("GET", "POST", "PUT", "PATCH", "DELETE"), "secrets")


KEY_SETTINGS = (
    "A publishable key (`pk_…`) has `allowed_origins` (exact `scheme://host[:port]`; none: "
    "localhost pages only), `allowed_agents` (slugs; none: every agent), "
    "`allow_inline_config` (the page may send its own instructions, greeting, voice, "
    "vocabulary, empty reply and client tools, or run with no saved agent), "
    "`allow_inline_tool_code` (the page may send server-tool handler code) and `tokens_only` "
    "(the key opens no session itself: pages connect with session tokens your server "
    "mints). A secret key (`sk_…`) has `scopes`, only ones the calling key holds (else 403 "
    "`missing_scope`, and nothing changes). Settings of the other kind are ignored."
)


@extend_schema(tags=["Keys"])
class KeyListCreateApi(APIView):
    scopes = KEYS_SCOPE

    @extend_schema(
        summary="List API keys",
        description="Every key of the workspace, publishable and secret, with its `status` "
        "(`active`, `revoked`, `expired`), settings and maker. A plaintext is never shown "
        "again: `display` is a key's first 7 and last 4 characters (a publishable key, "
        "public anyway, is whole in `publishable_key`).",
        responses=KeyOutput(many=True),
        examples=examples.KEY_LIST,
    )
    def get(self, request: Request) -> Response:
        keys = selectors.api_key_list(workspace=request_workspace(request))
        return Response(KeyOutput(keys, many=True).data)

    @extend_schema(
        summary="Create an API key",
        description=f"`kind` chooses the key. {KEY_SETTINGS} A new secret key gets every "
        "scope but `keys` unless `scopes` says otherwise; `expires_at` (optional) ends it. "
        "The answer's `key` is the plaintext, shown this once.",
        request=KeyCreateInput,
        responses={201: NewKeyOutput},
        examples=examples.KEY_CREATE,
    )
    def post(self, request: Request) -> Response:
        data = KeyCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        with key_refusals():
            key, plaintext = services.api_key_create(
                actor=actor_for_request(request),
                workspace=request_workspace(request),
                **data.validated_data,
            )
        return Response(_key_with_plaintext(key, plaintext), status=status.HTTP_201_CREATED)


@extend_schema(tags=["Keys"])
class KeyDetailApi(APIView):
    scopes = KEYS_SCOPE

    @extend_schema(
        summary="Get an API key",
        description="One key of the workspace, by its `id` (never its plaintext).",
        responses=KeyOutput,
        examples=examples.KEY_DETAIL,
    )
    def get(self, request: Request, key_id: int) -> Response:
        key = selectors.api_key_get(workspace=request_workspace(request), key_id=key_id)
        return Response(KeyOutput(key).data)

    @extend_schema(
        summary="Change an API key's settings",
        description=f"Only the fields sent change; `label` applies to both kinds. {KEY_SETTINGS} "
        "Another key changes only if the calling key holds every scope it holds (else 403 "
        "`missing_scope`, and nothing changes). The change is in the audit log (`key.updated`).",
        request=KeySettingsInput,
        responses=KeyOutput,
        examples=examples.KEY_UPDATE,
    )
    def patch(self, request: Request, key_id: int) -> Response:
        key = selectors.api_key_get(workspace=request_workspace(request), key_id=key_id)
        data = KeySettingsInput(data=request.data)
        data.is_valid(raise_exception=True)
        with key_refusals():
            key = services.api_key_update(
                actor=actor_for_request(request), key=key, **data.validated_data
            )
        return Response(KeyOutput(key).data)


class KeyRollInput(StrictSerializer):
    expires_at = serializers.DateTimeField(
        required=False, allow_null=True, help_text="Until when the old key keeps working."
    )


@extend_schema(tags=["Keys"])
class KeyRollApi(APIView):
    scopes = KEYS_SCOPE

    @extend_schema(
        summary="Roll an API key",
        description="A new key of the same kind with the same label and settings (its "
        "`rolled_from` is the old key's id); the answer's `key` is its plaintext, shown this "
        "once. The old key keeps working until `expires_at` (default: now), so deployments "
        "can switch. Only an active key can be rolled (else 400), and only by a key that "
        "holds every scope of the key it rolls (else 403 `missing_scope`, and nothing changes).",
        request=KeyRollInput,
        responses={201: NewKeyOutput},
        examples=examples.KEY_ROLL,
    )
    def post(self, request: Request, key_id: int) -> Response:
        key = selectors.api_key_get(workspace=request_workspace(request), key_id=key_id)
        data = KeyRollInput(data=request.data)
        data.is_valid(raise_exception=True)
        with key_refusals():
            new_key, plaintext = services.api_key_roll(
                actor=actor_for_request(request), key=key, **data.validated_data
            )
        return Response(_key_with_plaintext(new_key, plaintext), status=status.HTTP_201_CREATED)


@extend_schema(tags=["Keys"])
class KeyRevokeApi(APIView):
    scopes = KEYS_SCOPE

    @extend_schema(
        summary="Revoke an API key",
        description="The key stops working at once, and so does every key it made (and the "
        "keys those made); their live sessions end, token sessions minted with them too. "
        "This cannot be undone; revoking a revoked key changes nothing. A key may revoke "
        "itself, and any key, only if it holds every scope of each other key this revokes "
        "(the keys it made too; else 403 `missing_scope`, and nothing changes).",
        request=None,
        responses=KeyOutput,
        examples=examples.KEY_REVOKE,
    )
    def post(self, request: Request, key_id: int) -> Response:
        key = selectors.api_key_get(workspace=request_workspace(request), key_id=key_id)
        with key_refusals():
            key = services.api_key_revoke(actor=actor_for_request(request), key=key)
        return Response(KeyOutput(key).data)


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


@extend_schema(tags=["Audit events"])
class AuditEventListApi(APIView):
    scopes = {"GET": "audit:read"}
    paginator_class = AuditPages

    @extend_schema(
        summary="List the audit log",
        description="Security-relevant changes in the workspace, newest first, in pages of "
        "100 (`next` leads to older ones): keys made, changed, rolled and revoked; secrets, "
        "agents and their tool handlers (by SHA-256, never their code); members, provider "
        "accounts, webhooks, usage exports, sessions ended. `actor` is a person's email, "
        "`API key sk_…` or `system`; `address` is the client's.",
        parameters=[OpenApiParameter("cursor", str, description="from `next` or `previous`")],
        responses=AuditPageOutput,
        examples=examples.AUDIT_PAGE,
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


SECRET_VALUE_RULES = (
    "The value is stored encrypted and never shown again, by any answer, page or log. "
    "`allowed_hosts` (`api.example.com`, `*.example.com`) lists where handlers may send it: "
    "the egress proxy puts the value only into requests to those hosts. `readable_by_code`: "
    "handlers saved by an owner or admin (or with a secret key) see the value itself. Both "
    "are reset when left out (no hosts, not readable). 201 when created, 200 when an existing "
    "secret was replaced. Values are at most 64 KB and a workspace holds at most 100 secrets "
    "(the platform's defaults, `SECRET_VALUE_MAX_BYTES`, `SECRETS_PER_WORKSPACE_MAX`)."
)


@extend_schema(tags=["Secrets"])
class SecretListCreateApi(APIView):
    scopes = SECRETS_SCOPE

    @extend_schema(
        summary="List secrets",
        description="The workspace's secrets: names, allowed hosts and whether saved handlers "
        "may read them. Never their values.",
        responses=SecretOutput(many=True),
        examples=examples.SECRET_LIST,
    )
    def get(self, request: Request) -> Response:
        secrets = selectors.secret_list(workspace=request_workspace(request))
        return Response(SecretOutput(secrets, many=True).data)

    @extend_schema(
        summary="Create or replace a secret",
        description="A name like `STRIPE_KEY` (A-Z, 0-9 and `_`, starting with a letter) and "
        f"its value. {SECRET_VALUE_RULES}",
        request=SecretCreateInput,
        responses={201: SecretOutput, 200: SecretOutput},
        examples=examples.SECRET_CREATE,
    )
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


@extend_schema(tags=["Secrets"])
class SecretDetailApi(APIView):
    scopes = SECRETS_SCOPE

    @extend_schema(
        summary="Get a secret",
        description="A secret's name, allowed hosts and dates. Never its value.",
        responses=SecretOutput,
        examples=examples.SECRET_DETAIL,
    )
    def get(self, request: Request, name: str) -> Response:
        secret = selectors.secret_get(workspace=request_workspace(request), name=name)
        return Response(SecretOutput(secret).data)

    @extend_schema(
        summary="Set a secret's value",
        description=f"The secret named in the path, created or replaced. {SECRET_VALUE_RULES}",
        request=SecretValueInput,
        responses={201: SecretOutput, 200: SecretOutput},
        examples=examples.SECRET_REPLACE,
    )
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

    @extend_schema(
        summary="Change where a secret may be sent",
        description="`allowed_hosts` replaces the list; `readable_by_code`, when sent, "
        "changes whether saved handlers see the value. The value stays as it is. The change "
        "is in the audit log (`secret.access_changed`).",
        request=SecretHostsInput,
        responses=SecretOutput,
        examples=examples.SECRET_HOSTS,
    )
    def patch(self, request: Request, name: str) -> Response:
        secret = selectors.secret_get(workspace=request_workspace(request), name=name)
        data = SecretHostsInput(data=request.data)
        data.is_valid(raise_exception=True)
        secret = services.secret_update_hosts(
            actor=actor_for_request(request), secret=secret, **data.validated_data
        )
        return Response(SecretOutput(secret).data)

    @extend_schema(
        summary="Delete a secret",
        description="The value is gone for good; the deletion is in the audit log "
        "(`secret.deleted`).",
        responses={204: None},
    )
    def delete(self, request: Request, name: str) -> Response:
        secret = selectors.secret_get(workspace=request_workspace(request), name=name)
        services.secret_delete(actor=actor_for_request(request), secret=secret)
        return Response(status=status.HTTP_204_NO_CONTENT)
