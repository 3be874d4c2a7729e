"""Secrets as handler code holds them (references) and as the wire carries them (values).

Handler code gets an opaque reference per secret, not its value. The egress proxy puts
the value in place of the reference only in a request to one of the secret's allowed
hosts, in the spelling that place needs: percent-encoded in a URL, JSON-escaped in a JSON
body, form-encoded in a form body, as is in a header, and inside a Basic credential
(``Authorization: Basic base64(user:reference)``, which ``ctx.basicAuth`` writes) decoded,
expanded and encoded again. Everything else about references is structural: code that
never held a value cannot leak it.

Values are also looked for, as a second line: in requests to other hosts (for secrets
that owners marked readable by code) and in everything that comes back (responses,
results, logs), in every spelling the proxy applies or a server echoes back: as is,
percent- and form-encoded, JSON-escaped, base64 (at any offset, either alphabet), hex,
reversed.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from secrets import token_hex
from urllib.parse import quote, quote_plus

import ahocorasick_rs

# Shorter values would match ordinary text.
MIN_SCANNED_SECRET_LENGTH = 4
_BASE64_TOKEN = re.compile(r"^(?:([A-Za-z][A-Za-z0-9._~+/-]*) +)?([A-Za-z0-9+/_-]{8,}={0,2})\Z")
_URLSAFE = str.maketrans("+/", "-_")


@dataclass(frozen=True)
class SecretBinding:
    """One workspace secret as a handler call may use it."""

    name: str
    value: str
    allowed_hosts: tuple[str, ...]
    reference: str  # what handler code holds instead of the value
    readable_by_code: bool = False


def make_reference(name: str) -> str:
    """An unguessable stand-in for a secret's value, new for every call. Letters, digits
    and ``_`` only, so it survives encodeURIComponent, JSON and form encoding unchanged."""
    return f"secret_ref_{name}_{token_hex(16)}"


def _base64_runs(data: bytes) -> set[str]:
    """The base64 characters that encode ``data`` wherever it sits in a longer text: for
    each of the three alignments, the characters made only of ``data``'s own bits."""
    runs = set()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data).decode("ascii")
        first = -(-8 * offset // 6)
        last = 8 * (offset + len(data)) // 6
        run = encoded[first:last]
        if len(run) >= MIN_SCANNED_SECRET_LENGTH:
            runs.update({run, run.translate(_URLSAFE)})
    return runs


@lru_cache(maxsize=1024)
def spellings(value: str) -> frozenset[str]:
    """Every way the proxy writes ``value`` or a server may echo it back."""
    percent = quote(value, safe="")
    in_path = quote(value)  # "/" kept, as a URL path carries it (and a server echoes it)
    texts = {
        value,
        value.lower(),  # as a host name carries it
        percent,
        _lower_escapes(percent),
        in_path,
        _lower_escapes(in_path),
        quote_plus(value),
        _lower_escapes(quote_plus(value)),
        json.dumps(value)[1:-1],
        _upper_escapes(json.dumps(value)[1:-1]),
        json.dumps(value, ensure_ascii=False)[1:-1],
    }
    found = set(texts)
    for text in texts:
        found |= _base64_runs(text.encode("utf-8"))
    hexed = value.encode("utf-8").hex()
    found |= {hexed, hexed.upper(), value[::-1]}
    return frozenset(form for form in found if len(form) >= MIN_SCANNED_SECRET_LENGTH)


def _upper_escapes(text: str) -> str:
    """``\\u00e9`` spelled ``\\u00E9``, as some JSON encoders write it."""
    return re.sub(r"\\u[0-9a-f]{4}", lambda m: "\\u" + m[0][2:].upper(), text)


def _lower_escapes(text: str) -> str:
    """``%2F`` spelled ``%2f``, as some servers echo it."""
    return re.sub(r"%[0-9A-F]{2}", lambda m: m[0].lower(), text)


def _scanned(secrets: Iterable[SecretBinding]) -> list[SecretBinding]:
    return [s for s in secrets if len(s.value) >= MIN_SCANNED_SECRET_LENGTH]


@lru_cache(maxsize=64)
def _automaton(values: tuple[str, ...]) -> tuple[ahocorasick_rs.BytesAhoCorasick, list[int]]:
    """One Aho-Corasick automaton for every spelling of every value: a text is scanned
    once, in linear time, however many secrets a workspace has (a handler's 1 MB body
    must not cost its parent a second of CPU per secret)."""
    patterns: list[bytes] = []
    owners: list[int] = []
    for index, value in enumerate(values):
        for form in sorted(spellings(value)):
            patterns.append(form.encode("utf-8"))
            owners.append(index)
    leftmost_longest = ahocorasick_rs.MatchKind.LeftmostLongest
    return ahocorasick_rs.BytesAhoCorasick(patterns, matchkind=leftmost_longest), owners


class Scanner:
    """Finds and masks the values of a set of secrets in any spelling."""

    def __init__(self, secrets: Sequence[SecretBinding]) -> None:
        self.secrets = _scanned(secrets)
        values = tuple(binding.value for binding in self.secrets)
        self._automaton: ahocorasick_rs.BytesAhoCorasick | None
        self._owners: list[int]
        self._automaton, self._owners = _automaton(values) if values else (None, [])

    def _matches(self, data: bytes) -> list[tuple[int, int, int]]:
        if self._automaton is None or not data:
            return []
        return self._automaton.find_matches_as_indexes(data)

    def found(self, texts: Iterable[str | bytes]) -> list[SecretBinding]:
        """The secrets whose value any of ``texts`` spells."""
        hits: set[int] = set()
        for text in texts:
            data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
            hits.update(self._owners[pattern] for pattern, _, _ in self._matches(data))
        return [self.secrets[index] for index in sorted(hits)]

    def mask_bytes(self, data: bytes, mask: Callable[[SecretBinding], str]) -> bytes:
        matches = self._matches(data)
        if not matches:
            return data
        out, last = [], 0
        for pattern, start, end in matches:
            out += [data[last:start], mask(self.secrets[self._owners[pattern]]).encode("utf-8")]
            last = end
        out.append(data[last:])
        return b"".join(out)

    def mask(self, text: str, mask: Callable[[SecretBinding], str]) -> str:
        data = text.encode("utf-8", "surrogatepass")
        return self.mask_bytes(data, mask).decode("utf-8", "surrogatepass")


def mask_values(
    text: str, secrets: Sequence[SecretBinding], mask: Callable[[SecretBinding], str]
) -> str:
    return Scanner(secrets).mask(text, mask)


def mask_secret_values(text: str, secrets: Sequence[SecretBinding]) -> str:
    """Every spelling of every secret value (and its reference) becomes ``[secret NAME]``."""
    text = mask_values(text, secrets, lambda binding: f"[secret {binding.name}]")
    for binding in secrets:
        text = text.replace(binding.reference, f"[secret {binding.name}]")
    return text


def carries_value(texts: Iterable[str], binding: SecretBinding) -> bool:
    """Whether any of ``texts`` spells this secret's value."""
    return bool(Scanner([binding]).found(texts))


# --- expansion: references become values, in the spelling each place needs -----------


def references_in(text: str, secrets: Sequence[SecretBinding]) -> list[SecretBinding]:
    return [binding for binding in secrets if binding.reference in text]


def _substituter(
    used: Sequence[SecretBinding], encode: Callable[[str], str]
) -> Callable[[str], str]:
    values = {binding.reference: encode(binding.value) for binding in used}
    pattern = re.compile("|".join(map(re.escape, values)))
    return lambda text: pattern.sub(lambda m: values[m[0]], text)


def expand_in_url(url: str, used: Sequence[SecretBinding]) -> str:
    """Percent-encoded, so a value can never add a "/", "@" or "#" that moves the URL."""
    return _substituter(used, lambda value: quote(value, safe=""))(url) if used else url


def decoded_credential(value: str) -> tuple[str, str] | None:
    """``(scheme, decoded text)`` of a header value such as ``Basic dXNlcjpwdw==``."""
    found = _BASE64_TOKEN.match(value.strip())
    if found is None:
        return None
    token = found[2]
    try:
        standard = token.translate(str.maketrans("-_", "+/"))
        decoded = base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
        return found[1] or "", decoded.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def header_texts(value: str) -> list[str]:
    """A header value, and what a base64 credential inside it decodes to."""
    credential = decoded_credential(value)
    return [value] if credential is None else [value, credential[1]]


def expand_in_header(value: str, used: Sequence[SecretBinding]) -> str:
    if not used:
        return value
    credential = decoded_credential(value)
    if credential is not None and references_in(credential[1], used):
        scheme, text = credential
        expanded = _substituter(used, _as_is)(text).encode("utf-8")
        token = base64.b64encode(expanded).decode("ascii")
        return f"{scheme} {token}" if scheme else token
    return _substituter(used, _as_is)(value)


def expand_in_body(body: bytes, content_type: str, used: Sequence[SecretBinding]) -> bytes:
    if not used or not body:
        return body
    kind = content_type.split(";", 1)[0].strip().lower()
    encode: Callable[[str], str] = _as_is
    if kind == "application/json" or kind.endswith("+json"):
        encode = _json_escaped
    elif kind == "application/x-www-form-urlencoded":
        encode = quote_plus
    replacements = {b.reference.encode("ascii"): encode(b.value).encode("utf-8") for b in used}
    pattern = re.compile(b"|".join(map(re.escape, replacements)))
    return pattern.sub(lambda m: replacements[m[0]], body)


def _as_is(value: str) -> str:
    return value


def _json_escaped(value: str) -> str:
    return json.dumps(value)[1:-1]
