"""Knowledge bases of a workspace, their documents, and the chunks retrieval searches.

A chunk keeps its workspace and knowledge base beside its document, so every search
filters on the tenant in the same query that ranks. Its full-text index is the
database's own (a generated ``tsvector`` column with a GIN index on PostgreSQL, an FTS5
table on SQLite: migration 0002), its embedding a float32 vector in ``embedding``.

Vectors of different models are never compared: a knowledge base embeds with the offline
model or with the workspace's embedding connection it chose (``embedding_connection``),
and each document records the space its passages' vectors are in (``embedded_with``:
``embedders.Embedder.space``, the model and where it is served) and their dimension. A
search scores only the passages embedded in its base's current space.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from secrets_app.models import ProviderCredential, Workspace


class KnowledgeBase(models.Model):
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="knowledge_bases"
    )
    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=100)
    description = models.CharField(max_length=500, blank=True)
    # Bumped whenever its chunks change: the in-process vector caches key on it.
    index_version = models.PositiveIntegerField(default=0)
    # The workspace's embedding connection its passages are embedded with (None: the
    # offline model). A connection in use cannot be deleted (RESTRICT), but goes with
    # its workspace as the base does.
    embedding_connection = models.ForeignKey(
        ProviderCredential, on_delete=models.RESTRICT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="knowledge_base_name")
        ]

    def __str__(self) -> str:
        return self.name


class Document(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        INDEXING = "indexing"
        READY = "ready"
        FAILED = "failed"

    class Kind(models.TextChoices):
        PDF = "pdf", "PDF"
        MARKDOWN = "markdown", "Markdown"
        TEXT = "text", "Plain text"
        HTML = "html", "HTML"
        DOCX = "docx", "Word (DOCX)"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    knowledge_base = models.ForeignKey(
        KnowledgeBase, on_delete=models.CASCADE, related_name="documents"
    )
    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    title = models.CharField(max_length=200)
    # Blank until a URL document's first fetch tells it.
    kind = models.CharField(max_length=10, choices=Kind.choices, blank=True)
    url = models.CharField(max_length=500, blank=True)  # fetched from here; blank: uploaded
    # The bytes as uploaded or last fetched, so a worker on any machine can index them.
    content = models.BinaryField(editable=False)
    # SHA-256 of the content its passages were made from (blank: none yet, or it failed):
    # a scheduled fetch that brings the same bytes indexes nothing.
    content_sha256 = models.CharField(max_length=64, blank=True)
    # A URL document fetched again every so many hours by Celery beat (0: never).
    refresh_hours = models.PositiveSmallIntegerField(default=0)
    refresh_due_at = models.DateTimeField(null=True, blank=True, db_index=True)
    size_bytes = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    progress = models.PositiveSmallIntegerField(default=0)  # percent, while indexing
    error = models.CharField(max_length=300, blank=True)  # one of our own sentences
    characters = models.PositiveIntegerField(default=0)
    chunk_count = models.PositiveIntegerField(default=0)
    # The vector space its passages were embedded in (``embedders.Embedder.space``; blank:
    # none yet), and how many floats each vector has.
    embedded_with = models.CharField(max_length=64, blank=True)
    embedding_dimensions = models.PositiveIntegerField(default=0)
    # Queued to embed its passages again (its base chose another embedder): the stored
    # passages are embedded anew, a URL is not fetched again.
    reembed = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    fetched_at = models.DateTimeField(null=True, blank=True)
    indexed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return self.title


class Chunk(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    knowledge_base = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE, related_name="+")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    position = models.PositiveIntegerField()  # 1, 2, … in the document
    text = models.TextField()
    embedding = models.BinaryField()  # float32, document.embedding_dimensions of them

    class Meta:
        ordering = ["document", "position"]
        indexes = [models.Index(fields=["workspace", "knowledge_base"])]

    def __str__(self) -> str:
        return f"{self.document_id}#{self.position}"
