"""The npm package of the browser library (/sdk/voice-agent.tgz) and the API docs' assets."""

from __future__ import annotations

import io
import json
import re
import tarfile

import pytest

from frontend import library as library_module
from frontend import sdk


@pytest.fixture(autouse=True)
def _fresh_builds(monkeypatch):
    monkeypatch.setattr(sdk, "_built", {})


def members(tarball: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]


def test_the_package_is_the_library_with_the_platforms_url(client, settings):
    settings.PUBLIC_URL = None
    response = client.get("/sdk/voice-agent.tgz", HTTP_HOST="localhost:8000")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/gzip"
    files = members(response.content)
    lib = library_module.library()
    assert response["ETag"] == f'"{lib.digest}"'
    for name, content in lib.files.items():
        if name != "location.js":
            assert files[f"package/{name}"] == content, name
    location = files["package/location.js"].decode()
    assert f'"http://localhost:8000/lib/{lib.digest}/location.js"' in location
    manifest = json.loads(files["package/package.json"])
    assert manifest["name"] == "voice-agent"
    assert manifest["exports"]["./react"] == {
        "types": "./react.d.ts",
        "default": "./react-package.js",
    }
    assert 'from "react"' in files["package/react-package.js"].decode()
    # the same bytes again: npm's integrity hash in a lock file stays valid
    assert client.get("/sdk/voice-agent.tgz", HTTP_HOST="localhost:8000").content == (
        response.content
    )


def test_public_url_wins_over_the_request(client, settings):
    settings.PUBLIC_URL = "https://voice.example.com"
    files = members(client.get("/sdk/voice-agent.tgz").content)
    assert '"https://voice.example.com/lib/' in files["package/location.js"].decode()


def test_only_get_and_head(client):
    assert client.post("/sdk/voice-agent.tgz").status_code == 405


def test_library_modules_name_their_types(client):
    digest = library_module.library().digest
    react = client.get(f"/lib/{digest}/react.js")
    assert react["X-TypeScript-Types"] == "react.d.ts"
    assert "X-TypeScript-Types" not in client.get(f"/lib/{digest}/core.js")


def test_api_docs_load_swagger_ui_from_this_platform(client):
    page = client.get("/api/docs/").content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert assets and all(url.startswith("/") for url in assets), assets  # nothing from a CDN
    assert "<script>" not in page.replace(" ", "")  # the start-up script is a file too
    for url in assets:
        assert client.get(url).status_code == 200, url
