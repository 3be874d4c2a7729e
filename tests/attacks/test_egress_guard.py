"""Attacks on the URLs the platform dials for a customer, now regressions (issue 21, item 3).

- Address spellings (hex, octal, dotted-hex, integer, short, percent-encoded, full-width,
  IPv6-mapped…) accepted at save: refused at save AND at send, for webhooks, LLM
  connections and the Orpheus WebSocket (ctx.fetch: ``tests/tools_app/test_egress.py``).
- "Test connection" as an oracle: a name that resolves to loopback, a name that does not
  resolve and a closed port answered differently (a map of internal DNS, a port scanner).
  They now say the same sentence, and the workspace's key never reaches loopback.
- DNS rebinding: a name that was public when saved and answers loopback when dialled.
  Refused; the connection goes only to the address that was checked.

DNS is scripted (``egress.guard.lookup``): no public address is ever dialled from here.
Where a test needs "a public address with a closed port", 127.0.0.2 stands in for one
(``public_stand_in``): the code after the check (connect, fail, say the sentence) is real.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError

import egress
from core import outbound
from egress.client import EgressDenied, EgressPolicy, FetchRequest, fetch
from engine.protocol import PROVIDER_FAILURES
from secrets_app import provider_credentials as credentials
from secrets_app.models import ProviderCredential
from secrets_app.services import sealed_store
from sessions_app.provider_check import provider_check
from tests.engine.providers.llm.openai.fake_server import FakeOpenAIServer, text_reply
from tests.engine.providers.tts.orpheus.fake_server import FakeOrpheusServer
from tests.factories import Tenant, make_tenant
from tests.fakes.egress_server import EgressTestServer, respond
from tests.sessions_app.recording import recorded_errors
from tests.sessions_app.wsclient import Client
from webhooks_app import services as webhooks

pytestmark = pytest.mark.django_db(transaction=True)

NOT_PUBLIC = "is not a public address the platform can reach."
NAMES_THE_SETTINGS = ("(EGRESS_PORTS)", "DEV_ALLOW_PRIVATE_EGRESS=true allows any address and port")

# Spellings of 127.0.0.1: where the test's own servers listen, so a request that got
# through would be seen.
LOOPBACK = [
    "127.0.0.1", "2130706433", "0x7f000001", "0x7f.0x0.0x0.0x1", "0177.0.0.1", "017700000001",
    "127.1", "0x7f.1", "127.0.0.1.", "%31%32%37.0.0.1", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]",
    "\uff11\uff12\uff17\uff0e\uff10\uff0e\uff10\uff0e\uff11", "localhost",  # full-width
]  # fmt: skip
# The issue's own, and the other kinds of address that lead inwards.
INWARDS = [
    "0x7f00000a", "0x7f.0x0.0x0.0xa", "0xa9fea9fe", "169.254.169.254", "10.0.0.8", "0",
    "100.64.0.1", "[::1]", "[fd00:ec2::254]", "[fe80::1]", "[fc00::1]", "[::127.0.0.1]",
    "[64:ff9b::7f00:1]", "[64:ff9b:1::a00:1]", "[2002:7f00:1::1]",
    "[2001:0:4136:e378:8000:63bf:80ff:fffe]", "foo.localhost",
]  # fmt: skip


class ScriptedDNS:
    """The platform's one lookup, scripted: ``answers[name]`` is a list of addresses, or a
    function of how many times the name was asked; a name it does not know does not
    resolve."""

    def __init__(self) -> None:
        self.answers: dict[str, list[str] | Callable[[int], list[str]]] = {}
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        answer = self.answers.get(host)
        if answer is None:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return answer(self.calls.count(host)) if callable(answer) else answer


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> ScriptedDNS:
    scripted = ScriptedDNS()
    monkeypatch.setattr(egress.guard, "lookup", scripted)
    return scripted


@pytest.fixture
def public_stand_in(monkeypatch: pytest.MonkeyPatch) -> str:
    """127.0.0.2 counts as a public address (no real one may be dialled from here)."""
    stand_in = ipaddress.ip_address("127.0.0.2")
    real = egress.guard.is_public
    monkeypatch.setattr(egress.guard, "is_public", lambda a: a == stand_in or real(a))
    return str(stand_in)


@pytest.fixture(autouse=True)
def production(settings: Any, http_pools_closed: None) -> Any:
    settings.DEV_ALLOW_PRIVATE_EGRESS = False
    settings.EGRESS_PORTS = [80, 443]
    settings.LLM_BASE_URL = None
    return settings


def _refused_alike(messages: list[str]) -> None:
    """Every message is the one sentence (after the host:port the customer typed)."""
    assert messages
    for message in messages:
        assert NOT_PUBLIC in message, message
        for named in NAMES_THE_SETTINGS:
            assert named in message, message
    tails = {message.split(NOT_PUBLIC, 1)[1] for message in messages}
    assert len(tails) == 1, tails


# ---------------------------------------------------------------- at save


@pytest.mark.parametrize("host", LOOPBACK + INWARDS)
def test_every_spelling_is_refused_when_saved(host: str) -> None:
    tenant = make_tenant("save@example.com")
    refusals = []
    for save in (
        lambda: webhooks.endpoint_create(
            workspace=tenant.workspace, url=f"http://{host}/hook", events=["session.ended"]
        ),
        lambda: credentials.provider_llm_set(
            workspace=tenant.workspace, name="x", base_url=f"http://{host}/v1", model="m"
        ),
        lambda: credentials.provider_speech_set(
            workspace=tenant.workspace, kind="orpheus", api_key="k-1234", url=f"ws://{host}/o"
        ),
    ):
        with pytest.raises(ValidationError) as caught:
            save()
        refusals.extend(caught.value.messages)
    _refused_alike(refusals)
    assert not ProviderCredential.objects.exists()


def test_a_port_is_refused_in_the_same_words_naming_its_setting() -> None:
    tenant = make_tenant("port@example.com")
    with pytest.raises(ValidationError) as port:
        webhooks.endpoint_create(
            workspace=tenant.workspace,
            url="https://hooks.example.com:8716/",
            events=["quota.warning"],
        )
    with pytest.raises(ValidationError) as address:
        webhooks.endpoint_create(
            workspace=tenant.workspace, url="https://10.0.0.8/", events=["quota.warning"]
        )
    _refused_alike(port.value.messages + address.value.messages)
    assert "hooks.example.com:8716 is not a public address" in port.value.messages[0]


def test_the_development_switch_allows_loopback_and_any_port(settings: Any) -> None:
    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    tenant = make_tenant("dev@example.com")
    endpoint, _ = webhooks.endpoint_create(
        workspace=tenant.workspace, url="http://0x7f000001:8716/hook", events=["quota.warning"]
    )
    row = credentials.provider_llm_set(
        workspace=tenant.workspace, name="ollama", base_url="http://localhost:11434/v1", model="m"
    )
    assert endpoint.url == "http://127.0.0.1:8716/hook"  # stored as the parser read it
    assert row.base_url == "http://localhost:11434/v1"


# ---------------------------------------------------------------- at send


def _stored(tenant: Tenant, kind: str, url: str, **fields: Any) -> ProviderCredential:
    """A row as an older version (or a database edit) may have left it: never validated."""
    row = ProviderCredential(
        workspace=tenant.workspace, kind=kind, name=fields.pop("name", kind), base_url=url,
        **fields,
    )  # fmt: skip
    sealed_store(row, "workspace-key-0123")
    row.save()
    return row


async def test_every_spelling_is_refused_when_a_webhook_is_sent(settings: Any) -> None:
    async with EgressTestServer() as receiver:
        receiver.route("/hook", respond(200, b"ok"))
        settings.EGRESS_PORTS = [80, 443, receiver.port]  # the port is not the reason
        outcomes = await asyncio.gather(
            *(
                webhooks._send(webhooks._Request(f"http://{host}:{receiver.port}/hook", {}, b"{}"))
                for host in LOOPBACK + INWARDS
            )
        )
        assert receiver.requests == []
        settings.DEV_ALLOW_PRIVATE_EGRESS = True  # beside it, the normal path on this machine
        delivered = await webhooks._send(
            webhooks._Request(f"http://127.0.0.1:{receiver.port}/hook", {}, b"{}")
        )
    assert delivered.status_code == 200 and len(receiver.requests) == 1
    assert [outcome.status_code for outcome in outcomes] == [None] * len(outcomes)
    _refused_alike([outcome.error for outcome in outcomes])


async def test_every_spelling_is_refused_when_a_session_dials_its_llm(settings: Any) -> None:
    async with (
        FakeOpenAIServer(default=text_reply("leaked")) as target,
        FakeOpenAIServer(default=text_reply("Platform here.")) as platform,
    ):
        settings.EGRESS_PORTS = [80, 443, target.port]
        hosts = LOOPBACK[:8]
        tenants = [await sync_to_async(make_tenant)(f"llm{i}@example.com") for i in range(9)]
        for tenant, host in zip(tenants, hosts, strict=False):
            await sync_to_async(_stored)(
                tenant, "llm", f"http://{host}:{target.port}/v1", model="m"
            )
        settings.LLM_BASE_URL = platform.base_url  # the operator's: not the guard's business
        results = await asyncio.gather(*(_text_turn(tenant) for tenant in tenants))
    refused, healthy = results[: len(hosts)], results[-1]
    assert target.requests == []
    for events in refused:
        assert _errors(events) == [("llm_failed", PROVIDER_FAILURES["llm_failed"])]
    assert [e["text"] for e in healthy if e["type"] == "chat"] == ["Platform here."]
    details = [(await recorded_errors(t.workspace))[0][1] for t in tenants[: len(hosts)]]
    _refused_alike(details)


async def test_every_spelling_is_refused_when_orpheus_is_dialled(settings: Any) -> None:
    async with FakeOrpheusServer(api_key="orpheus-workspace-key") as orpheus:
        settings.EGRESS_PORTS = [80, 443, orpheus.port]
        tenant = await sync_to_async(make_tenant)("orpheus@example.com")
        messages = []
        for host in LOOPBACK + INWARDS:
            await sync_to_async(ProviderCredential.objects.filter(kind="orpheus").delete)()
            row = await sync_to_async(_stored)(
                tenant, "orpheus", f"ws://{host}:{orpheus.port}/environments/production/websocket"
            )
            messages.append((await sync_to_async(provider_check)(credential=row)).message)
        assert orpheus.connections == []
    _refused_alike(messages)


async def test_every_spelling_is_refused_when_a_handler_fetches(settings: Any) -> None:
    async with EgressTestServer() as server:
        server.route("/", respond(200, b"inside"))
        settings.EGRESS_PORTS = [80, 443, server.port]
        policy = EgressPolicy(guard=outbound.policy())
        outcomes = await asyncio.gather(
            *(
                fetch(FetchRequest(f"http://{host}:{server.port}/"), policy=policy)
                for host in LOOPBACK + INWARDS
            ),
            return_exceptions=True,
        )
        assert server.requests == []
    assert all(isinstance(outcome, EgressDenied) for outcome in outcomes), outcomes
    _refused_alike([str(outcome) for outcome in outcomes])


async def test_a_live_voice_session_never_dials_a_stored_private_orpheus_url(
    settings: Any,
) -> None:
    async with (
        FakeOrpheusServer(api_key="workspace-key-0123") as orpheus,
        FakeOpenAIServer(default=text_reply("Hello there.")) as llm,
    ):
        settings.EGRESS_PORTS = [80, 443, orpheus.port]
        settings.LLM_BASE_URL, settings.TTS_PROVIDER = llm.base_url, "orpheus"
        tenant = await sync_to_async(make_tenant)("orpheus-live@example.com")
        await sync_to_async(_stored)(
            tenant, "orpheus", f"ws://0x7f.1:{orpheus.port}/environments/production/websocket"
        )
        async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
            await client.send({"type": "configure", "mode": "voice"})
            await client.until("ready")
            await client.send({"type": "text", "text": "hello"})
            await client.until("tts_done", timeout=15)
        assert orpheus.connections == []
    assert _errors(client.events) == [("tts_failed", PROVIDER_FAILURES["tts_failed"])]
    assert any(e["type"] == "chat" and e["text"] == "Hello there." for e in client.events)
    ((_code, detail),) = await recorded_errors(tenant.workspace)
    _refused_alike([detail])
    assert detail.startswith(f"127.0.0.1:{orpheus.port} ")


# ---------------------------------------------------------------- no oracle


async def _orpheus_check(tenant: Tenant, url: str) -> str:
    await sync_to_async(credentials.provider_speech_set)(
        workspace=tenant.workspace, kind="orpheus", api_key="orpheus-workspace-key", url=url
    )
    row = await sync_to_async(ProviderCredential.objects.get)(
        workspace=tenant.workspace, kind="orpheus"
    )
    return (await sync_to_async(provider_check)(credential=row)).message


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.2", 0))
        return int(probe.getsockname()[1])


async def test_test_connection_tells_loopback_from_unknown_from_closed_by_nothing(
    settings: Any, dns: ScriptedDNS, public_stand_in: str
) -> None:
    closed = _closed_port()
    tenant = await sync_to_async(make_tenant)("oracle@example.com")
    async with FakeOrpheusServer(api_key="orpheus-workspace-key") as orpheus:
        open_port = orpheus.port
        settings.EGRESS_PORTS = [80, 443, open_port, closed]
        dns.answers = {"inside.corp": ["127.0.0.1"], "closed.example": [public_stand_in]}
        path = "/environments/production/websocket"
        messages = [
            await _orpheus_check(tenant, f"ws://inside.corp:{open_port}{path}"),  # open, inside
            await _orpheus_check(tenant, f"ws://nowhere.corp:{open_port}{path}"),  # no answer
            await _orpheus_check(tenant, f"ws://closed.example:{closed}{path}"),  # closed port
            await _orpheus_check(tenant, f"ws://inside.corp:{closed}{path}"),  # closed, inside
        ]
        assert orpheus.connections == []  # the key never went to loopback
    _refused_alike(messages)
    assert {m.split(": ", 1)[0] for m in messages} == {"Orpheus text-to-speech failed"}


async def test_llm_test_connection_answers_alike_too(
    settings: Any, dns: ScriptedDNS, public_stand_in: str
) -> None:
    closed = _closed_port()
    tenant = await sync_to_async(make_tenant)("oracle-llm@example.com")
    async with FakeOpenAIServer(default=text_reply("OK")) as inside:
        settings.EGRESS_PORTS = [80, 443, inside.port, closed]
        dns.answers = {"inside.corp": ["127.0.0.1"], "closed.example": [public_stand_in]}
        messages = []
        for url in (
            f"http://inside.corp:{inside.port}/v1",
            f"http://nowhere.corp:{inside.port}/v1",
            f"http://closed.example:{closed}/v1",
        ):
            row = await sync_to_async(credentials.provider_llm_set)(
                workspace=tenant.workspace, name="x", base_url=url, model="m", api_key="sk-k"
            )
            messages.append((await sync_to_async(provider_check)(credential=row)).message)
        assert inside.requests == []
    _refused_alike(messages)


# ---------------------------------------------------------------- DNS rebinding


async def _text_turn(tenant: Tenant) -> list[dict[str, Any]]:
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({"type": "configure", "mode": "text"})
        await client.until("ready")
        await client.send({"type": "text", "text": "hello"})
        await client.until("metrics", timeout=15)
        return client.events


def _errors(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["code"], e["message"]) for e in events if e["type"] == "error"]


async def test_a_name_public_when_saved_and_loopback_when_dialled_is_refused(
    settings: Any, dns: ScriptedDNS
) -> None:
    async with (
        FakeOpenAIServer(default=text_reply("leaked")) as inside,
        FakeOpenAIServer(default=text_reply("Platform here.")) as platform,
    ):
        settings.EGRESS_PORTS = [80, 443, inside.port]
        dns.answers = {"rebind.example": ["93.184.216.34"]}  # public while it is saved
        tenants = [await sync_to_async(make_tenant)(f"rebind{i}@example.com") for i in range(6)]
        for tenant in tenants[:5]:
            await sync_to_async(credentials.provider_llm_set)(
                workspace=tenant.workspace, name="mine", model="m", api_key="sk-rebind",
                base_url=f"http://rebind.example:{inside.port}/v1",
            )  # fmt: skip
        assert dns.calls == []  # saving judges what needs no DNS; dialling resolves
        dns.answers = {"rebind.example": ["127.0.0.1"]}  # and loopback when dialled
        settings.LLM_BASE_URL = platform.base_url  # the sixth: the normal path, beside
        results = await asyncio.gather(*(_text_turn(tenant) for tenant in tenants))
    assert inside.requests == []
    for events in results[:5]:
        assert _errors(events) == [("llm_failed", PROVIDER_FAILURES["llm_failed"])]
    assert [e["text"] for e in results[5] if e["type"] == "chat"] == ["Platform here."]
    details = [(await recorded_errors(t.workspace))[0][1] for t in tenants[:5]]
    _refused_alike(details)
    assert all(detail.startswith(f"rebind.example:{inside.port} ") for detail in details)


async def test_the_connection_goes_to_the_address_that_was_checked(
    settings: Any, dns: ScriptedDNS
) -> None:
    """The system resolver knows no flip.example: reaching a server at all proves the
    adapters connect to the guard's answer, never to a lookup of their own. The guard
    is asked once per connection; its later answers (another server) are never used."""
    settings.DEV_ALLOW_PRIVATE_EGRESS = True  # two loopback servers stand in for the world
    async with FakeOpenAIServer(default=text_reply("From A.")) as first:
        async with (
            FakeOpenAIServer(
                host="127.0.0.2", port=first.port, default=text_reply("From B.")
            ) as second,
            FakeOrpheusServer(api_key="orpheus-workspace-key") as orpheus,
        ):
            dns.answers = {"flip.example": lambda n: ["127.0.0.1"] if n == 1 else ["127.0.0.2"]}
            tenant = await sync_to_async(make_tenant)("flip@example.com")
            await sync_to_async(credentials.provider_llm_set)(
                workspace=tenant.workspace, name="mine", model="m", api_key="sk-flip",
                base_url=f"http://flip.example:{first.port}/v1",
            )  # fmt: skip
            events = [await _text_turn(tenant) for _ in range(3)]
            dns.answers["voice.example"] = ["127.0.0.1"]
            spoken = await _orpheus_check(
                tenant, f"ws://voice.example:{orpheus.port}/environments/production/websocket"
            )
    chats = [e["text"] for turn in events for e in turn if e["type"] == "chat"]
    assert chats == ["From A."] * 3 and len(first.requests) == 3 and second.requests == []
    assert dns.calls.count("flip.example") == 1  # one pooled connection, looked up once
    assert spoken.startswith("Connected: the voice spoke a test word")
    assert len(orpheus.connections) == 1
