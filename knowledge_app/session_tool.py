"""The knowledge search as a tool of a realtime session: ``search_knowledge``.

This is the one place the session meets knowledge bases, and it is a tool kind like any
other (``engine.tools.kinds``): a ``ToolDefinition`` of kind ``knowledge`` the LLM is
offered, and ``KnowledgeSearch``, the ``ToolRunner`` of that kind, registered from this
app's ``ready()``. A search runs on a thread of its own (it reads the database and embeds
the question), scoped to the request's workspace and the agent's knowledge bases (given
by the session, ``SessionTools.knowledge_bases``), whatever the query says. Its
``ToolResult`` gives the LLM the passages, each with its source label; its ``steps`` put
those sources in the turn's ``chat`` event, and the session record keeps the call with its
result (docs/knowledge.md). When a knowledge base's embedding connection fails, the
search ranks by full text alone and the turn goes on: the result and the steps say so.

``knowledge_mode = "prefetch"``: the session calls the tool itself, through the same seam,
with the user's words before the turn's first LLM request (``SessionConfig.prefetch_tool``),
so the passages are in the context even for a model that does not call tools well.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from django.db import close_old_connections

from engine.session.config import SessionConfig, ToolDefinition
from engine.tools import kinds
from engine.tools.call import ToolRequest, ToolResult, ToolStatus
from engine.tools.runner import ToolRunner
from knowledge_app.search import Found, Passage, search_noted

logger = logging.getLogger(__name__)

TOOL_NAME = "search_knowledge"
KIND = "knowledge"
RESULTS = 5
PASSAGE_SHOWN_MAX = 1500  # characters of a passage given to the LLM
TIMEOUT_S = 10.0
GUIDANCE = (
    "Passages from the customer's own documents, best first. Answer from them when they "
    "answer the question, and say so when they do not. Do not read source labels aloud."
)

# Searches read the database and embed the question: threads of their own, each keeping
# its database connection (a new PostgreSQL connection would add milliseconds to a turn).
_searches: ThreadPoolExecutor | None = None
_searches_lock = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _searches
    with _searches_lock:
        if _searches is None:
            _searches = ThreadPoolExecutor(max_workers=4, thread_name_prefix="knowledge-search")
        return _searches


def searches_stop() -> None:
    """Let the search threads end (their connections with them): tests, process exit."""
    global _searches
    with _searches_lock:
        pool, _searches = _searches, None
    if pool is not None:
        pool.shutdown(wait=True)


def tool_definition(timeout_s: float = TIMEOUT_S) -> ToolDefinition:
    return ToolDefinition(
        name=TOOL_NAME,
        description=(
            "Search the documents this agent was given (policies, manuals, FAQs…) for "
            "passages that answer the user's question. Call it before answering any "
            "question about facts those documents may hold."
        ),
        parameters={
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "What to look for, as a full question or key words.",
                }
            },
            "required": ["query"],
        },
        timeout_s=timeout_s,
        kind=KIND,
    )


def configure(
    config: SessionConfig,
    *,
    knowledge_base_ids: list[int],
    mode: str,
    timeout_ms: int | None = None,
) -> None:
    """Give the session the knowledge tool (replacing a tool of the same name), with the
    agent's timeout for it (None: ``TIMEOUT_S``)."""
    if not knowledge_base_ids:
        return
    config.tools = [tool for tool in config.tools if tool.name != TOOL_NAME]
    config.tools.append(tool_definition(timeout_ms / 1000 if timeout_ms else TIMEOUT_S))
    config.knowledge_bases = sorted(knowledge_base_ids)
    config.prefetch_tool = TOOL_NAME if mode == "prefetch" else None


class KnowledgeSearch(ToolRunner):
    """The ``knowledge`` kind: ``search_knowledge`` over one session's knowledge bases."""

    kind = KIND
    # The search runs on in its thread whatever the turn does (a thread cannot be
    # stopped), so its result is kept, as the sandbox's is.
    shielded = True

    def __init__(self, knowledge_base_ids: tuple[int, ...]) -> None:
        self._knowledge_base_ids = list(knowledge_base_ids)

    async def run(self, request: ToolRequest) -> ToolResult:
        if not self._knowledge_base_ids:
            return ToolResult(ToolStatus.FAILED, error="this agent has no knowledge bases")
        query = str(request.arguments.get("query", "")).strip()
        if not query:
            return ToolResult(ToolStatus.FAILED, error="give a query: what to look for")
        started = time.monotonic()
        search_done = asyncio.get_running_loop().run_in_executor(
            _pool(), _search, request.workspace_id, self._knowledge_base_ids, query
        )
        try:  # the thread runs on (it cannot be stopped); the turn stops waiting for it
            found = await asyncio.wait_for(search_done, request.timeout_s)
        except TimeoutError:
            return ToolResult(
                ToolStatus.TIMED_OUT,
                error=f"the document search took longer than {request.timeout_s:g} s",
            )
        logger.info(
            "knowledge search: %s passages in %.0f ms%s",
            len(found.passages), (time.monotonic() - started) * 1000,
            " (full text alone: the embedding connection failed)" if found.note else "",
        )  # fmt: skip
        return ToolResult(
            ToolStatus.COMPLETED,
            result=result_text(found.passages, retrieval=found.note),
            steps=(*steps(found.passages), *((found.note,) if found.note else ())),
        )


def register() -> None:
    """Make ``knowledge`` a tool kind every session builds (from ``apps.ready``)."""
    kinds.register(KIND, lambda tools: KnowledgeSearch(tools.knowledge_bases))


def _search(workspace_id: int, knowledge_base_ids: list[int], query: str) -> Found:
    close_old_connections()
    try:
        return search_noted(
            workspace_id=workspace_id, knowledge_base_ids=knowledge_base_ids, query=query, k=RESULTS
        )
    finally:
        close_old_connections()


def result_text(passages: list[Passage], *, retrieval: str = "") -> str:
    """What the LLM reads (and the record keeps); ``retrieval`` notes a full-text-only search."""
    found = [
        {
            "source": passage.source,
            "document": passage.document_title,
            "text": passage.text[:PASSAGE_SHOWN_MAX],
        }
        for passage in passages
    ]
    note = GUIDANCE if found else "No passage of the documents matches; say you do not know."
    answer: dict[str, object] = {"passages": found, "note": note}
    if retrieval:
        answer["retrieval"] = retrieval
    return json.dumps(answer, ensure_ascii=False)


def sources_in(name: str, result: str) -> list[dict[str, str]]:
    """The passages a recorded ``search_knowledge`` call gave the LLM (for its page)."""
    if name != TOOL_NAME or not result:
        return []
    try:
        found = json.loads(result).get("passages", [])
    except (ValueError, AttributeError):
        return []  # cut short by the turn's result budget, or not ours
    return [
        {key: str(passage.get(key, "")) for key in ("source", "document", "text")}
        for passage in found
        if isinstance(passage, dict)
    ]


def steps(passages: list[Passage]) -> tuple[str, ...]:
    return tuple(
        f"Source {passage.source}: {passage.document_title}, passage {passage.position}"
        for passage in passages
    )
