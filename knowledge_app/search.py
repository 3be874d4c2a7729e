"""Hybrid retrieval: the database's full-text ranking and embedding similarity, fused.

``search(workspace_id=…, knowledge_base_ids=…, query=…, k=…)`` is the one entry point:
the realtime session's knowledge tool, the REST search and the benchmark call it.

- Full text: PostgreSQL ``ts_rank`` over a generated ``tsvector`` column (GIN index);
  SQLite FTS5's ``bm25`` on the embedded default. The question's words are OR-ed (a
  spoken question rarely has every word of the passage), each quoted: no query syntax
  of the user's reaches the parser.
- Embeddings: the question's vector against every chunk's, in process (numpy). No
  pgvector for this PostgreSQL, so each knowledge base's vectors are loaded once per
  process and index version and kept (``_VectorCache``); scoring 10k chunks is one
  10k×384 product (1-2 ms on an idle core). It stops being fast around a few hundred thousand chunks
  per search (100 ms and 150 MB per 100k); past that an ANN index (pgvector HNSW, or a
  FAISS/hnswlib sidecar) replaces the brute-force product.
- Fusion: reciprocal rank fusion (score = Σ 1/(60 + rank)), which needs no calibration
  between the two scores.
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

import re
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

import numpy as np
from django.conf import settings
from django.db import connection
from django.utils.crypto import salted_hmac
from threadpoolctl import threadpool_limits

from knowledge_app import embeddings
from knowledge_app.models import Chunk, KnowledgeBase

Mode = Literal["hybrid", "fulltext", "vector"]
RRF_K = 60
CANDIDATES = 20  # from each ranking, before fusion
QUERY_TERMS_MAX = 32
QUERY_MAX_CHARS = 1000
CACHE_MAX_VECTORS = 200_000  # per process, across knowledge bases (about 300 MB)
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


def search(
    *,
    workspace_id: int,
    knowledge_base_ids: list[int],
    query: str,
    k: int = 5,
    mode: Mode = "hybrid",
) -> list[Passage]:
    query = query[:QUERY_MAX_CHARS]
    bases = dict(
        KnowledgeBase.objects.filter(
            workspace_id=workspace_id, pk__in=knowledge_base_ids
        ).values_list("pk", "index_version")
    )
    if not bases or not query.strip():
        return []
    rankings: list[list[int]] = []
    # The question is embedded on another thread while the database ranks by full text
    # (numpy and the tokenizer let go of the GIL): the search waits for the slower one.
    question = _question_vector(workspace_id, query) if mode != "fulltext" else None
    if mode != "vector" or question is None:  # past its share: full text alone
        rankings.append(_full_text(workspace_id, list(bases), query, CANDIDATES))
    if question is not None:
        rankings.append(_by_vector(workspace_id, bases, question.result(), CANDIDATES))
    fused = _fuse(rankings)[:k]
    return _passages(workspace_id, list(bases), fused)


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
    """Each knowledge base's chunk ids and vectors, as of an index version (LRU)."""

    def __init__(self, max_vectors: int) -> None:
        self._entries: OrderedDict[int, tuple[int, np.ndarray, np.ndarray]] = OrderedDict()
        self._max, self._lock = max_vectors, threading.Lock()

    def get(self, workspace_id: int, base_id: int, version: int) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            entry = self._entries.get(base_id)
            if entry is not None and entry[0] == version:
                self._entries.move_to_end(base_id)
                return entry[1], entry[2]
        ids, matrix = _load_vectors(workspace_id, base_id)
        with self._lock:
            self._entries[base_id] = (version, ids, matrix)
            self._entries.move_to_end(base_id)
            while (
                sum(len(e[1]) for e in self._entries.values()) > self._max
                and len(self._entries) > 1
            ):
                self._entries.popitem(last=False)
        return ids, matrix

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def _load_vectors(workspace_id: int, base_id: int) -> tuple[np.ndarray, np.ndarray]:
    rows = Chunk.objects.filter(workspace_id=workspace_id, knowledge_base_id=base_id).values_list(
        "pk", "embedding"
    )
    ids = np.fromiter((pk for pk, _ in rows), dtype=np.int64, count=len(rows))
    matrix = np.zeros((len(rows), embeddings.DIMENSIONS), dtype=np.float32)
    for row, (_, vector) in enumerate(rows):
        matrix[row] = np.frombuffer(bytes(vector), dtype=np.float32)
    return ids, matrix


vectors = _VectorCache(CACHE_MAX_VECTORS)
# No database in this thread: it only embeds (embeddings.embed runs one at a time anyway).
_embedder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="knowledge-embed")


class _Questions:
    """Each workspace's questions waiting for the embedding thread or on it (capped), and
    the vectors of its recent questions."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy: dict[int, int] = {}
        self._recent: OrderedDict[tuple[int, str], tuple[float, np.ndarray]] = OrderedDict()

    def vector(self, workspace_id: int, text: str) -> Future[np.ndarray] | None:
        """The question's vector (soon), or None: the workspace has its share in flight."""
        key = (workspace_id, text)
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
            return _embedder.submit(self._embed, key)
        except BaseException:
            self._release(workspace_id)
            raise

    def _embed(self, key: tuple[int, str]) -> np.ndarray:
        try:
            vector: np.ndarray = embeddings.embed([key[1]])[0]
        finally:
            self._release(key[0])
        with self._lock:
            self._recent[key] = (time.monotonic(), vector)
            self._recent.move_to_end(key)
            while len(self._recent) > QUESTION_CACHE_MAX:
                self._recent.popitem(last=False)
        return vector

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


def _question_vector(workspace_id: int, query: str) -> Future[np.ndarray] | None:
    return questions.vector(workspace_id, query[:EMBED_QUERY_MAX_CHARS])


def _by_vector(
    workspace_id: int, bases: dict[int, int], question: np.ndarray, limit: int
) -> list[int]:
    scored: list[tuple[float, int]] = []
    for base_id, version in bases.items():
        ids, matrix = vectors.get(workspace_id, base_id, version)
        if not len(ids):
            continue
        with threadpool_limits(limits=1, user_api="blas"):  # see embeddings.embed
            similarity = matrix @ question
        top = np.argpartition(-similarity, min(limit, len(ids) - 1))[:limit]
        scored.extend((float(similarity[i]), int(ids[i])) for i in top)
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [chunk_id for _, chunk_id in scored[:limit]]
