"""A workspace's OpenAI-compatible ``/embeddings`` endpoint, dialled through the egress guard.

One request per batch: ``POST {base_url}/embeddings`` with ``{"model", "input": [texts],
"encoding_format": "float"}`` and ``Authorization: Bearer <key>``. It goes through the
platform's one client for customer-given URLs (``egress.client.fetch``, under
``core.outbound.policy()``): public addresses only, the name resolved once and the
connection pinned to the checked address, every redirect checked again, a timeout for the
whole exchange and a cap on the answer's size. The key is a secret bound to the
endpoint's host: the request carries a reference that becomes the key only on the way to
that host, so a redirect elsewhere carries no key, and the answer comes back with the key
masked wherever a server echoed it.

The answer is checked before any of it is kept: one vector per input (by ``index``), all
of one dimension (at most ``KNOWLEDGE_EMBEDDING_MAX_DIMENSIONS``), finite numbers, not all
zero; vectors are scaled to unit length, as the offline model's are, so a dot product is
their cosine. Whatever goes wrong is ``EmbeddingFailed`` with a sentence of ours (a
provider's own error text is cut short and has the key masked): it becomes a document's
error or a search's note, never a crash.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from asgiref.sync import async_to_sync
from django.conf import settings

import egress
from core import outbound
from egress import client as egress_client
from egress.secret_refs import SecretBinding, make_reference
from sessions_app.scrubbing import KEY_MASK, Credential, Scrubber

USER_AGENT = "voice-agent-platform-knowledge/1"
PROVIDER_TEXT_MAX = 200  # characters of a provider's own error message kept
_RESPONSE_OVERHEAD = 64 * 1024
NOT_A_LIST = "The embedding provider's answer is not an embeddings list."
_BYTES_PER_NUMBER = 32  # "-0.0123456789012345678," with room for spaces and exponents


class EmbeddingFailed(Exception):
    """No vectors; the message is ours, safe for a document's error or a record."""


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/embeddings"


def embed(endpoint: Endpoint, texts: list[str], *, timeout_s: float) -> np.ndarray:
    """One row per text, unit length, float32; EmbeddingFailed otherwise. Synchronous:
    called from the indexing job."""
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    return async_to_sync(embed_async)(endpoint, texts, timeout_s=timeout_s)


async def embed_async(endpoint: Endpoint, texts: list[str], *, timeout_s: float) -> np.ndarray:
    """``embed`` on an event loop (a search's questions: each waits on its socket, not on a
    thread of a pool that slow providers of other workspaces could fill)."""
    scrub = Scrubber([Credential(endpoint.api_key or "")])
    try:
        body = await _post(endpoint, texts, timeout_s, scrub)
        return vectors_from(body, len(texts), int(settings.KNOWLEDGE_EMBEDDING_MAX_DIMENSIONS))
    except EmbeddingFailed as failed:
        raise EmbeddingFailed(scrub(str(failed))) from None


def response_cap(count: int, max_dimensions: int) -> int:
    """The largest answer read for ``count`` inputs: their vectors written out as JSON."""
    return _RESPONSE_OVERHEAD + count * max_dimensions * _BYTES_PER_NUMBER


async def _post(endpoint: Endpoint, texts: list[str], timeout_s: float, scrub: Scrubber) -> bytes:
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
    secrets: list[SecretBinding] = []
    reference = make_reference("embedding_key")
    if endpoint.api_key:
        host = egress.parse(endpoint.base_url, schemes=("https", "http")).host
        secrets.append(SecretBinding("embedding key", endpoint.api_key, (host,), reference))
        headers["Authorization"] = f"Bearer {reference}"
    payload = {"model": endpoint.model, "input": texts, "encoding_format": "float"}
    max_dimensions = int(settings.KNOWLEDGE_EMBEDDING_MAX_DIMENSIONS)
    policy = egress_client.EgressPolicy(
        guard=outbound.policy(),
        max_response_bytes=response_cap(len(texts), max_dimensions),
        timeout_s=timeout_s,
    )
    request = egress_client.FetchRequest(endpoint.url, "POST", headers, json.dumps(payload))
    try:
        response = await egress_client.fetch(request, policy=policy, secrets=secrets)
    except egress_client.EgressError as error:
        said = str(error).rstrip(".")
        raise EmbeddingFailed(f"The embedding provider failed: {said}.") from None
    if not 200 <= response.status < 300:
        # The client gave back the key as its reference wherever the server echoed it; a
        # spelling only JSON decoding reveals (``\u0073k-…``) is masked once decoded.
        said = _provider_message(
            response.body, lambda text: scrub(text.replace(reference, KEY_MASK))
        )
        raise EmbeddingFailed(f"The embedding provider answered HTTP {response.status}{said}.")
    return response.body


def _provider_message(body: bytes, mask: Callable[[str], str]) -> str:
    """OpenAI's ``{"error": {"message": …}}``, masked, then cut short (cut first, a key
    across the cut would keep its first half), or nothing."""
    try:
        error = json.loads(body).get("error")
        message = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError, RecursionError):
        return ""
    if not isinstance(message, str) or not message.strip():
        return ""
    return ": " + " ".join(mask(message).split())[:PROVIDER_TEXT_MAX]


def vectors_from(body: bytes, count: int, max_dimensions: int) -> np.ndarray:
    """The ``count`` vectors of an ``/embeddings`` answer, in input order, unit length."""
    try:
        data = json.loads(body)["data"]
    except (ValueError, TypeError, KeyError, RecursionError):  # nested past Python's stack
        raise EmbeddingFailed(NOT_A_LIST) from None
    if not isinstance(data, list) or len(data) != count:
        got = len(data) if isinstance(data, list) else 0
        raise EmbeddingFailed(f"The embedding provider answered {got} vectors for {count} texts.")
    rows: list[list[float] | None] = [None] * count
    for position, item in enumerate(data):
        index, vector = _item(item, position)
        if not 0 <= index < count or rows[index] is not None:
            raise EmbeddingFailed("The embedding provider's vectors are not one per text.")
        rows[index] = vector
    dimensions = {len(row) for row in rows if row is not None}
    if len(dimensions) != 1:
        raise EmbeddingFailed("The embedding provider's vectors are not all of one length.")
    (dimension,) = dimensions
    if not 1 <= dimension <= max_dimensions:
        raise EmbeddingFailed(
            f"The embedding provider's vectors have {dimension} numbers; "
            f"at most {max_dimensions} are taken (KNOWLEDGE_EMBEDDING_MAX_DIMENSIONS)."
        )
    matrix = np.asarray(rows, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0):
        raise EmbeddingFailed("The embedding provider answered a vector of zeros or of overflows.")
    unit: np.ndarray = (matrix / norms).astype(np.float32)
    return unit


def _item(item: object, position: int) -> tuple[int, list[float]]:
    if not isinstance(item, dict) or not isinstance(item.get("embedding"), list):
        raise EmbeddingFailed(NOT_A_LIST)
    index = item.get("index", position)
    vector = item["embedding"]
    if not isinstance(index, int) or isinstance(index, bool):
        raise EmbeddingFailed("The embedding provider's vectors are not one per text.")
    if not all(_finite_number(number) for number in vector):
        raise EmbeddingFailed("The embedding provider's vectors hold something not a number.")
    return index, vector


def _finite_number(value: object) -> bool:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer literal past a float's range: 1 followed by 400 zeros
        return False
