from __future__ import annotations

from django.urls import path

from knowledge_app import api

BASE = "knowledge-bases/<str:knowledge_base_id>"
DOCUMENT = f"{BASE}/documents/<str:document_id>"

urlpatterns = [
    path("knowledge-bases", api.KnowledgeBaseListApi.as_view(), name="knowledge-bases"),
    path(BASE, api.KnowledgeBaseDetailApi.as_view(), name="knowledge-base"),
    path(f"{BASE}/documents", api.DocumentListApi.as_view(), name="knowledge-documents"),
    path(DOCUMENT, api.DocumentDetailApi.as_view(), name="knowledge-document"),
    path(f"{DOCUMENT}/refresh", api.DocumentRefreshApi.as_view(), name="knowledge-refresh"),
    path(f"{BASE}/search", api.KnowledgeSearchApi.as_view(), name="knowledge-search"),
    path(f"{BASE}/embedding", api.KnowledgeBaseEmbeddingApi.as_view(), name="knowledge-embedding"),
    path(
        "knowledge-embedding-connections",
        api.EmbeddingConnectionListApi.as_view(),
        name="knowledge-embedding-connections",
    ),
    path(
        "knowledge-embedding-connections/<slug:name>",
        api.EmbeddingConnectionDetailApi.as_view(),
        name="knowledge-embedding-connection",
    ),
    path("agents/<slug:slug>/knowledge", api.AgentKnowledgeApi.as_view(), name="agent-knowledge"),
]
