"""The browser library (``frontend/lib``) as the platform serves it: content-addressed.

Every file is served under ``/lib/<digest>/<name>``, where the digest covers the whole
folder, so relative imports between the files (``./core.js``, the audio worklets) always
meet the same version, and each URL can be cached for a year. ``/client.js`` and
``/react.js`` are short-lived redirects to the current digest.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

LIB_DIR = Path(__file__).resolve().parent / "lib"
FILE_NAME = re.compile(r"^[a-z0-9-]+\.(?:js|d\.ts)\Z")
_CONTENT_TYPES = {".js": "text/javascript; charset=utf-8", ".ts": "text/plain; charset=utf-8"}


@dataclass(frozen=True)
class Library:
    digest: str
    files: dict[str, bytes]

    def content_type(self, name: str) -> str:
        return _CONTENT_TYPES[Path(name).suffix]


_cache: tuple[tuple[tuple[str, int, int], ...], Library] | None = None


def library() -> Library:
    """The current files and their digest; read again only when a file changed."""
    global _cache
    paths = sorted(p for p in LIB_DIR.iterdir() if p.is_file() and FILE_NAME.match(p.name))
    signature = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in paths)
    if _cache is None or _cache[0] != signature:
        files = {p.name: p.read_bytes() for p in paths}
        digest = hashlib.sha256()
        for name, content in files.items():
            digest.update(name.encode() + b"\0" + hashlib.sha256(content).digest())
        _cache = (signature, Library(digest.hexdigest()[:16], files))
    return _cache[1]
