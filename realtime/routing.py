"""WebSocket routes: the realtime session, at /v1/session and /session."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from django.urls import path

from realtime.connection.inbound import InboundByteGate
from realtime.consumers import VoiceConsumer

if TYPE_CHECKING:
    from channels.routing import URLRouter, _ExtendedURLPattern


def _session_route(route: str) -> _ExtendedURLPattern:
    """Django's ``path`` to the ASGI consumer: channels' URLRouter takes it."""
    consumer = InboundByteGate(VoiceConsumer.as_asgi())  # bytes counted as they arrive
    pattern = path(route, consumer)  # type: ignore[arg-type]  # stubs expect a view
    return cast("_ExtendedURLPattern", pattern)


websocket_urlpatterns: list[_ExtendedURLPattern | URLRouter] = [
    _session_route("v1/session"),
    _session_route("session"),
]
