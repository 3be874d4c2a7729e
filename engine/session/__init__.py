"""VoiceSession: one realtime conversation, plain asyncio, providers injected.

The consumer decodes frames and calls ``handle`` / ``push_audio``; the session answers
through ``emit`` (typed events: ``protocol.Stamped``, with their ``seq`` and ``ts``) and
``send_audio`` (PCM16 at ``tts_sample_rate``). Each assistant turn is one task that an interruption
cancels; server tools run shielded so a finished tool keeps its result in history.

History is OpenAI chat format. When a turn is interrupted, the assistant message keeps
only what the user heard (the sentences handed to TTS, narrowed by ``playedMs`` when
known) followed by ``INTERRUPTED_MARK``.

``VoiceSession`` (``session``: the consumer's entry points, the shared history,
variables and seq, and how events go out) owns its parts as collaborators, each given only
what it needs (the config, a provider, the usage meter, and callables to emit, report
errors, spawn tasks and read the clock) rather than the whole session:
``speech.SpeechOutput`` (speech out, what the user heard), ``speech_in.SpeechInput`` (the
recogniser, barge-in), ``tools.ToolCalls`` (tool calls), ``turns.Turns`` (the turn
lifecycle, interruption; it holds the current turn, and the reply started ahead at a likely
end of turn, held back until the turn ends: preemptive generation) and
``resumable.Relocation`` (snapshot and restore, settling before a handover). ``state`` has
the turn's dataclasses, ``config`` what a session is given.
"""

from __future__ import annotations

from engine.session.config import (
    DEFAULT_EMPTY_REPLY,
    Mode,
    SessionConfig,
    ToolDefinition,
    TurnMetrics,
    render_template,
)
from engine.session.session import VoiceSession
from engine.session.speech import INTERRUPTED_MARK
from engine.session.tools import SERVER_TOOL_GRACE_S
from engine.session.turns import TOOLS_EXHAUSTED_NOTE

__all__ = [
    "DEFAULT_EMPTY_REPLY",
    "INTERRUPTED_MARK",
    "SERVER_TOOL_GRACE_S",
    "TOOLS_EXHAUSTED_NOTE",
    "Mode",
    "SessionConfig",
    "ToolDefinition",
    "TurnMetrics",
    "VoiceSession",
    "render_template",
]
