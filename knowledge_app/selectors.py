"""Reads for knowledge bases: every one takes the workspace."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db.models import QuerySet
from django.http import Http404

from knowledge_app import embedders
from knowledge_app.models import Document, KnowledgeBase
from secrets_app.models import ProviderCredential, Workspace
from secrets_app.provider_credentials import provider_credential_list

Kind = ProviderCredential.Kind


def _uid(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise Http404 from None


def knowledge_base_list(*, workspace: Workspace) -> QuerySet[KnowledgeBase]:
    return KnowledgeBase.objects.filter(workspace=workspace)


def knowledge_base_get(*, workspace: Workspace, uid: str) -> KnowledgeBase:
    base = KnowledgeBase.objects.filter(workspace=workspace, uid=_uid(uid)).first()
    if base is None:
        raise Http404
    return base


def document_list(*, base: KnowledgeBase) -> QuerySet[Document]:
    return Document.objects.filter(workspace_id=base.workspace_id, knowledge_base=base).defer(
        "content"
    )


def document_get(*, base: KnowledgeBase, uid: str) -> Document:
    document = document_list(base=base).filter(uid=_uid(uid)).first()
    if document is None:
        raise Http404
    return document


def embedding_connection_list(*, workspace: Workspace) -> QuerySet[ProviderCredential]:
    return provider_credential_list(workspace=workspace).filter(kind=Kind.EMBEDDING)


def embedding_connection_get(*, workspace: Workspace, name: str) -> ProviderCredential:
    connection = embedding_connection_list(workspace=workspace).filter(name=name).first()
    if connection is None:
        raise Http404
    return connection


@dataclass(frozen=True)
class EmbeddingStatus:
    """What a base embeds with, and how far its documents are from being in that space."""

    connection: str | None  # the embedding connection's name; None: the offline model
    model: str  # the model, and the connection serving it
    documents: int  # documents with passages
    embedded: int  # of them, embedded with ``model`` (the others: full text only for now)

    @property
    def reindexing(self) -> bool:
        return self.embedded < self.documents


def embedding_status(*, base: KnowledgeBase) -> EmbeddingStatus:
    connection = base.embedding_connection
    indexed = document_list(base=base).filter(chunk_count__gt=0)
    return EmbeddingStatus(
        connection=connection.name if connection else None,
        model=embedders.label_of(connection),
        documents=indexed.count(),
        embedded=indexed.filter(embedded_with=embedders.space_of(connection)).count(),
    )
