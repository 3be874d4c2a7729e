"""The knowledge parser reads strangers' PDF, DOCX and HTML files with large parsers; should
one of them be subverted by a file, it must find no way out: no network (the Redis and
Postgres on loopback are right there), no new process, nothing written, and (started as
root) nothing of the platform's user to read."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from knowledge_app import parsing
from tests.knowledge_app.documents import docx_bytes, pdf_bytes

PROBE = Path(__file__).with_name("parser_probe.py")
LIMITS = parsing.ParseLimits(max_pages=10, max_characters=10_000, timeout_s=30, memory_mb=512)
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux confinement")


@pytest.fixture
def open_room() -> Iterator[Path]:
    """A folder anyone may write in: only the confinement, not the user, can refuse."""
    room = Path(tempfile.mkdtemp(dir="/tmp"))
    room.chmod(0o777)
    yield room
    shutil.rmtree(room)


def test_a_subverted_parser_finds_no_way_out(open_room: Path) -> None:
    tmp_path = open_room
    appended = tmp_path / "existing.txt"
    appended.write_text("kept")
    appended.chmod(0o666)
    redis_port = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379").rsplit(":", 1)[1]
    # A neighbour as the parser will be (nobody, as a sandbox worker or another parser).
    as_nobody = (lambda: (os.setgid(65534), os.setuid(65534))) if os.getuid() == 0 else None
    neighbour = subprocess.Popen(["sleep", "60"], preexec_fn=as_nobody)
    finished = subprocess.run(
        [
            sys.executable,
            "-E",
            "-s",
            "-B",
            str(PROBE),
            redis_port.split("/")[0],
            str(tmp_path / "new.txt"),
            str(appended),
            str(neighbour.pid),
        ],
        capture_output=True,
        timeout=60,
        preexec_fn=lambda: parsing._fence(LIMITS),
        env={},
        check=True,
    )
    neighbour.kill()
    report = json.loads(finished.stdout)
    protections, attempts = report["protections"], report["attempts"]
    assert protections["syscall_filter"] is True
    refused = {name for name, outcome in attempts.items() if outcome.startswith("refused")}
    assert refused >= {
        "socket",
        "unix_socket",
        "connect_to_redis",
        "fork",
        "exec",
        "write_a_file",
        "append_to_a_file",
        "signal_a_neighbour",  # tgkill: kill's check did not cover it
        "change_a_neighbour",  # prlimit: a CPU limit of 0 killed it
    }
    assert attempts["write_a_file"] == attempts["append_to_a_file"] == "refused: errno 1"
    assert attempts["read_the_file"] == "allowed"  # files are still opened for reading
    assert not (tmp_path / "new.txt").exists()
    assert appended.read_text() == "kept"
    if os.getuid() == 0:  # started as root: nobody, in a network of its own
        assert protections["uid"] != 0
        assert protections["network_namespace"] is True
        assert {"read_parent_environment", "signal_parent"} <= refused


@pytest.mark.parametrize(
    ("kind", "content", "words"),
    [
        ("pdf", pdf_bytes(["Opening hours are nine to five."]), "Opening hours"),
        ("docx", docx_bytes(["Returns within thirty days."]), "thirty days"),
        ("html", b"<html><body><p>Caf\xc3\xa9 menu</p></body></html>", "Café menu"),
        ("text", "Grüße aus Köln".encode("utf-16"), "Grüße aus Köln"),
    ],
    ids=["pdf", "docx", "html", "text"],
)
def test_documents_are_still_read_inside_the_confinement(kind, content, words) -> None:
    answer = parsing.read_document(kind, content, LIMITS)
    assert words in answer["text"]
    assert answer["protections"]["syscall_filter"] is True


@pytest.mark.parametrize(
    ("kind", "content", "words"),
    [
        ("text", "Café crème, déjà vu.".encode("cp1252"), "Café crème, déjà vu."),
        ("markdown", "# Menü\n\nSpätzle.".encode("latin-1"), "Spätzle"),
        ("html", "<p>Crème brûlée.</p>".encode("cp1252"), "Crème brûlée"),
    ],
    ids=["text-cp1252", "markdown-latin1", "html-cp1252"],
)
def test_a_file_in_a_single_byte_encoding_is_not_read_as_utf_16(kind, content, words) -> None:
    """Any text of even length decodes as UTF-16 (little-endian, no BOM needed): a Latin-1
    or Windows-1252 file of an even number of bytes became CJK-looking noise, indexed as
    such. UTF-16 is taken only with its BOM; else such a file is Latin-1 as before."""
    assert len(content) % 2 == 0
    assert words in parsing.extract_text(kind, content, LIMITS)


def _page(charset: str, words: str, *, http_equiv: bool = False) -> bytes:
    meta = (
        f'<meta http-equiv="Content-Type" content="text/html; charset={charset}">'
        if http_equiv
        else f'<meta charset="{charset}">'
    )
    return f"<html><head>{meta}</head><body><p>{words}</p></body></html>".encode(charset)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (_page("shift_jis", "営業時間は九時から五時です"), "営業時間は九時から五時です"),
        (_page("gbk", "北京的营业时间", http_equiv=True), "北京的营业时间"),
        (_page("euc-kr", "서울 영업시간"), "서울 영업시간"),
        (_page("windows-1252", "Crème brûlée – 5 €"), "Crème brûlée – 5 €"),
        (_page("koi8-r", "Часы работы", http_equiv=True), "Часы работы"),
    ],
    ids=["shift-jis", "gbk", "euc-kr", "windows-1252", "koi8-r"],
)
def test_an_html_page_is_read_in_the_charset_it_declares(content: bytes, words: str) -> None:
    """A page in Shift-JIS, GBK, EUC-KR or KOI8-R was read as Latin-1 (its <meta charset>
    ignored): noise, indexed as such."""
    assert words in parsing.extract_text("html", content, LIMITS)


@pytest.mark.parametrize("charset", ["zlib", "hex", "utf-16", "utf-7", "unicode-escape", "nope"])
def test_a_charset_no_page_is_in_is_not_taken_at_its_word(charset: str) -> None:
    """Python knows codecs that are not a page's charset (bytes to bytes, or its own escapes);
    a page declaring one, or an unknown one, is read as any undeclared page."""
    content = f'<meta charset="{charset}"><p>Café \\u0041</p>'.encode("latin-1")
    assert parsing.extract_text("html", content, LIMITS) == "Café \\u0041"
