"""The one scrubber for every text that reaches a page or a record: it knows every
credential a session uses (the workspace's own LLM and speech keys, the platform's provider
keys, the workspace's secrets) and masks each in every spelling a provider may echo back.

The spellings and the single pass over the text are the sandbox's own
(``egress.secret_refs``: as is, percent- and form-encoded, JSON-escaped, base64 at any
offset, hex, reversed, one Aho-Corasick automaton for all). On top, a key a provider half
masked itself (OpenAI's ``sk-ab************wxyz``) loses what it kept. Plain Python: the
session (no ORM) holds one; ``session_setup`` gives it the credentials.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from egress.secret_refs import Scanner, SecretBinding

KEY_MASK = "[key]"
# A token with a run of asterisks in it: a credential the provider masked only in part.
_HALF_MASKED = re.compile(r"[A-Za-z0-9_\-.]*\*{4,}[A-Za-z0-9_\-]*")


@dataclass(frozen=True)
class Credential:
    value: str
    mask: str = KEY_MASK  # what the text says in its place ("[secret NAME]" for a secret)


class Scrubber:
    def __init__(self, credentials: Iterable[Credential] = ()) -> None:
        self._bindings = [
            SecretBinding(name=c.mask, value=c.value, allowed_hosts=(), reference="")
            for c in credentials
            if c.value and c.value.strip()
        ]
        self._scanner: Scanner | None = None

    def __call__(self, text: str) -> str:
        if not text:
            return text
        if self._scanner is None:  # built on first use: most sessions never need it
            self._scanner = Scanner(self._bindings)
        masked = self._scanner.mask(text, lambda binding: binding.name)
        return _HALF_MASKED.sub(KEY_MASK, masked)

    def with_credentials(self, credentials: Iterable[Credential]) -> Scrubber:
        """This scrubber, knowing ``credentials`` too."""
        known = [Credential(b.value, b.name) for b in self._bindings]
        return Scrubber([*known, *credentials])
