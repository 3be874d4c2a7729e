"""Traces of sessions: the small interface a host of sessions talks to, and the process's
tracer.

A ``Tracer`` opens a ``SessionTrace`` per session; the trace is shown each event the session
emits (it reads the ``metrics`` event at the end of each turn: the waterfall's stages) and
is ended with the session's close code. The default tracer records nothing;
``engine.tracing.otel`` is the OpenTelemetry one, installed at start when
``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (``configure_from_environment``). A trace never
carries what was said or a tool's arguments: only figures, stage names, provider labels,
tool names and outcomes (the same as the metrics event's waterfall).
"""

from __future__ import annotations

import os
from typing import Protocol

from engine.protocol import Stamped


class SessionTrace(Protocol):
    def observe(self, event: Stamped) -> None:
        """A server event of the session, typed, as emitted. Never raises."""

    def end(self, close_code: int | None, *, moved: bool = False) -> None:
        """The session ended (``moved``: it goes on in another process). Never raises."""


class Tracer(Protocol):
    def session(self, session_id: str, attributes: dict[str, str | int | bool]) -> SessionTrace:
        """A trace for one session, started now."""


class _NoTrace:
    def observe(self, event: Stamped) -> None:
        pass

    def end(self, close_code: int | None, *, moved: bool = False) -> None:
        pass


class NoTracer:
    """Records nothing: the default."""

    def session(self, session_id: str, attributes: dict[str, str | int | bool]) -> SessionTrace:
        return NO_TRACE


NO_TRACE: SessionTrace = _NoTrace()
_tracer: Tracer = NoTracer()


def tracer() -> Tracer:
    return _tracer


def install(chosen: Tracer) -> Tracer:
    """Make ``chosen`` the process's tracer; returns the one it replaces."""
    global _tracer
    previous, _tracer = _tracer, chosen
    return previous


def configure_from_environment() -> None:
    """OpenTelemetry over OTLP/HTTP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or its traces
    variant) is set; the exporter reads the rest of the ``OTEL_*`` variables itself."""
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    ):
        from engine.tracing import otel

        install(otel.OTelTracer(otel.otlp_provider()))
