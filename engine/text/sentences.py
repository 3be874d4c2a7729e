"""Streaming sentence splitter: LLM text deltas in, complete sentences out.

TTS starts on the first complete sentence while the LLM is still writing, so a
boundary is declared as soon as it is certain and no sooner. A terminator (``. ! ? …``)
ends a sentence only when whitespace follows it, which keeps "3.14", "v1.2" and URLs
whole; a newline always ends one. Abbreviations ("e.g.", "Dr.") and list numbers
("1. ") do not. Nothing is split inside a ``` fence or an indented code block (lines
of four spaces or a tab, not list items, nor the continuation of one), because the voice
cleaner drops a code block only when it sees all of it, indentation included.

The first clause of a reply may go out alone (``first_clause_words``): "All right, I will
book that for you." is spoken as "All right," then the rest, because a TTS's first byte
grows with the length of what it is given (Piper: about 15 ms a word).
"""

from __future__ import annotations

import re

TERMINATORS = frozenset(".!?…")
CLAUSE_MARKS = frozenset(",;:—")
CLOSERS = frozenset("\"')]}”’»")
FENCE = "```"
_INDENT = re.compile(r"(?: {4}|\t)")
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d{1,3}[.)])[ \t]")
_UNDECIDED = -1  # what follows decides, and it has not arrived yet

# Lower-case, without the final dot. Words that often end a sentence ("etc", "no")
# are left out: merging two sentences costs less than cutting one in half.
ABBREVIATIONS = frozenset(
    {
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "mt",
        "vs",
        "cf",
        "approx",
        "dept",
        "est",
        "fig",
        "inc",
        "ltd",
        "co",
        "corp",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
    }
)
# "e.g", "i.e", "a.m", "U.S": letters joined by dots.
_DOTTED = re.compile(r"^(?:[A-Za-z]\.)+[A-Za-z]\Z")
_WORD_EDGE = re.compile(r"^[\W_]+")


def _is_abbreviation(word: str) -> bool:
    word = _WORD_EDGE.sub("", word)
    if len(word) == 1 and word.isalpha():  # an initial: "J. R. R. Tolkien"
        return True
    return word.lower() in ABBREVIATIONS or bool(_DOTTED.match(word))


class SentenceSplitter:
    """Feed deltas with ``push``; call ``flush`` once the text is complete."""

    def __init__(self, *, first_clause_words: int = 0) -> None:
        """``first_clause_words``: a clause of at least this many words that opens the text
        is a piece of its own (0: whole sentences only)."""
        self._buffer = ""
        self._scan = 0  # buffer[:_scan] holds no boundary
        self._in_fence = False
        self._first_clause_words = first_clause_words
        self._started = False  # a piece was given out
        self._at_line_start = True  # the buffer begins a line (its indentation kept)
        self._line_is_list = False  # the line being given out is (part of) a list item
        self._after_list = False  # the line before it was

    def push(self, text: str) -> list[str]:
        self._buffer += text
        sentences = []
        while (end := self._find_boundary()) is not None:
            piece = self._buffer[:end]
            code = self._code_block_end() is not None
            if self._at_line_start:
                self._line_is_list = bool(_LIST_ITEM.match(piece)) or (
                    self._after_list and bool(_INDENT.match(piece))
                )
            self._rest_after(end, ends_line=piece.endswith("\n"))
            sentence = piece.rstrip() if code else piece.strip()
            if sentence:
                sentences.append(sentence)
                self._started = True
        return sentences

    def flush(self) -> list[str]:
        code = self._code_block_end() is not None
        rest = self._buffer.rstrip() if code else self._buffer.strip()
        self._buffer, self._scan, self._in_fence = "", 0, False
        self._at_line_start, self._after_list = True, False
        return [rest] if rest.strip() else []

    def _rest_after(self, end: int, *, ends_line: bool) -> None:
        """The buffer after a piece: at a new line its indentation is kept (it may open a
        code block); blank lines between are dropped (and end a list)."""
        rest = self._buffer[end:]
        leading = rest[: len(rest) - len(rest.lstrip())]
        if "\n" in leading:
            blank_line = ends_line or leading.count("\n") > 1
            rest = rest[leading.rindex("\n") + 1 :]
            ends_line = True
        else:
            blank_line = False
            if not ends_line:
                rest = rest.lstrip()
        if ends_line:
            self._after_list = self._line_is_list and not blank_line
        self._at_line_start = ends_line
        self._buffer, self._scan = rest, 0

    def _code_block_end(self) -> int | None:
        """Where an indented code block that opens the buffer ends (after its last line's
        newline), ``_UNDECIDED`` while that is not known yet; None: no code block here."""
        buffer = self._buffer
        if not self._at_line_start or self._in_fence or self._after_list:
            return None
        if not _INDENT.match(buffer):
            return _UNDECIDED if buffer and not buffer.strip(" ") and len(buffer) < 4 else None
        head = buffer.lstrip(" \t")
        if not head or (not _LIST_ITEM.match(buffer) and _could_become_list_item(head)):
            return _UNDECIDED
        if _LIST_ITEM.match(buffer):
            return None  # a nested list item, not code
        at = buffer.find("\n")
        while at >= 0:
            line = buffer[at + 1 :]
            head_of_line = line.split("\n", 1)[0]
            if "\n" not in line and not head_of_line.strip() and len(head_of_line) < 4:
                return _UNDECIDED  # blank or indentation still arriving
            if head_of_line.strip() and not _INDENT.match(head_of_line):
                return at + 1  # a line of prose ends the block
            at = buffer.find("\n", at + 1)
        return _UNDECIDED

    def _find_boundary(self) -> int | None:
        code_end = self._code_block_end()
        if code_end is not None:
            return None if code_end == _UNDECIDED else code_end
        buffer, size = self._buffer, len(self._buffer)
        index = self._scan
        while index < size:
            char = buffer[index]
            if char == "`":
                if buffer.startswith(FENCE, index):
                    self._in_fence = not self._in_fence
                    index += len(FENCE)
                    continue
                if buffer[index:] == "`" * (size - index):  # maybe a fence cut in two
                    break
            elif self._in_fence:
                pass
            elif char == "\n":
                self._scan = index + 1
                return index + 1
            elif char in CLAUSE_MARKS and self._opens_with_clause(index):
                if index + 1 == size:  # what follows decides, and it has not arrived yet
                    break
                if buffer[index + 1].isspace():
                    self._scan = index + 1
                    return index + 1
            elif char in TERMINATORS:
                end = self._end_of_terminator(index)
                if end == size:  # what follows decides, and it has not arrived yet
                    break
                if buffer[end].isspace() and not self._continues(index, end):
                    self._scan = end
                    return end
                index = end
                continue
            index += 1
        self._scan = index
        return None

    def _opens_with_clause(self, index: int) -> bool:
        if self._started or not self._first_clause_words:
            return False
        return len(self._buffer[:index].split()) >= self._first_clause_words

    def _end_of_terminator(self, index: int) -> int:
        buffer, size = self._buffer, len(self._buffer)
        end = index + 1
        while end < size and buffer[end] in TERMINATORS:
            end += 1
        while end < size and buffer[end] in CLOSERS:
            end += 1
        return end

    def _continues(self, index: int, end: int) -> bool:
        """A single dot after an abbreviation or a list number is not a sentence end."""
        if self._buffer[index:end].rstrip("".join(CLOSERS)) != ".":
            return False
        head = self._buffer[:index]
        word = head.rsplit(None, 1)[-1] if head.strip() else ""
        if word.isdigit() and head.strip() == word:  # "1. First item"
            return True
        return _is_abbreviation(word)


def _could_become_list_item(head: str) -> bool:
    """``head`` (a line's text so far) may still turn out to be a list marker: "-", "12"."""
    return bool(re.fullmatch(r"[-*+]|\d{1,3}[.)]?", head))


def split_sentences(text: str) -> list[str]:
    """All sentences of a complete text (the streaming splitter fed in one go)."""
    splitter = SentenceSplitter()
    return splitter.push(text) + splitter.flush()
