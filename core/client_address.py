"""Who is on the other end of a request or socket, also behind a reverse proxy.

The peer's address is the client's unless the peer is one of ``TRUSTED_PROXIES``; then
``X-Forwarded-For`` is read from the right (the entry the nearest proxy added) past every
trusted proxy. Entries left of the first untrusted one are whatever the client claimed and
are never believed, so a spoofed header cannot dodge a per-address limit.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest

UNKNOWN = "unknown"


@lru_cache(maxsize=8)
def _networks(
    proxies: tuple[str, ...],
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(proxy, strict=False) for proxy in proxies)


def _trusted(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in _networks(tuple(settings.TRUSTED_PROXIES)))


def _clean(address: str) -> str:
    address = address.strip()
    try:
        return str(ipaddress.ip_address(address.strip("[]")))
    except ValueError:
        return UNKNOWN


def client_address(peer: str | None, forwarded_for: str | None) -> str:
    """The client's IP address as text ("unknown" when there is none to be had)."""
    address = _clean(peer or "")
    if not forwarded_for or not _trusted(address):
        return address
    for hop in reversed(forwarded_for.split(",")):
        address = _clean(hop)
        if not _trusted(address):
            return address
    return address


def request_address(request: HttpRequest) -> str:
    return client_address(request.META.get("REMOTE_ADDR"), request.META.get("HTTP_X_FORWARDED_FOR"))
