"""The browser library as an npm package: ``/sdk/voice-agent.tgz``.

Built on request from ``frontend/lib`` (plus ``frontend/sdk``: the React entry that imports
the app's React), never committed. The files are the ones the platform serves, except
``location.js``, which in a bundled copy cannot know where the platform is: the package
carries the platform's URL instead (``PUBLIC_URL``, else the request's). The archive is
byte-for-byte the same for the same library and URL (fixed times and owners), so npm's
integrity hash in a customer's lock file stays valid until the library changes.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

from frontend.library import Library, library

PACKAGE_NAME = "voice-agent"
SDK_DIR = Path(__file__).resolve().parent / "sdk"
# npm's own fixed time for packed files (1985-10-26T08:15:00Z).
PACKED_MTIME = 499162500


def package_json(*, digest: str, platform_url: str) -> dict[str, object]:
    return {
        "name": PACKAGE_NAME,
        "version": f"1.0.0-{digest}",
        "description": f"Browser library of the voice agent platform at {platform_url}",
        "type": "module",
        "main": "./client.js",
        "types": "./client.d.ts",
        "exports": {
            ".": {"types": "./client.d.ts", "default": "./client.js"},
            "./react": {"types": "./react.d.ts", "default": "./react-package.js"},
        },
        "peerDependencies": {"react": ">=18"},
        "peerDependenciesMeta": {"react": {"optional": True}},
        "license": "UNLICENSED",
    }


def _files(lib: Library, platform_url: str) -> dict[str, bytes]:
    files = dict(lib.files)
    location = f"{platform_url}/lib/{lib.digest}/location.js"
    files["location.js"] = (
        "// The platform this package was built by (see location.js on the platform).\n"
        f"export const LIBRARY_URL = {json.dumps(location)};\n"
    ).encode()
    for path in sorted(SDK_DIR.iterdir()):
        files[path.name] = path.read_bytes()
    manifest = package_json(digest=lib.digest, platform_url=platform_url)
    files["package.json"] = (json.dumps(manifest, indent=2) + "\n").encode()
    return files


def _archive(files: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(f"package/{name}")
            info.size, info.mtime, info.mode = len(files[name]), PACKED_MTIME, 0o644
            tar.addfile(info, io.BytesIO(files[name]))
    return gzip.compress(raw.getvalue(), mtime=0)


_built: dict[tuple[str, str], bytes] = {}
_BUILT_MAX = 8  # (library version, platform URL) pairs kept; URLs come from ALLOWED_HOSTS


def sdk_tarball(*, platform_url: str) -> tuple[str, bytes]:
    """The current package for ``platform_url``: (library digest, .tgz bytes)."""
    lib = library()
    key = (lib.digest, platform_url.rstrip("/"))
    if key not in _built:
        if len(_built) >= _BUILT_MAX:
            _built.clear()
        _built[key] = _archive(_files(lib, key[1]))
    return lib.digest, _built[key]
