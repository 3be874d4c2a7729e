"""A document's text cut into passages retrieval can return on their own.

About ``TARGET_WORDS`` words each (all-MiniLM-L6-v2 reads 256 tokens; 120 English words
are about 160), cut at paragraph ends where it can and else at sentence ends, with the
last sentence of a passage repeated at the start of the next, so an answer that spans
the cut is still found whole in one of them.
"""

from __future__ import annotations

import re

TARGET_WORDS = 120
MAX_WORDS = 180
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _pieces(text: str) -> list[str]:
    """Paragraphs, and the sentences of a paragraph too long to keep whole."""
    pieces: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = " ".join(paragraph.split())
        if not paragraph:
            continue
        if len(paragraph.split()) <= MAX_WORDS:
            pieces.append(paragraph)
            continue
        for sentence in _SENTENCE_END.split(paragraph):
            words = sentence.split()
            for start in range(0, len(words), MAX_WORDS):  # a "sentence" without an end
                pieces.append(" ".join(words[start : start + MAX_WORDS]))
    return pieces


def chunk_text(text: str) -> list[str]:
    chunks: list[str] = []
    current: list[str] = []
    words = 0
    for piece in _pieces(text):
        size = len(piece.split())
        if current and words + size > TARGET_WORDS:
            chunks.append(" ".join(current))
            tail = _SENTENCE_END.split(current[-1])[-1]
            overlap = len(tail.split())
            current, words = ([tail], overlap) if overlap + size <= MAX_WORDS else ([], 0)
        current.append(piece)
        words += size
    if current:
        chunks.append(" ".join(current))
    return chunks
