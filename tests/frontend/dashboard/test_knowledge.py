"""The Knowledge pages: a knowledge base made, a document uploaded and shown with its
status or its error, an agent given it; a session's page shows the passages an answer
came from; members only read, the outsider sees nothing."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from knowledge_app import dispatch
from knowledge_app.models import Document, KnowledgeBase
from sessions_app import services as agent_services
from sessions_app.models import Session, ToolCallRecord
from tests.factories import Tenant
from tests.frontend.dashboard.conftest import page
from tests.knowledge_app import documents

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _index_on_a_thread(settings) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = True


def _made(owner: Tenant, client: Client) -> KnowledgeBase:
    response = client.post(page(owner, "knowledge"), {"name": "Civics"})
    base = KnowledgeBase.objects.get(workspace=owner.workspace)
    assert response.status_code == 302
    good = SimpleUploadedFile("gettysburg.txt", documents.corpus("gettysburg.txt"))
    bad = SimpleUploadedFile("many.pdf", documents.pdf_with_many_pages(5000))
    for upload in (good, bad):
        client.post(page(owner, "knowledge-base", base.uid), {"upload-file": upload})
    dispatch.wait_idle()
    return base


def test_documents_show_their_status_and_errors(
    owner: Tenant, owner_client: Client, settings
) -> None:
    settings.KNOWLEDGE_PDF_MAX_PAGES = 50
    base = _made(owner, owner_client)
    html = owner_client.get(page(owner, "knowledge-base", base.uid)).content.decode()
    assert "gettysburg.txt" in html and "ready" in html
    assert "It was refused: it has 5000 pages, more than 50." in html
    assert 'http-equiv="refresh"' not in html  # nothing left to wait for
    Document.objects.filter(title="gettysburg.txt").update(status="indexing", progress=40)
    html = owner_client.get(page(owner, "knowledge-base", base.uid)).content.decode()
    assert "indexing 40 %" in html and 'http-equiv="refresh"' in html


def test_an_agent_is_given_knowledge_and_its_session_page_shows_sources(
    owner: Tenant, owner_client: Client
) -> None:
    base = _made(owner, owner_client)
    agent = agent_services.agent_create(workspace=owner.workspace, name="Civics", slug="civics")
    owner_client.post(
        page(owner, "agent-knowledge", "civics"),
        {"knowledge_bases": [str(base.uid)], "mode": "prefetch"},
    )
    agent.refresh_from_db()
    assert list(agent.knowledge_bases.all()) == [base] and agent.knowledge_mode == "prefetch"
    session = Session.objects.create(workspace=owner.workspace, agent=agent)
    result = {"passages": [{"source": "K7", "document": "gettysburg.txt", "text": "Four score"}]}
    ToolCallRecord.objects.create(
        session=session, call_id="prefetch_1", name="search_knowledge",
        arguments={"query": "q"}, status="completed", result=json.dumps(result),
    )  # fmt: skip
    html = owner_client.get(page(owner, "session", session.public_id)).content.decode()
    assert "Sources given to the LLM" in html and "K7" in html and "Four score" in html


def test_members_read_and_the_outsider_sees_nothing(
    owner: Tenant, owner_client: Client, member_client: Client, outsider_client: Client,
    outsider: Tenant,
) -> None:  # fmt: skip
    base = _made(owner, owner_client)
    assert (
        "gettysburg.txt"
        in member_client.get(page(owner, "knowledge-base", base.uid)).content.decode()
    )
    refused = member_client.post(page(owner, "knowledge"), {"name": "Mine"})
    assert refused.status_code == 403
    for name, args in (("knowledge", ()), ("knowledge-base", (base.uid,))):
        assert outsider_client.get(page(owner, name, *args)).status_code in (403, 404)
    # Under the outsider's own workspace, the owner's base id is not found either.
    assert outsider_client.get(page(outsider, "knowledge-base", base.uid)).status_code == 404
    assert "Civics" not in outsider_client.get(page(outsider, "knowledge")).content.decode()


class _Unreadable(SimpleUploadedFile):
    def read(self, *args: object, **kwargs: object) -> bytes:
        raise AssertionError("an oversized upload was read into memory")


def test_an_oversized_upload_is_refused_before_it_is_read(
    owner: Tenant, owner_client: Client, settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.KNOWLEDGE_DOCUMENT_MAX_BYTES = 1024 * 1024
    owner_client.post(page(owner, "knowledge"), {"name": "Civics"})
    base = KnowledgeBase.objects.get(workspace=owner.workspace)
    big = _Unreadable("big.md", b"")
    big.size = 2 * 1024 * 1024  # what the multipart parser counted as it spooled the file
    monkeypatch.setattr(
        "frontend.dashboard.knowledge.UploadForm.clean_file", lambda form: big, raising=False
    )
    answer = owner_client.post(
        page(owner, "knowledge-base", base.uid),
        {"upload-file": SimpleUploadedFile("big.md", b"# Big")},
    )
    assert "A document is at most 1 MB." in answer.content.decode()
    assert not Document.objects.exists()


async def test_a_url_is_added_pending_and_its_failed_fetch_shows_on_the_page(
    owner: Tenant, owner_client: Client, settings
) -> None:
    from asgiref.sync import sync_to_async

    from tests.fakes.egress_server import EgressTestServer, respond

    settings.DEV_ALLOW_PRIVATE_EGRESS = False
    post = sync_to_async(owner_client.post)
    await post(page(owner, "knowledge"), {"name": "Web"})
    base = await KnowledgeBase.objects.aget(workspace=owner.workspace)
    where = page(owner, "knowledge-base", base.uid)
    refused = await post(where, {"url-url": "http://10.0.0.5/faq.html", "url-refresh_hours": 0})
    assert "is not a public address the platform can reach" in refused.content.decode()
    assert not await Document.objects.aexists()
    settings.DEV_ALLOW_PRIVATE_EGRESS = True  # the test server is on loopback
    async with EgressTestServer() as server:
        server.route("/faq.html", respond(503, b"down"))
        added = await post(where, {"url-url": server.url("/faq.html"), "url-refresh_hours": 12})
        assert added.status_code == 302
        await sync_to_async(dispatch.wait_idle)()
    html = (await sync_to_async(owner_client.get)(where)).content.decode()
    assert "The server answered HTTP 503." in html and "Fetched again every 12 h" in html

    document = await Document.objects.aget(knowledge_base=base)
    act = page(owner, "knowledge-document", base.uid, document.uid, "schedule")
    await post(act, {"refresh_hours": 2})
    await document.arefresh_from_db()
    assert document.refresh_hours == 2 and document.refresh_due_at is not None
    await post(act, {"refresh_hours": 9999})
    html = (await sync_to_async(owner_client.get)(where)).content.decode()
    assert "Ensure this value is less than or equal to 720." in html


def test_an_embedding_connection_is_saved_chosen_for_a_base_and_kept_from_others(
    owner: Tenant, owner_client: Client, member_client: Client, outsider: Tenant,
    outsider_client: Client, settings,
) -> None:  # fmt: skip
    from secrets_app.models import ProviderCredential

    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    key = "sk-dashboard-embed-7c2e91"
    form = {"name": "acme-small", "base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key": key}
    saved = owner_client.post(page(owner, "knowledge-model-new"), form)
    assert saved.status_code == 302
    listed = owner_client.get(page(owner, "knowledge")).content.decode()
    assert "acme-small" in listed and "http://127.0.0.1:9/v1" in listed and key not in listed
    edit = owner_client.get(page(owner, "knowledge-model", "acme-small")).content.decode()
    assert key not in edit and "Leave empty to keep the key you saved" in edit
    owner_client.post(page(owner, "knowledge"), {"name": "Civics"})
    base = KnowledgeBase.objects.get(workspace=owner.workspace)
    owner_client.post(page(owner, "knowledge-embedding", base.uid), {"connection": "acme-small"})
    base.refresh_from_db()
    assert base.embedding_connection == ProviderCredential.objects.get(name="acme-small")
    shown = owner_client.get(page(owner, "knowledge-base", base.uid)).content.decode()
    assert "Passages are embedded with <strong>m (connection acme-small)</strong>" in shown
    # In use: not deleted. Members only read; the outsider reaches none of it.
    owner_client.post(page(owner, "knowledge-model-delete", "acme-small"))
    assert ProviderCredential.objects.filter(name="acme-small").exists()
    assert member_client.post(page(owner, "knowledge-model-new"), form).status_code == 403
    chosen = member_client.post(page(owner, "knowledge-embedding", base.uid), {"connection": ""})
    assert chosen.status_code == 403
    assert outsider_client.get(page(outsider, "knowledge-model", "acme-small")).status_code == 404
    deleted = outsider_client.post(page(outsider, "knowledge-model-delete", "acme-small"))
    assert deleted.status_code == 404
    assert "acme-small" not in outsider_client.get(page(outsider, "knowledge")).content.decode()
