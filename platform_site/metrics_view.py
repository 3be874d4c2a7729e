"""/metrics for Prometheus: never public.

With ``METRICS_TOKEN`` set, a scrape must send ``Authorization: Bearer <token>``. Without
it, only a direct request from this machine's loopback is answered: a request that came
through a proxy (it carries forwarding headers) is refused, because a proxy on the same
host would otherwise make every outside request look local.
"""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from engine import metrics

_PROXY_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")


def _from_loopback(request: HttpRequest) -> bool:
    if any(header in request.META for header in _PROXY_HEADERS):
        return False
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


def _allowed(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    if not token:
        return _from_loopback(request)
    scheme, _, sent = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(sent.encode(), token.encode())


@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not _allowed(request):
        return HttpResponse("forbidden\n", status=403, content_type="text/plain")
    body, content_type = metrics.exposition(request.headers.get("Accept", ""))
    return HttpResponse(body, content_type=content_type)
