"""Another workspace's documents are never retrieved, whatever the query; a URL the egress
guard refuses as written is refused at once (a name that resolves to a private address:
test_url_sources); a URL is fetched once, and again on refresh."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError

import egress
from knowledge_app import dispatch, services
from knowledge_app.models import Document
from knowledge_app.search import search
from sessions_app import services as agent_services
from tests.factories import Tenant
from tests.fakes.egress_server import EgressTestServer, respond
from tests.knowledge_app import documents

pytestmark = pytest.mark.django_db(transaction=True)

OUTSIDER_SECRET = "The outsider's vault code is zebra-quartz-1947."
CRAFTED = [
    "vault code zebra quartz",
    "zebra') OR 1=1 --",
    "' | 'zebra':* | '",
    '"zebra" OR NEAR(vault code) OR *',
    "zebra* OR text:vault",
    "%' UNION SELECT text FROM knowledge_app_chunk --",
    "\x00zebra\x00",
    OUTSIDER_SECRET,
]


@pytest.fixture
def two_workspaces(owner: Tenant, outsider: Tenant) -> tuple[int, int]:
    mine = services.knowledge_base_create(workspace=owner.workspace, name="Mine")
    theirs = services.knowledge_base_create(workspace=outsider.workspace, name="Theirs")
    services.document_upload(
        base=mine, filename="g.txt", content=documents.corpus("gettysburg.txt")
    )
    services.document_upload(base=theirs, filename="vault.txt", content=OUTSIDER_SECRET.encode())
    dispatch.wait_idle()
    assert set(Document.objects.values_list("status", flat=True)) == {"ready"}
    return mine.pk, theirs.pk


@pytest.mark.parametrize("query", CRAFTED)
@pytest.mark.parametrize("mode", ["hybrid", "fulltext", "vector"])
def test_crafted_queries_never_reach_another_workspace(
    owner: Tenant, two_workspaces: tuple[int, int], query: str, mode: Any
) -> None:
    mine, theirs = two_workspaces
    for bases in ([mine], [theirs], [mine, theirs]):  # even naming their base by id
        found = search(
            workspace_id=owner.workspace.pk, knowledge_base_ids=bases, query=query, k=20, mode=mode
        )
        assert all("zebra" not in passage.text for passage in found)
        assert all(passage.knowledge_base_id == mine for passage in found)


def test_the_outsiders_own_search_finds_it(
    outsider: Tenant, two_workspaces: tuple[int, int]
) -> None:
    _mine, theirs = two_workspaces
    found = search(
        workspace_id=outsider.workspace.pk, knowledge_base_ids=[theirs], query=CRAFTED[0]
    )
    assert found and "zebra" in found[0].text  # so the test above could have failed


def test_an_agent_cannot_attach_another_workspaces_knowledge_base(
    owner: Tenant, outsider: Tenant, two_workspaces: tuple[int, int]
) -> None:
    agent = agent_services.agent_create(workspace=owner.workspace, name="A", slug="a")
    theirs = services.KnowledgeBase.objects.get(pk=two_workspaces[1])
    with pytest.raises(ValidationError, match="No knowledge base of this workspace"):
        services.agent_knowledge_set(agent=agent, knowledge_base_uids=[str(theirs.uid)])
    assert not agent.knowledge_bases.exists()


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/doc.txt",
        "http://10.0.0.5/doc.txt",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:127.0.0.1]/",
        "http://0x7f000001/",
        "http://localhost/doc.txt",
    ],
)
def test_urls_to_private_addresses_are_refused_with_the_one_sentence(
    owner: Tenant, monkeypatch: pytest.MonkeyPatch, settings: Any, url: str
) -> None:
    settings.DEV_ALLOW_PRIVATE_EGRESS = False

    async def scripted(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "unknown")

    monkeypatch.setattr(egress.guard, "lookup", scripted)
    base = services.knowledge_base_create(workspace=owner.workspace, name="Web")
    with pytest.raises(ValidationError) as refused:
        services.document_add_url(base=base, url=url)
    assert "is not a public address the platform can reach" in str(refused.value)
    assert not Document.objects.exists()


async def test_a_url_is_fetched_once_then_again_on_refresh(owner: Tenant, settings: Any) -> None:
    settings.DEV_ALLOW_PRIVATE_EGRESS = True  # the test server is on loopback
    async with EgressTestServer() as server:
        settings.EGRESS_PORTS = [server.port]
        page = documents.corpus("declaration.html")
        server.route("/declaration", respond(200, page, [("Content-Type", "text/html")]))
        base = await sync_to_async(services.knowledge_base_create)(
            workspace=owner.workspace, name="Web"
        )
        document = await sync_to_async(services.document_add_url)(
            base=base, url=server.url("/declaration")
        )
        await sync_to_async(dispatch.wait_idle)()
        await sync_to_async(document.refresh_from_db)()
        assert (document.kind, document.status, len(server.requests)) == ("html", "ready", 1)
        server.route("/declaration", respond(200, b"<p>Replaced text about liberty bells.</p>"))
        await sync_to_async(services.document_refresh)(document=document)
        await sync_to_async(dispatch.wait_idle)()
        found = await sync_to_async(search)(
            workspace_id=owner.workspace.pk, knowledge_base_ids=[base.pk], query="liberty bells"
        )
    assert len(server.requests) == 2 and "liberty bells" in found[0].text
