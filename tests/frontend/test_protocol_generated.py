"""The browser library's protocol names are the server's: the generated files match what
``engine/protocol.py`` renders now, and the library's refusals read them."""

from __future__ import annotations

import re

import pytest
from django.core.management import CommandError, call_command

from engine import protocol, protocol_js
from frontend.library import LIB_DIR


def test_the_generated_files_match_the_protocol() -> None:
    for name, text in protocol_js.rendered().items():
        assert (LIB_DIR / name).read_text() == text, f"run manage.py protocol_js ({name})"


def test_every_code_and_event_is_in_the_generated_module() -> None:
    js = (LIB_DIR / protocol_js.JS_NAME).read_text()
    for code in protocol.ErrorCode:
        assert f'"{code.value}"' in js
    for close in protocol.CloseCode:
        assert f": {close.value}," in js
    for event in protocol.SERVER_EVENTS:
        assert f'"{event}"' in js


def test_the_check_fails_when_a_file_drifts(monkeypatch: pytest.MonkeyPatch) -> None:
    call_command("protocol_js", check=True)
    drifted = {**protocol_js.rendered(), protocol_js.JS_NAME: "// an old copy\n"}
    monkeypatch.setattr(protocol_js, "rendered", lambda: drifted)
    with pytest.raises(CommandError, match=r"protocol-generated\.js"):
        call_command("protocol_js", check=True)


# The library's modules that speak the protocol, and how a wire name would be written in
# them literally: a server event in a `case`/comparison, a client message's `type`.
_SPEAKING = ("core.js", "connection.js", "errors.js")


def _literal_wire_names(source: str) -> list[str]:
    events = "|".join(re.escape(name) for name in protocol.SERVER_EVENTS)
    messages = "|".join(re.escape(name) for name in protocol.MESSAGE_TYPES)
    codes = "|".join(re.escape(code.value) for code in protocol.ErrorCode)
    patterns = (
        rf'case "({events})":',
        rf'\.type [!=]== "({events})"',
        rf'type: "({messages})"',
        r"close\((\d{4}),",
        rf'"({codes})"',  # an error code, quoted
        rf"^\s+({codes}):",  # an error code as an object's key
    )
    return [found for pattern in patterns for found in re.findall(pattern, source, flags=re.M)]


def test_the_library_takes_its_wire_names_from_the_generated_module() -> None:
    for name in _SPEAKING:
        source = (LIB_DIR / name).read_text()
        assert 'from "./protocol-generated.js"' in source, name
        assert _literal_wire_names(source) == [], f"{name}: use the generated names"
    # The check itself finds what it looks for.
    sample = 'case "tts_done": x({ type: "cancel" }); s.close(1000, "");\n  llm_failed: "x"'
    assert _literal_wire_names(sample) == ["tts_done", "cancel", "1000", "llm_failed"]


def test_the_type_declarations_use_the_generated_types() -> None:
    types = (LIB_DIR / "client.d.ts").read_text()
    assert 'from "./protocol-generated.js"' in types
    assert re.search(r"interface ServerEvent \{\s+type: ServerEventType;", types)
    assert "code: ErrorCode | LibraryErrorCode;" in types
    assert "export type ToolStatus = WireToolStatus" in types
