"""Knowledge retrieval: how well and how fast. Prints JSON.

Quality: the fixed question set of tests/knowledge_app/corpus/questions.json over the
public-domain documents beside it (listed in that folder's README; written before any
retrieval ran, never tuned on). A question's answer is the passage of the named document
that holds the named phrase. recall@5: share of questions with that passage in the top 5;
MRR@10: mean of 1/rank of it in the top 10 (0 when absent). For full text alone,
embeddings alone, and the hybrid (reciprocal rank fusion) the agents use.

Speed: what one ``search`` adds to a turn (question embedded, full-text query, vectors
scored, passages read) with a knowledge base of 1k and 10k passages, p50 and p95 over
the questions repeated. The filler passages are sentences of the corpus shuffled (so the
full-text index has real words to match) with random unit vectors for embeddings:
embedding 10k passages with the offline model would take this machine many minutes and
measure nothing more about the search. The vectors are loaded once per process and index
version (``cold_load_ms``), as a live platform's are.

    .venv/bin/python bench/retrieval.py [--repeat 5]
    DATABASE_URL=postgres://… .venv/bin/python bench/retrieval.py
    EMBEDDING_API_KEY=sk-… .venv/bin/python bench/retrieval.py \
        --provider-url https://api.openai.com/v1 --provider-model text-embedding-3-small

With ``--provider-url`` the corpus is embedded by that OpenAI-compatible ``/embeddings``
endpoint (a workspace's embedding connection, through the egress guard; the key from
``EMBEDDING_API_KEY``), and only the quality figures are measured: the speed figures'
filler vectors are the offline model's size.

Uses DATABASE_URL if set (else the embedded SQLite file); makes a workspace of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")
CORPUS = ROOT / "tests" / "knowledge_app" / "corpus"
DOCUMENTS = [
    "bill_of_rights.md", "gettysburg.txt", "declaration.html",
    "constitution_article1.txt", "emancipation.txt",
]  # fmt: skip
SIZES = (1_000, 10_000)


def _setup() -> Any:
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from secrets_app import services

    user, _ = services.user_get_or_create(email="bench-retrieval@example.com")
    return services.workspace_create(name=f"bench-retrieval-{uuid.uuid4().hex[:6]}", owner=user)


def _index_corpus(workspace: Any, provider: tuple[str, str] | None) -> Any:
    from knowledge_app import dispatch, services

    dispatch.schedule = lambda *_args, **_kwargs: None  # indexed right here, below
    base = services.knowledge_base_create(workspace=workspace, name="corpus")
    if provider is not None:
        services.embedding_connection_set(
            workspace=workspace, name="bench", base_url=provider[0], model=provider[1],
            api_key=os.environ.get("EMBEDDING_API_KEY") or None,
        )  # fmt: skip
        services.knowledge_base_set_embedding(base=base, connection_name="bench")
    for name in DOCUMENTS:
        document = services.document_upload(
            base=base, filename=name, content=(CORPUS / name).read_bytes()
        )
        services.document_index(document_id=document.pk)
    return base


def _quality(workspace: Any, base: Any) -> dict[str, Any]:
    from knowledge_app.models import Chunk
    from knowledge_app.search import search

    questions = json.loads((CORPUS / "questions.json").read_text())
    figures: dict[str, Any] = {}
    for mode in ("fulltext", "vector", "hybrid"):
        hits, reciprocal = 0, 0.0
        for item in questions:
            relevant = set(
                Chunk.objects.filter(
                    knowledge_base=base, document__title=item["document"],
                    text__contains=item["contains"],
                ).values_list("pk", flat=True)
            )  # fmt: skip
            assert relevant, item
            found = search(
                workspace_id=workspace.pk, knowledge_base_ids=[base.pk], query=item["question"],
                k=10, mode=mode,
            )  # fmt: skip
            ranks = [i for i, p in enumerate(found, start=1) if p.chunk_id in relevant]
            hits += bool(ranks and ranks[0] <= 5)
            reciprocal += 1 / ranks[0] if ranks else 0.0
        figures[mode] = {
            "recall_at_5": round(hits / len(questions), 3),
            "mrr_at_10": round(reciprocal / len(questions), 3),
        }
    figures["questions"] = len(questions)
    figures["passages"] = Chunk.objects.filter(knowledge_base=base).count()
    return figures


def _filler(workspace: Any, size: int) -> Any:
    import numpy as np

    from knowledge_app import services
    from knowledge_app.chunking import chunk_text
    from knowledge_app.embedders import OFFLINE_SPACE
    from knowledge_app.embeddings import DIMENSIONS
    from knowledge_app.models import Chunk, Document

    words = " ".join((CORPUS / name).read_text() for name in DOCUMENTS).split()
    rng = random.Random(size)
    vectors = np.random.default_rng(size).standard_normal((size, DIMENSIONS)).astype("float32")
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    base = services.knowledge_base_create(workspace=workspace, name=f"filler-{size}")
    document = Document.objects.create(
        workspace=workspace, knowledge_base=base, title="filler", kind="text", content=b"",
        status="ready", embedded_with=OFFLINE_SPACE, embedding_dimensions=DIMENSIONS,
    )  # fmt: skip
    texts = [" ".join(rng.choices(words, k=110)) for _ in range(size)]
    assert chunk_text(texts[0])  # the size a real passage has
    Chunk.objects.bulk_create(
        (
            Chunk(
                workspace=workspace,
                knowledge_base=base,
                document=document,
                position=i + 1,
                text=text,
                embedding=vectors[i].tobytes(),
            )
            for i, text in enumerate(texts)
        ),
        batch_size=1000,
    )
    base.index_version += 1
    base.save(update_fields=["index_version"])
    return base


def _ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 1),
        "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1),
    }


def _speed(workspace: Any, repeat: int) -> dict[str, Any]:
    from knowledge_app import embeddings
    from knowledge_app.search import search, vectors

    questions = [q["question"] for q in json.loads((CORPUS / "questions.json").read_text())]
    embeddings.preload()
    embed_ms, embed_cpu_ms = [], []
    for question in questions * repeat:
        started, cpu = time.perf_counter(), time.thread_time()
        embeddings.embed([question])
        embed_ms.append((time.perf_counter() - started) * 1000)
        embed_cpu_ms.append((time.thread_time() - cpu) * 1000)
    figures: dict[str, Any] = {
        "question_embedding_ms": _ms(embed_ms),
        "question_embedding_cpu_ms": _ms(embed_cpu_ms),
    }
    for size in SIZES:
        base = _filler(workspace, size)
        vectors.clear()
        started = time.perf_counter()
        search(workspace_id=workspace.pk, knowledge_base_ids=[base.pk], query=questions[0])
        cold = (time.perf_counter() - started) * 1000
        timings: dict[str, list[float]] = {"hybrid": [], "fulltext": [], "vector": []}
        cpu_times: dict[str, list[float]] = {mode: [] for mode in timings}
        for question in questions * repeat:
            for mode, times in timings.items():
                started, cpu = time.perf_counter(), time.thread_time()
                search(
                    workspace_id=workspace.pk, knowledge_base_ids=[base.pk], query=question,
                    k=5, mode=mode,  # type: ignore[arg-type]
                )  # fmt: skip
                times.append((time.perf_counter() - started) * 1000)
                cpu_times[mode].append((time.thread_time() - cpu) * 1000)
        figures[f"{size}_passages"] = {
            "search_ms": {mode: _ms(times) for mode, times in timings.items()},
            # This process's CPU per search (the database server's own work not included):
            # what the wall time shrinks to on an idle machine.
            "search_cpu_ms": {mode: _ms(times) for mode, times in cpu_times.items()},
            "cold_load_ms": round(cold, 1),
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--provider-url", help="an OpenAI-compatible API's base URL")
    parser.add_argument("--provider-model", default="text-embedding-3-small")
    args = parser.parse_args()
    workspace = _setup()
    from django.db import connection

    provider = (args.provider_url, args.provider_model) if args.provider_url else None
    base = _index_corpus(workspace, provider)
    load_before = [round(x, 1) for x in os.getloadavg()]
    result = {
        "database": connection.vendor,
        "embeddings": f"{args.provider_model} at {args.provider_url}" if provider else "offline",
        "quality": _quality(workspace, base),
        "speed": _speed(workspace, args.repeat) if provider is None else "not measured",
        "cpus": os.cpu_count(),
        "load_average_before_after": [load_before, [round(x, 1) for x in os.getloadavg()]],
    }
    print(json.dumps(result, indent=2))
    workspace.delete()


if __name__ == "__main__":
    main()
