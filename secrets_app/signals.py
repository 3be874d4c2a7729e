"""Signals other apps listen to, so secrets_app never imports them.

``api_key_disabled``: a key was revoked (``at`` None: now) or will stop working at ``at``
(a roll with a grace period). The realtime app ends the key's live sessions then.
"""

from __future__ import annotations

from django.dispatch import Signal

api_key_disabled = Signal()  # sender=ApiKey, key=ApiKey, at=datetime | None
