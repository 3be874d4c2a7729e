"""Logged-in browsers (Django test clients) for the three users of tests/conftest.py."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.factories import Tenant


def logged_in(tenant: Tenant) -> Client:
    client = Client()
    client.force_login(tenant.user)
    return client


@pytest.fixture
def owner_client(owner: Tenant) -> Client:
    return logged_in(owner)


@pytest.fixture
def member_client(member: Tenant) -> Client:
    return logged_in(member)


@pytest.fixture
def outsider_client(outsider: Tenant) -> Client:
    return logged_in(outsider)


def page(tenant: Tenant, name: str, *args: Any) -> str:
    """The URL of a workspace page of ``tenant``'s workspace."""
    return reverse(f"dashboard:{name}", args=[tenant.workspace.pk, *args])
