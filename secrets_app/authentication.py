"""REST API authentication: ``Authorization: Bearer sk_…`` names the workspace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from rest_framework import authentication, exceptions, permissions, throttling
from rest_framework.request import Request

from core import rates
from core.client_address import request_address
from secrets_app import scopes, services
from secrets_app.models import ApiKey, Workspace


def api_rate() -> rates.Rate:
    return rates.Rate("api", settings.API_REQUESTS_PER_MINUTE, 60)


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
        # Guessing keys from one address is refused long before it could ever succeed.
        address = request_address(request)
        wait_s = rates.peek_sync(api_rate(), "bad-key", address)
        if wait_s is not None:
            raise exceptions.Throttled(wait_s)
        try:
            key = services.api_key_authenticate(plaintext=token.strip(), kind=ApiKey.Kind.SECRET)
        except services.KeyRejected as rejected:
            rates.hit_sync(api_rate(), "bad-key", address)
            raise exceptions.AuthenticationFailed(rejected.reason, code=rejected.code) from None
        return KeyPrincipal(key), key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


def operation_scope(view: Any, method: str) -> str | None:
    """The scope an operation needs: every method a view answers names one in
    ``view.scopes`` (HEAD is GET's). None: the method names none (OPTIONS only)."""
    method = "GET" if method == "HEAD" else method
    return dict(getattr(view, "scopes", {})).get(method)


class HasWorkspace(permissions.BasePermission):
    """A secret key, and the scope the view names for this method (``view.scopes``).
    An operation that names no scope is refused (OPTIONS aside): nothing is open by
    omission."""

    message = "authenticate with 'Authorization: Bearer sk_…'"

    def has_permission(self, request: Request, view: Any) -> bool:
        if not isinstance(request.auth, ApiKey):
            return False
        method = request.method or ""
        wanted = operation_scope(view, method)
        if wanted is None:
            if method == "OPTIONS" or not hasattr(view, method.lower()):
                return True  # the metadata, or DRF's 405 for a method the view lacks
            raise exceptions.PermissionDenied(
                "this operation names no scope, so no key may call it", code="missing_scope"
            )
        if not scopes.grants(request.auth.scopes, wanted):
            raise exceptions.PermissionDenied(
                f"this key lacks the scope {wanted!r}; create a key with it in the dashboard",
                code="missing_scope",
            )
        return True


class ApiKeyRateThrottle(throttling.BaseThrottle):
    """``API_REQUESTS_PER_MINUTE`` per secret key (per address before a key is known),
    counted where every web process sees it."""

    def allow_request(self, request: Request, view: Any) -> bool:
        key = request.auth
        who = ("key", str(key.pk)) if isinstance(key, ApiKey) else ("address", "")
        if who[0] == "address":
            who = ("address", request_address(request))
        self._wait_s = rates.hit_sync(api_rate(), *who)
        return self._wait_s is None

    def wait(self) -> float | None:
        return self._wait_s


def request_workspace(request: Request) -> Workspace:
    assert isinstance(request.auth, ApiKey)  # guaranteed by HasWorkspace
    return request.auth.workspace
