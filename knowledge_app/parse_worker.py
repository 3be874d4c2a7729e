"""Text out of a document, in a child process fenced by the parent (``parsing``).

Run as ``python -m knowledge_app.parse_worker KIND MAX_PAGES MAX_CHARACTERS``: the
document's bytes on stdin, one JSON object on stdout, ``{"text": …}`` or ``{"error": …}``
(one of the sentences below, never a parser's own message: those can quote the file).
No Django here: the child starts in a fraction of a second and holds no settings,
database or keys while it reads a stranger's file. Before it parses, it closes the ways
out a parser bug could open (``confine``, ``tools_app.confinement``): no network (its own
empty namespace where it may, and no sockets), no new processes or programs, files opened
for reading only, and, started as root, the user nobody; the answer says what was in
force (``protections``).
"""

from __future__ import annotations

import codecs
import contextlib
import importlib
import io
import json
import os
import pkgutil
import re
import sys
import zipfile
from typing import Any

from tools_app import confinement

DOCX_MAX_UNCOMPRESSED = 50 * 1024 * 1024  # what the zip's parts may inflate to, together


class Refused(Exception):
    """The document is refused; the message is ours and says why."""


class _TextCap:
    def __init__(self, limit: int) -> None:
        self.limit, self.size = limit, 0
        self.parts: list[str] = []

    def add(self, text: str) -> None:
        self.size += len(text)
        if self.size > self.limit:
            raise Refused(f"its text is longer than {self.limit} characters")
        self.parts.append(text)

    def text(self, separator: str = "\n\n") -> str:
        return separator.join(self.parts)


def _pdf(content: bytes, max_pages: int, cap: _TextCap) -> None:
    from pypdf import PdfReader
    from pypdf.errors import LimitReachedError, PyPdfError

    try:
        reader = PdfReader(io.BytesIO(content))
        if reader.is_encrypted:
            raise Refused("it is an encrypted PDF")
        pages = len(reader.pages)
        if pages > max_pages:
            raise Refused(f"it has {pages} pages, more than {max_pages}")
        for page in reader.pages:
            cap.add(page.extract_text() or "")
    except Refused:
        raise
    except LimitReachedError:  # pypdf's own fences: inflated streams, arrays, page trees
        raise Refused("part of it unpacks to more than a document may hold") from None
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        raise Refused("it is not a PDF that can be read") from None


def _docx(content: bytes, cap: _TextCap) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            inflated = sum(info.file_size for info in archive.infolist())
    except zipfile.BadZipFile:
        raise Refused("it is not a DOCX file that can be read") from None
    if inflated > DOCX_MAX_UNCOMPRESSED:  # checked before anything is inflated
        raise Refused(f"it unpacks to more than {DOCX_MAX_UNCOMPRESSED // 1024 // 1024} MB")
    import docx

    try:
        document = docx.Document(io.BytesIO(content))
    except Exception:
        raise Refused("it is not a DOCX file that can be read") from None
    for paragraph in document.paragraphs:
        if paragraph.text.strip():
            cap.add(paragraph.text)
    for table in document.tables:
        for row in table.rows:
            cap.add(" | ".join(cell.text for cell in row.cells))


_HTML_SKIPPED = {"script", "style", "noscript", "template", "svg", "head"}
_HTML_BLOCKS = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section",
                "article", "pre", "blockquote", "table", "ul", "ol", "dd", "dt"}  # fmt: skip


def _html(content: bytes, cap: _TextCap) -> None:
    """libxml2's HTML parser, linear in the input: the standard library's ``html.parser``
    takes quadratic time on unclosed constructs (``<!--`` or ``<a b='`` repeated)."""
    from lxml import etree

    parser = etree.HTMLParser(
        encoding="utf-8", recover=True, no_network=True, remove_comments=True, remove_pis=True
    )
    try:  # our own decoding (as for Markdown and text), handed on as UTF-8
        text = _decode(content, declared=_declared_charset(content))
        root = etree.fromstring(text.encode("utf-8", "replace"), parser)
    except (etree.LxmlError, ValueError):
        raise Refused("it is not an HTML page that can be read") from None
    if root is None:
        return
    skipping = 0
    for event, element in etree.iterwalk(root, events=("start", "end")):
        tag = element.tag if isinstance(element.tag, str) else ""
        if event == "start":
            skipping += tag in _HTML_SKIPPED
            if tag in _HTML_BLOCKS and not skipping:
                cap.add("\n")
            if tag and not skipping and element.text:
                cap.add(element.text)
            continue
        if tag in _HTML_SKIPPED:
            skipping -= 1
        elif tag in _HTML_BLOCKS and not skipping:
            cap.add("\n")
        if not skipping and element.tail:
            cap.add(element.tail)


_MARKDOWN_NOISE = re.compile(r"^\s{0,3}(#{1,6}\s+|>\s?|[-*+]\s+|\d+\.\s+)|[*_`]{1,3}", re.M)
# Neither part may hold its own opening bracket, so each attempt stops at the next one and
# the whole pass is linear (``[^\]]*`` rescanned to the end from every '[': quadratic).
_MARKDOWN_LINK = re.compile(r"!?\[([^\[\]]*)\]\([^()]*\)")


def _markdown(content: bytes, cap: _TextCap) -> None:
    text = _MARKDOWN_LINK.sub(r"\1", _decode(content))
    cap.add(_MARKDOWN_NOISE.sub("", text))


# <meta charset="…"> or <meta http-equiv="Content-Type" content="text/html; charset=…">,
# in the first 4 KB as browsers look for it (ASCII in every charset a page declares so).
_META_CHARSET = re.compile(
    rb"<meta[^>]{0,512}?charset\s*=\s*[\"']?\s*([A-Za-z0-9_.:-]{1,40})", re.IGNORECASE
)


# Not charsets of a page whose declaration was read as ASCII: UTF-16 and UTF-32 (the HTML
# standard reads such a declaration as UTF-8; a real one has its BOM), UTF-7 (no browser
# reads it), and Python's own text codecs of other purposes.
_NOT_PAGE_CHARSETS = re.compile(r"utf_(16|32|7)|escape|idna|punycode|undefined|mbcs|oem")


def _declared_charset(content: bytes) -> str | None:
    """The charset an HTML page declares, if Python knows it (None: none, or unknown)."""
    found = _META_CHARSET.search(content[:4096])
    if found is None:
        return None
    try:
        name = codecs.lookup(found.group(1).decode("ascii")).name
        b"a".decode(name)  # a text encoding, not one of bytes to bytes ("zlib", "hex")
    except LookupError:
        return None
    except UnicodeError:
        pass  # a text encoding that "a" alone is not
    return None if _NOT_PAGE_CHARSETS.search(name.replace("-", "_")) else name


def _decode(content: bytes, declared: str | None = None) -> str:
    """UTF-16 with its BOM; else UTF-8, or the charset the page declares (HTML: Shift-JIS,
    GBK, Windows-1252…); else Latin-1 (any bytes of even length decode as BOM-less UTF-16:
    a Latin-1 file read so was noise)."""
    utf16 = content.startswith((b"\xff\xfe", b"\xfe\xff"))
    encodings = ("utf-16",) * utf16 + ("utf-8-sig",) + ((declared,) if declared else ())
    for encoding in encodings:
        try:
            return content.decode(encoding)
        except UnicodeError:
            continue
    if declared:  # declared but not quite: its characters, a broken few replaced
        with contextlib.suppress(UnicodeError):
            return content.decode(declared, "replace")
    return content.decode("latin-1")


def extract(kind: str, content: bytes, max_pages: int, max_characters: int) -> str:
    cap = _TextCap(max_characters)
    if kind == "pdf":
        _pdf(content, max_pages, cap)
    elif kind == "docx":
        _docx(content, cap)
    elif kind == "html":
        _html(content, cap)
        return _tidy(cap.text(""))
    elif kind == "markdown":
        _markdown(content, cap)
    else:
        if b"\x00" in content[:8192] and not content.startswith((b"\xff\xfe", b"\xfe\xff")):
            raise Refused("it is not a text file")
        cap.add(_decode(content))
    return _tidy(cap.text())


def _tidy(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\x00", "")
    text = re.sub(r"[ \t\f\v]+", " ", text)
    return re.sub(r"\n\s*\n\s*", "\n\n", text).strip()


_PARSERS = {"pdf": ("pypdf",), "docx": ("docx",), "html": ("lxml",)}
_PARSERS_OPTIONAL = {"pdf": ("PIL.Image", "fontTools.cffLib", "brotli", "cryptography")}


def _load_parser(kind: str) -> None:
    """Everything reading ``kind`` may import, imported while every file may be opened: a
    parser imports some of its modules (and Python its text codecs) only when a document
    needs them, and after ``confine`` the user nobody may not be able to read them."""
    for package in ("encodings", *_PARSERS.get(kind, ())):
        module = importlib.import_module(package)
        for found in pkgutil.walk_packages(module.__path__, f"{package}.", onerror=_ignore):
            with contextlib.suppress(Exception):  # a module for another platform or Python
                importlib.import_module(found.name)
    for name in _PARSERS_OPTIONAL.get(kind, ()):
        with contextlib.suppress(ImportError):  # not installed: the parser goes without
            importlib.import_module(name)


def _ignore(name: str) -> None:
    pass


def confine(kind: str) -> dict[str, Any]:
    """Close the ways out, in the order it has to happen; what is in force on this host."""
    parent = os.getppid()
    confinement.die_with_parent(parent)
    protections: dict[str, Any] = {"network_namespace": confinement.leave_network()}
    _load_parser(kind)
    import pyseccomp  # noqa: F401  (finds libseccomp now, as the user that may read it)

    protections["uid"] = confinement.drop_privileges(parent)
    protections["syscall_filter"] = confinement.filter_syscalls(read_only_files=True)
    return protections


def main() -> None:
    kind, max_pages, max_characters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    content = sys.stdin.buffer.read()
    protections = confine(kind)
    answer: dict[str, Any]
    try:
        answer = {"text": extract(kind, content, max_pages, max_characters)}
    except Refused as refused:
        answer = {"error": str(refused)}
    except RecursionError:
        answer = {"error": "it is nested too deeply to read"}
    sys.stdout.write(json.dumps({**answer, "protections": protections}))


if __name__ == "__main__":
    main()
