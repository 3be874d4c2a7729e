"""Hybrid retrieval: the database's full-text ranking and embedding similarity, fused.

``search(workspace_id=…, knowledge_base_ids=…, query=…, k=…)`` is the one entry point:
the realtime session's knowledge tool, the REST search and the benchmark call it.

- Full text: PostgreSQL ``ts_rank`` over a generated ``tsvector`` column (GIN index);
  SQLite FTS5's ``bm25`` on the embedded default. The question's words are OR-ed (a
  spoken question rarely has every word of the passage), each quoted: no query syntax
  of the user's reaches the parser.
- Embeddings: the question's vector against every chunk's, in process (numpy), in each
  base's own vector space (``embedders``): the question is embedded once per space among
  the bases searched (the offline model, or a workspace's embedding connection), and
  compared only with passages embedded in that space, of that dimension. No
  pgvector for this PostgreSQL, so each knowledge base's vectors are loaded once per
  process and index version and kept (``_VectorCache``); scoring 10k chunks is one
  10k×384 product (1-2 ms on an idle core). It stops being fast around a few hundred thousand chunks
  per search (100 ms and 150 MB per 100k); past that an ANN index (pgvector HNSW, or a
  FAISS/hnswlib sidecar) replaces the brute-force product.
- Fusion: reciprocal rank fusion (score = Σ 1/(60 + rank)), which needs no calibration
  between the scores (nor between spaces: each space's ranking is one more list).
- An embedding connection that fails or is slower than
  ``KNOWLEDGE_EMBEDDING_QUESTION_TIMEOUT_S`` leaves its bases to full text for that
  search; ``search_noted`` says so (the session's record and the turn's steps show it).
- Fair share of the embedding thread (one per process, shared by every workspace's
  searches, REST and live sessions alike): a workspace has at most
  ``KNOWLEDGE_WORKSPACE_SEARCH_CONCURRENCY`` questions waiting for it or being embedded;
  a search past that ranks by full text alone, so another workspace's question waits
  behind a bounded number of a flooding one's. A question's first
  ``EMBED_QUERY_MAX_CHARS`` characters are embedded, and its vector kept for
  ``QUESTION_CACHE_S`` (per workspace: a hit must not tell one tenant what another asked).

Every query names the workspace: a knowledge base of another workspace is dropped
before anything is read, and each chunk row is filtered on the workspace again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from django.conf import settings
from django.db import connection
from django.utils.crypto import salted_hmac
from threadpoolctl import threadpool_limits

from knowledge_app import embedders, embedding_provider
from knowledge_app.embedders import Embedder
from knowledge_app.embedding_provider import EmbeddingFailed, Endpoint
from knowledge_app.models import Chunk, KnowledgeBase

logger = logging.getLogger(__name__)

Mode = Literal["hybrid", "fulltext", "vector"]
RRF_K = 60
CANDIDATES = 20  # from each ranking, before fusion
QUERY_TERMS_MAX = 32
QUERY_MAX_CHARS = 1000
CACHE_MAX_FLOATS = 200_000 * 384  # per process, across knowledge bases (about 300 MB)
EMBED_QUERY_MAX_CHARS = 400  # a spoken question is far shorter; the model reads 256 tokens
QUESTION_CACHE_S = 60.0
QUESTION_CACHE_MAX = 512


@dataclass(frozen=True)
class Passage:
    chunk_id: int
    knowledge_base_id: int
    document_uid: str
    document_title: str
    position: int
    text: str
    score: float

    @property
    def source(self) -> str:
        """How the LLM, the steps and the record name the passage."""
        return source_label(self.chunk_id)


def source_label(chunk_id: int) -> str:
    """A passage's name, the same on every search, telling nothing of the platform's other
    passages (chunk ids are one sequence for all workspaces: ``K1042`` would count them)."""
    return "K" + salted_hmac("knowledge-source", str(chunk_id)).hexdigest()[:10]


@dataclass(frozen=True)
class Found:
    passages: list[Passage]
    note: str = ""  # why embeddings were left out of the ranking ("": they were not)


def search(
    *,
    workspace_id: int,
    knowledge_base_ids: list[int],
    query: str,
    k: int = 5,
    mode: Mode = "hybrid",
) -> list[Passage]:
    found = search_noted(
        workspace_id=workspace_id, knowledge_base_ids=knowledge_base_ids, query=query, k=k,
        mode=mode,
    )  # fmt: skip
    return found.passages


def search_noted(
    *,
    workspace_id: int,
    knowledge_base_ids: list[int],
    query: str,
    k: int = 5,
    mode: Mode = "hybrid",
) -> Found:
    """The passages, and a note when an embedding connection failed (full text instead)."""
    query = query[:QUERY_MAX_CHARS]
    bases = list(
        KnowledgeBase.objects.filter(
            workspace_id=workspace_id, pk__in=knowledge_base_ids
        ).select_related("embedding_connection")
    )
    if not bases or not query.strip():
        return Found([])
    base_ids = [base.pk for base in bases]
    spaces: dict[str, list[KnowledgeBase]] = {}
    for base in bases:
        spaces.setdefault(embedders.space_of(base.embedding_connection), []).append(base)
    # Each space's question is embedded on another thread while the database ranks by
    # full text (numpy, the tokenizer and sockets let go of the GIL).
    questions_asked = {
        space: _question_vector(workspace_id, members[0], query)
        for space, members in (spaces.items() if mode != "fulltext" else ())
    }
    full_text = None
    if mode != "vector" or None in questions_asked.values():  # past its share: full text
        full_text = _full_text(workspace_id, base_ids, query, CANDIDATES)
    rankings, failed = _vector_rankings(workspace_id, spaces, questions_asked)
    if full_text is None and failed:
        full_text = _full_text(workspace_id, base_ids, query, CANDIDATES)
    fused = _fuse([full_text or [], *rankings])[:k]
    note = ""
    if failed:
        note = f"Searched by full text alone: {failed[0]}"
    return Found(_passages(workspace_id, base_ids, fused), note)


def _vector_rankings(
    workspace_id: int,
    spaces: dict[str, list[KnowledgeBase]],
    asked: dict[str, Future[np.ndarray] | None],
) -> tuple[list[list[int]], list[str]]:
    """Each space's ranking, and why a space has none (its provider failed)."""
    rankings: list[list[int]] = []
    failed: list[str] = []
    for space, question in asked.items():
        if question is None:
            continue
        try:
            vector = question.result()
        except EmbeddingFailed as error:
            failed.append(str(error))
            continue
        except Exception as error:  # a turn's search never fails for its embeddings
            logger.error("question embedding failed: %s", type(error).__name__)
            failed.append("The question could not be embedded (the platform's side).")
            continue
        versions = {base.pk: base.index_version for base in spaces[space]}
        rankings.append(_by_vector(workspace_id, versions, space, vector, CANDIDATES))
    return rankings, failed


def _fuse(rankings: list[list[int]]) -> list[tuple[int, float]]:
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, chunk_id in enumerate(ranking, start=1):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def _passages(
    workspace_id: int, base_ids: list[int], fused: list[tuple[int, float]]
) -> list[Passage]:
    score = dict(fused)
    rows = Chunk.objects.filter(
        workspace_id=workspace_id, knowledge_base_id__in=base_ids, pk__in=list(score)
    ).values_list("pk", "knowledge_base_id", "document__uid", "document__title", "position", "text")
    passages = [
        Passage(pk, base, str(uid), title, position, text, round(score[pk], 5))
        for pk, base, uid, title, position, text in rows
    ]
    return sorted(passages, key=lambda passage: (-passage.score, passage.chunk_id))


# ---------------------------------------------------------------- full text


def query_terms(query: str) -> list[str]:
    """The question's words, lower-cased, once each: only letters, digits and '_'."""
    seen: dict[str, None] = {}
    for word in re.findall(r"\w+", query.lower()):
        seen.setdefault(word, None)
    return list(seen)[:QUERY_TERMS_MAX]


def _full_text(workspace_id: int, base_ids: list[int], query: str, limit: int) -> list[int]:
    terms = query_terms(query)
    if not terms:
        return []
    # Only "%s" placeholders are formatted into the SQL; every value is a parameter.
    placeholders = ", ".join(["%s"] * len(base_ids))
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT c.id FROM knowledge_app_chunk c, to_tsquery('english', %s) q "  # noqa: S608
                f"WHERE c.workspace_id = %s AND c.knowledge_base_id IN ({placeholders}) "
                "AND c.search @@ q ORDER BY ts_rank(c.search, q) DESC, c.id LIMIT %s",
                [" | ".join(f"'{term}'" for term in terms), workspace_id, *base_ids, limit],
            )
        else:
            cursor.execute(
                "SELECT c.id FROM knowledge_app_chunk_fts "  # noqa: S608
                "JOIN knowledge_app_chunk c ON c.id = knowledge_app_chunk_fts.rowid "
                f"WHERE knowledge_app_chunk_fts MATCH %s AND c.workspace_id = %s "
                f"AND c.knowledge_base_id IN ({placeholders}) "
                "ORDER BY bm25(knowledge_app_chunk_fts), c.id LIMIT %s",
                [" OR ".join(f'"{term}"' for term in terms), workspace_id, *base_ids, limit],
            )
        return [row[0] for row in cursor.fetchall()]


# ---------------------------------------------------------------- embeddings


class _VectorCache:
    """Each knowledge base's chunk ids and vectors of one space and dimension, as of an
    index version (LRU, bounded by the floats it holds)."""

    def __init__(self, max_floats: int) -> None:
        self._entries: OrderedDict[int, tuple[tuple[int, str, int], np.ndarray, np.ndarray]] = (
            OrderedDict()
        )
        self._max, self._lock = max_floats, threading.Lock()

    def get(
        self, workspace_id: int, base_id: int, version: int, space: str, dimensions: int
    ) -> tuple[np.ndarray, np.ndarray]:
        stamp = (version, space, dimensions)
        with self._lock:
            entry = self._entries.get(base_id)
            if entry is not None and entry[0] == stamp:
                self._entries.move_to_end(base_id)
                return entry[1], entry[2]
        ids, matrix = _load_vectors(workspace_id, base_id, space, dimensions)
        with self._lock:
            self._entries[base_id] = (stamp, ids, matrix)
            self._entries.move_to_end(base_id)
            while (
                sum(e[2].size for e in self._entries.values()) > self._max
                and len(self._entries) > 1
            ):
                self._entries.popitem(last=False)
        return ids, matrix

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def _load_vectors(
    workspace_id: int, base_id: int, space: str, dimensions: int
) -> tuple[np.ndarray, np.ndarray]:
    """The base's passages embedded in ``space`` with vectors of ``dimensions`` floats."""
    rows = Chunk.objects.filter(
        workspace_id=workspace_id, knowledge_base_id=base_id,
        document__embedded_with=space, document__embedding_dimensions=dimensions,
    ).values_list("pk", "embedding")  # fmt: skip
    ids = np.fromiter((pk for pk, _ in rows), dtype=np.int64, count=len(rows))
    matrix = np.zeros((len(rows), dimensions), dtype=np.float32)
    for row, (_, vector) in enumerate(rows):
        matrix[row] = np.frombuffer(bytes(vector), dtype=np.float32)
    return ids, matrix


vectors = _VectorCache(CACHE_MAX_FLOATS)
# No database in this thread: it only embeds. The offline model runs one at a time anyway.
_embedder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="knowledge-embed")


class _RemoteLoop:
    """One event loop on a thread of its own for providers' questions: each waits on its
    socket, so however many are slow (each workspace has its share in flight), another
    workspace's question is sent at once. (A pool of a few threads would have queued it
    behind slow providers until they timed out, and its turn's search with it.)"""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def submit(self, work: Coroutine[Any, Any, np.ndarray]) -> Future[np.ndarray]:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():  # none yet, or forked since
                self._loop, self._pid = asyncio.new_event_loop(), os.getpid()
                threading.Thread(
                    target=self._loop.run_forever, name="knowledge-embed-remote", daemon=True
                ).start()
            return asyncio.run_coroutine_threadsafe(work, self._loop)


_remote = _RemoteLoop()


class _Questions:
    """Each workspace's questions waiting for an embedding thread or on it (capped), and
    the vectors of its recent questions, per vector space."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy: dict[int, int] = {}
        self._recent: OrderedDict[tuple[int, str, str], tuple[float, np.ndarray]] = OrderedDict()

    def vector(self, workspace_id: int, embedder: Embedder, text: str) -> Future[np.ndarray] | None:
        """The question's vector (soon), or None: the workspace has its share in flight."""
        key = (workspace_id, embedder.space, text)
        with self._lock:
            kept = self._recent.get(key)
            if kept is not None and time.monotonic() - kept[0] < QUESTION_CACHE_S:
                done: Future[np.ndarray] = Future()
                done.set_result(kept[1])
                return done
            if self._busy.get(workspace_id, 0) >= settings.KNOWLEDGE_WORKSPACE_SEARCH_CONCURRENCY:
                return None
            self._busy[workspace_id] = self._busy.get(workspace_id, 0) + 1
        try:
            if embedder.endpoint is None:
                return _embedder.submit(self._embed, key, embedder)
            return _remote.submit(self._embed_remote(key, embedder.endpoint))
        except BaseException:
            self._release(workspace_id)
            raise

    def _embed(self, key: tuple[int, str, str], embedder: Embedder) -> np.ndarray:
        try:
            vector: np.ndarray = embedder.embed([key[2]])[0]
        finally:
            self._release(key[0])
        self._keep(key, vector)
        return vector

    async def _embed_remote(self, key: tuple[int, str, str], endpoint: Endpoint) -> np.ndarray:
        timeout_s = float(settings.KNOWLEDGE_EMBEDDING_QUESTION_TIMEOUT_S)
        try:
            vector: np.ndarray = (
                await embedding_provider.embed_async(endpoint, [key[2]], timeout_s=timeout_s)
            )[0]
        finally:
            self._release(key[0])
        self._keep(key, vector)
        return vector

    def _keep(self, key: tuple[int, str, str], vector: np.ndarray) -> None:
        with self._lock:
            self._recent[key] = (time.monotonic(), vector)
            self._recent.move_to_end(key)
            while len(self._recent) > QUESTION_CACHE_MAX:
                self._recent.popitem(last=False)

    def _release(self, workspace_id: int) -> None:
        with self._lock:
            left = self._busy.get(workspace_id, 1) - 1
            if left:
                self._busy[workspace_id] = left
            else:
                self._busy.pop(workspace_id, None)

    def clear(self) -> None:
        with self._lock:
            self._recent.clear()


questions = _Questions()


def _question_vector(
    workspace_id: int, base: KnowledgeBase, query: str
) -> Future[np.ndarray] | None:
    """The question in ``base``'s space (its embedding connection's key opened here)."""
    embedder = embedders.embedder_for(base.embedding_connection)
    return questions.vector(workspace_id, embedder, query[:EMBED_QUERY_MAX_CHARS])


def _by_vector(
    workspace_id: int, bases: dict[int, int], space: str, question: np.ndarray, limit: int
) -> list[int]:
    scored: list[tuple[float, int]] = []
    for base_id, version in bases.items():
        ids, matrix = vectors.get(workspace_id, base_id, version, space, len(question))
        if not len(ids):
            continue
        with threadpool_limits(limits=1, user_api="blas"):  # see embeddings.embed
            similarity = matrix @ question
        top = np.argpartition(-similarity, min(limit, len(ids) - 1))[:limit]
        scored.extend((float(similarity[i]), int(ids[i])) for i in top)
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [chunk_id for _, chunk_id in scored[:limit]]
