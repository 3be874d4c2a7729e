"""WebSocket routes: the realtime session, at /v1/session and /session."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from django.urls import path

from sessions_app.consumers import VoiceConsumer

if TYPE_CHECKING:
    from channels.routing import URLRouter, _ExtendedURLPattern


def _session_route(route: str) -> _ExtendedURLPattern:
    """Django's ``path`` to the ASGI consumer: channels' URLRouter takes it."""
    pattern = path(route, VoiceConsumer.as_asgi())  # type: ignore[arg-type]  # stubs expect a view
    return cast("_ExtendedURLPattern", pattern)


websocket_urlpatterns: list[_ExtendedURLPattern | URLRouter] = [
    _session_route("v1/session"),
    _session_route("session"),
]
