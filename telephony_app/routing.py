"""WebSocket routes: the carriers' media streams, at /phone/<carrier>/stream."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from django.urls import path

from realtime.connection.inbound import InboundByteGate
from telephony_app.consumers import MediaStreamConsumer

if TYPE_CHECKING:
    from channels.routing import _ExtendedURLPattern

websocket_urlpatterns = [
    cast(
        "_ExtendedURLPattern",
        # Bytes counted as they arrive, as on the browser's socket: a flood of frames is
        # refused before it is buffered (the consumer hears ``websocket.flood``).
        path(
            "phone/<str:carrier>/stream",
            InboundByteGate(MediaStreamConsumer.as_asgi()),  # type: ignore[arg-type]
        ),
    )
]
