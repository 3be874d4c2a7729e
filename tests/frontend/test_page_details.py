"""Small things every page shows: an icon (the dashboard's pages link it, the pages that do
not, the admin and the API docs, get it at /favicon.ico, where browsers look: a 404 there
was in every page's console), and how long ago something happened ("just now", never
"0 minutes ago")."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from frontend.templatetags.dashboard_time import ago
from tests.factories import Tenant
from tests.frontend.dashboard.conftest import logged_in, page


def _fetch(client: Client, url: str) -> tuple[int, str, bytes]:
    response = client.get(url, follow=True)
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return response.status_code, response["Content-Type"], body


@pytest.mark.django_db
def test_favicon_ico_is_the_platforms_icon() -> None:
    status, content_type, body = _fetch(Client(), "/favicon.ico")
    assert (status, content_type) == (200, "image/svg+xml")
    assert body.startswith(b"<svg")


@pytest.mark.django_db
def test_dashboard_pages_link_an_icon_that_exists(owner: Tenant) -> None:
    for client, url in [(Client(), "/login/"), (logged_in(owner), page(owner, "agents"))]:
        html = client.get(url).content.decode()
        (icon,) = re.findall(r'<link rel="icon" href="([^"]+)"', html)
        assert _fetch(Client(), icon)[:2] == (200, "image/svg+xml"), url


def test_a_moment_ago_reads_just_now_and_later_in_minutes() -> None:
    now = timezone.now()
    assert ago(now - timedelta(seconds=20)) == "just now"
    assert ago(now - timedelta(minutes=3, seconds=5)) == "3\xa0minutes ago"
    assert ago(None) == ""
