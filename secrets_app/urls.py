from __future__ import annotations

from django.urls import path

from secrets_app import api

urlpatterns = [
    path("keys", api.KeyListCreateApi.as_view(), name="keys"),
    path("keys/<id:key_id>", api.KeyDetailApi.as_view(), name="key-detail"),
    path("keys/<id:key_id>/roll", api.KeyRollApi.as_view(), name="key-roll"),
    path("keys/<id:key_id>/revoke", api.KeyRevokeApi.as_view(), name="key-revoke"),
    path("audit-events", api.AuditEventListApi.as_view(), name="audit-events"),
    path("secrets", api.SecretListCreateApi.as_view(), name="secrets"),
    path("secrets/<str:name>", api.SecretDetailApi.as_view(), name="secret-detail"),
]
