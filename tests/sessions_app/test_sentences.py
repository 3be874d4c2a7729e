from __future__ import annotations

import pytest

from engine.text.sentences import SentenceSplitter, split_sentences

WHOLE_TEXT_CASES = [
    ("Hello there. How are you?", ["Hello there.", "How are you?"]),
    ("Wow! Really? Yes.", ["Wow!", "Really?", "Yes."]),
    ("Well… maybe. Or not", ["Well…", "maybe.", "Or not"]),
    ("Wait... what?! No way", ["Wait...", "what?!", "No way"]),
    ("Pi is 3.14 roughly. Next", ["Pi is 3.14 roughly.", "Next"]),
    ("Use fruit, e.g. apples. Done", ["Use fruit, e.g. apples.", "Done"]),
    ("That is, i.e. the end. Ok", ["That is, i.e. the end.", "Ok"]),
    ("Ask Dr. Smith today. Then rest.", ["Ask Dr. Smith today.", "Then rest."]),
    ("Mr. and Mrs. Jones came.", ["Mr. and Mrs. Jones came."]),
    ("Upgrade to v1.2 now. It works.", ["Upgrade to v1.2 now.", "It works."]),
    (
        "See https://example.com/a.b?c=1 for more. Bye",
        ["See https://example.com/a.b?c=1 for more.", "Bye"],
    ),
    ("Go to example.com. Then log in.", ["Go to example.com.", "Then log in."]),
    ("Read J. R. R. Tolkien. Good", ["Read J. R. R. Tolkien.", "Good"]),
    ('He said "stop." Then left.', ['He said "stop."', "Then left."]),
    ("(It rained.) We stayed in.", ["(It rained.)", "We stayed in."]),
    ("Steps:\n1. Open it.\n2. Close it.", ["Steps:", "1. Open it.", "2. Close it."]),
    ("Line one\nLine two", ["Line one", "Line two"]),
    ("Para one\n\n  Para two", ["Para one", "Para two"]),
    ("It costs $3.50. Cheap.", ["It costs $3.50.", "Cheap."]),
    (
        "Run:\n```\nx = 1. y\nprint(x)\n```\nDone. Ok",
        ["Run:", "```\nx = 1. y\nprint(x)\n```", "Done.", "Ok"],
    ),
    # An indented code block is one piece, its indentation kept (the cleaner drops it).
    ("Code:\n    x = 1\n    y = 2\nDone.", ["Code:", "    x = 1\n    y = 2", "Done."]),
    ("Code:\n\n\tx = 1. y\n\n\tz = 2\n\nOk.", ["Code:", "\tx = 1. y\n\n\tz = 2", "Ok."]),
    ("Code:\n    x = 1", ["Code:", "    x = 1"]),
    ("Nested:\n    - one. Two\n    - three", ["Nested:", "- one.", "Two", "- three"]),
    ("1. First\n    more. Of it\n2. Next", ["1. First", "more.", "Of it", "2. Next"]),
    ("no terminator at all", ["no terminator at all"]),
    ("   ", []),
    ("", []),
]


@pytest.mark.parametrize(("text", "expected"), WHOLE_TEXT_CASES)
def test_whole_text(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


@pytest.mark.parametrize(("text", "expected"), WHOLE_TEXT_CASES)
def test_same_result_one_character_at_a_time(text: str, expected: list[str]) -> None:
    splitter = SentenceSplitter()
    out = [sentence for char in text for sentence in splitter.push(char)]
    assert out + splitter.flush() == expected


STREAMING_CASES = [
    # (deltas, sentences released after each delta, flushed rest)
    (["Hello there.", " How", " are you?"], [[], ["Hello there."], []], ["How are you?"]),
    (["Pi is 3.", "14 exactly. "], [[], ["Pi is 3.14 exactly."]], []),
    (["See v1", ".2 now! ", "Ok"], [[], ["See v1.2 now!"], []], ["Ok"]),
    (["First line\n", "second"], [["First line"], []], ["second"]),
    (["Code ``", "`\na. b\n``", "`\nAfter. "], [[], [], ["Code ```\na. b\n```", "After."]], []),
]


@pytest.mark.parametrize(("deltas", "released", "rest"), STREAMING_CASES)
def test_sentences_are_released_as_soon_as_they_are_certain(
    deltas: list[str], released: list[list[str]], rest: list[str]
) -> None:
    splitter = SentenceSplitter()
    assert [splitter.push(delta) for delta in deltas] == released
    assert splitter.flush() == rest


def test_flush_resets_the_splitter() -> None:
    splitter = SentenceSplitter()
    splitter.push("Unfinished ```code")
    assert splitter.flush() == ["Unfinished ```code"]
    assert splitter.push("New one. And") == ["New one."]
    assert splitter.flush() == ["And"]


# ---------------------------------------------------------------- the first clause alone


def streamed(text: str, **options: int) -> list[str]:
    splitter = SentenceSplitter(**options)
    pieces: list[str] = []
    for char in text:  # one character at a time: the worst an LLM stream can do
        pieces += splitter.push(char)
    return pieces + splitter.flush()


@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        (
            "All right, I will take care of that. Anything else?",
            ["All right,", "I will take care of that.", "Anything else?"],
        ),
        ("Sure, go ahead, please.", ["Sure, go ahead,", "please."]),  # "Sure," is too short
        ("Yes, it is.", ["Yes, it is."]),
        ("It costs 1,000 euros, roughly.", ["It costs 1,000 euros,", "roughly."]),
        ("In short: yes. Then, later, more.", ["In short:", "yes.", "Then, later, more."]),
    ],
)
def test_the_opening_clause_of_a_reply_is_spoken_on_its_own(text: str, pieces: list[str]) -> None:
    assert streamed(text, first_clause_words=2) == pieces
    assert " ".join(pieces) == text


def test_without_the_option_only_whole_sentences_come_out() -> None:
    assert streamed("All right, I will do it. Bye.") == ["All right, I will do it.", "Bye."]
