"""HTTP goes to Django; WebSockets go to the session consumer (browsers) or the media-stream
consumer (carriers' phone calls).

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

from core import backends  # noqa: E402
from platform_site.body_limit import BodyLimit, refuse_early_in_daphne  # noqa: E402
from platform_site.collector import freeze_start_up_in_daphne  # noqa: E402
from platform_site.log_masking import mask_access_log_in_daphne  # noqa: E402
from platform_site.request_head import bound_request_heads_in_daphne  # noqa: E402
from platform_site.response_pacing import pace_responses_in_daphne  # noqa: E402
from platform_site.shutdown import drain_on_sigterm  # noqa: E402
from platform_site.socket_writes import send_at_step_end_in_daphne  # noqa: E402
from platform_site.websocket_doors import (  # noqa: E402
    count_control_frames_in_daphne,
    rfc6455_only_in_daphne,
    unknown_path_route,
)
from platform_site.websocket_unmasking import unmask_cheaply_in_daphne  # noqa: E402
from realtime.routing import websocket_urlpatterns  # noqa: E402
from realtime.session_setup import speech_preload  # noqa: E402
from sessions_app.checks import refuse_bad_settings  # noqa: E402
from telephony_app.routing import websocket_urlpatterns as phone_urlpatterns  # noqa: E402
from tools_app.services import warm_sandbox  # noqa: E402

refuse_bad_settings()  # daphne runs no system checks: a bad provider setting stops it here
# The first sandbox worker starts (and logs its protections) with the process, and the
# offline speech models load in the background, not on the first session.
warm_sandbox(embedded=backends.tasks_inline())
speech_preload()
drain_on_sigterm()  # a deploy's SIGTERM moves the sessions to other processes first
refuse_early_in_daphne()  # a body past its limit is refused as it arrives, not held
bound_request_heads_in_daphne()  # a request's head must arrive in time, however it trickles
mask_access_log_in_daphne()  # a recording's signed URL is a credential: not in the log
pace_responses_in_daphne()  # a response goes out as fast as its client takes it, no faster
rfc6455_only_in_daphne()  # WebSocket version 13 only: not autobahn's hybi draft 8 as well
send_at_step_end_in_daphne()  # a socket is sent its step's writes at once, not via the reactor
unmask_cheaply_in_daphne()  # a client's frame is unmasked without a native object per frame
count_control_frames_in_daphne()  # a client's pings and pongs count as its messages
freeze_start_up_in_daphne()  # full collections skip start-up's objects: no 100-300 ms pauses

application = ProtocolTypeRouter(
    {
        "http": BodyLimit(django_asgi_app),
        "websocket": URLRouter([*websocket_urlpatterns, *phone_urlpatterns, unknown_path_route()]),
    }
)
