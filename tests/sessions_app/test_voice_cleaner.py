from __future__ import annotations

import pytest

from engine.text.sentences import SentenceSplitter
from engine.text.voice_cleaner import cardinal_words, clean_for_speech, ordinal_words

RULES = [
    # code blocks
    ("fenced code", "Run this:\n```python\nprint('hi')\n```\nThen wait.", "Run this: Then wait."),
    ("tilde fence", "Before\n~~~\nx = 1\n~~~\nafter", "Before after"),
    ("unclosed fence still streaming", "Here it is:\n```bash\nrm -rf build", "Here it is:"),
    ("indented code", "Example:\n\n    x = 1\n    y = 2\n\nDone.", "Example: Done."),
    ("tab-indented code", "Example:\n\n\tx = 1\n\nDone.", "Example: Done."),
    ("indented list item is not code", "Items:\n\n    - nested", "Items: nested"),
    ("indented code right after prose", "Here:\n    x = 1\n    y = 2\nDone.", "Here: Done."),
    ("an indented block on its own", "    x = 1\n\n    y = 2", ""),
    (
        "a list item going on is not code",
        "1. First\n    more of it\n2. Second",
        "First more of it Second",
    ),
    # inline markup
    ("inline code", "Call `get_user()` now", "Call get_user() now"),
    ("inline code is not rewritten", "Set `__init__` to `3.14`", "Set __init__ to 3.14"),
    ("bold stars", "This is **very** good", "This is very good"),
    ("bold underscores", "This is __very__ good", "This is very good"),
    ("italic star", "This is *quite* good", "This is quite good"),
    ("italic underscore", "This is _quite_ good", "This is quite good"),
    ("snake case kept", "Set max_retry_count now", "Set max_retry_count now"),
    ("file name kept", "Open file_name.py please", "Open file_name.py please"),
    ("bold cut by chunk boundary", "**Note that this is cut.", "Note that this is cut."),
    ("power kept, product read", "2**10 and a * b", "two**ten and a times b"),
    # line markup
    ("header", "## Title", "Title"),
    ("bullet dash", "- apples\n- pears", "apples pears"),
    ("bullet star", "* apples", "apples"),
    ("bullet plus", "+ apples", "apples"),
    ("numbered dot", "1. First step", "First step"),
    ("numbered paren", "2) Second step", "Second step"),
    ("blockquote", "> Quoted text", "Quoted text"),
    ("nested blockquote", "> > Deeper", "Deeper"),
    ("rule dashes", "Above\n---\nBelow", "Above Below"),
    ("rule stars", "Above\n***\nBelow", "Above Below"),
    # links
    ("link", "See [the docs](https://example.com/docs) now", "See the docs now"),
    ("image", "Look ![a cat](https://x.org/cat.png) here", "Look here"),
    ("http url", "Visit https://example.com/a_b?x=1 today", "Visit today"),
    ("url keeps full stop", "Go to https://example.com.", "Go to."),
    ("www url", "Try www.example.org for more", "Try for more"),
    # currency
    ("dollars and cents", "$7.95", "seven dollars and ninety-five cents"),
    ("one dollar", "$1", "one dollar"),
    ("cents only", "$0.50", "fifty cents"),
    ("one cent", "$1.01", "one dollar and one cent"),
    ("pounds", "£3", "three pounds"),
    ("pence", "£3.50", "three pounds and fifty pence"),
    ("euros", "€2.50", "two euros and fifty cents"),
    ("yen", "¥100", "one hundred yen"),
    ("thousands of dollars", "$1,000", "one thousand dollars"),
    ("scaled amount", "$1.5 million", "one point five million dollars"),
    ("negative amount", "-$5", "minus five dollars"),
    # numbers with a meaning
    ("percent", "45%", "forty-five percent"),
    ("phone dashes", "555-123-4567", "five five five, one two three, four five six seven"),
    ("phone parens", "(555) 123-4567", "five five five, one two three, four five six seven"),
    ("ordinal st", "21st", "twenty-first"),
    ("ordinal nd", "2nd", "second"),
    ("ordinal rd", "3rd", "third"),
    ("ordinal th", "4th", "fourth"),
    ("ordinal hundredth", "100th", "one hundredth"),
    ("hertz", "50 Hz", "fifty hertz"),
    ("kilohertz", "16 kHz", "sixteen kilohertz"),
    ("megahertz", "100 MHz", "one hundred megahertz"),
    ("gigahertz", "3 GHz", "three gigahertz"),
    ("kilobytes", "64 KB", "sixty-four kilobytes"),
    ("megabytes no space", "5MB", "five megabytes"),
    ("one gigabyte", "1 GB", "one gigabyte"),
    ("terabytes", "2 TB", "two terabytes"),
    ("milliseconds", "200 ms", "two hundred milliseconds"),
    ("kilobits", "56 kb", "fifty-six kilobits"),
    ("megabits", "10 Mb", "ten megabits"),
    ("gigabits", "1.5 Gb", "one point five gigabits"),
    ("fahrenheit", "72°F", "seventy-two degrees Fahrenheit"),
    ("celsius", "20°C", "twenty degrees Celsius"),
    ("bare degrees", "90°", "ninety degrees"),
    ("below zero", "-5°C", "minus five degrees Celsius"),
    # plain numbers
    ("thousands separator", "1,000", "one thousand"),
    ("millions", "2,500,000 people", "two million five hundred thousand people"),
    ("decimal", "3.14", "three point one four"),
    ("negative", "-5", "minus five"),
    ("year", "2024", "two thousand twenty-four"),
    ("leading zero is a label", "Code 007", "Code zero zero seven"),
    ("hyphen is not minus", "COVID-19", "COVID-nineteen"),
    ("digit inside word kept", "Play the mp3 file", "Play the mp3 file"),
    ("sentence full stop", "I have 3.", "I have three."),
    ("number sign", "Order #12 is ready", "Order number twelve is ready"),
    # read exactly as written
    ("time", "Meet at 3:30 today", "Meet at 3:30 today"),
    ("time with seconds", "At 14:05:09", "At 14:05:09"),
    ("version with v", "Upgrade to v1.2.3 now", "Upgrade to v1.2.3 now"),
    ("bare version", "Python 3.11.4 is out", "Python 3.11.4 is out"),
    ("iso date", "Due 2024-05-01", "Due 2024-05-01"),
    # symbols
    ("ampersand", "Salt & pepper", "Salt and pepper"),
    ("plus between words", "cats+dogs", "cats plus dogs"),
    ("plus between numbers", "2 + 2", "two plus two"),
    ("c plus plus kept", "I like C++", "I like C++"),
    ("em dash", "Wait—really", "Wait, really"),
    ("en dash", "Wait – really", "Wait, really"),
    ("spaced hyphen dash", "Wait - really", "Wait, really"),
    ("dash before full stop", "It ends —.", "It ends."),
    ("arrow", "Paris → London", "Paris to London"),
    ("arrow between steps", "Step 1 → step 2", "Step one to step two"),
    ("ascii arrow", "build -> test => ship", "build to test to ship"),
    ("left arrow", "Go ← back", "Go from back"),
    ("up and down arrows", "Sales ↑, costs ↓", "Sales up, costs down"),
    ("about", "~5 minutes, ≈ 10 km", "about five minutes, about ten km"),
    ("comparisons", "x <= 10 and y ≥ 2", "x at most ten and y at least two"),
    ("not equal", "a != b, c ≠ d", "a is not b, c is not d"),
    ("less and more", "x < 5 or x > 9", "x less than five or x more than nine"),
    ("equals", "x = 5", "x equals five"),
    ("markup is not maths", "<b>bold</b> and a->b", "<b>bold</b> and a->b"),
    ("times", "3 × 4 and 2 * 8", "three times four and two times eight"),
    ("divided and plus-minus", "10 ÷ 2 ± 1", "ten divided by two plus or minus one"),
    (
        "section and marks",
        "Acme™ © 2024, see § 4",
        "Acme copyright two thousand twenty-four, see section four",
    ),
    ("bullets", "one • two · three", "one, two, three"),
    ("check marks and emoji", "✓ Done ✅ Great job 🎉!", "Done Great job!"),
    # whitespace
    ("whitespace", "  Hello \n\n  world\t again  ", "Hello world again"),
    ("empty", "", ""),
]


@pytest.mark.parametrize(
    ("text", "expected"), [row[1:] for row in RULES], ids=[row[0] for row in RULES]
)
def test_rule(text: str, expected: str) -> None:
    assert clean_for_speech(text) == expected


def test_realistic_paragraph() -> None:
    text = (
        "## Your order\n\n"
        "Great news — your order **#4521** shipped on the 3rd! Here's a summary:\n\n"
        "- Total: $7.95 (a 15% discount)\n"
        "- Delivery window: 9:00 to 11:30\n"
        "- Questions? Call (555) 123-4567 or see [our help page](https://help.example.com).\n\n"
        '```json\n{"order": 4521}\n```\n'
        "Your `tracking_id` is in the app_config file & v2.1.0 handles it."
    )
    assert clean_for_speech(text) == (
        "Your order Great news, your order number four thousand five hundred twenty-one shipped on "
        "the third! Here's a summary: Total: seven dollars and ninety-five cents (a fifteen "
        "percent discount) Delivery window: 9:00 to 11:30 Questions? Call five five five, one "
        "two three, four five six seven or see our help page. Your tracking_id is in the "
        "app_config file and v2.1.0 handles it."
    )


def test_placeholder_characters_in_input_are_dropped() -> None:
    assert clean_for_speech("odd \ue000 char and `code`") == "odd char and code"


@pytest.mark.parametrize(
    ("number", "cardinal", "ordinal"),
    [
        (0, "zero", "zeroth"),
        (1, "one", "first"),
        (5, "five", "fifth"),
        (8, "eight", "eighth"),
        (9, "nine", "ninth"),
        (12, "twelve", "twelfth"),
        (13, "thirteen", "thirteenth"),
        (20, "twenty", "twentieth"),
        (42, "forty-two", "forty-second"),
        (101, "one hundred one", "one hundred first"),
        (1_000, "one thousand", "one thousandth"),
        (21_000, "twenty-one thousand", "twenty-one thousandth"),
        (1_000_001, "one million one", "one million first"),
        (
            987_654_321_012,
            "nine hundred eighty-seven billion six hundred fifty-four million "
            "three hundred twenty-one thousand twelve",
            "nine hundred eighty-seven billion six hundred fifty-four million "
            "three hundred twenty-one thousand twelfth",
        ),
        (-3, "minus three", "minus third"),
    ],
)
def test_number_words(number: int, cardinal: str, ordinal: str) -> None:
    assert cardinal_words(number) == cardinal
    assert ordinal_words(number) == ordinal


def test_very_long_numbers_are_read_digit_by_digit() -> None:
    assert clean_for_speech("1234567890123456") == (
        "one two three four five six seven eight nine zero one two three four five six"
    )


@pytest.mark.parametrize(
    "reply",
    [
        "Here is the code:\n    x = 1\n    print(x)\nThat prints one.",
        "Here is the code:\n\n    x = 1\n    print(x)\n\nThat prints one.",
        "Here is the code:\n\tx = 1\n\tprint(x)\nThat prints one.",
    ],
)
def test_indented_code_in_a_streamed_reply_is_not_read_aloud(reply: str) -> None:
    """As a reply is spoken: the LLM's deltas (here one character at a time) through the
    sentence splitter, each piece through the cleaner."""
    splitter = SentenceSplitter(first_clause_words=3)
    pieces = [piece for char in reply for piece in splitter.push(char)] + splitter.flush()
    spoken = " ".join(text for text in map(clean_for_speech, pieces) if text)
    assert spoken == "Here is the code: That prints one."
