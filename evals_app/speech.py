"""Spoken turns: a user's line said by the offline voice (Piper) as a microphone would send
it, for the engine's own speech-in path (the offline recogniser, Whisper) to hear; and the
offline engines a voice run gives the session.

English only: the offline voice speaks English, and tiny.en hears it.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError

from engine import protocol
from engine.providers.stt.local.adapter import LocalSTT
from engine.providers.tts.local.adapter import LocalTTS
from engine.session import SessionConfig
from engine.session.state import closing_stream

SPOKEN_TEXT_MAX = 300  # characters of a spoken line (about 20 seconds of speech)
MISSING = (
    "Spoken turns and voice simulations need the offline speech models, and they are not "
    "installed on this server: {why}."
)


class TooLong(Exception):
    """The line's audio is longer than AGENT_TEST_SPOKEN_MAX_S."""


def offline_speech_missing() -> str | None:
    """Why lines cannot be spoken and heard here (what to install); None when they can."""
    why = LocalTTS.missing() or LocalSTT.missing()
    return None if why is None else MISSING.format(why=why)


def offline_speech_required(field: str) -> None:
    """Refuse (400) what needs speech where the offline models are not installed."""
    missing = offline_speech_missing()
    if missing is not None:
        raise ValidationError({field: [missing]})


async def spoken(text: str) -> bytes:
    """``text`` in the offline voice: PCM16 mono at the rate a browser's microphone sends.
    Raises ``TooLong`` for a line past SPOKEN_TEXT_MAX characters, before any of it is
    synthesized (a run's ``spoken: true`` takes typed lines, and a voice simulation the
    simulated user's, of any length), and once the audio passes AGENT_TEST_SPOKEN_MAX_S."""
    if len(text) > SPOKEN_TEXT_MAX:
        raise TooLong
    limit = settings.AGENT_TEST_SPOKEN_MAX_S * protocol.CLIENT_SAMPLE_RATE * 2
    audio = bytearray()
    voice = LocalTTS(sample_rate=protocol.CLIENT_SAMPLE_RATE)
    async with closing_stream(voice.synthesize(text)) as chunks:
        async for chunk in chunks:
            audio += chunk
            if len(audio) > limit:
                raise TooLong
    return bytes(audio)


def listener(config: SessionConfig) -> LocalSTT:
    """The offline recogniser, with the agent's vocabulary hints as a page's session has."""
    return LocalSTT(vocabulary=config.vocabulary)


def agent_voice(config: SessionConfig) -> LocalTTS:
    """What says the agent's replies in a voice simulation: the offline voice."""
    return LocalTTS(sample_rate=config.tts_sample_rate)
