"""Writes for knowledge bases: bases, documents (uploaded or fetched), and indexing.

A document is stored with its bytes and indexed off the request (``dispatch``): its text
read by a fenced child process (``parsing``), cut into passages (``chunking``), each
embedded by its base's embedder (``embedders``: the offline model, or the workspace's
embedding connection the base chose); the passages replace the previous ones in one
transaction, so a search sees the old index or the new one, never half. A base that
chooses another embedder has every document's stored passages embedded again by the
same jobs (``reembed``: nothing parsed or fetched again); until a document's turn comes,
a search finds its passages by full text alone. A URL document is fetched by
that same job, through the platform's egress guard (``egress.client.fetch`` under
``outbound.policy()``, as webhooks are): when it is added, when someone refreshes it, and
every ``refresh_hours`` if it has them (Celery beat, ``refresh_due``); bytes that hash
the same as the indexed ones are not indexed again.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import time
import uuid
from dataclasses import dataclass
from pathlib import PurePosixPath

import numpy as np
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import F, Sum
from django.utils import timezone

from core import outbound, rates
from egress import client as egress
from knowledge_app import chunking, dispatch, embedders
from knowledge_app.embedders import Embedder
from knowledge_app.embedding_provider import EmbeddingFailed
from knowledge_app.models import Chunk, Document, KnowledgeBase
from knowledge_app.parsing import ParseLimits, ParseRefused, extract_text
from secrets_app import provider_credentials
from secrets_app.audit import SYSTEM, Actor, audit_record, url_shown
from secrets_app.models import ProviderCredential, Workspace
from secrets_app.services import workspace_lock
from sessions_app.models import Agent
from sessions_app.versions import agent_changed, published_by_caller

logger = logging.getLogger(__name__)

Kind = Document.Kind
Status = Document.Status
USER_AGENT = "voice-agent-platform-knowledge/1"
MODES = ("tool", "prefetch")
REFRESH_MAX_HOURS = 24 * 30
REFRESH_BATCH = 200  # URL documents queued per beat run, the longest overdue first
REFRESH_PER_WORKSPACE = 20  # of them from one workspace
_EXTENSIONS = {
    ".pdf": Kind.PDF, ".md": Kind.MARKDOWN, ".markdown": Kind.MARKDOWN, ".txt": Kind.TEXT,
    ".text": Kind.TEXT, ".html": Kind.HTML, ".htm": Kind.HTML, ".docx": Kind.DOCX,
}  # fmt: skip
_CONTENT_TYPES = {
    "application/pdf": Kind.PDF, "text/markdown": Kind.MARKDOWN, "text/x-markdown": Kind.MARKDOWN,
    "text/plain": Kind.TEXT, "text/html": Kind.HTML, "application/xhtml+xml": Kind.HTML,
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": Kind.DOCX,
}  # fmt: skip


# ---------------------------------------------------------------- knowledge bases


def knowledge_base_create(
    *, workspace: Workspace, name: str, description: str = "", actor: Actor = SYSTEM
) -> KnowledgeBase:
    name = name.strip()
    if not name:
        raise ValidationError({"name": ["Give the knowledge base a name."]})
    with transaction.atomic():
        workspace_lock(
            workspace_id=workspace.pk
        )  # the count and the name are checked and written as one step
        if (
            KnowledgeBase.objects.filter(workspace=workspace).count()
            >= settings.KNOWLEDGE_WORKSPACE_MAX_BASES
        ):
            raise ValidationError(
                f"A workspace has at most {settings.KNOWLEDGE_WORKSPACE_MAX_BASES} knowledge bases."
            )
        if KnowledgeBase.objects.filter(workspace=workspace, name=name).exists():
            raise ValidationError({"name": ["This workspace has a knowledge base of that name."]})
        base = KnowledgeBase.objects.create(
            workspace=workspace, name=name, description=description.strip()
        )
        audit_record(workspace=workspace, actor=actor, action="knowledge_base.created", target=name)
    return base


def knowledge_base_delete(*, base: KnowledgeBase, actor: Actor = SYSTEM) -> None:
    with transaction.atomic():
        audit_record(
            workspace=base.workspace, actor=actor, action="knowledge_base.deleted",
            target=base.name, details={"documents": base.documents.count()},
        )  # fmt: skip
        base.delete()


def knowledge_base_set_embedding(
    *, base: KnowledgeBase, connection_name: str | None, actor: Actor = SYSTEM
) -> KnowledgeBase:
    """Embed the base with the workspace's embedding connection of that name (None or "":
    the offline model). Another vector space has every document embedded again, off the
    request; until each is, searches find its passages by full text alone."""
    with transaction.atomic():
        connection = None
        if connection_name:
            # Locked until the base points at it: a delete waits, then sees it in use.
            connection = provider_credentials.embedding_connection_get(
                workspace_id=base.workspace_id, name=connection_name, lock=True
            )
            if connection is None:
                raise ValidationError(
                    {"embedding_connection": [f"This workspace has no embedding connection "
                                              f"named {connection_name[:64]!r}."]}
                )  # fmt: skip
        before = embedders.space_of(base.embedding_connection)
        base.embedding_connection = connection
        base.save(update_fields=["embedding_connection"])
        queued = 0 if embedders.space_of(connection) == before else _reembed_base(base)
        audit_record(
            workspace=base.workspace, actor=actor, action="knowledge_base.embedding_changed",
            target=base.name,
            details={"embedding": embedders.label_of(connection), "documents_queued": queued},
        )  # fmt: skip
    return base


def _reembed_base(base: KnowledgeBase) -> int:
    """Queue every settled document of the base to be embedded again (a pending or indexing
    one embeds with the base's embedder when its job reaches it, or queues itself again)."""
    settled = Document.objects.filter(
        workspace_id=base.workspace_id, knowledge_base=base,
        status__in=(Status.READY, Status.FAILED),
    ).only("pk", "workspace_id")  # fmt: skip
    return sum(_requeue(document, reembed=True) for document in settled)


def embedding_connection_set(
    *,
    workspace: Workspace,
    name: str,
    base_url: str,
    model: str,
    api_key: str | None = None,
    actor: Actor = SYSTEM,
) -> ProviderCredential:
    """Create or change the workspace's embedding connection ``name`` (its key sealed as an
    LLM connection's is). Another URL or model is another vector space: the bases that
    embed with it are embedded again."""
    before = provider_credentials.embedding_connection_get(workspace_id=workspace.pk, name=name)
    space = embedders.space_of(before) if before else None
    connection = provider_credentials.provider_endpoint_set(
        workspace=workspace, kind=ProviderCredential.Kind.EMBEDDING, name=name,
        base_url=base_url, model=model, api_key=api_key, actor=actor,
    )  # fmt: skip
    if before is not None and embedders.space_of(connection) != space:
        with transaction.atomic():
            for base in KnowledgeBase.objects.filter(
                workspace=workspace, embedding_connection=connection
            ):
                _reembed_base(base)
    return connection


def embedding_connection_delete(
    *, workspace: Workspace, connection: ProviderCredential, actor: Actor = SYSTEM
) -> None:
    """Refused while a knowledge base embeds with it: its passages' vectors are that model's.
    The row is locked first, so a base choosing it at the same moment either waits and
    finds it gone, or is seen here (never a foreign key broken at commit: a 500)."""
    with transaction.atomic():
        locked = provider_credentials.embedding_connection_get(
            workspace_id=workspace.pk, name=connection.name, lock=True
        )
        if locked is None:
            return
        _embedding_connection_delete(workspace, locked, actor)


def _embedding_connection_delete(
    workspace: Workspace, connection: ProviderCredential, actor: Actor
) -> None:
    using = sorted(
        KnowledgeBase.objects.filter(
            workspace=workspace, embedding_connection=connection
        ).values_list("name", flat=True)
    )
    if using:
        raise ValidationError(
            f"Knowledge bases embed with it ({', '.join(using[:5])}); choose another "
            "embedder for them first."
        )
    provider_credentials.provider_credential_delete(credential=connection, actor=actor)


def agent_knowledge_set(
    *,
    agent: Agent,
    knowledge_base_uids: list[str],
    mode: str = "tool",
    actor: Actor = SYSTEM,
) -> Agent:
    """Attach the agent's workspace's knowledge bases named by uid (others: refused)."""
    if mode not in MODES:
        raise ValidationError({"knowledge_mode": [f"Choose one of {', '.join(MODES)}."]})
    wanted = {str(uid) for uid in knowledge_base_uids}
    bases = list(
        KnowledgeBase.objects.filter(workspace_id=agent.workspace_id, uid__in=_uuids(wanted))
    )
    missing = wanted - {str(base.uid) for base in bases}
    if missing:
        raise ValidationError(
            {
                "knowledge_bases": [
                    "No knowledge base of this workspace has the id " + sorted(missing)[0] + "."
                ]
            }
        )
    with transaction.atomic(), published_by_caller():
        agent.knowledge_bases.set(bases)
        agent.knowledge_mode = mode
        agent.save(update_fields=["knowledge_mode"])
        names = sorted(base.name for base in bases)
        audit_record(
            workspace=agent.workspace, actor=actor, action="agent.knowledge_changed",
            target=agent.slug, details={"knowledge_bases": names, "mode": mode},
        )  # fmt: skip
    agent_changed(agent=agent, actor=actor)  # published at once unless the agent keeps drafts
    return agent


def _uuids(values: set[str]) -> list[uuid.UUID]:
    parsed = []
    for value in values:
        try:
            parsed.append(uuid.UUID(value))
        except ValueError:
            raise ValidationError(
                {"knowledge_bases": [f"{value[:40]!r} is not a knowledge base id."]}
            ) from None
    return parsed


# ---------------------------------------------------------------- documents


def kind_for(*, filename: str = "", content_type: str = "", content: bytes = b"") -> str:
    """The document's kind, from its first bytes, its name or its content type."""
    if content.startswith(b"%PDF-"):
        return Kind.PDF
    by_name = _EXTENSIONS.get(PurePosixPath(filename.lower()).suffix)
    if by_name is not None:
        return by_name
    by_type = _CONTENT_TYPES.get(content_type.split(";", 1)[0].strip().lower())
    if by_type is not None:
        return by_type
    shown = ", ".join(sorted(_EXTENSIONS))
    raise ValidationError(f"This kind of file is not supported; send one of {shown}.")


def _check_size(size: int) -> None:
    if size > settings.KNOWLEDGE_DOCUMENT_MAX_BYTES:
        limit = settings.KNOWLEDGE_DOCUMENT_MAX_BYTES // (1024 * 1024)
        raise ValidationError(f"A document is at most {limit} MB.")
    if size == 0:
        raise ValidationError("The document is empty.")


def _check_room(workspace: Workspace, size: int, *, replacing: Document | None = None) -> None:
    """Room for one more document of ``size`` bytes (or for ``replacing`` to become that
    size). In a transaction: the workspace stays locked until the document is written."""
    _check_size(size)
    workspace_lock(workspace_id=workspace.pk)
    documents = Document.objects.filter(workspace=workspace)
    if replacing is not None:
        documents = documents.exclude(pk=replacing.pk)
    elif documents.count() >= settings.KNOWLEDGE_WORKSPACE_MAX_DOCUMENTS:
        raise ValidationError(
            f"A workspace has at most {settings.KNOWLEDGE_WORKSPACE_MAX_DOCUMENTS} documents."
        )
    used = documents.aggregate(total=Sum("size_bytes"))["total"] or 0
    if used + size > settings.KNOWLEDGE_WORKSPACE_MAX_BYTES:
        limit = _megabytes(settings.KNOWLEDGE_WORKSPACE_MAX_BYTES)
        raise ValidationError(
            f"A workspace's documents hold at most {limit} MB together; delete some first."
        )


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.3g}"


def upload_read(*, file: UploadedFile[bytes]) -> bytes:
    """An uploaded file's bytes, its size checked before any is read into memory."""
    limit = settings.KNOWLEDGE_DOCUMENT_MAX_BYTES
    if file.size is not None and file.size > limit:
        raise ValidationError({"file": [f"A document is at most {limit // (1024 * 1024)} MB."]})
    content: bytes = file.read(limit + 1)
    return content  # past the limit: refused by the room check, not read on


def _title(title: str, fallback: str) -> str:
    return (title.strip() or fallback.strip() or "Untitled")[:200]


def document_upload(
    *,
    base: KnowledgeBase,
    filename: str,
    content: bytes,
    content_type: str = "",
    title: str = "",
    actor: Actor = SYSTEM,
) -> Document:
    _check_size(len(content))
    kind = kind_for(filename=filename, content_type=content_type, content=content)
    with transaction.atomic():
        _check_room(base.workspace, len(content))
        document = Document.objects.create(
            workspace=base.workspace, knowledge_base=base, kind=kind, content=content,
            size_bytes=len(content), title=_title(title, PurePosixPath(filename).name),
        )  # fmt: skip
        audit_record(
            workspace=base.workspace, actor=actor, action="knowledge_document.uploaded",
            target=document.title, details={"knowledge_base": base.name, "bytes": len(content)},
        )  # fmt: skip
        _schedule(document)
    return document


def document_add_url(
    *,
    base: KnowledgeBase,
    url: str,
    title: str = "",
    refresh_hours: int = 0,
    actor: Actor = SYSTEM,
) -> Document:
    """Store ``url`` as a pending document; the indexing job fetches it through the egress
    guard. A URL the guard's rules refuse as written is refused here, at once."""
    try:
        url = outbound.clean_outbound_url(url, schemes=("https", "http"), what="URL")
    except ValidationError as error:
        raise ValidationError({"url": error.messages}) from None
    _check_refresh_hours(refresh_hours)
    with transaction.atomic():
        _check_room(base.workspace, 1)  # its bytes are counted when the job has fetched them
        document = Document.objects.create(
            workspace=base.workspace, knowledge_base=base, kind="", url=url, content=b"",
            title=_title(title, url_shown(url)), refresh_hours=refresh_hours,
        )  # fmt: skip
        audit_record(
            workspace=base.workspace, actor=actor, action="knowledge_document.fetched",
            target=url_shown(url),
            details={"knowledge_base": base.name, "refresh_hours": refresh_hours},
        )  # fmt: skip
        _schedule(document)
    return document


def _check_refresh_hours(hours: int) -> None:
    low, high = settings.KNOWLEDGE_REFRESH_MIN_HOURS, REFRESH_MAX_HOURS
    if hours and not low <= hours <= high:
        raise ValidationError(
            {"refresh_hours": [f"Fetch it again every {low} to {high} hours, or 0 for never."]}
        )


def document_set_refresh(
    *, document: Document, refresh_hours: int, actor: Actor = SYSTEM
) -> Document:
    """How often a URL document is fetched again (0: only when someone asks); the next
    fetch is due that long after the last one."""
    if not document.url:
        raise ValidationError({"refresh_hours": ["Only a URL document is fetched again."]})
    _check_refresh_hours(refresh_hours)
    document.refresh_hours = refresh_hours
    document.refresh_due_at = None
    if refresh_hours:
        since = document.fetched_at or timezone.now()
        document.refresh_due_at = since + datetime.timedelta(hours=refresh_hours)
    with transaction.atomic():
        document.save(update_fields=["refresh_hours", "refresh_due_at"])
        audit_record(
            workspace=document.workspace, actor=actor, action="knowledge_document.schedule_set",
            target=document.title, details={"refresh_hours": refresh_hours},
        )  # fmt: skip
    return document


def document_refresh(*, document: Document, actor: Actor = SYSTEM) -> Document:
    """Fetch a URL document again and index it anew; an uploaded one is indexed again.
    Refused while it waits for indexing or is being indexed: each refresh would queue
    another whole pass for the one worker every workspace shares."""
    with transaction.atomic():
        if not _requeue(document):
            raise ValidationError("It is being indexed now; refresh it once that is done.")
        audit_record(
            workspace=document.workspace, actor=actor, action="knowledge_document.refreshed",
            target=document.title,
        )  # fmt: skip
    document.refresh_from_db()
    return document


def _requeue(document: Document, *, reembed: bool = False) -> bool:
    """Mark a ready or failed document pending and queue its job; False if it is pending or
    indexing already (the conditional update is the lock). ``reembed``: its stored
    passages are embedded again (its base chose another embedder)."""
    with transaction.atomic():
        claimed = Document.objects.filter(
            pk=document.pk, status__in=(Status.READY, Status.FAILED)
        ).update(status=Status.PENDING, progress=0, error="", reembed=reembed)
        if claimed:
            _schedule(document)
    return bool(claimed)


def refresh_due(*, now: datetime.datetime | None = None) -> int:
    """Celery beat: queue the URL documents whose refresh time has come, the longest
    overdue first: at most ``REFRESH_BATCH`` a run and ``REFRESH_PER_WORKSPACE`` of one
    workspace (the rest wait for the next run), so one workspace's many URLs never fill
    the ``knowledge`` queue ahead of the others' uploads. Returns how many were queued."""
    due = Document.objects.filter(
        refresh_hours__gt=0, refresh_due_at__lte=now or timezone.now(),
        status__in=(Status.READY, Status.FAILED),
    ).exclude(url="").order_by("refresh_due_at", "pk").only("pk", "workspace_id")  # fmt: skip
    chosen: list[Document] = []
    per_workspace: dict[int, int] = {}
    for document in due[: REFRESH_BATCH * 5]:
        taken = per_workspace.get(document.workspace_id, 0)
        if taken < REFRESH_PER_WORKSPACE and len(chosen) < REFRESH_BATCH:
            chosen.append(document)
            per_workspace[document.workspace_id] = taken + 1
    queued = sum(_requeue(document) for document in chosen)
    if queued:
        logger.info("knowledge: %s scheduled refreshes queued", queued)
    return queued


def document_delete(*, document: Document, actor: Actor = SYSTEM) -> None:
    with transaction.atomic():
        audit_record(
            workspace=document.workspace, actor=actor, action="knowledge_document.deleted",
            target=document.title,
        )  # fmt: skip
        base_id = document.knowledge_base_id
        document.delete()
        KnowledgeBase.objects.filter(pk=base_id).update(index_version=F("index_version") + 1)


@dataclass(frozen=True)
class _Fetched:
    body: bytes
    content_type: str


class _FetchFailed(Exception):
    """A fetch that brought nothing to index; its text is the document's error."""


def _fetch(url: str) -> _Fetched:
    policy = egress.EgressPolicy(
        guard=outbound.policy(),
        max_response_bytes=settings.KNOWLEDGE_DOCUMENT_MAX_BYTES,
        timeout_s=settings.KNOWLEDGE_FETCH_TIMEOUT_S,
    )
    request = egress.FetchRequest(url, "GET", {"User-Agent": USER_AGENT})
    try:
        response = async_to_sync(egress.fetch)(request, policy=policy)
    except egress.EgressError as error:
        raise _FetchFailed(str(error)) from None
    if not 200 <= response.status < 300:
        raise _FetchFailed(f"The server answered HTTP {response.status}.")
    if not response.body:
        raise _FetchFailed("The server answered with nothing to index.")
    content_type = next((v for n, v in response.headers if n.lower() == "content-type"), "")
    return _Fetched(response.body, content_type)


# ---------------------------------------------------------------- indexing


def _limits() -> ParseLimits:
    return ParseLimits(
        max_pages=settings.KNOWLEDGE_PDF_MAX_PAGES,
        max_characters=settings.KNOWLEDGE_DOCUMENT_MAX_CHARACTERS,
        timeout_s=settings.KNOWLEDGE_PARSE_TIMEOUT_S,
        memory_mb=settings.KNOWLEDGE_PARSE_MEMORY_MB,
    )


def _claim(document_id: int) -> Document | None:
    with transaction.atomic():
        document = Document.objects.select_for_update().filter(pk=document_id).first()
        if document is None or document.status != Status.PENDING:
            return None  # deleted, or another copy of the task has it
        document.status, document.progress, document.error = Status.INDEXING, 0, ""
        document.save(update_fields=["status", "progress", "error"])
    return document


def _progress(document: Document, percent: int) -> None:
    Document.objects.filter(pk=document.pk).update(progress=percent)


def _fail(document: Document, error: str) -> None:
    Document.objects.filter(pk=document.pk).update(
        status=Status.FAILED, progress=0, error=error[:300], content_sha256="", reembed=False
    )


def _schedule(document: Document) -> None:
    """Once the document is committed, its indexing is queued (or parked, ``dispatch``)."""
    document_id, workspace_id = document.pk, document.workspace_id
    transaction.on_commit(lambda: dispatch.schedule(document_id, workspace_id, index_by_id))


def index_by_id(document_id: int) -> None:
    document_index(document_id=document_id)


def document_index(*, document_id: int) -> None:
    """Parse, cut and embed a pending document, then swap its passages in. Whatever goes
    wrong, the document ends ``ready`` or ``failed`` with a sentence, never ``indexing``."""
    document = _claim(document_id)
    if document is None:
        return
    try:
        _index(document)
    except Exception as exc:
        logger.error("indexing document %s failed: %s", document.pk, type(exc).__name__)
        _fail(document, "Indexing failed on the platform's side; refresh it to try again.")


def _index(document: Document) -> None:
    started = time.monotonic()
    if document.reembed and document.chunk_count:
        return _reembed(document)
    if document.url and not (document.reembed and document.content):
        try:
            if not _fetched_anew(document):
                return  # the same bytes as the passages were made from
        except (_FetchFailed, ValidationError) as failed:
            return _fail(document, " ".join(getattr(failed, "messages", [str(failed)])))
        finally:
            _schedule_next(document)
    try:
        text = extract_text(document.kind, bytes(document.content), _limits())
    except ParseRefused as refused:
        return _fail(document, str(refused))
    chunks = chunking.chunk_text(text)
    if not chunks:
        return _fail(document, "It holds no text to search (a scanned PDF needs OCR first).")
    used = (
        Chunk.objects.filter(workspace_id=document.workspace_id).exclude(document=document).count()
    )
    if used + len(chunks) > settings.KNOWLEDGE_WORKSPACE_MAX_CHUNKS:
        return _fail(
            document,
            f"The workspace's knowledge bases would hold more than "
            f"{settings.KNOWLEDGE_WORKSPACE_MAX_CHUNKS} passages; delete some documents first.",
        )
    _progress(document, 10)
    embedder = _embedder_of(document)
    try:
        vectors = _embed_all(document, embedder, chunks)
    except EmbeddingFailed as failed:
        return _fail(document, str(failed))
    _store(document, chunks, vectors, characters=len(text), embedder=embedder)
    logger.info(
        "knowledge document %s indexed: %s chunks in %.1f s",
        document.pk, len(chunks), time.monotonic() - started,
    )  # fmt: skip


def _embedder_of(document: Document) -> Embedder:
    base = KnowledgeBase.objects.select_related("embedding_connection").get(
        pk=document.knowledge_base_id, workspace_id=document.workspace_id
    )
    return embedders.embedder_for(base.embedding_connection)


def _embed_all(document: Document, embedder: Embedder, texts: list[str]) -> np.ndarray:
    """Every text's vector, a batch at a time (the progress moves on after each), all of
    them within KNOWLEDGE_EMBEDDING_DOCUMENT_TIMEOUT_S."""
    budget = float(settings.KNOWLEDGE_EMBEDDING_DOCUMENT_TIMEOUT_S)
    deadline = time.monotonic() + budget
    parts: list[np.ndarray] = []
    too_long = EmbeddingFailed(
        f"Embedding this document's passages took longer than {budget:g} s "
        "(KNOWLEDGE_EMBEDDING_DOCUMENT_TIMEOUT_S)."
    )
    for start in range(0, len(texts), embedder.batch):
        left = deadline - time.monotonic()
        if left <= 0:
            raise too_long
        timeout = min(float(settings.KNOWLEDGE_EMBEDDING_TIMEOUT_S), left)
        try:
            parts.append(embedder.embed(texts[start : start + embedder.batch], timeout_s=timeout))
        except EmbeddingFailed:
            if time.monotonic() >= deadline:
                raise too_long from None
            raise
        if parts[-1].shape[1] != parts[0].shape[1]:
            raise EmbeddingFailed("The embedding provider's vectors changed length midway.")
        done = min(len(texts), start + embedder.batch)
        _progress(document, 10 + int(85 * done / len(texts)))
    return np.concatenate(parts)


def _reembed(document: Document) -> None:
    """Embed the document's stored passages with its base's embedder, in place."""
    chunks = list(Chunk.objects.filter(document=document).order_by("position"))
    embedder = _embedder_of(document)
    _progress(document, 10)
    try:
        vectors = _embed_all(document, embedder, [chunk.text for chunk in chunks])
    except EmbeddingFailed as failed:
        return _fail(document, str(failed))
    with transaction.atomic():
        if not Document.objects.select_for_update().filter(pk=document.pk).exists():
            return  # deleted while it was being embedded
        for chunk, vector in zip(chunks, vectors, strict=True):
            chunk.embedding = vector.astype("float32").tobytes()
        Chunk.objects.bulk_update(chunks, ["embedding"], batch_size=500)
        _indexed(document, embedder, vectors, status=Status.READY, progress=100, error="")
    _requeue_if_stale(document, embedder)


def _indexed(document: Document, embedder: Embedder, vectors: np.ndarray, **fields: object) -> None:
    """The document's passages are in ``embedder``'s space now; searches reload them."""
    Document.objects.filter(pk=document.pk).update(
        embedded_with=embedder.space, embedding_dimensions=int(vectors.shape[1]), reembed=False,
        **fields,
    )  # fmt: skip
    KnowledgeBase.objects.filter(pk=document.knowledge_base_id).update(
        index_version=F("index_version") + 1
    )


def _base_space(document: Document) -> str:
    base = KnowledgeBase.objects.select_related("embedding_connection").get(
        pk=document.knowledge_base_id
    )
    return embedders.space_of(base.embedding_connection)


def _requeue_if_stale(document: Document, embedder: Embedder) -> None:
    """Its base chose another embedder while it was being embedded: embed it again."""
    if _base_space(document) != embedder.space:
        _requeue(document, reembed=True)


def _fetched_anew(document: Document) -> bool:
    """Fetch a URL document's bytes into it; False when they are the ones already indexed
    (the document is ready again, nothing re-indexed)."""
    fetched = _fetch(document.url)
    _check_size(len(fetched.body))
    digest = hashlib.sha256(fetched.body).hexdigest()
    document.fetched_at = timezone.now()
    current = document.embedded_with == _base_space(document)
    if digest == document.content_sha256 and document.chunk_count and current:
        Document.objects.filter(pk=document.pk).update(
            status=Status.READY, progress=100, fetched_at=document.fetched_at
        )
        return False
    try:
        document.kind = kind_for(
            filename=document.url.split("?", 1)[0],
            content_type=fetched.content_type,
            content=fetched.body,
        )
    except ValidationError:
        if not document.kind:
            raise
        # A later answer that says nothing of its kind: read it as the earlier one was.
    with transaction.atomic():  # the workspace's bytes counted with these in their place
        _check_room(document.workspace, len(fetched.body), replacing=document)
        document.content, document.size_bytes = fetched.body, len(fetched.body)
        document.save(update_fields=["kind", "content", "size_bytes", "fetched_at"])
    _progress(document, 5)
    return True


def _schedule_next(document: Document) -> None:
    """After each fetch, failed ones too: the next scheduled one is ``refresh_hours`` on."""
    if document.refresh_hours:
        due = timezone.now() + datetime.timedelta(hours=document.refresh_hours)
        Document.objects.filter(pk=document.pk).update(refresh_due_at=due)


def _store(
    document: Document,
    chunks: list[str],
    vectors: np.ndarray,
    *,
    characters: int,
    embedder: Embedder,
) -> None:
    with transaction.atomic():
        if not Document.objects.select_for_update().filter(pk=document.pk).exists():
            return  # deleted while it was being read
        Chunk.objects.filter(document=document).delete()
        Chunk.objects.bulk_create(
            Chunk(
                workspace_id=document.workspace_id,
                knowledge_base_id=document.knowledge_base_id,
                document=document,
                position=position,
                text=text,
                embedding=vector.astype("float32").tobytes(),
            )
            for position, (text, vector) in enumerate(zip(chunks, vectors, strict=True), 1)
        )
        _indexed(
            document, embedder, vectors, status=Status.READY, progress=100, error="",
            chunk_count=len(chunks), characters=characters, indexed_at=timezone.now(),
            content_sha256=hashlib.sha256(bytes(document.content)).hexdigest(),
        )  # fmt: skip
    _requeue_if_stale(document, embedder)


def search_rate() -> rates.Rate:
    return rates.Rate("knowledge-search", settings.KNOWLEDGE_SEARCHES_PER_MINUTE, 60)


def search_throttle(*, workspace: Workspace) -> int | None:
    """Count one REST search of the workspace's (whichever key asks): None, or the seconds
    until one more is allowed."""
    return rates.hit_sync(search_rate(), str(workspace.pk))


def workspace_usage(*, workspace: Workspace) -> dict[str, int]:
    documents = Document.objects.filter(workspace=workspace)
    return {
        "documents": documents.count(),
        "chunks": Chunk.objects.filter(workspace=workspace).count(),
        "bytes": documents.aggregate(total=Sum("size_bytes"))["total"] or 0,
    }
