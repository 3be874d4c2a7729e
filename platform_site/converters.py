"""URL converters. ``id``: a database id, at most 18 digits, so a huge number in a URL is an
unknown route (a 404) instead of an integer the database cannot hold (a 500 on SQLite)."""

from __future__ import annotations

from django.urls import register_converter


class IdConverter:
    regex = "[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(IdConverter, "id")
