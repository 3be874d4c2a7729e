"""Turn LLM markdown into text a TTS engine can speak.

`clean_for_speech` is applied to each sentence or chunk before it is sent to TTS, so it is
stateless: markup that a chunk boundary cuts in half (an unclosed ``` fence, a `**` whose
partner is in the next chunk) is handled as well as one chunk allows. The chunker should
avoid splitting inside fenced code.

Rules run in this order, because each one relies on the previous having run:

1. drop code blocks (fenced, then indented) while line structure still exists;
2. strip line markup (rules, headers, quotes, bullets, numbers), then join the lines;
3. shelve inline code, so no later rule rewrites identifiers or snippets;
4. links, images and bare URLs, before emphasis (underscores are common in URLs);
5. emphasis markers;
6. shelve times, dates and version strings, which must be read exactly as written;
7. numbers, most specific first: "#", phone numbers, currency, percent, degrees, units,
   ordinals, then plain numbers;
8. symbols (`&`, `+`, arrows, comparisons, bullets, dashes; emoji are dropped), after
   numbers so "-5" is already "minus five";
9. tidy whitespace and punctuation, then put shelved spans back.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

# Shelved spans are swapped for single private-use characters: they are not word characters,
# digits or spaces, so no rule matches them, and nobody can speak them anyway.
_SHELF_BASE = 0xE000
_SHELF_SIZE = 0x1900
_SHELF_MARKER = re.compile("[\ue000-\uf8ff]")


class _Shelf:
    """Spans that later rules must not touch, each replaced by one placeholder character."""

    def __init__(self) -> None:
        self._spans: list[str] = []

    def put(self, span: str) -> str:
        if len(self._spans) >= _SHELF_SIZE:
            return span
        self._spans.append(span)
        return chr(_SHELF_BASE + len(self._spans) - 1)

    def restore(self, text: str) -> str:
        return _SHELF_MARKER.sub(lambda m: self._spans[ord(m[0]) - _SHELF_BASE], text)


# --- numbers to words -------------------------------------------------------------------------

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = ((10**12, "trillion"), (10**9, "billion"), (10**6, "million"), (10**3, "thousand"))
_IRREGULAR_ORDINALS = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}
# Past this, a number is an identifier (an account, a card) rather than a quantity.
_MAX_SPOKEN_DIGITS = 15


def _below_thousand(number: int) -> str:
    hundreds, rest = divmod(number, 100)
    words = [f"{_ONES[hundreds]} hundred"] if hundreds else []
    if rest >= 20:
        tens, ones = divmod(rest, 10)
        words.append(_TENS[tens] + (f"-{_ONES[ones]}" if ones else ""))
    elif rest:
        words.append(_ONES[rest])
    return " ".join(words)


def cardinal_words(number: int) -> str:
    """`2024` -> "two thousand twenty-four" (American style, no "and")."""
    if number < 0:
        return f"minus {cardinal_words(-number)}"
    if number == 0:
        return "zero"
    if number >= 10**_MAX_SPOKEN_DIGITS:
        return digit_words(str(number))
    words = []
    for scale, name in _SCALES:
        count, number = divmod(number, scale)
        if count:
            words.append(f"{_below_thousand(count)} {name}")
    if number:
        words.append(_below_thousand(number))
    return " ".join(words)


def ordinal_words(number: int) -> str:
    """`21` -> "twenty-first"."""
    head, space, last_word = cardinal_words(number).rpartition(" ")
    stem, hyphen, last = last_word.rpartition("-")
    if last in _IRREGULAR_ORDINALS:
        last = _IRREGULAR_ORDINALS[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return f"{head}{space}{stem}{hyphen}{last}"


def digit_words(digits: str) -> str:
    """`"0451"` -> "zero four five one"."""
    return " ".join(_ONES[int(digit)] for digit in digits)


def number_words(token: str) -> str:
    """Speak a numeric token as written in text, e.g. `-1,234.5`."""
    sign = "minus " if token[0] in "-−" else ""
    whole, _, fraction = token.lstrip("-−").replace(",", "").partition(".")
    # A leading zero ("007", a zip code) means the digits are a label, not a quantity.
    if len(whole) > 1 and whole.startswith("0"):
        words = digit_words(whole)
    else:
        words = cardinal_words(int(whole))
    if fraction:
        words += f" point {digit_words(fraction)}"
    return sign + words


def _is_one(token: str) -> bool:
    return token.lstrip("-−") == "1"


# --- 1. code blocks ---------------------------------------------------------------------------

# An unclosed fence runs to the end of the chunk: it is code still being streamed.
_FENCED_CODE = re.compile(r"(?P<fence>`{3,}|~{3,}).*?(?:(?P=fence)|\Z)", re.DOTALL)
_INDENTED_LINE = re.compile(r"(?: {4}|\t)\s*\S")
_LIST_ITEM = re.compile(r"\s*(?:[-*+]|\d{1,3}[.)])\s")


def _drop_code_blocks(text: str) -> str:
    """Fenced blocks, and indented ones: lines of four spaces or a tab that open the text
    (the sentence splitter gives an indented block out whole, indentation kept) or follow a
    blank line or a line of prose ("Here is the code:" then the code, as models write it).
    An indented list item is a nested list; an indented line after a list item is that
    item going on: neither is code."""
    text = _FENCED_CODE.sub("\n", text)
    kept: list[str] = []
    in_code, after_blank, in_list = False, True, False
    for line in text.split("\n"):
        blank = not line.strip()
        indented = bool(_INDENTED_LINE.match(line))
        if in_code and (blank or indented):
            continue
        listed = bool(_LIST_ITEM.match(line))
        in_code = indented and not listed and (after_blank or not in_list)
        if not in_code:
            kept.append(line)
        if not blank:
            in_list = listed or (in_list and indented)
        after_blank = blank
    return "\n".join(kept)


# --- 2. line markup ---------------------------------------------------------------------------

_LINE_MARKUP = (
    re.compile(r"^[ \t]*([-*_])(?:[ \t]*\1){2,}[ \t]*$", re.MULTILINE),  # horizontal rule
    re.compile(r"^[ \t]*(?:>[ \t]?)+", re.MULTILINE),  # blockquote, possibly nested
    re.compile(r"^[ \t]{0,3}#{1,6}(?:[ \t]+|$)", re.MULTILINE),  # header
    re.compile(r"^[ \t]*[-*+][ \t]+", re.MULTILINE),  # bullet
    re.compile(r"^[ \t]*\d{1,3}[.)][ \t]+", re.MULTILINE),  # numbered item
)
_WHITESPACE = re.compile(r"\s+")


def _strip_line_markup(text: str) -> str:
    # Rules go before bullets: "* * *" would otherwise lose its first star as a bullet.
    for pattern in _LINE_MARKUP:
        text = pattern.sub("", text)
    return _WHITESPACE.sub(" ", text)


# --- 3. inline code ---------------------------------------------------------------------------

_INLINE_CODE = re.compile(r"(?P<ticks>`+)(?P<code>.+?)(?P=ticks)")

# --- 4. links ---------------------------------------------------------------------------------

_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[(?P<text>[^\]]*)\]\([^)]*\)")
# The last character may not be punctuation, so "see https://x.org." keeps its full stop.
_BARE_URL = re.compile(r"<?(?:https?://|www\.)[^\s<>\"'`]*[^\s<>\"'`.,;:!?)\]]>?")


def _strip_links(text: str) -> str:
    text = _IMAGE.sub("", text)
    text = _LINK.sub(r"\g<text>", text)
    return _BARE_URL.sub("", text)


# --- 5. emphasis ------------------------------------------------------------------------------

_EMPHASIS = (
    re.compile(r"\*\*(?=\S)(?P<text>.+?)(?<=\S)\*\*"),
    re.compile(r"(?<!\w)__(?=\S)(?P<text>.+?)(?<=\S)__(?!\w)"),
    re.compile(r"(?<![\w*])\*(?=[^\s*])(?P<text>.+?)(?<=[^\s*])\*(?![\w*])"),
    # Underscores inside a word (snake_case_names, file_name.py) are not emphasis.
    re.compile(r"(?<!\w)_(?=\S)(?P<text>.+?)(?<=\S)_(?!\w)"),
)
# Markers whose partner fell in another chunk: touching a word on one side only, so "2**10"
# and "a * b" survive.
_STRAY_EMPHASIS = re.compile(
    r"(?<!\S)(?:\*+|__)(?=[^\s*])|(?<=[^\s*])(?:\*+|__)(?!\S)",
)


def _strip_emphasis(text: str) -> str:
    for pattern in _EMPHASIS:
        text = pattern.sub(r"\g<text>", text)
    return _STRAY_EMPHASIS.sub("", text)


# --- 6. spans read as written -----------------------------------------------------------------

_VERBATIM = re.compile(
    r"(?<![\d:])\d{1,2}:\d{2}(?::\d{2})?(?![\d:])"  # 3:30, 14:05:09
    r"|(?<![\w-])\d{4}-\d{2}-\d{2}(?![\w-])"  # 2024-05-01
    r"|(?<![\w.])(?:[vV]\d+(?:\.\d+)+|\d+(?:\.\d+){2,})(?!\.?\w)"  # v1.2, 1.2.3, 10.0.0.1
)

# --- 7. numbers -------------------------------------------------------------------------------

# A minus sign counts only where it cannot be a hyphen ("10-5", "COVID-19").
_SIGNED = r"(?P<number>(?:(?<![\w.\-−])[-−])?(?<![\w.])(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?)"

_PHONE = re.compile(r"(?<![\w-])(?:\((\d{3})\)\s?|(\d{3})-)(\d{3})-(\d{4})(?![\w-])")


def _speak_phone(match: re.Match[str]) -> str:
    groups = [group for group in match.groups() if group]
    return ", ".join(digit_words(group) for group in groups)


class _Currency(NamedTuple):
    one: str
    many: str
    minor_one: str | None = None
    minor_many: str | None = None


_CURRENCIES = {
    "$": _Currency("dollar", "dollars", "cent", "cents"),
    "£": _Currency("pound", "pounds", "penny", "pence"),
    "€": _Currency("euro", "euros", "cent", "cents"),
    "¥": _Currency("yen", "yen"),
}
_CURRENCY = re.compile(
    r"(?P<sign>(?<![\w.])[-−])?(?P<symbol>[$£€¥])(?P<whole>\d{1,3}(?:,\d{3})+(?!\d)|\d+)"
    r"(?:\.(?P<fraction>\d+))?(?:\s(?P<scale>thousand|million|billion|trillion)\b)?(?!\.?\w)"
)


def _count(amount: int, one: str, many: str) -> str:
    return f"{cardinal_words(amount)} {one if amount == 1 else many}"


def _speak_currency(match: re.Match[str]) -> str:
    currency = _CURRENCIES[match["symbol"]]
    sign = "minus " if match["sign"] else ""
    fraction = match["fraction"] or ""
    if match["scale"] or len(fraction) > 2 or (fraction and currency.minor_many is None):
        amount = number_words(f"{match['whole']}.{fraction}" if fraction else match["whole"])
        scale = f" {match['scale']}" if match["scale"] else ""
        return f"{sign}{amount}{scale} {currency.many}"
    whole = int(match["whole"].replace(",", ""))
    minor = int(fraction.ljust(2, "0")) if fraction else 0
    parts = []
    if whole or not minor:
        parts.append(_count(whole, currency.one, currency.many))
    if minor and currency.minor_one and currency.minor_many:
        parts.append(_count(minor, currency.minor_one, currency.minor_many))
    return sign + " and ".join(parts)


_PERCENT = re.compile(_SIGNED + r"\s?%")
_DEGREES = re.compile(_SIGNED + r"\s?°\s?(?P<scale>[FC])?(?![A-Za-z])")
_DEGREE_SCALES = {"F": " Fahrenheit", "C": " Celsius", None: ""}


def _speak_degrees(match: re.Match[str]) -> str:
    unit = "degree" if _is_one(match["number"]) else "degrees"
    return f"{number_words(match['number'])} {unit}{_DEGREE_SCALES[match['scale']]}"


_UNITS = {
    "Hz": ("hertz", "hertz"),
    "kHz": ("kilohertz", "kilohertz"),
    "MHz": ("megahertz", "megahertz"),
    "GHz": ("gigahertz", "gigahertz"),
    "KB": ("kilobyte", "kilobytes"),
    "kB": ("kilobyte", "kilobytes"),
    "MB": ("megabyte", "megabytes"),
    "GB": ("gigabyte", "gigabytes"),
    "TB": ("terabyte", "terabytes"),
    "kb": ("kilobit", "kilobits"),
    "Mb": ("megabit", "megabits"),
    "Gb": ("gigabit", "gigabits"),
    "ms": ("millisecond", "milliseconds"),
}
_UNIT = re.compile(_SIGNED + r"\s?(?P<unit>" + "|".join(_UNITS) + r")(?![A-Za-z])")


def _speak_unit(match: re.Match[str]) -> str:
    one, many = _UNITS[match["unit"]]
    return f"{number_words(match['number'])} {one if _is_one(match['number']) else many}"


_ORDINAL = re.compile(r"(?<![\w.])(?P<number>\d{1,3}(?:,\d{3})+|\d+)(?:st|nd|rd|th)\b")
_NUMBER = re.compile(_SIGNED + r"(?!\.?\w)")

_NUMBER_SIGN = re.compile(r"(?<![\w&])#(?=\d)")  # "#4521"; "&#39;" is an HTML entity

_NUMBER_RULES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (_NUMBER_SIGN, lambda m: "number "),
    (_PHONE, _speak_phone),
    (_CURRENCY, _speak_currency),
    (_PERCENT, lambda m: f"{number_words(m['number'])} percent"),
    (_DEGREES, _speak_degrees),
    (_UNIT, _speak_unit),
    (_ORDINAL, lambda m: ordinal_words(int(m["number"].replace(",", "")))),
    (_NUMBER, lambda m: number_words(m["number"])),
)


def _speak_numbers(text: str) -> str:
    for pattern, speak in _NUMBER_RULES:
        text = pattern.sub(speak, text)
    return text


# --- 8. symbols -------------------------------------------------------------------------------

# A speech engine reads a symbol it does not know by its Unicode name ("rightwards arrow"),
# so each one becomes the words a person would say. Comparison signs count only between
# spaces or next to a number: "<b>" and "a->b" in a path are not maths.
_SPACED = r"(?:(?<=\s)|(?<=\d)|^)\s*{}\s*(?=\s|[\d−-]|$)"
_PICTOGRAPHS = (
    "[\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\u2190-\u21ff\u2300-\u23ff"
    "\u25a0-\u25ff\ufe0f\u200d]"
)
_SYMBOLS = (
    (re.compile(r"\s*&\s*"), " and "),
    (re.compile(r"(?<=[\w)])\s*\+\s*(?=[\w(])"), " plus "),  # "C++" keeps its pluses
    (re.compile(r"\s*(?:[→⟶➔➜➝➞⇒⟹⇨]|(?<=\s)(?:-+|=)>(?=\s))\s*"), " to "),
    (re.compile(r"\s*(?:[←⟵⇐]|(?<=\s)<-+(?=\s))\s*"), " from "),
    (re.compile(r"\s*[↔⇔⟷]\s*"), " and "),
    (re.compile(r"\s*[↑⬆]\s*"), " up "),
    (re.compile(r"\s*[↓⬇]\s*"), " down "),
    (re.compile(r"\s*[≈≃]\s*|(?<![^\s(])~\s?(?=\w)"), " about "),
    (re.compile(r"\s*≠\s*|" + _SPACED.format("!==?")), " is not "),
    (re.compile(r"\s*≤\s*|" + _SPACED.format("<=")), " at most "),
    (re.compile(r"\s*≥\s*|" + _SPACED.format(">=")), " at least "),
    (re.compile(_SPACED.format("<")), " less than "),
    (re.compile(_SPACED.format(">")), " more than "),
    (re.compile(_SPACED.format("={1,3}")), " equals "),
    (re.compile(r"(?<=\w)\s*×\s*(?=\w)|(?<=\w)\s+\*\s+(?=\w)"), " times "),
    (re.compile(r"\s*÷\s*"), " divided by "),
    (re.compile(r"\s*±\s*"), " plus or minus "),
    (re.compile(r"\s*§\s*"), " section "),
    (re.compile(r"\s*©\s*"), " copyright "),
    (re.compile(r"[®™℠]"), ""),
    (re.compile(r"\s*[•·▪●◦‣∙|]\s*"), ", "),
    (re.compile(r"\s*[—–]\s*|\s+--?\s+"), ", "),
    (re.compile(_PICTOGRAPHS), ""),  # emoji, check marks, stars: nothing to say
)


def _speak_symbols(text: str) -> str:
    for pattern, spoken in _SYMBOLS:
        text = pattern.sub(spoken, text)
    return text


# --- 9. tidy ----------------------------------------------------------------------------------

_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+(?=[,.;:!?])")
# A dash next to other punctuation, or a removed URL, leaves ",." or ",,".
_REDUNDANT_COMMA = re.compile(r",(?=[,.;:!?])")
_LEADING_PUNCTUATION = re.compile(r"^[\s,;]+")


def _tidy(text: str) -> str:
    text = _WHITESPACE.sub(" ", text.replace("`", ""))
    text = _SPACE_BEFORE_PUNCTUATION.sub("", text)
    text = _REDUNDANT_COMMA.sub("", text)
    return _LEADING_PUNCTUATION.sub("", text).strip()


def clean_for_speech(text: str) -> str:
    """Return what a TTS engine should say for a chunk of LLM markdown."""
    text = _SHELF_MARKER.sub("", text)
    text = _strip_line_markup(_drop_code_blocks(text))
    shelf = _Shelf()
    text = _INLINE_CODE.sub(lambda m: shelf.put(m["code"].strip()), text)
    text = _strip_emphasis(_strip_links(text))
    text = _VERBATIM.sub(lambda m: shelf.put(m[0]), text)
    text = _speak_symbols(_speak_numbers(text))
    return shelf.restore(_tidy(text)).strip()
