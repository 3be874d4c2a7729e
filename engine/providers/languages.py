"""The languages an agent may speak, and what a session does with its choice.

An agent's ``language`` is an ISO 639-1 code from ``NAMES``, ``detect`` (the caller's,
whichever it is) or blank (English, as before languages existed). The session passes it to
the speech providers whose ``Capabilities.languages`` hold it (AssemblyAI's multilingual
streaming model, ElevenLabs' multilingual models, OpenAI's voices), refuses to start with
one that cannot hear or speak it, and tells the LLM which language to answer in.
"""

from __future__ import annotations

DETECT = "detect"
ENGLISH = "en"

# What at least one cloud provider here hears or speaks (docs/languages.md).
NAMES = {
    "en": "English",
    "es": "Spanish",
    "fr": "French",
    "de": "German",
    "it": "Italian",
    "pt": "Portuguese",
    "nl": "Dutch",
    "pl": "Polish",
    "sv": "Swedish",
    "da": "Danish",
    "fi": "Finnish",
    "no": "Norwegian",
    "cs": "Czech",
    "ro": "Romanian",
    "hu": "Hungarian",
    "el": "Greek",
    "tr": "Turkish",
    "ru": "Russian",
    "uk": "Ukrainian",
    "ar": "Arabic",
    "hi": "Hindi",
    "ja": "Japanese",
    "ko": "Korean",
    "zh": "Chinese",
    "id": "Indonesian",
    "vi": "Vietnamese",
}
CHOICES = (DETECT, *NAMES)
# AssemblyAI's multilingual streaming model (its documented six).
ASSEMBLYAI_MULTILINGUAL = ("en", "es", "fr", "de", "it", "pt")
ENGLISH_ONLY = (ENGLISH,)
ANY = tuple(NAMES)


def normalised(language: str | None) -> str:
    """The code a setting names (blank: English); ``ValueError`` for one not listed."""
    code = (language or ENGLISH).strip().lower()
    if code not in CHOICES:
        raise ValueError(f"language must be one of {', '.join(CHOICES)}; got {code[:20]!r}")
    return code


def supports(languages: tuple[str, ...], detects: bool, language: str) -> bool:
    """Whether a provider with these capabilities can serve ``language``."""
    return detects if language == DETECT else language in languages


def llm_instruction(language: str) -> str:
    """What the LLM is told, after the agent's own instructions (English: nothing new)."""
    if language == DETECT:
        return (
            "Answer in the language the caller speaks; if they change language, change with them."
        )
    if language == ENGLISH:
        return ""
    return f"Answer in {NAMES[language]}, whatever language these instructions are in."


def with_instruction(instructions: str, language: str) -> str:
    extra = llm_instruction(language)
    if not extra:
        return instructions
    return f"{instructions.rstrip()}\n\n{extra}" if instructions.strip() else extra
