from __future__ import annotations

from django.urls import path

from secrets_app import api

urlpatterns = [
    path("keys", api.KeyListCreateApi.as_view(), name="keys"),
    path("keys/<int:key_id>", api.KeyDetailApi.as_view(), name="key-detail"),
    path("keys/<int:key_id>/roll", api.KeyRollApi.as_view(), name="key-roll"),
    path("keys/<int:key_id>/revoke", api.KeyRevokeApi.as_view(), name="key-revoke"),
    path("secrets", api.SecretListCreateApi.as_view(), name="secrets"),
    path("secrets/<str:name>", api.SecretDetailApi.as_view(), name="secret-detail"),
]
