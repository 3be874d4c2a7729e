"""Documents made for the tests: real PDFs and DOCX files, and hostile ones."""

from __future__ import annotations

import io
import textwrap
import zlib
from pathlib import Path

CORPUS = Path(__file__).parent / "corpus"


def _pdf(objects: list[bytes]) -> bytes:
    """A PDF of ``objects`` (numbered from 1; the first is the catalog), with its xref."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


def _stream(data: bytes, *, compressed: bool = False) -> bytes:
    if compressed:
        data = zlib.compress(data, 9)
        return (
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data + b"\nendstream"
        )
    return b"<< /Length %d >>\nstream\n" % len(data) + data + b"\nendstream"


def _text_ops(text: str) -> bytes:
    lines = textwrap.wrap(text, 90) or [""]
    escaped = [line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") for line in lines]
    body = " ".join(f"({line}) '" for line in escaped)
    return f"BT /F1 10 Tf 14 TL 40 800 Td {body} ET".encode("latin-1", "replace")


def pdf_bytes(pages: list[str]) -> bytes:
    """A real PDF with one page per text (Helvetica, text extractable)."""
    page_count = len(pages)
    first_page = 4
    kids = " ".join(f"{first_page + 2 * i} 0 R" for i in range(page_count))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {page_count} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for index, text in enumerate(pages):
        content = first_page + 2 * index + 1
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {content} 0 R >>".encode()
        )
        objects.append(_stream(_text_ops(text)))
    return _pdf(objects)


def pdf_with_many_pages(count: int) -> bytes:
    """A small file that claims ``count`` pages: one page object listed ``count`` times."""
    kids = " ".join(["4 0 R"] * count)
    return _pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
        b"/Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R >>",
        _stream(_text_ops("One page, many times.")),
    ])  # fmt: skip


def pdf_bomb(inflated_mb: int) -> bytes:
    """One page whose content stream inflates from a few hundred kB to ``inflated_mb`` MB
    of text-showing operators."""
    line = b"BT /F1 10 Tf 40 800 Td (All work and no play makes a dull document) Tj ET\n"
    content = line * (inflated_mb * 1024 * 1024 // len(line))
    return _pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
        b"/Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R >>",
        _stream(content, compressed=True),
    ])  # fmt: skip


def docx_bytes(paragraphs: list[str]) -> bytes:
    import docx

    document = docx.Document()
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def docx_bomb(inflated_mb: int) -> bytes:
    """A zip named .docx whose one member inflates to ``inflated_mb`` MB."""
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", b"\0" * (inflated_mb * 1024 * 1024))
    return out.getvalue()


def corpus(name: str) -> bytes:
    return (CORPUS / name).read_bytes()
