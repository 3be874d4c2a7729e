"""WebSocket routes: the realtime session, at /v1/session and /session."""

from __future__ import annotations

from django.urls import path

from sessions_app.consumers import VoiceConsumer

websocket_urlpatterns = [
    path("v1/session", VoiceConsumer.as_asgi()),
    path("session", VoiceConsumer.as_asgi()),
]
