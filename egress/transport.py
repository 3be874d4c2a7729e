"""An httpx transport held to the egress guard and bound to one origin: for libraries that
dial a customer-given server themselves (the MCP SDK) and take an ``httpx.AsyncClient``.

``fetch`` (``egress.client``) is one request that the platform builds and follows; a
library speaking a protocol makes its own requests, so the guard sits under it instead,
where every request it sends passes, and holds it to the same rules:

1. every request goes to the origin the transport was made for (scheme, host, port, read
   by the guard's one parser): a request elsewhere, a redirect the library followed to
   another host included, is refused before any lookup;
2. secrets: a header may carry a secret's reference (``egress.secret_refs``), which
   becomes its value only when this origin's host is one of that secret's allowed hosts;
   a value of any secret that is not allowed here, found anywhere in the request, refuses
   it;
3. the host name is resolved once, for the transport's life, and every answer must be
   public; each connection goes to that vetted address with the original Host header
   and, for https, the original name as SNI and for the certificate check;
4. a response body past ``max_response_bytes`` breaks off; a connection that fails says
   the guard's one sentence under a public-only policy (no port scanner).

A refusal is a ``GuardRefused`` (an ``httpx.TransportError``, so the library treats it as
a failed request); its message is safe to show and is also kept in ``refused``, for a
caller whose library swallows transport errors.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import AsyncIterator, Callable, Sequence

import httpx

import egress
from egress import guard as rules
from egress import secret_refs as refs
from egress.client import host_allowed
from egress.secret_refs import SecretBinding

SCHEMES = ("http", "https")


class GuardRefused(httpx.TransportError):
    """The guard refused the request or cut its response; the message is safe to show."""


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    return httpx.create_ssl_context()


class GuardedTransport(httpx.AsyncBaseTransport):
    def __init__(
        self,
        url: str,
        policy: egress.Policy,
        *,
        secrets: Sequence[SecretBinding] = (),
        max_response_bytes: int = 1024 * 1024,
        resolver: rules.Lookup | None = None,
        inner: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.target = egress.check(url, schemes=SCHEMES, policy=policy)
        self.policy, self.max_response_bytes, self._resolver = policy, max_response_bytes, resolver
        self._secrets = tuple(secrets)
        self._scanner = refs.Scanner(self._secrets)
        self._inner = inner or httpx.AsyncHTTPTransport(verify=_ssl_context(), trust_env=False)
        self._address: rules.IPAddress | None = None
        self._vetting = asyncio.Lock()
        self.refused: str | None = None  # the first refusal, in words
        self.failed = asyncio.Event()  # set with ``refused``: a caller may stop waiting

    @property
    def host(self) -> str:
        return self.target.host

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        pinned = await self._pinned(request)
        try:
            response = await self._inner.handle_async_request(pinned)
        except httpx.TransportError as exc:
            raise self._refuse(self._unreachable(exc), request) from None
        return self._capped(response, request)

    async def aclose(self) -> None:
        await self._inner.aclose()

    # --- the request ---------------------------------------------------------------

    async def _pinned(self, request: httpx.Request) -> httpx.Request:
        try:
            target = egress.check(str(request.url), schemes=SCHEMES, policy=self.policy)
        except (egress.InvalidURL, egress.EgressRefused) as exc:
            raise self._refuse(f"the URL {exc}", request) from None
        if (target.scheme, target.host, target.port) != self._origin:
            raise self._refuse(
                f"{self.host} sent the request on to another address "
                f"({target.host}); only {self.target.where} is dialled",
                request,
            )
        headers = self._with_secrets(request)
        address = await self._vetted(request)
        extensions = dict(request.extensions)
        if target.scheme == "https" and target.address is None:
            extensions["sni_hostname"] = target.host  # SNI and the certificate's name
        return httpx.Request(
            request.method,
            request.url.copy_with(host=str(address)),
            headers=headers,
            stream=request.stream,
            extensions=extensions,
        )

    @property
    def _origin(self) -> tuple[str, str, int]:
        return (self.target.scheme, self.target.host, self.target.port)

    def _with_secrets(self, request: httpx.Request) -> list[tuple[str, str]]:
        """The request's headers with references expanded, for this host only."""
        headers = [(name, value) for name, value in request.headers.multi_items()]
        written = [text for _, value in headers for text in refs.header_texts(value)]
        used = [s for s in self._secrets if any(s.reference in text for text in written)]
        for binding in used:
            if not host_allowed(binding.allowed_hosts, self.host):
                raise self._refuse(self._secret_denied(binding), request)
        expanded = [(name, refs.expand_in_header(value, used)) for name, value in headers]
        body = request.content if isinstance(request.stream, httpx.ByteStream) else b""
        sent: list[str | bytes] = [str(request.url), body]
        sent += [f"{name}: {value}" for name, value in headers]  # as written: no value in them
        for binding in self._scanner.found(sent):
            if not host_allowed(binding.allowed_hosts, self.host):
                raise self._refuse(self._secret_denied(binding), request)
        return expanded

    def _secret_denied(self, binding: SecretBinding) -> str:
        allowed = ", ".join(binding.allowed_hosts) or "no hosts"
        return f"secret {binding.name} may not be sent to {self.host} (allowed: {allowed})"

    async def _vetted(self, request: httpx.Request) -> rules.IPAddress:
        """Looked up once for the transport's life: a rebinding DNS server gets no second say."""
        async with self._vetting:
            if self._address is None:
                try:
                    addresses = await egress.vet_host(
                        self.host, self.target.port, self.policy, resolver=self._resolver
                    )
                except (egress.EgressRefused, egress.EgressUnreachable) as exc:
                    raise self._refuse(str(exc), request) from None
                self._address = addresses[0]
            return self._address

    # --- the response --------------------------------------------------------------

    def _capped(self, response: httpx.Response, request: httpx.Request) -> httpx.Response:
        limit = self.max_response_bytes
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise self._refuse(self._too_large(), request)
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_CappedStream(stream, limit, lambda: self._refuse(self._too_large(), request)),
            extensions=response.extensions,
        )

    def _too_large(self) -> str:
        return f"a response from {self.host} is larger than {self.max_response_bytes} bytes"

    def _unreachable(self, exc: httpx.TransportError) -> str:
        # The exception's text can quote what was sent: never passed on.
        if isinstance(exc, GuardRefused):
            return str(exc)
        if isinstance(exc, httpx.TimeoutException):
            return f"{self.host} did not answer in time"
        if "CERTIFICATE_VERIFY_FAILED" in str(exc):
            return f"the TLS certificate of {self.host} could not be verified"
        if isinstance(exc, httpx.ConnectError) and not self.policy.allow_private:
            return str(egress.refusal(self.target.where, self.policy))
        if isinstance(exc, httpx.ConnectError):
            return f"could not connect to {self.target.where}"
        return f"the connection to {self.host} failed ({type(exc).__name__})"

    def _refuse(self, message: str, request: httpx.Request) -> GuardRefused:
        self.refused = self.refused or message
        self.failed.set()
        return GuardRefused(message, request=request)


class _CappedStream(httpx.AsyncByteStream):
    def __init__(
        self, stream: httpx.AsyncByteStream, limit: int, error: Callable[[], GuardRefused]
    ) -> None:
        self._stream, self._limit, self._error = stream, limit, error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        received = 0
        async for chunk in self._stream:
            received += len(chunk)
            if received > self._limit:
                raise self._error()
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()
