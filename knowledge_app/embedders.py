"""Which model embeds a knowledge base: the offline all-MiniLM-L6-v2 (``embeddings``), or the
workspace's own embedding connection the base chose (``embedding_provider``).

An ``Embedder`` names its vector space: the offline model's, or a hash of the endpoint's
base URL and model (another URL or model is another space, whatever the provider calls
it). Documents record the space their passages were embedded in; a search compares a
question only with passages of the space it embedded the question in. The key is opened
(``secrets_app.provider_credentials.credential_open``) only when vectors are wanted.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
from django.conf import settings

from knowledge_app import embedding_provider, embeddings
from knowledge_app.embedding_provider import Endpoint
from secrets_app.models import ProviderCredential
from secrets_app.provider_credentials import credential_open

OFFLINE_MODEL = "all-MiniLM-L6-v2"
OFFLINE_SPACE = f"offline/{OFFLINE_MODEL}"
OFFLINE_BATCH = 16  # texts per forward pass of the offline model
MAX_BATCH = 512  # texts per provider request, whatever KNOWLEDGE_EMBEDDING_BATCH says


@dataclass(frozen=True)
class Embedder:
    space: str
    label: str  # what a page says: the model, and the connection serving it
    endpoint: Endpoint | None = None  # None: the offline model

    @property
    def batch(self) -> int:
        """Texts per call: an indexing job's progress moves on after each."""
        if self.endpoint is None:
            return OFFLINE_BATCH
        return min(int(settings.KNOWLEDGE_EMBEDDING_BATCH), MAX_BATCH)

    def embed(self, texts: list[str], *, timeout_s: float | None = None) -> np.ndarray:
        """One unit vector per text; ``EmbeddingFailed`` when the provider fails."""
        if self.endpoint is None:
            return embeddings.embed(texts)
        timeout = timeout_s or float(settings.KNOWLEDGE_EMBEDDING_TIMEOUT_S)
        return embedding_provider.embed(self.endpoint, texts, timeout_s=timeout)


OFFLINE = Embedder(OFFLINE_SPACE, f"{OFFLINE_MODEL} (offline, built in)")


def space_of(connection: ProviderCredential | None) -> str:
    """The vector space a connection's vectors are in (None: the offline model's)."""
    if connection is None:
        return OFFLINE_SPACE
    served = f"{connection.base_url.rstrip('/')}\n{connection.model}".encode()
    return "openai/" + hashlib.sha256(served).hexdigest()[:32]


def label_of(connection: ProviderCredential | None) -> str:
    if connection is None:
        return OFFLINE.label
    return f"{connection.model} (connection {connection.name})"


def embedder_for(connection: ProviderCredential | None) -> Embedder:
    """The embedder of a base that chose ``connection``, its key opened."""
    if connection is None:
        return OFFLINE
    key = credential_open(credential=connection)
    endpoint = Endpoint(connection.base_url, connection.model, key)
    return Embedder(space_of(connection), label_of(connection), endpoint)
