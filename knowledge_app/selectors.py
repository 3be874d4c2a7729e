"""Reads for knowledge bases: every one takes the workspace."""

from __future__ import annotations

import uuid

from django.db.models import QuerySet
from django.http import Http404

from knowledge_app.models import Document, KnowledgeBase
from secrets_app.models import Workspace


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
