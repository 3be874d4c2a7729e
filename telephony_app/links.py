"""The addresses a carrier is given: a number's voice webhook, its calls' status
callbacks, the media stream. ``base`` is ``platform_base()``."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest

from telephony_app.models import PhoneNumber


def platform_base(request: HttpRequest | None = None) -> str:
    """``PUBLIC_URL`` (carriers need https), else the request's own address."""
    if settings.PUBLIC_URL:
        return str(settings.PUBLIC_URL)
    if request is not None:
        return f"{request.scheme}://{request.get_host()}"
    return "http://127.0.0.1:8000"


def voice_webhook_url(phone: PhoneNumber, base: str) -> str:
    """What to paste into the carrier's console as the number's voice webhook."""
    return f"{base}/phone/{phone.account.carrier}/{phone.uid}/voice"


def status_callback_url(phone: PhoneNumber, base: str) -> str:
    return f"{base}/phone/{phone.account.carrier}/{phone.uid}/status"


def machine_callback_url(phone: PhoneNumber, base: str) -> str:
    """Where Twilio's asynchronous answering-machine detection reports (Telnyx reports to
    the status callback, as one more event)."""
    return f"{base}/phone/{phone.account.carrier}/{phone.uid}/machine"


def stream_url(carrier: str, base: str) -> str:
    """The media stream's WebSocket address (wss:// behind https)."""
    return "ws" + base.removeprefix("http") + f"/phone/{carrier}/stream"
