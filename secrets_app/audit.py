"""The audit log: who changed what, when, and from where, for a workspace's owners.

Services write an event for every security-relevant change (keys, secrets, agents and
their handlers, members, the workspace) and for everything that moves data out or could
(webhook endpoints and redeliveries, provider credentials and their connection tests,
exports). The caller says who acts with an ``Actor``: the
dashboard user, the API key, or ``SYSTEM`` (management commands, the platform itself).
Events never hold secret values, key plaintexts or handler source, only what changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

from secrets_app.models import ApiKey, AuditEvent, User, Workspace

if TYPE_CHECKING:
    from django.http import HttpRequest


@dataclass(frozen=True)
class Actor:
    user: User | None = None
    key: ApiKey | None = None
    address: str = ""

    @property
    def label(self) -> str:
        if self.user is not None:
            return self.user.email
        if self.key is not None:
            return f"API key {self.key.display}"
        return "system"


SYSTEM = Actor()


def actor_for_request(request: HttpRequest) -> Actor:
    """The person logged in to the dashboard, or the secret key of an API request."""
    from core.client_address import request_address

    key = getattr(request, "auth", None)
    user = getattr(request, "user", None)
    address = request_address(request)
    if isinstance(key, ApiKey):
        return Actor(key=key, address=address)
    if isinstance(user, User) and user.is_authenticated:
        return Actor(user=user, address=address)
    return Actor(address=address)


def url_shown(url: str) -> str:
    """Where a URL goes, for the log: scheme, host, port and path; never a user name,
    password, query or fragment (where credentials may ride)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(not a URL)"
    host = f"[{host}]" if ":" in host else host
    return urlunsplit((parts.scheme, host + port, parts.path, "", ""))


def url_masked(url: str) -> str:
    """A URL as it may be shown back to its owner: where it goes and which query parameters
    it carries, never a user name, password or a query value (where tokens ride)."""
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return "(not a URL)"
    shown = url_shown(url)
    if not query:
        return shown
    return shown + "?" + "&".join(f"{quote(name, safe='')}=***" for name, _value in query)


def audit_record(
    *,
    workspace: Workspace,
    actor: Actor,
    action: str,
    target: str = "",
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    return AuditEvent.objects.create(
        workspace=workspace,
        actor_user=actor.user,
        actor_key=actor.key,
        actor_label=actor.label[:255],
        action=action,
        target=target[:255],
        details=details or {},
        address=actor.address[:64],
    )
