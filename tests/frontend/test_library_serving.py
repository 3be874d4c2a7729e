"""The browser library's URLs: short redirects, content-addressed files, CORS."""

from __future__ import annotations

import pytest

from frontend import library as library_module

pytestmark = pytest.mark.usefixtures("lib_dir")


@pytest.fixture
def lib_dir(tmp_path, monkeypatch):
    (tmp_path / "client.js").write_text('import { core } from "./core.js";\nexport { core };\n')
    (tmp_path / "core.js").write_text("export const core = 1;\n")
    (tmp_path / "client.d.ts").write_text("export declare const core: number;\n")
    (tmp_path / "notes.md").write_text("not served\n")
    monkeypatch.setattr(library_module, "LIB_DIR", tmp_path)
    monkeypatch.setattr(library_module, "_cache", None)
    return tmp_path


def test_entry_redirects_to_the_current_digest_with_cors(client):
    response = client.get("/client.js")
    assert response.status_code == 302
    digest = library_module.library().digest
    assert response["Location"] == f"/lib/{digest}/client.js"
    assert response["Access-Control-Allow-Origin"] == "*"
    assert response["Cache-Control"] == "no-cache"


def test_files_are_served_immutable_with_cors(client):
    digest = library_module.library().digest
    response = client.get(f"/lib/{digest}/core.js")
    assert response.status_code == 200
    assert response.content == b"export const core = 1;\n"
    assert response["Content-Type"].startswith("text/javascript")
    assert (
        "immutable" in response["Cache-Control"] and "max-age=31536000" in response["Cache-Control"]
    )
    assert response["Access-Control-Allow-Origin"] == "*"
    types = client.get(f"/lib/{digest}/client.d.ts")
    assert types.status_code == 200 and types["Content-Type"].startswith("text/plain")


def test_a_change_makes_a_new_digest_and_old_urls_redirect(client, lib_dir):
    old = library_module.library().digest
    (lib_dir / "core.js").write_text("export const core = 2;\n")
    new = library_module.library().digest
    assert new != old
    stale = client.get(f"/lib/{old}/core.js")
    assert stale.status_code == 302 and stale["Location"] == f"/lib/{new}/core.js"


@pytest.mark.parametrize("name", ["notes.md", "missing.js", "..%2Fsettings.py", "CLIENT.JS"])
def test_only_library_files_are_served(client, name):
    digest = library_module.library().digest
    assert client.get(f"/lib/{digest}/{name}").status_code == 404


def test_writes_are_refused(client):
    assert client.post("/client.js").status_code == 405
