"""HTTP goes to Django; WebSockets go to the session consumer.

No origin or session middleware wraps the WebSocket: browser connections are
authenticated by their publishable key, whose own allowed origins are checked
before the socket is accepted.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from platform_site import backends  # noqa: E402
from sessions_app.checks import refuse_bad_settings  # noqa: E402
from sessions_app.routing import websocket_urlpatterns  # noqa: E402
from sessions_app.session_setup import speech_preload  # noqa: E402
from tools_app.services import warm_sandbox  # noqa: E402

refuse_bad_settings()  # daphne runs no system checks: a bad provider setting stops it here
# The first sandbox worker starts (and logs its protections) with the process, and the
# offline speech models load in the background, not on the first session.
warm_sandbox(embedded=backends.tasks_inline())
speech_preload()

application = ProtocolTypeRouter(
    {"http": django_asgi_app, "websocket": URLRouter(websocket_urlpatterns)}
)
