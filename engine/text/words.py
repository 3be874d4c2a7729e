"""Words as the engine compares them: letters or digits of any script, lowercased; an
apostrophe inside a word keeps it whole ("don't"). Matching ASCII only made a Russian or
Japanese sentence no words at all: two different ones compared equal, such a caller never
barged in, and the offline end of turn read their words as trailing off."""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")


def words_of(text: str) -> list[str]:
    return _WORD.findall(text.lower())
