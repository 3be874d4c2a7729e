"""Admin for tenancy and credentials: key hashes and secret values are never shown."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import REDIRECT_FIELD_NAME
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from secrets_app import services
from secrets_app.audit import actor_for_request
from secrets_app.models import (
    ApiKey,
    Invitation,
    Membership,
    ProviderCredential,
    Secret,
    User,
    Workspace,
)
from secrets_app.validators import clean_hosts, validate_secret_value


def admin_login(request: HttpRequest, extra_context: Any = None) -> HttpResponse:
    """One door for people: the admin logs in through the dashboard's login, which is
    throttled and asks for the second factor when it is on."""
    if request.user.is_authenticated and not request.user.is_staff:
        raise PermissionDenied("This account cannot use the admin.")
    target = request.GET.get(REDIRECT_FIELD_NAME) or ""
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = reverse("admin:index")
    return redirect_to_login(target, login_url=reverse("dashboard:login"))


# The admin signs in through the dashboard's login (throttled, two-factor).
admin.site.login = admin_login  # type: ignore[method-assign]


@admin.register(User)
class UserAdmin(BaseUserAdmin):  # type: ignore[type-arg]
    ordering = ["email"]
    list_display = ["email", "first_name", "last_name", "is_staff", "is_active"]
    search_fields = ["email", "first_name", "last_name"]
    fieldsets = (
        (None, {"fields": ("email", "password")}),
        ("Personal info", {"fields": ("first_name", "last_name")}),
        ("Permissions", {"fields": ("is_active", "is_staff", "is_superuser", "groups")}),
        ("Dates", {"fields": ("last_login", "date_joined")}),
    )
    add_fieldsets = ((None, {"classes": ("wide",), "fields": ("email", "password1", "password2")}),)


class MembershipInline(admin.TabularInline):  # type: ignore[type-arg]
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "id", "session_limit", "created_at"]
    search_fields = ["name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["user", "workspace", "role", "created_at"]
    list_filter = ["role"]
    search_fields = ["user__email", "workspace__name"]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["display", "kind", "label", "workspace", "key_status", "last_used_at"]
    list_filter = ["kind"]
    search_fields = ["label", "prefix", "last4", "workspace__name"]
    fields = [
        "workspace", "kind", "label", "display", "allowed_origins", "allowed_agents",
        "allow_inline_config", "created_at", "last_used_at", "revoked_at", "expires_at",
    ]  # fmt: skip
    readonly_fields = ["workspace", "kind", "display", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke_keys"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A key's plaintext must be shown exactly once; the dashboard and API do that.
        return False

    @admin.display(description="status")
    def key_status(self, key: ApiKey) -> str:
        return key.status()

    @admin.action(description="Revoke selected keys")
    def revoke_keys(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for key in queryset:
            services.api_key_revoke(actor=actor_for_request(request), key=key)
        self.message_user(request, f"Revoked {queryset.count()} key(s).", messages.SUCCESS)


class SecretAdminForm(forms.ModelForm):  # type: ignore[type-arg]
    """The value is write-only: the field always renders empty."""

    value = forms.CharField(
        widget=forms.PasswordInput(render_value=False),
        required=False,
        help_text="Write-only. Leave empty to keep the current value.",
    )
    allowed_hosts_text = forms.CharField(
        required=False, label="Allowed hosts", help_text="Comma-separated host names."
    )

    class Meta:
        model = Secret
        fields = ["workspace", "name"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["allowed_hosts_text"].initial = ", ".join(self.instance.allowed_hosts)
        else:
            self.fields["value"].required = True

    def clean_value(self) -> str:
        value: str = self.cleaned_data["value"]
        if value:
            validate_secret_value(value)
        return value

    def clean_allowed_hosts_text(self) -> list[str]:
        raw: str = self.cleaned_data["allowed_hosts_text"]
        return clean_hosts([host for host in raw.split(",") if host.strip()])


@admin.register(Secret)
class SecretAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = SecretAdminForm
    list_display = ["name", "workspace", "allowed_hosts", "key_id", "updated_at"]
    search_fields = ["name", "workspace__name"]

    def get_readonly_fields(self, request: HttpRequest, obj: Secret | None = None) -> list[str]:
        return ["workspace", "name"] if obj else []

    def save_model(self, request: HttpRequest, obj: Secret, form: Any, change: bool) -> None:
        value, hosts = form.cleaned_data["value"], form.cleaned_data["allowed_hosts_text"]
        if value:
            saved, _ = services.secret_set(
                actor=actor_for_request(request),
                workspace=obj.workspace,
                name=obj.name,
                value=value,
                allowed_hosts=hosts,
            )
            obj.pk = saved.pk
        else:
            services.secret_update_hosts(
                actor=actor_for_request(request), secret=obj, allowed_hosts=hosts
            )


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["email", "workspace", "role", "invitation_status", "created_at", "expires_at"]
    list_filter = ["role"]
    search_fields = ["email", "workspace__name"]
    fields = readonly_fields = (
        "workspace", "email", "role", "invited_by", "token_hash", "created_at", "expires_at",
        "accepted_at", "revoked_at",
    )  # fmt: skip
    actions = ["revoke_invitations"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # The link is shown once, to the owner who invites from the dashboard.
        return False

    @admin.display(description="status")
    def invitation_status(self, invitation: Invitation) -> str:
        return invitation.status()

    @admin.action(description="Revoke selected invitations")
    def revoke_invitations(self, request: HttpRequest, queryset: QuerySet[Invitation]) -> None:
        for invitation in queryset:
            services.invitation_revoke(actor=actor_for_request(request), invitation=invitation)
        self.message_user(request, f"Revoked {queryset.count()} invitation(s).", messages.SUCCESS)


@admin.register(ProviderCredential)
class ProviderCredentialAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Which workspaces bring their own provider accounts; keys stay out of the admin."""

    list_display = ["workspace", "kind", "name", "base_url", "model", "has_key", "check_ok"]
    list_filter = ["kind"]
    search_fields = ["workspace__name", "name"]
    fields = readonly_fields = (
        "workspace", "kind", "name", "base_url", "model", "has_key", "checked_at",
        "check_ok", "check_message", "created_at", "updated_at",
    )  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # owners set keys on the dashboard, where a key is shown to no one

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
