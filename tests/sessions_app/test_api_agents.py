"""Saved agents through the REST API."""

from __future__ import annotations

import hashlib

from secrets_app import services as secret_services
from secrets_app.provider_credentials import provider_speech_set
from sessions_app.models import Agent
from tests.factories import order_tool


def test_agent_crud_and_handler_pinning(owner, owner_api, outsider_api):
    tool = order_tool()
    created = owner_api.post(
        "/api/v1/agents",
        {
            "name": "Order status",
            "slug": "orders",
            "instructions": "You help with {{customer}}'s orders.",
            "greeting": "Hi!",
            "mode": "text",
            "tools": [
                tool,
                {"name": "open_file", "client": True, "parameters": {"path": "string"}},
            ],
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    saved = created.json()["tools"]
    assert saved[0]["handler_sha256"] == hashlib.sha256(tool["handler"].encode()).hexdigest()
    assert "handler_sha256" not in saved[1]

    changed_handler = "async (args) => ({ status: 'lost' })"
    updated = owner_api.patch(
        "/api/v1/agents/orders",
        {"tools": [order_tool(handler=changed_handler)], "greeting": "Hello"},
        format="json",
    )
    assert updated.status_code == 200
    agent = Agent.objects.get(workspace=owner.workspace, slug="orders")
    assert agent.greeting == "Hello" and agent.mode == "text"
    assert agent.tools[0]["handler_sha256"] == hashlib.sha256(changed_handler.encode()).hexdigest()

    assert [a["slug"] for a in owner_api.get("/api/v1/agents").json()] == ["orders"]
    assert outsider_api.get("/api/v1/agents").json() == []
    assert owner_api.delete("/api/v1/agents/orders").status_code == 204
    assert owner_api.get("/api/v1/agents/orders").status_code == 404


def test_client_cannot_forge_a_pin(owner_api):
    forged = {**order_tool(), "handler_sha256": "0" * 64}
    response = owner_api.post(
        "/api/v1/agents", {"name": "A", "slug": "a", "tools": [forged]}, format="json"
    )
    assert response.status_code == 400
    assert "handler_sha256" in response.json()["error"]["message"]


def test_same_slug_in_two_workspaces_is_fine(owner_api, outsider_api):
    body = {"name": "A", "slug": "shared"}
    assert owner_api.post("/api/v1/agents", body, format="json").status_code == 201
    assert outsider_api.post("/api/v1/agents", body, format="json").status_code == 201


def test_speech_providers_are_checked_by_name(owner_api):
    body = {"name": "A", "slug": "a", "stt_provider": "assemblyai", "tts_provider": "orpheus"}
    assert owner_api.post("/api/v1/agents", body, format="json").status_code == 201
    wrong = owner_api.patch("/api/v1/agents/a", {"tts_provider": "orpheuss"}, format="json")
    assert wrong.status_code == 400
    assert "tts_provider" in wrong.json()["error"]["message"]


def test_the_scripted_fake_providers_are_refused_outside_the_tests(owner_api, settings):
    settings.ALLOW_FAKE_PROVIDERS = False  # as on every real platform
    for field in ("stt_provider", "tts_provider"):
        refused = owner_api.post(
            "/api/v1/agents", {"name": "A", "slug": "a", field: "fake"}, format="json"
        )
        assert refused.status_code == 400, refused.content
        error = refused.json()["error"]
        assert error["code"] == "invalid" and list(error["fields"]) == [field]
        assert error["message"].startswith(f"{field}: ") and "fake" in error["message"]
    assert not Agent.objects.exists()
    created = owner_api.post("/api/v1/agents", {"name": "A", "slug": "a"}, format="json")
    assert created.status_code == 201
    patched = owner_api.patch("/api/v1/agents/a", {"stt_provider": "fake"}, format="json")
    assert patched.status_code == 400 and Agent.objects.get().stt_provider == ""


def test_a_voice_the_agents_tts_lacks_is_refused(owner_api, settings):
    settings.TTS_PROVIDER = "local"
    refused = owner_api.post(
        "/api/v1/agents", {"name": "A", "slug": "a", "voice": "jess"}, format="json"
    )
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert "voice" in error["fields"] and "'jess'" in error["message"] and "joe" in error["message"]
    orpheus = owner_api.post(
        "/api/v1/agents",
        {"name": "A", "slug": "a", "voice": "jess", "tts_provider": "orpheus"},
        format="json",
    )
    assert orpheus.status_code == 201, orpheus.content
    switched = owner_api.patch("/api/v1/agents/a", {"tts_provider": "local"}, format="json")
    assert switched.status_code == 400  # the voice would no longer exist


def test_vocabulary_and_empty_reply_are_saved_and_checked(owner_api):
    created = owner_api.post(
        "/api/v1/agents",
        {
            "name": "Coder",
            "slug": "coder",
            "vocabulary": [" index.js ", "greet()"],
            "empty_reply": "I have nothing to add.",
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["vocabulary"] == ["index.js", "greet()"]
    assert created.json()["empty_reply"] == "I have nothing to add."
    for vocabulary in (["x" * 51], ["   "], ["w"] * 101, "index.js"):
        response = owner_api.patch(
            "/api/v1/agents/coder", {"vocabulary": vocabulary}, format="json"
        )
        assert response.status_code == 400, vocabulary
        fields = response.json()["error"]["fields"]
        assert all(name.startswith("vocabulary") for name in fields), fields


def test_every_refused_tool_field_is_named_in_the_error(owner_api):
    tools = [
        order_tool(parameters={"order_number": "strng"}),
        order_tool(name="b", handler="async (args, ctx) => {"),
    ]
    response = owner_api.post(
        "/api/v1/agents", {"name": "A", "slug": "a", "tools": tools}, format="json"
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert set(error["fields"]) == {"tools[0].parameters.order_number", "tools[1].handler"}
    assert "unknown type 'strng'" in error["fields"]["tools[0].parameters.order_number"][0]
    assert error["message"].startswith("tools[0].parameters.order_number: unknown type")
    assert "; tools[1].handler: SyntaxError" in error["message"]
    assert not Agent.objects.exists()


# ---------------------------------------------------------------- warnings

WEATHER_HANDLER = (
    "async (args, ctx) => { const { UNITS } = ctx.secrets;"
    " return (await ctx.fetch(`https://api.weather.example/?units=${UNITS}`,"
    " { headers: { 'X-Api-Key': ctx.secrets.WEATHER_API_KEY } })).json() }"
)


def _fields(response) -> dict[str, str]:
    return {w["field"]: w["message"] for w in response.json()["warnings"]}


def test_a_handler_reading_secrets_the_workspace_lacks_is_saved_with_warnings(
    owner, owner_api, outsider_api, settings
):
    settings.LLM_BASE_URL = "http://127.0.0.1:9/v1"  # (no "no language model" warning here)
    secret_services.secret_set(workspace=owner.workspace, name="UNITS", value="metric")
    secret_services.secret_set(workspace=owner.workspace, name="UNUSED", value="x")
    tool = order_tool(name="get_weather", handler=WEATHER_HANDLER)
    created = owner_api.post(
        "/api/v1/agents", {"name": "W", "slug": "w", "tools": [tool]}, format="json"
    )
    assert created.status_code == 201, created.content
    warnings = created.json()["warnings"]
    assert [w["field"] for w in warnings] == ["tools[0].handler"]
    message = warnings[0]["message"]
    assert "get_weather reads the secret WEATHER_API_KEY" in message
    assert f"/w/{owner.workspace.pk}/secrets/" in message
    assert "UNITS" not in message  # the workspace has that one
    # The same warnings on every read of the agent, until the secret exists.
    assert owner_api.get("/api/v1/agents/w").json()["warnings"] == warnings
    secret_services.secret_set(workspace=owner.workspace, name="WEATHER_API_KEY", value="k")
    assert owner_api.get("/api/v1/agents/w").json()["warnings"] == []
    # Another workspace's secret of that name counts for nothing.
    outsider_agent = outsider_api.post(
        "/api/v1/agents", {"name": "W", "slug": "w", "tools": [tool]}, format="json"
    )
    assert set(_fields(outsider_agent)) == {"tools[0].handler"}
    assert "WEATHER_API_KEY" in _fields(outsider_agent)["tools[0].handler"]


def test_a_speech_provider_without_a_key_anywhere_is_saved_with_a_warning(
    owner, owner_api, settings
):
    settings.LLM_BASE_URL = "http://127.0.0.1:9/v1"
    settings.ELEVENLABS_API_KEY = ""
    settings.ASSEMBLYAI_API_KEY = ""
    body = {"name": "E", "slug": "e", "tts_provider": "elevenlabs", "voice": "abc123",
            "stt_provider": "assemblyai"}  # fmt: skip
    created = owner_api.post("/api/v1/agents", body, format="json")
    assert created.status_code == 201, created.content
    fields = _fields(created)
    assert set(fields) == {"tts_provider", "stt_provider"}
    assert "ElevenLabs has no key" in fields["tts_provider"]
    assert "ELEVENLABS_API_KEY" in fields["tts_provider"]
    assert f"/w/{owner.workspace.pk}/providers/" in fields["tts_provider"]
    assert "ASSEMBLYAI_API_KEY" in fields["stt_provider"]
    # The workspace's own key, or the platform's, is enough.
    provider_speech_set(workspace=owner.workspace, kind="elevenlabs", api_key="el-key-123")
    settings.ASSEMBLYAI_API_KEY = "platform-key"
    assert owner_api.get("/api/v1/agents/e").json()["warnings"] == []


def test_an_agent_with_no_language_model_anywhere_is_warned_about(owner_api, settings):
    settings.LLM_BASE_URL = ""
    created = owner_api.post("/api/v1/agents", {"name": "N", "slug": "n"}, format="json")
    assert _fields(created).keys() == {"llm_provider"}
    assert "can only repeat what it hears" in _fields(created)["llm_provider"]
    settings.LLM_BASE_URL = "http://127.0.0.1:9/v1"
    assert owner_api.get("/api/v1/agents/n").json()["warnings"] == []
    assert "warnings" not in owner_api.get("/api/v1/agents").json()[0]  # the list leaves them out
