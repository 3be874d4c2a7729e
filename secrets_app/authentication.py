"""REST API authentication: ``Authorization: Bearer sk_…`` names the workspace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from secrets_app import services
from secrets_app.models import ApiKey, Workspace


@dataclass(frozen=True)
class KeyPrincipal:
    """Who is calling: a workspace, through one of its secret keys."""

    key: ApiKey
    is_authenticated: bool = True
    is_anonymous: bool = False

    @property
    def workspace(self) -> Workspace:
        return self.key.workspace


class SecretKeyAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[KeyPrincipal, ApiKey] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise exceptions.AuthenticationFailed("use the header 'Authorization: Bearer sk_…'")
        try:
            key = services.api_key_authenticate(plaintext=token.strip(), kind=ApiKey.Kind.SECRET)
        except services.KeyRejected as rejected:
            raise exceptions.AuthenticationFailed(rejected.reason, code=rejected.code) from None
        return KeyPrincipal(key), key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


class HasWorkspace(permissions.BasePermission):
    message = "authenticate with 'Authorization: Bearer sk_…'"

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, ApiKey)


def request_workspace(request: Request) -> Workspace:
    assert isinstance(request.auth, ApiKey)  # guaranteed by HasWorkspace
    return request.auth.workspace
