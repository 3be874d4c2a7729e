"""The README and docs/ hold together: every relative link reaches a file (and a heading),
read the way GitHub renders them, and the MkDocs site builds in strict mode."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def github_anchor(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to '-'."""
    text = CODE_SPAN.sub(lambda span: span.group(0).strip("`"), heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {github_anchor(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """Each relative link of ``page`` whose file (inside ``root``), or whose heading in that
    file, is missing."""
    text = CODE_SPAN.sub("", FENCE.sub("", page.read_text()))
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # https:, mailto: …: not ours to check here
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or not file.is_relative_to(root):
            broken.append(target)
        elif anchor and (file.suffix != ".md" or anchor not in anchors(file)):
            broken.append(target)
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_reaches_its_file_and_heading(page: Path) -> None:
    assert broken_links(page) == []


def test_a_broken_link_or_heading_is_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Behind a proxy (https)\n\n## The `ready` event\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#behind-a-proxy-https) [ok](other.md#the-ready-event) [ok](#here)\n"
        "# Here\n"
        "[no file](missing.md) [no heading](other.md#nope) `[in code](gone.md)`\n"
        "[outside](../elsewhere.md)\n"
        "```\n[in a fence](gone.md)\n```\n"
    )
    (tmp_path.parent / "elsewhere.md").write_text("# Elsewhere\n")
    assert broken_links(page, root=tmp_path) == ["missing.md", "other.md#nope", "../elsewhere.md"]


def test_the_readme_stays_a_five_minute_read() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for command in ("./dev.sh", "./test.sh", "ollama pull llama3.2", "LLM_BASE_URL="):
        assert command in readme


def test_every_page_is_in_the_site_and_the_site_builds_strictly(tmp_path: Path) -> None:
    """MkDocs' strict mode fails on a broken link or anchor and on a page left out of `nav`."""
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    for page in PAGES[1:]:
        assert (tmp_path / page.with_suffix(".html").name).exists()
