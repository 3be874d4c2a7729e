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

# Shorter values would match ordinary text.
MIN_SCANNED_SECRET_LENGTH = 4
_BASE64_TOKEN = re.compile(r"^(?:([A-Za-z][A-Za-z0-9._~+/-]*) +)?([A-Za-z0-9+/_-]{8,}={0,2})$")
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


@lru_cache(maxsize=256)
def spellings(value: str) -> frozenset[str]:
    """Every way the proxy writes ``value`` or a server may echo it back."""
    texts = {
        value,
        quote(value, safe=""),
        quote_plus(value),
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
    }
    found = set(texts)
    for text in texts:
        found |= _base64_runs(text.encode("utf-8"))
    found.add(value.encode("utf-8").hex())
    found.add(value[::-1])
    return frozenset(form for form in found if len(form) >= MIN_SCANNED_SECRET_LENGTH)


def _scanned(secrets: Iterable[SecretBinding]) -> list[SecretBinding]:
    return [s for s in secrets if len(s.value) >= MIN_SCANNED_SECRET_LENGTH]


@lru_cache(maxsize=256)
def _pattern(forms: frozenset[str]) -> re.Pattern[str]:
    ordered = sorted(forms, key=len, reverse=True)
    return re.compile("|".join(map(re.escape, ordered)), re.IGNORECASE)


def mask_values(
    text: str, secrets: Sequence[SecretBinding], mask: Callable[[SecretBinding], str]
) -> str:
    for binding in _scanned(secrets):
        literal = mask(binding).replace("\\", r"\\")  # a replacement, not a template
        text = _pattern(spellings(binding.value)).sub(literal, text)
    return text


def mask_secret_values(text: str, secrets: Sequence[SecretBinding]) -> str:
    """Every spelling of every secret value (and its reference) becomes ``[secret NAME]``."""
    text = mask_values(text, secrets, lambda binding: f"[secret {binding.name}]")
    for binding in secrets:
        text = text.replace(binding.reference, f"[secret {binding.name}]")
    return text


def mask_bytes(body: bytes, secrets: Sequence[SecretBinding]) -> bytes:
    """A response body with every spelling of these values turned into their references."""
    for binding in _scanned(secrets):
        forms = sorted(spellings(binding.value), key=len, reverse=True)
        pattern = re.compile(b"|".join(re.escape(f.encode("utf-8")) for f in forms), re.IGNORECASE)
        body = pattern.sub(binding.reference.encode("ascii"), body)
    return body


def carries_value(texts: Iterable[str], binding: SecretBinding) -> bool:
    """Whether any of ``texts`` spells this secret's value."""
    if len(binding.value) < MIN_SCANNED_SECRET_LENGTH:
        return False
    pattern = _pattern(spellings(binding.value))
    return any(pattern.search(text) for text in texts)


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
