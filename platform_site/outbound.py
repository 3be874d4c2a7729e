"""Requests to addresses a customer typed in: a workspace's LLM endpoint, a webhook URL.

The platform must not become a way into its own network, so such URLs get the rules of
the tool sandbox's egress proxy (``tools_app.egress``): public addresses only, unless
``SANDBOX_EGRESS_ALLOW_PRIVATE`` (local development) says otherwise. A URL is checked
when it is saved (``clean_outbound_url``: the scheme, no credentials in it, no private
address literal), and again where it is used: webhooks go through ``egress.fetch``
itself; LLM streams through a pool whose resolver (``PublicOnlyResolver``) resolves the
host once per connection, refuses a non-public answer and connects to the address it
checked.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from urllib.parse import urlsplit

import aiohttp
import aiohttp.abc
from django.conf import settings
from django.core.exceptions import ValidationError

from tools_app.egress import non_public_reason

logger = logging.getLogger(__name__)

URL_MAX = 500


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:  # 2130706433, 0x7f.1, 127.1: spellings of IPv4 that resolvers accept
        return ipaddress.IPv4Address(socket.inet_aton(host)) if host[-1:].isdigit() else None
    except OSError:
        return None


def host_refusal(host: str) -> str | None:
    """Why ``host`` may not be reached, judged without DNS (None: it may be, so far)."""
    if settings.SANDBOX_EGRESS_ALLOW_PRIVATE:
        return None
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return f"{host} is this machine, not a public address"
    address = _literal(host)
    reason = non_public_reason(address) if address is not None else None
    return f"{host} is not a public address ({reason})" if reason else None


def clean_outbound_url(value: str, *, schemes: tuple[str, ...], what: str = "URL") -> str:
    """A URL the platform may call later; ValidationError in words otherwise."""
    url = (value or "").strip()
    if len(url) > URL_MAX:
        raise ValidationError(f"The {what} is longer than {URL_MAX} characters.")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ValidationError(f"The {what} is not a valid URL.") from None
    if parts.scheme not in schemes or not parts.hostname:
        allowed = " or ".join(f"{scheme}://" for scheme in schemes)
        raise ValidationError(f"The {what} must start with {allowed} and name a host.")
    if parts.username or parts.password:
        raise ValidationError(f"The {what} must not carry a user name or password.")
    if parts.fragment:
        raise ValidationError(f"The {what} must not have a #fragment.")
    refusal = host_refusal(parts.hostname)
    if refusal is not None:
        raise ValidationError(f"The {what} is refused: {refusal}.")
    return url


class AddressRefused(OSError):
    """A customer-given host that may not be reached; the message says why."""


async def vetted_address(host: str, port: int, timeout: float | None = None) -> str:  # noqa: ASYNC109
    """The address to connect to for ``host``: resolved once, public (or allowed) only."""
    literal = _literal(host)
    if literal is not None:
        addresses = [literal]
    else:
        loop = asyncio.get_running_loop()
        lookup = loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        try:
            infos = await asyncio.wait_for(lookup, timeout)
        except (OSError, TimeoutError):
            raise AddressRefused(f"could not resolve {host}") from None
        addresses = [ipaddress.ip_address(info[4][0]) for info in infos]
    if not settings.SANDBOX_EGRESS_ALLOW_PRIVATE:
        for address in addresses:
            if reason := non_public_reason(address):
                logger.warning("refused a connection to a customer-given host: not public")
                raise AddressRefused(f"{host} is not a public address ({reason})")
    return str(addresses[0])


class PublicOnlyResolver(aiohttp.abc.AbstractResolver):
    """aiohttp's resolver for customer-given URLs: one vetted address per host, so the
    connection goes where the check looked (TLS still names and verifies the host)."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[aiohttp.abc.ResolveResult]:
        address = await vetted_address(host, port)
        found = ipaddress.ip_address(address)
        return [
            {
                "hostname": host,
                "host": address,
                "port": port,
                "family": socket.AF_INET6 if found.version == 6 else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
        ]

    async def close(self) -> None:
        return None
