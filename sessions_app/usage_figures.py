"""The figures a session record keeps, in the order every report lists them (API, CSV,
dashboard, webhooks): what the engine meters, then what a door adds that the engine
cannot know (``phone_call_ms``: how long the session was on a phone call)."""

from __future__ import annotations

from engine.session.usage import USAGE_FIELDS

DOOR_FIELDS = ("phone_call_ms",)
RECORD_FIELDS = (*USAGE_FIELDS, *DOOR_FIELDS)
