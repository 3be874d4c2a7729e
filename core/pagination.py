"""Cursor pages for long lists (sessions, the audit log): newest first, stable under inserts.

A cursor that does not decode is a bad request (400 ``invalid``), not a missing page.
"""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions, pagination


class NewestFirst(pagination.CursorPagination):
    ordering = "-created_at"
    page_size = 50

    def decode_cursor(self, request: Any) -> Any:
        try:
            return super().decode_cursor(request)
        except exceptions.NotFound:
            raise exceptions.ValidationError(
                {"cursor": ["not a cursor this API gave out; use `next` or `previous`"]}
            ) from None


class SessionPages(NewestFirst):
    ordering = "-started_at"


class CallPages(NewestFirst):
    ordering = "-started_at"


class AuditPages(NewestFirst):
    page_size = 100
