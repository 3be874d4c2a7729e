"""What the sessions API asks of live sessions: end one, close the records no process holds.

The sessions run in the ``realtime`` app, a layer above this one; it installs its control
here when the platform starts (``realtime.apps``), so the API reaches live sessions without
importing the app that runs them.
"""

from __future__ import annotations

from typing import Protocol

from secrets_app.audit import SYSTEM, Actor
from secrets_app.models import Workspace
from sessions_app.models import Session


class SessionControl(Protocol):
    def session_end(self, *, session: Session, actor: Actor = SYSTEM) -> Session: ...

    def sessions_sweep(self, *, workspace: Workspace | None = None) -> int: ...


_installed: SessionControl | None = None


def session_control_install(control: SessionControl) -> None:
    global _installed
    _installed = control


def session_control() -> SessionControl:
    if _installed is None:
        raise RuntimeError("no session control: the realtime app installs it at start")
    return _installed
