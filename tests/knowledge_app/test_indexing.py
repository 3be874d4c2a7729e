"""Documents in, passages out: every supported kind is read and indexed, hostile files are
refused within their limits, and a search finds the passage that answers."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.db import connection

from knowledge_app import dispatch, services
from knowledge_app.models import Chunk, Document, KnowledgeBase
from knowledge_app.search import search
from tests.factories import Tenant
from tests.knowledge_app import documents

pytestmark = pytest.mark.django_db(transaction=True)


def _base(tenant: Tenant, name: str = "Founding documents") -> KnowledgeBase:
    return services.knowledge_base_create(workspace=tenant.workspace, name=name)


def _indexed(document: Document) -> Document:
    dispatch.wait_idle()
    document.refresh_from_db()
    return document


def _upload(base: KnowledgeBase, filename: str, content: bytes) -> Document:
    return _indexed(services.document_upload(base=base, filename=filename, content=content))


@pytest.mark.parametrize(
    ("filename", "content", "phrase"),
    [
        ("bill_of_rights.md", documents.corpus("bill_of_rights.md"), "Assistance of Counsel"),
        ("gettysburg.txt", documents.corpus("gettysburg.txt"), "Four score"),
        ("declaration.html", documents.corpus("declaration.html"), "pursuit of Happiness"),
        (
            "article1.pdf",
            documents.pdf_bytes(
                [
                    documents.corpus("constitution_article1.txt").decode()[:1500],
                    documents.corpus("constitution_article1.txt").decode()[1500:],
                ]
            ),
            "thirty Years",
        ),
        (
            "emancipation.docx",
            documents.docx_bytes(documents.corpus("emancipation.txt").decode().split("\n\n")),
            "reasonable wages",
        ),
    ],
    ids=["markdown", "text", "html", "pdf", "docx"],
)
def test_each_kind_is_read_indexed_and_found(
    owner: Tenant, filename: str, content: bytes, phrase: str
) -> None:
    base = _base(owner)
    document = _upload(base, filename, content)
    assert (document.status, document.error, document.progress) == ("ready", "", 100)
    assert document.chunk_count == Chunk.objects.filter(document=document).count() > 0
    texts = " ".join(Chunk.objects.filter(document=document).values_list("text", flat=True))
    assert "not text" not in texts and "font-family" not in texts  # script and style left out
    found = search(workspace_id=owner.workspace.pk, knowledge_base_ids=[base.pk], query=phrase)
    assert phrase in found[0].text and found[0].document_title == filename


def test_a_question_in_other_words_finds_its_passage(owner: Tenant) -> None:
    base = _base(owner)
    for name in ("bill_of_rights.md", "gettysburg.txt", "constitution_article1.txt"):
        _upload(base, name, documents.corpus(name))
    found = search(
        workspace_id=owner.workspace.pk,
        knowledge_base_ids=[base.pk],
        query="Can I be made to testify against myself?",
        k=3,
    )
    assert any("witness against himself" in passage.text for passage in found)


@pytest.mark.parametrize(
    ("filename", "content", "says"),
    [
        ("many-pages.pdf", documents.pdf_with_many_pages(5000), "it has 5000 pages, more than 50"),
        ("bomb.pdf", documents.pdf_bomb(300), "unpacks to more than a document may hold"),
        ("bomb.docx", documents.docx_bomb(200), "it unpacks to more than 50 MB"),
        ("garbage.pdf", b"%PDF-1.7\n" + bytes(range(256)) * 64, "not a PDF that can be read"),
        ("binary.txt", b"\x00\x01\x02" * 1000, "it is not a text file"),
    ],
    ids=["many-pages", "pdf-bomb", "docx-bomb", "garbage-pdf", "binary-text"],
)
def test_hostile_documents_are_refused_in_words_within_limits(
    owner: Tenant, settings: Any, filename: str, content: bytes, says: str
) -> None:
    settings.KNOWLEDGE_PDF_MAX_PAGES = 50
    document = _upload(_base(owner), filename, content)
    assert document.status == "failed" and says in document.error
    assert document.chunk_count == 0 and not Chunk.objects.filter(document=document).exists()


def test_a_parse_that_runs_past_its_memory_is_stopped(owner: Tenant, settings: Any) -> None:
    """What the worker cannot foresee meets the kernel's fences (here: 150 MB of address
    space for a stream that inflates to 60 MB of text, under pypdf's own limit)."""
    settings.KNOWLEDGE_PARSE_MEMORY_MB = 150
    settings.KNOWLEDGE_DOCUMENT_MAX_CHARACTERS = 10**9
    document = _upload(_base(owner), "bomb.pdf", documents.pdf_bomb(60))
    assert document.status == "failed"
    assert "memory or time allowed" in document.error or "unpacks" in document.error


def test_hostile_documents_side_by_side_fail_alone(owner: Tenant, settings: Any) -> None:
    """Several bombs at once, beside a good document: each fails by itself, the good one is
    indexed, and nothing is left half-done."""
    settings.KNOWLEDGE_PDF_MAX_PAGES = 50
    base = _base(owner)
    hostile = [
        documents.pdf_bomb(300),
        documents.pdf_with_many_pages(5000),
        documents.docx_bomb(200),
    ]
    names = ["a.pdf", "b.pdf", "c.docx"]
    uploaded = [
        services.document_upload(base=base, filename=n, content=c)
        for n, c in zip(names, hostile, strict=True)
    ]
    good = services.document_upload(
        base=base, filename="gettysburg.txt", content=documents.corpus("gettysburg.txt")
    )

    def index(document_id: int) -> None:
        Document.objects.filter(pk=document_id).update(status="pending")
        try:
            services.document_index(document_id=document_id)
        finally:
            connection.close()

    dispatch.wait_idle()
    if connection.vendor == "postgresql":  # SQLite allows one writer: the thread did them
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(index, [d.pk for d in [*uploaded, good]]))
    states = {
        d.title: (d.status, bool(d.error)) for d in Document.objects.filter(knowledge_base=base)
    }
    assert states == {
        "a.pdf": ("failed", True), "b.pdf": ("failed", True), "c.docx": ("failed", True),
        "gettysburg.txt": ("ready", False),
    }  # fmt: skip


def test_limits_per_document_and_workspace_are_refused_before_anything_is_stored(
    owner: Tenant, settings: Any
) -> None:
    base = _base(owner)
    settings.KNOWLEDGE_DOCUMENT_MAX_BYTES = 1000
    with pytest.raises(services.ValidationError, match="at most 0 MB"):
        services.document_upload(base=base, filename="big.txt", content=b"a " * 1000)
    settings.KNOWLEDGE_DOCUMENT_MAX_BYTES = 10**6
    with pytest.raises(services.ValidationError, match="not supported"):
        services.document_upload(base=base, filename="x.exe", content=b"MZ\x90")
    settings.KNOWLEDGE_WORKSPACE_MAX_CHUNKS = 2
    document = _upload(base, "bill_of_rights.md", documents.corpus("bill_of_rights.md"))
    assert document.status == "failed" and "more than 2 passages" in document.error
    settings.KNOWLEDGE_WORKSPACE_MAX_DOCUMENTS = 1
    with pytest.raises(services.ValidationError, match="at most 1 documents"):
        services.document_upload(base=base, filename="g.txt", content=b"Four score")


def test_reindexing_swaps_passages_and_deleting_removes_them(owner: Tenant) -> None:
    base = _base(owner)
    document = _upload(base, "gettysburg.txt", documents.corpus("gettysburg.txt"))
    before = set(Chunk.objects.filter(document=document).values_list("pk", flat=True))
    document = _indexed(services.document_refresh(document=document))
    after = set(Chunk.objects.filter(document=document).values_list("pk", flat=True))
    assert document.status == "ready" and after and not before & after
    services.document_delete(document=document)
    assert not search(
        workspace_id=owner.workspace.pk, knowledge_base_ids=[base.pk], query="Four score"
    )
