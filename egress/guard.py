"""The rules every customer-given URL is held to, before and while it is dialled.

One parser (WHATWG's, through ada: what browsers do) reads the URL, so that every
spelling of an address means one thing here: ``0x7f00000a``, ``0x7f.0x0.0x0.0xa``,
``0177.0.0.1``, ``2130706433``, ``127.1``, ``%31%32%37.0.0.1`` and full-width digits are all
``127.0.0.x`` before any rule looks at them, and the normalised URL is what is stored and
dialled, so no second parser downstream can read it differently. An IPv6 address is judged
with the IPv4 address it carries (mapped, compatible, NAT64, 6to4, Teredo).

A name is resolved once, every answer must be public, and the connection goes to the
address that was checked (``vet``): a DNS server that answers differently the second time
gets no second time.

Every refusal of an address, a port, a name that does not resolve or a connection that
fails says the same sentence (``refusal``): an answer that told "loopback" from "could not
resolve" from "connection refused" would map the platform's own network for whoever typed
the URL. Where the policy allows private addresses (a development machine), there is no
such network to hide, and failures say what happened.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import ada_url

logger = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Lookup = Callable[[str, int], Awaitable[Iterable[str]]]

DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
LOOKUP_TIMEOUT_S = 10.0

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: a network's own NAT64
_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d
_TEREDO = ipaddress.ip_network("2001::/32")
_NOT_PUBLIC = (
    "is_unspecified",
    "is_loopback",
    "is_link_local",
    "is_multicast",
    "is_reserved",
    "is_private",
)


@dataclass(frozen=True)
class Policy:
    """Where a customer-given URL may lead. ``ports`` None: any port. ``hint`` ends every
    refusal: it names the settings that would allow more (the caller knows their names)."""

    allow_private: bool = False
    ports: frozenset[int] | None = frozenset({80, 443})
    hint: str = ""

    def allows_port(self, port: int) -> bool:
        return self.ports is None or port in self.ports


# The platform's own provider URLs (LLM_BASE_URL, ORPHEUS_URL…): the operator chose them,
# and an internal model server is a fair choice. Dialled the same way, never refused.
OPERATOR = Policy(allow_private=True, ports=None)


class InvalidURL(ValueError):
    """Not a URL the platform can dial at all; the message says why, from the text alone."""


class EgressRefused(OSError):
    """The one sentence for every address, port, name or connection refused (an OSError,
    so connection libraries treat it as a failure to connect)."""


class EgressUnreachable(OSError):
    """Where private addresses are allowed: what went wrong, said plainly."""


@dataclass(frozen=True)
class Target:
    url: str  # as the WHATWG parser normalises it: what to store and to dial
    scheme: str
    host: str  # lower-case ASCII name, or an IP address without brackets
    port: int
    address: IPAddress | None  # the host, when it is an IP address
    has_credentials: bool
    has_fragment: bool

    @property
    def where(self) -> str:
        return where(self.host, self.port)


def where(host: str, port: int) -> str:
    """``host:port`` as a person writes it (IPv6 in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def refusal(shown: str, policy: Policy) -> EgressRefused:
    """The same words whatever the cause; ``shown`` is only what the customer typed."""
    sentence = f"{shown} is not a public address the platform can reach."
    return EgressRefused(f"{sentence} {policy.hint}" if policy.hint else sentence)


def parse(url: str, *, schemes: Iterable[str]) -> Target:
    """``url`` read as a browser reads it; InvalidURL when it is no URL of ``schemes``."""
    allowed = tuple(schemes)
    try:
        parts = ada_url.parse_url(str(url).strip())
    except ValueError:
        raise InvalidURL("is not a valid URL") from None
    scheme = parts["protocol"].rstrip(":")
    if scheme not in allowed or scheme not in DEFAULT_PORTS or not parts["hostname"]:
        shown = " or ".join(f"{name}://" for name in allowed)
        raise InvalidURL(f"must start with {shown} and name a host")
    host = parts["hostname"]
    address: IPAddress | None = None
    if parts["host_type"] != ada_url.HostType.DEFAULT:
        address = ipaddress.ip_address(host.strip("[]"))
        host = str(address)
    port = int(parts["port"]) if parts["port"] else DEFAULT_PORTS[scheme]
    return Target(
        url=parts["href"],
        scheme=scheme,
        host=host,
        port=port,
        address=address,
        has_credentials=bool(parts["username"] or parts["password"]),
        has_fragment=bool(parts["hash"]),
    )


def is_public(address: IPAddress) -> bool:
    """Whether packets to ``address`` go to the public internet (and to nothing else)."""
    if isinstance(address, ipaddress.IPv6Address):
        if address in _NAT64_LOCAL:
            return False
        if address.ipv4_mapped is not None or address in _NAT64:
            # Packets go to the IPv4 address inside: that is what is judged.
            return is_public(ipaddress.IPv4Address(address.packed[-4:]))
        if address in _COMPATIBLE and int(address) > 1:
            return False  # deprecated; some stacks still route it to the IPv4 address
        embedded = _embedded_ipv4(address)
        if embedded is not None and not is_public(embedded):
            return False
    if any(getattr(address, attribute, False) for attribute in (*_NOT_PUBLIC, "is_site_local")):
        return False
    return address not in _CGNAT and address.is_global


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address that a 6to4 or Teredo address hands its packets to."""
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _TEREDO and address.teredo is not None:
        server, client = address.teredo
        return client if is_public(server) else server
    return None


def _names_this_machine(host: str) -> bool:
    name = host.rstrip(".")
    return name == "localhost" or name.endswith(".localhost")


def check(url: str, *, schemes: Iterable[str], policy: Policy) -> Target:
    """What can be judged without DNS: the scheme, the port, an address literal, localhost.

    Raises InvalidURL (the text is no such URL) or EgressRefused (the one sentence)."""
    target = parse(url, schemes=schemes)
    if not policy.allows_port(target.port):
        raise refusal(target.where, policy)
    if not policy.allow_private:
        if target.address is not None and not is_public(target.address):
            raise refusal(target.where, policy)
        if _names_this_machine(target.host):
            raise refusal(target.where, policy)
    return target


async def system_lookup(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


# The one place names become addresses (tests put a scripted DNS here).
lookup: Lookup = system_lookup


async def vet_host(
    host: str, port: int, policy: Policy, *, resolver: Lookup | None = None
) -> list[IPAddress]:
    """The addresses to connect to for ``host``: looked up once, every one allowed."""
    shown = where(host, port)
    if not policy.allows_port(port):
        raise refusal(shown, policy)
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    elif _names_this_machine(host) and not policy.allow_private:
        raise refusal(shown, policy)
    else:
        addresses = await _resolved(host, port, shown, policy, resolver or lookup)
    if not policy.allow_private and not all(is_public(address) for address in addresses):
        logger.info("refused a customer-given host: not a public address")
        raise refusal(shown, policy)
    return addresses


async def _resolved(
    host: str, port: int, shown: str, policy: Policy, resolver: Lookup
) -> list[IPAddress]:
    try:
        async with asyncio.timeout(LOOKUP_TIMEOUT_S):
            answers = [str(answer) for answer in await resolver(host, port)]
        addresses = [ipaddress.ip_address(answer.split("%", 1)[0]) for answer in answers]
    except (OSError, TimeoutError, ValueError):
        addresses = []
    if addresses:
        return addresses
    if policy.allow_private:
        raise EgressUnreachable(f"could not resolve {host}")
    raise refusal(shown, policy)


async def vet(target: Target, policy: Policy, *, resolver: Lookup | None = None) -> IPAddress:
    """The one address to connect to for ``target`` (checked with ``check`` first)."""
    addresses = await vet_host(target.host, target.port, policy, resolver=resolver)
    return addresses[0]


async def open_socket(
    target: Target, policy: Policy, *, timeout_s: float, resolver: Lookup | None = None
) -> socket.socket:
    """A TCP connection to the vetted address of ``target``. Under a public-only policy a
    connection that fails says the one sentence too: a closed port must read as a private
    address does, or the platform would be a port scanner."""
    address = await vet(target, policy, resolver=resolver)
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        async with asyncio.timeout(timeout_s):
            await asyncio.get_running_loop().sock_connect(sock, (str(address), target.port))
    except BaseException as exc:
        sock.close()
        if isinstance(exc, OSError) and not policy.allow_private:
            raise refusal(target.where, policy) from None
        if isinstance(exc, OSError):
            raise EgressUnreachable(f"could not connect to {target.where}") from None
        raise
    return sock
