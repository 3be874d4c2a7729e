"""Examples for the knowledge bases' OpenAPI schema (Swagger UI shows them);
``tests/test_openapi.py`` checks them against their schemas and sends the requests."""

from __future__ import annotations

from typing import Any

from core.api_examples import request, response

BASE_ID = "0b7e1f2a-5c3d-4e8f-9a1b-2c3d4e5f6a7b"
DOCUMENT_ID = "6f1d2c3b-4a5e-4f60-8b7c-9d0e1f2a3b4c"

_BASE: dict[str, Any] = {
    "id": BASE_ID,
    "name": "Help center",
    "description": "Return policy, shipping, warranty.",
    "documents": 2,
    "embedding": {
        "connection": None,
        "model": "all-MiniLM-L6-v2 (offline, built in)",
        "documents": 2,
        "embedded": 2,
        "reindexing": False,
    },
    "created_at": "2025-06-01T09:30:00Z",
}
_DOCUMENT: dict[str, Any] = {
    "id": DOCUMENT_ID,
    "title": "returns.pdf",
    "kind": "pdf",
    "url": "",
    "size_bytes": 48213,
    "status": "ready",
    "progress": 100,
    "error": "",
    "characters": 18230,
    "chunk_count": 31,
    "created_at": "2025-06-01T09:31:00Z",
    "fetched_at": None,
    "indexed_at": "2025-06-01T09:31:09Z",
    "refresh_hours": 0,
    "refresh_due_at": None,
}

BASE_LIST = [response("A knowledge base", _BASE)]
BASE_CREATE = [
    request("A knowledge base", {"name": "Help center", "description": "Return policy, shipping."}),
    response("Created", {**_BASE, "documents": 0}, 201),
]
BASE_DETAIL = [response("A knowledge base", _BASE)]
_CONNECTION: dict[str, Any] = {
    "name": "openai-small",
    "base_url": "https://api.openai.com/v1",
    "model": "text-embedding-3-small",
    "has_key": True,
    "created_at": "2025-06-01T09:20:00Z",
    "updated_at": "2025-06-01T09:20:00Z",
}
CONNECTION_LIST = [response("An embedding connection", _CONNECTION)]
CONNECTION_DETAIL = [response("An embedding connection", _CONNECTION)]
CONNECTION_SAVE = [
    request(
        "An OpenAI embedding model",
        {
            "name": "openai-small",
            "base_url": "https://api.openai.com/v1",
            "model": "text-embedding-3-small",
            "api_key": "sk-proj-…",
        },
    ),
    response("Created (the key is never shown again)", _CONNECTION, 201),
    response(
        "Changed: another model (the saved key kept)",
        {**_CONNECTION, "model": "text-embedding-3-large", "updated_at": "2025-06-02T10:00:00Z"},
        200,
    ),
]
BASE_EMBEDDING = [
    request("Embed with the workspace's connection", {"connection": "openai-small"}),
    response(
        "Re-indexing with it",
        {
            **_BASE,
            "embedding": {
                "connection": "openai-small",
                "model": "text-embedding-3-small (connection openai-small)",
                "documents": 2,
                "embedded": 0,
                "reindexing": True,
            },
        },
    ),
]
DOCUMENT_LIST = [
    response("An indexed document", _DOCUMENT),
    response(
        "A document that failed",
        {
            **_DOCUMENT,
            "id": "7a2e3d4c-5b6f-4071-8c8d-0e1f2a3b4c5d",
            "title": "docs.example.com/manual.pdf",
            "url": "https://docs.example.com/manual.pdf",
            "status": "failed",
            "progress": 0,
            "error": "It was refused: it has 1200 pages, more than 500.",
            "chunk_count": 0,
            "characters": 0,
            "fetched_at": "2025-06-01T09:32:00Z",
            "indexed_at": None,
            "refresh_hours": 24,
            "refresh_due_at": "2025-06-02T09:32:00Z",
        },
    ),
]
DOCUMENT_CREATED = [
    response(
        "Queued for indexing",
        {
            **_DOCUMENT,
            "status": "pending",
            "progress": 0,
            "chunk_count": 0,
            "characters": 0,
            "indexed_at": None,
        },
        201,
    )
]
DOCUMENT_DETAIL = [response("A document", _DOCUMENT)]
_URL_DOCUMENT: dict[str, Any] = {
    **_DOCUMENT,
    "title": "docs.example.com/shipping.html",
    "kind": "html",
    "url": "https://docs.example.com/shipping.html",
    "fetched_at": "2025-06-01T09:31:05Z",
}
DOCUMENT_SCHEDULE = [
    request("Fetch it again every day", {"refresh_hours": 24}),
    response(
        "Refreshed daily",
        {**_URL_DOCUMENT, "refresh_hours": 24, "refresh_due_at": "2025-06-02T09:31:05Z"},
    ),
]
DOCUMENT_REFRESHED = [response("Queued again", {**_DOCUMENT, "status": "pending", "progress": 0})]
SEARCH = [
    request("A question", {"query": "How long do refunds take?", "k": 3}),
    response(
        "A passage",
        {
            "source": "K3fa94c0b27",
            "document_id": DOCUMENT_ID,
            "document": "returns.pdf",
            "position": 4,
            "text": "Refunds are paid within 14 days of the return reaching us.",
            "score": 0.03252,
        },
    ),
]
AGENT_KNOWLEDGE = [
    request("Answer from the help center", {"knowledge_bases": [BASE_ID], "mode": "tool"}),
    response("The agent's knowledge", {"knowledge_bases": [BASE_ID], "mode": "tool"}),
]
