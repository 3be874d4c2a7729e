"""The platform's one outbound HTTP client for customer-given URLs: the sandbox's
``ctx.fetch`` and webhook deliveries go through :func:`fetch`.

Plain asyncio and httpx, no Django: the caller passes the policy and the workspace's
secrets (none for a webhook), so the sandbox worker, webhooks and the tests use it the same
way.

Every hop (the first request and each redirect) is vetted in this order, before
anything leaves the machine:

1. the URL, read by the platform's one URL parser (``egress.guard``): http or https, on
   a port the policy allows, not an address literal that is not public;
2. secrets: a reference becomes its value only for a host allowed for that secret,
   and a value aimed at any other host is refused. This runs before DNS, so a secret
   spelled into a host name never reaches a resolver;
3. the address: the host name is resolved once and every answer must be public;
4. the connection goes to that vetted address, carrying the original Host header
   and, for https, the original name as TLS SNI and for the certificate check. No
   second lookup happens, so a rebinding DNS server gets no second say.

Steps 1 and 3, and a connection that fails, say the guard's one sentence whatever the
cause (``egress.refusal``), so a handler cannot map what lies behind the platform.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import ssl
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote

import httpx

import egress
from egress import guard as rules
from egress import secret_refs as refs
from egress.secret_refs import SecretBinding

logger = logging.getLogger(__name__)

IPAddress = rules.IPAddress
Resolver = rules.Lookup

DEFAULT_PORTS = {"http": 80, "https": 443}
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
ALLOWED_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Framing and routing are ours to set: a handler's Host could point a pinned
# connection at another virtual host, and its Content-Length could desync the body.
MANAGED_HEADERS = frozenset(
    "host content-length transfer-encoding connection keep-alive upgrade te trailer "
    "proxy-connection accept-encoding".split()
)
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
USER_AGENT = "voice-agent-platform-fetch/1"

_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
_HEADER_VALUE = re.compile(r"^[\t\x20-\x7e]*\Z")  # no CR/LF: no header injection


class EgressError(Exception):
    """A fetch that produced no response; the message is safe to show the handler's author."""


class EgressDenied(EgressError):
    """The policy refused the request or cut the response: names the rule and the host
    (for an address or a port: the guard's one sentence)."""


class EgressFailed(EgressError):
    """The destination could not be resolved or reached, broke off, or was too slow."""


@dataclass(frozen=True)
class EgressPolicy:
    # Addresses and ports: the platform's one guard (``core.outbound.policy``).
    guard: egress.Policy = field(default_factory=egress.Policy)
    max_response_bytes: int = 5 * 1024 * 1024
    timeout_s: float = 10.0  # the whole fetch: DNS, every redirect, the body
    max_redirects: int = 5


@dataclass(frozen=True)
class FetchRequest:
    url: str
    method: str = "GET"
    headers: dict[str, str] = field(default_factory=dict)
    body: str | bytes | None = None


@dataclass(frozen=True)
class FetchResponse:
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    url: str  # after redirects, with secret values shown as their references


def host_allowed(allowed_hosts: Iterable[str], host: str) -> bool:
    """Exact host, or ``*.example.com`` for its subdomains (not the apex)."""
    host = host.lower().rstrip(".")
    for pattern in allowed_hosts:
        if pattern.startswith("*."):
            if host.endswith(pattern[1:]) and host != pattern[2:]:
                return True
        elif host == pattern:
            return True
    return False


async def fetch(
    request: FetchRequest,
    *,
    policy: EgressPolicy,
    secrets: Sequence[SecretBinding] = (),
    resolver: Resolver | None = None,
    client: httpx.AsyncClient | None = None,
) -> FetchResponse:
    """Send ``request`` under ``policy``; raise EgressDenied or EgressFailed otherwise.

    ``client`` is for tests (a MockTransport, or a test CA): it must have no proxy or
    auth, and its pooled connections may be shared across host names that resolve to
    the same address. By default every hop gets a fresh client with no environment
    proxies, so a connection is never reused for another host name.
    """
    session = _Session(policy, tuple(secrets), resolver, client)
    host = "(unparsed URL)"
    try:
        async with asyncio.timeout(policy.timeout_s):
            hop = _first_hop(request, policy)
            host = hop.target.host
            return await session.follow(hop)
    except TimeoutError:
        error: EgressError = EgressFailed(
            f"request to {host} took longer than {policy.timeout_s:g} s"
        )
    except EgressError as exc:
        error = exc
    message = refs.mask_secret_values(str(error), session.secrets)
    if isinstance(error, EgressDenied):
        # Never the message: the handler chose the host and URL it names, and may have
        # put a tool argument there. The handler itself gets the message.
        logger.info("fetch refused by the egress policy")
    raise type(error)(message) from None


# --- one hop: what to send, where ---------------------------------------------------


@dataclass(frozen=True)
class _Target:
    url: httpx.URL  # as written by the handler or the redirecting server
    scheme: str
    host: str  # lower-case ASCII (IDNA) name, or an IP literal without brackets
    port: int
    address: IPAddress | None  # the host, when it is an IP literal

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"


@dataclass(frozen=True)
class _Hop:
    """One request of a fetch as the handler wrote it: references, not values."""

    target: _Target
    method: str
    headers: tuple[tuple[str, str], ...]
    body: bytes | None


@dataclass(frozen=True)
class _Outgoing:
    """A hop with secret values in place, ready for the wire."""

    url: httpx.URL
    headers: list[tuple[str, str]]
    body: bytes | None
    secret_headers: frozenset[str]  # lower-case names of headers that carry a secret


@dataclass(frozen=True)
class _Reply:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def _parse_target(url: str | httpx.URL, policy: EgressPolicy) -> _Target:
    """The URL as the guard reads it: scheme, port and address literal judged here."""
    try:
        target = egress.check(str(url), schemes=DEFAULT_PORTS, policy=policy.guard)
        parsed = httpx.URL(target.url)
    except egress.InvalidURL as exc:
        raise EgressDenied(f"the URL {exc}") from None
    except egress.EgressRefused as exc:
        raise EgressDenied(str(exc)) from None
    except (httpx.InvalidURL, ValueError):
        raise EgressDenied("the URL is not a valid URL") from None
    return _Target(parsed, target.scheme, target.host, target.port, target.address)


def _first_hop(request: FetchRequest, policy: EgressPolicy) -> _Hop:
    method = request.method.upper()
    if method not in ALLOWED_METHODS:
        raise EgressDenied(f"method {method[:20]} is not allowed")
    for name, value in request.headers.items():
        if not _HEADER_NAME.match(name) or not _HEADER_VALUE.match(value):
            raise EgressDenied(f"header {name[:40]!r} is not a valid HTTP header (ASCII only)")
    body = request.body.encode() if isinstance(request.body, str) else request.body
    headers = tuple(
        (name, value)
        for name, value in request.headers.items()
        if name.lower() not in MANAGED_HEADERS
    )
    return _Hop(_parse_target(request.url, policy), method, headers, body)


def _redirect_hop(
    hop: _Hop, outgoing: _Outgoing, status: int, location: str, policy: EgressPolicy
) -> _Hop:
    try:
        url = hop.target.url.join(location)
    except (httpx.InvalidURL, TypeError, ValueError):
        raise EgressDenied(f"{hop.target.host} redirected to an invalid URL") from None
    target = _parse_target(url, policy)
    method, body, headers = hop.method, hop.body, hop.headers
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        method, body = "GET", None
        headers = tuple((n, v) for n, v in headers if not n.lower().startswith("content-"))
    if target.origin != hop.target.origin:
        dropped = CREDENTIAL_HEADERS | outgoing.secret_headers
        headers = tuple((n, v) for n, v in headers if n.lower() not in dropped)
    return _Hop(target, method, headers, body)


# --- secrets ------------------------------------------------------------------------


def _secret_denied(binding: SecretBinding, host: str) -> EgressDenied:
    allowed = ", ".join(binding.allowed_hosts) or "no hosts"
    return EgressDenied(f"secret {binding.name} may not be sent to {host} (allowed: {allowed})")


def _written_texts(hop: _Hop) -> list[str]:
    """What the handler wrote into a request, Basic credentials decoded."""
    texts = [str(hop.target.url)]
    for _, value in hop.headers:
        texts.extend(refs.header_texts(value))
    texts.append(hop.body.decode("utf-8", "replace") if hop.body else "")
    return texts


def _with_secrets(hop: _Hop, scanner: refs.Scanner, policy: EgressPolicy) -> _Outgoing:
    secrets = scanner.secrets
    host = hop.target.host
    written = _written_texts(hop)
    used = [s for s in secrets if any(s.reference in text for text in written)]
    for binding in used:
        if not host_allowed(binding.allowed_hosts, host):
            raise _secret_denied(binding, host)
    content_type = next((v for n, v in hop.headers if n.lower() == "content-type"), "")
    url = httpx.URL(refs.expand_in_url(str(hop.target.url), used))
    headers = [(name, refs.expand_in_header(value, used)) for name, value in hop.headers]
    body = refs.expand_in_body(hop.body, content_type, used) if hop.body else hop.body
    if _parse_target(url, policy).origin != hop.target.origin:
        raise EgressDenied(f"secrets may not be used in the scheme, host or port ({host})")
    for binding in scanner.found(_sent_texts(host, url, headers, body)):
        # A value in the request the proxy did not put there: a readable one, spelled by
        # the handler itself.
        if binding not in used and not host_allowed(binding.allowed_hosts, host):
            raise _secret_denied(binding, host)
    carrying = frozenset(
        name.lower()
        for (name, value), (_, original) in zip(headers, hop.headers, strict=True)
        if value != original or scanner.found(refs.header_texts(value))
    )
    return _Outgoing(url, headers, body, carrying)


def _sent_texts(
    host: str, url: httpx.URL, headers: list[tuple[str, str]], body: bytes | None
) -> list[str | bytes]:
    """Everything a request puts on the wire, decoded where the proxy or a server decodes."""
    texts: list[str | bytes] = [host, str(url), unquote(str(url))]
    for name, value in headers:
        texts.extend(f"{name}: {text}" for text in refs.header_texts(value))
    if body:
        texts.append(body)
    return texts


# --- addresses ----------------------------------------------------------------------


async def _vetted_address(
    target: _Target, resolver: Resolver | None, policy: EgressPolicy
) -> IPAddress:
    """Resolved once; every answer allowed (the address itself never reaches the message:
    it would map internal DNS)."""
    try:
        return (await egress.vet_host(target.host, target.port, policy.guard, resolver=resolver))[0]
    except egress.EgressRefused as exc:
        raise EgressDenied(str(exc)) from None
    except egress.EgressUnreachable as exc:
        raise EgressFailed(str(exc)) from None


# --- the wire -----------------------------------------------------------------------


@functools.cache
def _default_ssl_context() -> ssl.SSLContext:
    return httpx.create_ssl_context()


@dataclass
class _Session:
    policy: EgressPolicy
    secrets: tuple[SecretBinding, ...]
    resolver: Resolver | None  # None: the guard's own lookup
    client: httpx.AsyncClient | None

    def __post_init__(self) -> None:
        self.scanner = refs.Scanner(self.secrets)

    async def follow(self, hop: _Hop) -> FetchResponse:
        redirects = 0
        while True:
            outgoing = _with_secrets(hop, self.scanner, self.policy)
            address = await _vetted_address(hop.target, self.resolver, self.policy)
            reply = await self.exchange(hop, outgoing, address)
            location = dict(reply.headers).get("location")
            if reply.status not in REDIRECT_STATUSES or location is None:
                return self.response(hop, reply)
            if redirects == self.policy.max_redirects:
                raise EgressDenied(
                    f"{hop.target.host} redirected more than {self.policy.max_redirects} times"
                )
            redirects += 1
            hop = _redirect_hop(hop, outgoing, reply.status, location, self.policy)

    async def exchange(self, hop: _Hop, outgoing: _Outgoing, address: IPAddress) -> _Reply:
        request = self.pinned_request(hop, outgoing, address)
        host = hop.target.host
        async with self.http_client() as http:
            try:
                response = await http.send(request, stream=True, follow_redirects=False)
            except httpx.HTTPError as exc:
                raise _unreachable(hop.target, exc, self.policy) from None
            try:
                skip_body = response.status_code in REDIRECT_STATUSES or hop.method == "HEAD"
                body = b"" if skip_body else await self.read_body(response, host)
            except httpx.HTTPError as exc:
                raise _unreachable(hop.target, exc, self.policy) from None
            finally:
                await response.aclose()
        return _Reply(response.status_code, response.headers.multi_items(), body)

    def pinned_request(self, hop: _Hop, outgoing: _Outgoing, address: IPAddress) -> httpx.Request:
        """The request, addressed to the vetted IP but naming the original host."""
        target = hop.target
        headers = [("Host", target.host_header), ("Accept-Encoding", "identity")]
        if not any(name.lower() == "user-agent" for name, _ in outgoing.headers):
            headers.append(("User-Agent", USER_AGENT))
        extensions: dict[str, object] = {"timeout": httpx.Timeout(self.policy.timeout_s).as_dict()}
        if target.scheme == "https" and target.address is None:
            # httpcore uses this as server_hostname: SNI and the certificate name check.
            extensions["sni_hostname"] = target.host
        try:
            return httpx.Request(
                hop.method,
                outgoing.url.copy_with(host=str(address)),
                headers=headers + outgoing.headers,
                content=outgoing.body,
                extensions=extensions,
            )
        except UnicodeEncodeError:  # a secret value that is not ASCII, put in a header
            raise EgressDenied("header values must be ASCII text") from None

    @contextlib.asynccontextmanager
    async def http_client(self) -> AsyncIterator[httpx.AsyncClient]:
        if self.client is not None:
            yield self.client
            return
        async with httpx.AsyncClient(
            verify=_default_ssl_context(), trust_env=False, follow_redirects=False
        ) as fresh:
            yield fresh

    async def read_body(self, response: httpx.Response, host: str) -> bytes:
        # Raw bytes: we asked for identity, and decoding a gzip body could turn a
        # few kilobytes into gigabytes before any cap is checked.
        limit = self.policy.max_response_bytes
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise EgressDenied(f"response from {host} is larger than {_size(limit)}")
        body = bytearray()
        async for chunk in response.aiter_raw():
            body += chunk
            if len(body) > limit:
                raise EgressDenied(f"response from {host} is larger than {_size(limit)}")
        return bytes(body)

    def response(self, hop: _Hop, reply: _Reply) -> FetchResponse:
        """Secret values come back as references, never as values, in every spelling the
        proxy applies or a server may echo: whether or not this request carried one (a
        handler could store a value at an allowed host, then read it back)."""

        def mask(text: str) -> str:
            return self.scanner.mask(text, lambda s: s.reference)

        body = self.scanner.mask_bytes(reply.body, lambda s: s.reference)
        headers = [(name, mask(value)) for name, value in reply.headers]
        return FetchResponse(reply.status, headers, body, mask(str(hop.target.url)))


def _unreachable(target: _Target, exc: httpx.HTTPError, policy: EgressPolicy) -> EgressError:
    # The exception's own text can quote request headers, so it is never passed on.
    host = target.host
    if isinstance(exc, httpx.TimeoutException):
        return EgressFailed(f"request to {host} timed out")
    if "CERTIFICATE_VERIFY_FAILED" in str(exc):
        return EgressFailed(f"the TLS certificate of {host} could not be verified")
    if isinstance(exc, httpx.ConnectError) and not policy.guard.allow_private:
        # A closed port reads as a private address does: no port scanner.
        return EgressDenied(str(egress.refusal(rules.where(host, target.port), policy.guard)))
    if isinstance(exc, httpx.ConnectError):
        return EgressFailed(f"could not connect to {host}")
    return EgressFailed(f"connection to {host} failed ({type(exc).__name__})")


def _size(limit: int) -> str:
    for unit, scale in (("MB", 1024 * 1024), ("KB", 1024)):
        if limit >= scale and limit % scale == 0:
            return f"{limit // scale} {unit}"
    return f"{limit} bytes"
