"""Differential tests: the sandbox's own URL and TextDecoder (written in JavaScript in
``tools_app/sandbox_prelude.js``, since V8 alone has neither) against node's, which
follow the WHATWG standards. Same inputs, same answers, part by part."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

from tests.tools_app.jailed import run_jailed
from tests.tools_app.test_chacha20 import _node

REFERENCE = Path(__file__).with_name("node") / "reference.mjs"

BASES = [
    None,
    "https://example.com/a/b/c?q=1#f",
    "http://user:pw@host:8080/dir/file",
    "file:///C:/x/y",
]
INPUTS = [
    "https://example.com", "HTTPS://EXAMPLE.com:443/", "http://example.com:80/a/../b/./c",
    "https://a.test:8080/p?q=a b&r=é#frag ment", "//other.test/path", "/absolute?x",
    "relative/path",
    "../up", "./same", "?only=query", "#only-fragment", "", " https://trim.test/ ",
    "https://ex\tam\nple.com/", "http://[::1]/", "http://[::FFFF:127.0.0.1]:80/x",
    "http://[2001:db8::1]:8443/", "http://[1:2:3:4:5:6:7:8]/", "http://[::]/", "http://[1::2::3]/",
    "http://0x7f.1/", "http://2130706433/", "http://0177.0.0.1/", "http://127.1/",
    "http://1.2.3.4.5/", "http://256.1.1.1/", "http://4294967295/", "http://4294967296/",
    "https://münchen.de/", "https://xn--mnchen-3ya.de/", "https://EXAMPLE.COM./", "https://a..b/",
    "https://%41.test/", "https://a%2Fb.test/", "https://exa mple.com/", "http://a<b/",
    "https://user:pa ss@host.test/", "https://user@host.test:/", "https://:@host.test/",
    "https://host.test:65535/", "https://host.test:65536/", "https://host.test:-1/",
    "http://host.test:0080/", "mailto:someone@example.com", "data:text/plain,hello world",
    "javascript:alert(1)", "blob:https://a.test/uuid", "file:///etc/passwd", "file://host/share",
    "ftp://ftp.example.com/pub", "ws://socket.test/chat", "wss://socket.test:443/chat",
    "https://a.test/%zz%2F%2e%2E/", "https://a.test/ä/ö?ü=ß#€", "https://a.test/\\back\\slash",
    "http:\\\\host.test\\path", "https:example.com", "http:/one-slash.test", "https:///three",
    "https://a.test/?%", "https://a.test/?a=1&&b=2&c", "https://a.test/#%23%",
    "https://a.test/path;params", "https://a.test/%00", "https://a.test/\u0000", "not a url",
    "https://a.test/" + "x" * 300, "HtTp://MiXeD.CaSe/PaTh", "https://a.test:443",
    "https://a.test/.%2e/", "https://a.test/a/%2e%2E/b", "custom+scheme://h/p", "1http://bad/",
    "http://a.test/  spaces  ", "https://a.test/\u2028line", "https://[v1.x]/",
]  # fmt: skip


def _fuzzed_urls() -> list[str]:
    """Pieces that stress the parser, put together at random (the same every run)."""
    chooser = random.Random(3986)
    # Only special schemes: for `x:/..`, node 20 and the current URL standard disagree.
    schemes = ["http://", "https://", "HTTP://", "https:", "ws://", "ftp://", "//"]
    hosts = ["a.test", "A.Test.", "[::1]", "[0:0::ffff:1.2.3.4]", "1.2.3", "0x1.0x2.3.4",
             "üñí.test", "xn--nxasmq6b.test", "a_b.test", "%2e.test", "u:p@h.test", "@h.test",
             "h.test:8080", "h.test:", "h.test:99999", "", "a..test", "1.2.3.4.",
             "999.1.1.1"]  # fmt: skip
    paths = ["", "/", "/a/b/../c", "/./x", "/%2e%2E/y", "/a b", "/é", "/%", "\\x\\y", "/a?b",
             "/;p", "/a//b", "/..", "/~user", "/{x}", "/|", "/\u0007"]  # fmt: skip
    queries = ["", "?", "?a=1&b=2", "?q=a b", "?é=ü", "?%", "?a#b", "?'quote'", '?"d"', "?<>"]
    fragments = ["", "#", "#f", "#a b", "#é", "#%23", "#`x`", '#"d"']
    return [
        chooser.choice(schemes) + chooser.choice(hosts) + chooser.choice(paths)
        + chooser.choice(queries) + chooser.choice(fragments)
        for _ in range(400)
    ]  # fmt: skip


def _texts() -> list[str]:
    fixed = [
        b"", b"plain ascii", "é€😀".encode(), b"\xef\xbb\xbfwith bom", b"\xff", b"\xc0\x80",
        b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf0\x9f\x98", b"a\xe2\x82",
        b"\x80\x81\x82", b"\xc3(", b"\xe2\x28\xa1", b"\xf8\x88\x80\x80\x80", b"\x00\x01\x7f",
        "\ufeff\ufffd".encode(), b"\xef\xbb", b"\xef\xbb\xbf",
    ]  # fmt: skip
    chooser = random.Random(8439)
    alphabet = [0x00, 0x41, 0x7F, 0x80, 0xBF, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xFF]
    fuzzed = [
        bytes(chooser.choice([*alphabet, chooser.randrange(256)]) for _ in range(n % 17))
        for n in range(400)
    ]
    return [data.hex() for data in fixed + fuzzed]


# One function, run by node and by the sandbox: the parts each URL and decoder gives.
PROBE = (Path(__file__).with_name("node") / "url_and_text.js").read_text()


async def test_url_and_text_decoder_answer_like_nodes() -> None:
    urls = [[i, b] for i in INPUTS for b in BASES] + [[u, BASES[1]] for u in _fuzzed_urls()]
    cases = {"urls": urls, "texts": _texts()}
    reference = json.loads(
        subprocess.run(  # noqa: ASYNC221  (a test: nothing else waits on this loop)
            [_node(), str(REFERENCE)], input=json.dumps(cases), capture_output=True, text=True,
            timeout=60, check=True,
        ).stdout
    )  # fmt: skip
    result = await run_jailed(PROBE, cases, wall_time_s=30, max_result_bytes=4 * 2**20)
    assert result.ok, result.error
    ours = json.loads(result.result_json or "")
    url_differences = [
        (case, mine, theirs)
        for case, mine, theirs in zip(cases["urls"], ours["urls"], reference["urls"], strict=True)
        if mine != theirs
    ]
    text_differences = [
        (case, mine, theirs)
        for case, mine, theirs in zip(
            cases["texts"], ours["texts"], reference["texts"], strict=True
        )
        if mine != theirs
    ]
    assert (url_differences, text_differences) == ([], [])
