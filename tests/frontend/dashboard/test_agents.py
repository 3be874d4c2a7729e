"""Agents: the list, the template gallery, the editor (tools, pins, errors) and delete."""

from __future__ import annotations

import base64
import hashlib
import html as html_lib
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from frontend.dashboard.agent_forms import AgentEditor
from frontend.dashboard.agent_templates import TEMPLATES
from secrets_app.services import secret_set
from sessions_app import selectors, services
from sessions_app.agent_tools import AgentToolsInvalid, ToolError
from sessions_app.models import Agent
from tests.factories import Tenant, order_tool
from tests.frontend.dashboard.conftest import page
from tests.tools_app.jailed import run_jailed

HANDLER = """async (args, ctx) => {
  const response = await ctx.fetch("https://api.example.com/orders/" + args.order_number);
  return response.json();
}"""


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def editor_post(*, tools: list[dict[str, str]] | None = None, **fields: str) -> dict[str, str]:
    """What the editor's form posts: the agent's fields and the tools formset."""
    tools = tools or []
    data = {
        "name": "Orders", "slug": "", "instructions": "", "greeting": "", "voice": "",
        "mode": "voice", "llm_model": "", "stt_provider": "", "tts_provider": "",
        "tools-TOTAL_FORMS": str(len(tools)), "tools-INITIAL_FORMS": "0",
        "tools-MIN_NUM_FORMS": "0", "tools-MAX_NUM_FORMS": "32",
        **fields,
    }  # fmt: skip
    for index, tool in enumerate(tools):
        blank = {"runs_on": "server", "description": "", "handler": "", "parameters": ""}
        for key, value in {**blank, "timeout_ms": "", **tool}.items():
            data[f"tools-{index}-{key}"] = value
    return data


def server_tool(**overrides: str) -> dict[str, str]:
    tool = {
        "name": "track_order",
        "description": "Look up an order",
        "parameters": '{"order_number": "string"}',
        "handler": HANDLER,
    }
    return {**tool, **overrides}


class _EditorForm(HTMLParser):
    """Collects what a browser would submit from the editor (outside the <template>)."""

    def __init__(self) -> None:
        super().__init__()
        self.data: dict[str, str] = {}
        self._in_template = 0
        self._textarea: str | None = None
        self._select: str | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {key: value or "" for key, value in attrs}
        if tag == "template":
            self._in_template += 1
        if self._in_template or ("name" not in attr and tag != "option"):
            return
        if tag == "input" and attr.get("type") not in ("submit", "button"):
            if attr.get("type") != "checkbox":
                self.data[attr["name"]] = attr.get("value", "")
            elif "checked" in attr:
                self.data[attr["name"]] = attr.get("value", "on")
        elif tag == "textarea":
            self._textarea, self._text = attr["name"], ""
        elif tag == "select":
            self._select = attr["name"]
        elif tag == "option" and self._select:
            if self._select not in self.data or "selected" in attr:
                self.data[self._select] = attr.get("value", "")

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "template":
            self._in_template -= 1
        elif tag == "textarea" and self._textarea is not None:
            # Browsers drop the newline right after <textarea>.
            self.data[self._textarea] = self._text.removeprefix("\n")
            self._textarea = None
        elif tag == "select":
            self._select = None


def submitted(html: str) -> dict[str, str]:
    form = html[html.index("data-agent-form") :]
    parser = _EditorForm()
    parser.feed(form[: form.index("</form>")])
    return parser.data


def field_errors(html: str, field_id: str) -> str:
    found = re.search(rf'<ul class="errorlist" id="{field_id}_error">(.*?)</ul>', html, re.S)
    return html_lib.unescape(found[1]) if found else ""


def agents_of(tenant: Tenant) -> list[Agent]:
    return list(selectors.agent_list(workspace=tenant.workspace))


# -- creating and editing -----------------------------------------------------------------


def test_create_an_agent_with_a_server_tool(owner: Tenant, owner_client: Client) -> None:
    response = owner_client.post(
        page(owner, "agent-new"),
        editor_post(
            name="Order desk",
            instructions="Greet {{customer_name}}.",
            mode="text",
            tts_provider="orpheus",
            tools=[server_tool(timeout_ms="5000")],
        ),
        follow=True,
    )
    assert response.redirect_chain[-1][0] == page(owner, "agent-edit", "order-desk")
    assert "Agent “Order desk” created." in response.content.decode()
    agent = selectors.agent_get(workspace=owner.workspace, slug="order-desk")
    assert agent.instructions == "Greet {{customer_name}}." and agent.mode == "text"
    assert agent.tts_provider == "orpheus" and agent.stt_provider == ""
    [tool] = agent.tools
    assert tool["name"] == "track_order" and tool["parameters"] == {"order_number": "string"}
    assert tool["handler"] == HANDLER and tool["timeoutMs"] == 5000
    assert tool["handler_sha256"] == sha(HANDLER)


def test_the_editor_warns_about_missing_secrets_and_keys_after_saving(
    owner: Tenant, owner_client: Client, settings: Any
) -> None:
    settings.LLM_BASE_URL = "http://127.0.0.1:9/v1"
    settings.ELEVENLABS_API_KEY = ""
    handler = "async (args, ctx) => ctx.fetch('https://x.example', "
    handler += "{ headers: { Authorization: `Bearer ${ctx.secrets.ORDERS_API_KEY}` } })"
    response = owner_client.post(
        page(owner, "agent-new"),
        editor_post(
            name="Order desk", tts_provider="elevenlabs", voice="abc",
            tools=[server_tool(handler=handler)],
        ),
        follow=True,
    )  # fmt: skip
    html = html_lib.unescape(response.content.decode())
    assert "Agent “Order desk” created." in html  # saved: warnings are not refusals
    assert "needs what its workspace does not have yet" in html
    assert "track_order reads the secret ORDERS_API_KEY" in html
    assert "ElevenLabs has no key" in html and "ELEVENLABS_API_KEY" in html
    services.agent_update(agent=selectors.agent_get(workspace=owner.workspace, slug="order-desk"),
                          tts_provider="")  # fmt: skip
    secret_set(workspace=owner.workspace, name="ORDERS_API_KEY", value="k")
    html = owner_client.get(page(owner, "agent-edit", "order-desk")).content.decode()
    assert "data-agent-warnings" not in html


def test_the_editor_shows_the_pin_and_editing_the_handler_re_pins_it(
    owner: Tenant, owner_client: Client
) -> None:
    saved = order_tool()
    services.agent_create(workspace=owner.workspace, name="Orders", slug="orders", tools=[saved])
    html = owner_client.get(page(owner, "agent-edit", "orders")).content.decode()
    assert f"pinned {sha(saved['handler'])[:12]}" in html
    assert "re-pins it when you save" in html

    form = submitted(html)
    assert form["tools-0-handler"] == saved["handler"]
    form["tools-0-handler"] = HANDLER.replace("\n", "\r\n")  # as a browser sends it
    form["greeting"] = "Hello, order desk."
    response = owner_client.post(page(owner, "agent-edit", "orders"), form, follow=True)
    html = response.content.decode()
    assert "Agent “Orders” saved." in html
    agent = selectors.agent_get(workspace=owner.workspace, slug="orders")
    assert agent.greeting == "Hello, order desk."
    assert agent.tools[0]["handler"] == HANDLER
    assert agent.tools[0]["handler_sha256"] == sha(HANDLER)
    assert f"pinned {sha(HANDLER)[:12]}" in html


def test_saving_unchanged_keeps_every_tool_and_pin(owner: Tenant, owner_client: Client) -> None:
    tools = [order_tool(timeoutMs=2000), {"name": "open_file", "client": True, "parameters": {}}]
    agent = services.agent_create(
        workspace=owner.workspace,
        name="Orders",
        slug="orders",
        voice="tara",
        tools=tools,
        reads_secrets=True,  # saved by an owner, as the dashboard does
    )
    form = submitted(owner_client.get(page(owner, "agent-edit", "orders")).content.decode())
    assert owner_client.post(page(owner, "agent-edit", "orders"), form).status_code == 302
    again = selectors.agent_get(workspace=owner.workspace, slug="orders")
    assert again.tools == agent.tools and again.voice == "tara"


def test_a_removed_tool_is_gone_after_saving(owner: Tenant, owner_client: Client) -> None:
    client_tool = {"name": "open_file", "client": True}
    services.agent_create(
        workspace=owner.workspace, name="Orders", slug="orders", tools=[order_tool(), client_tool]
    )
    form = submitted(owner_client.get(page(owner, "agent-edit", "orders")).content.decode())
    form["tools-0-DELETE"] = "on"
    form["tools-0-handler"] = "this is not even JavaScript ("  # a removed tool is not checked
    assert owner_client.post(page(owner, "agent-edit", "orders"), form).status_code == 302
    agent = selectors.agent_get(workspace=owner.workspace, slug="orders")
    assert [tool["name"] for tool in agent.tools] == ["open_file"]


def test_a_syntax_error_is_shown_on_the_handler_with_its_line(
    owner: Tenant, owner_client: Client
) -> None:
    broken = "async (args, ctx) => {\n  const x = ;\n  return x;\n}"
    response = owner_client.post(
        page(owner, "agent-new"), editor_post(tools=[server_tool(handler=broken)])
    )
    assert response.status_code == 200
    html = response.content.decode()
    error = field_errors(html, "id_tools-0-handler")
    assert "SyntaxError" in error and "(line 2)" in error
    assert "Nothing was saved" in html
    assert html_lib.escape(broken) in html  # the code is still there to fix
    assert agents_of(owner) == []


def test_a_syntax_error_leaves_the_saved_agent_as_it_was(
    owner: Tenant, owner_client: Client
) -> None:
    services.agent_create(
        workspace=owner.workspace, name="Orders", slug="orders", tools=[order_tool()]
    )
    form = submitted(owner_client.get(page(owner, "agent-edit", "orders")).content.decode())
    form["tools-0-handler"] = "async (args) => {\n  return args.\n}"
    form["name"] = "Renamed"
    response = owner_client.post(page(owner, "agent-edit", "orders"), form)
    assert "(line 3)" in field_errors(response.content.decode(), "id_tools-0-handler")
    agent = selectors.agent_get(workspace=owner.workspace, slug="orders")
    assert agent.name == "Orders" and agent.tools[0]["handler"] == order_tool()["handler"]


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ('{"order_number": "string",}', "Not valid JSON"),
        ('{"order_number": "strng"}', "unknown type 'strng'"),
        ('["order_number"]', "Input should be a valid dictionary"),  # the service's words
        pytest.param(  # was a 500: RecursionError
            '{"a": ' * 2000 + "1" + "}" * 2000, "nests more than 100 levels", id="nested"
        ),
    ],
)
def test_bad_parameters_are_refused_on_the_parameters_field(
    owner: Tenant, owner_client: Client, parameters: str, message: str
) -> None:
    response = owner_client.post(
        page(owner, "agent-new"), editor_post(tools=[server_tool(parameters=parameters)])
    )
    assert response.status_code == 200
    assert message in field_errors(response.content.decode(), "id_tools-0-parameters")
    assert agents_of(owner) == []


def test_a_duplicate_slug_is_refused_on_the_slug_field(owner: Tenant, owner_client: Client) -> None:
    services.agent_create(workspace=owner.workspace, name="Orders", slug="orders")
    # Typed, or made from the name: either way the slug field says why.
    for fields in ({"name": "Other", "slug": "orders"}, {"name": "Orders", "slug": ""}):
        response = owner_client.post(page(owner, "agent-new"), editor_post(**fields))
        assert response.status_code == 200
        assert "already exists" in field_errors(response.content.decode(), "id_slug")
    assert [agent.name for agent in agents_of(owner)] == ["Orders"]


def test_tool_blocks_refuse_what_cannot_work(owner: Tenant, owner_client: Client) -> None:
    tools = [
        server_tool(handler=""),
        server_tool(name="track_order", runs_on="browser", handler="async () => 1"),
        {"name": "2fast", "runs_on": "browser"},
    ]
    response = owner_client.post(page(owner, "agent-new"), editor_post(tools=tools))
    html = response.content.decode()
    assert "Write the handler" in field_errors(html, "id_tools-0-handler")
    assert "clear it" in field_errors(html, "id_tools-1-handler")
    assert "names must be unique" in field_errors(html, "id_tools-1-name")
    assert "not starting with a digit" in field_errors(html, "id_tools-2-name")
    assert agents_of(owner) == []


def test_a_refusal_by_the_service_lands_on_the_field_it_names(owner: Tenant) -> None:
    editor = AgentEditor(editor_post(tools=[server_tool(), {"name": "b", "runs_on": "browser"}]))
    assert editor.is_valid()
    editor.add_service_error(
        AgentToolsInvalid(
            [
                ToolError("too long", index=1, field="timeoutMs"),
                ToolError("bad type", index=0, field="parameters", within="x"),
                ToolError("at most 32 tools"),
            ]
        )
    )
    assert editor.tools.forms[1].errors["timeout_ms"] == ["Too long"]
    assert editor.tools.forms[0].errors["parameters"] == ["X: bad type"]
    assert editor.form.non_field_errors() == ["Tools: at most 32 tools"]
    editor.add_service_error(ValidationError({"slug": ["an agent with slug 'x' already exists"]}))
    assert editor.form.errors["slug"] == ["An agent with slug 'x' already exists"]


def test_the_blank_editor_works_without_javascript(owner: Tenant, owner_client: Client) -> None:
    html = owner_client.get(page(owner, "agent-new")).content.decode()
    form = submitted(html)
    assert form["tools-TOTAL_FORMS"] == "1" and form["tools-0-name"] == ""  # one blank block
    assert 'class="code"' in html and 'spellcheck="false"' in html
    assert "Use {{variable}} to insert values the page sends in configure/context" in html
    assert '<option value="" selected>Platform default</option>' in html
    assert "tools-__prefix__-handler" in html  # the empty form that agents.js clones
    form.update(name="Support", instructions="Be kind.")
    assert owner_client.post(page(owner, "agent-new"), form).status_code == 302
    agent = selectors.agent_get(workspace=owner.workspace, slug="support")
    assert agent.tools == [] and agent.instructions == "Be kind."
    assert agent.preemptive_generation  # checked on a new agent: the default


def test_reserved_and_malformed_slugs_are_refused(owner: Tenant, owner_client: Client) -> None:
    for slug, message in (("new", "dashboard's own pages"), ("Order Desk", "lowercase")):
        response = owner_client.post(page(owner, "agent-new"), editor_post(slug=slug))
        assert message in field_errors(response.content.decode(), "id_slug")
    assert agents_of(owner) == []


# -- list, gallery, delete ----------------------------------------------------------------


def test_the_list_links_to_the_editor_and_the_playground(
    owner: Tenant, owner_client: Client
) -> None:
    empty = owner_client.get(page(owner, "agents")).content.decode()
    assert "No agents yet" in empty
    assert page(owner, "agent-templates") in empty and page(owner, "agent-new") in empty

    services.agent_create(
        workspace=owner.workspace, name="Order desk", slug="orders", mode="text",
        tools=[order_tool(), {"name": "open_file", "client": True}],
    )  # fmt: skip
    html = owner_client.get(page(owner, "agents")).content.decode()
    assert "No agents yet" not in html
    assert f'href="{page(owner, "agent-edit", "orders")}">Order desk</a>' in html
    assert f"{page(owner, 'playground')}?agent=orders" in html
    assert '<td class="num">2</td>' in html and "text</span>" in html


@pytest.mark.parametrize("template_id", sorted(TEMPLATES))
def test_each_template_opens_a_prefilled_editor_that_saves_as_is(
    owner: Tenant, owner_client: Client, template_id: str
) -> None:
    template = TEMPLATES[template_id]
    gallery = owner_client.get(page(owner, "agent-templates")).content.decode()
    new_url = f"{page(owner, 'agent-new')}?template={template_id}"
    assert f'href="{new_url}"' in gallery
    html = owner_client.get(new_url).content.decode()
    assert "Nothing is saved until you save" in html
    assert agents_of(owner) == []

    form = submitted(html)
    assert form["name"] == template.agent["name"]
    assert form["instructions"] == template.agent["instructions"]
    response = owner_client.post(new_url, form)
    assert response.status_code == 302, field_errors(response.content.decode(), "id_slug")
    [agent] = agents_of(owner)
    assert response["Location"] == page(owner, "agent-edit", agent.slug)
    assert agent.instructions == template.agent["instructions"]
    assert agent.greeting == template.agent["greeting"] and agent.voice == template.agent["voice"]
    assert agent.tools == services.agent_tools_clean(template.tools, reads_secrets=True)


def test_the_order_template_says_which_secret_to_create(
    owner: Tenant, owner_client: Client
) -> None:
    html = owner_client.get(page(owner, "agent-new") + "?template=order-tracking").content.decode()
    assert "<code>SHOP_API_KEY</code>" in html and page(owner, "secrets") in html
    handler = TEMPLATES["order-tracking"].tools[0]["handler"]
    assert "ctx.secrets.SHOP_API_KEY" in handler and "create it under Secrets" in handler
    assert owner_client.get(page(owner, "agent-new") + "?template=nope").status_code == 404


def test_the_candidate_template_is_the_voice_ide_persona() -> None:
    source = Path(__file__).parents[3] / "examples/voice-ide/src/agent.ts"
    literal = re.search(r"const INSTRUCTIONS = `(.*?)`;", source.read_text(), re.DOTALL)
    template = TEMPLATES["frontend-candidate"]
    assert literal is not None and template.agent["instructions"] == literal[1]
    assert {"{{task}}", "{{editor}}", "{{last_error}}"} <= set(
        re.findall(r"\{\{\w+\}\}", template.agent["instructions"])
    )
    assert template.agent["voice"] == "leo"
    assert [(t["name"], t.get("client")) for t in template.tools] == [
        ("open_file", True),
        ("write_file", True),
    ]


async def test_the_server_templates_handlers_run_in_the_sandbox() -> None:
    requests: list[dict[str, Any]] = []

    async def fetcher(request: dict[str, Any]) -> dict[str, Any]:
        requests.append(request)
        if "geocoding" in request["url"]:
            body = {"results": [{"name": "Paris", "country": "France", "latitude": 48.85,
                                 "longitude": 2.35}]}  # fmt: skip
        elif "forecast" in request["url"]:
            body = {"current": {"temperature_2m": 21.5, "wind_speed_10m": 9, "weather_code": 1}}
        else:
            body = {"status": "shipped", "expected_delivery": "2025-06-02"}
        encoded = base64.b64encode(json.dumps(body).encode()).decode()
        return {"status": 200, "headers": [], "body": encoded, "url": request["url"]}

    weather = TEMPLATES["weather"].tools[0]["handler"]
    result = await run_jailed(weather, {"city": "Paris"}, fetcher=fetcher)
    assert result.ok, result.error
    assert json.loads(result.result_json or "") == {
        "place": "Paris, France", "temperature_c": 21.5, "wind_kmh": 9, "weather_code": 1,
    }  # fmt: skip
    assert "latitude=48.85" in requests[1]["url"]

    order = TEMPLATES["order-tracking"].tools[0]["handler"]
    secrets = {"SHOP_API_KEY": "shop-key"}
    result = await run_jailed(order, {"order_number": "A 17"}, secrets=secrets, fetcher=fetcher)
    assert result.ok and json.loads(result.result_json or "")["status"] == "shipped"
    assert requests[2]["url"] == "https://api.example.com/orders/A%2017"
    assert ["authorization", "Bearer shop-key"] in requests[2]["headers"]


def test_delete_goes_through_a_confirmation(owner: Tenant, owner_client: Client) -> None:
    services.agent_create(workspace=owner.workspace, name="Orders", slug="orders")
    confirm = owner_client.get(page(owner, "agent-delete", "orders")).content.decode()
    assert "Delete agent “Orders”?" in confirm and 'class="btn danger"' in confirm
    assert agents_of(owner) != []
    response = owner_client.post(page(owner, "agent-delete", "orders"), follow=True)
    assert response.redirect_chain[-1][0] == page(owner, "agents")
    assert "Agent “Orders” deleted." in response.content.decode()
    assert agents_of(owner) == []


# -- who may do what ----------------------------------------------------------------------


def test_a_member_can_create_and_edit_agents(member: Tenant, member_client: Client) -> None:
    response = member_client.post(
        page(member, "agent-new"), editor_post(name="Weather", tools=[server_tool()])
    )
    assert response.status_code == 302
    form = submitted(member_client.get(page(member, "agent-edit", "weather")).content.decode())
    form["instructions"] = "Say the temperature."
    assert member_client.post(page(member, "agent-edit", "weather"), form).status_code == 302
    agent = selectors.agent_get(workspace=member.workspace, slug="weather")
    assert agent.instructions == "Say the temperature."
    assert agent.tools[0]["handler_sha256"] == sha(HANDLER)


@pytest.mark.parametrize(
    ("method", "name", "data"),
    [
        ("get", "agents", None),
        ("get", "agent-templates", None),
        ("get", "agent-new", None),
        ("post", "agent-new", editor_post(name="Planted")),
        ("get", "agent-edit", None),
        ("post", "agent-edit", editor_post(name="Hijacked", slug="orders")),
        ("get", "agent-delete", None),
        ("post", "agent-delete", {}),
    ],
)
def test_the_outsider_sees_nothing(
    owner: Tenant, outsider_client: Client, method: str, name: str, data: dict[str, str] | None
) -> None:
    services.agent_create(
        workspace=owner.workspace, name="Orders", slug="orders", tools=[order_tool()]
    )
    url = (
        page(owner, name, "orders") if name in ("agent-edit", "agent-delete") else page(owner, name)
    )
    response = getattr(outsider_client, method)(url, data or {})
    assert response.status_code == 404
    assert "track_order" not in response.content.decode()
    [agent] = agents_of(owner)
    assert agent.name == "Orders" and agent.tools[0]["name"] == "track_order"


def test_the_outsider_cannot_reach_an_agent_through_their_own_workspace(
    owner: Tenant, outsider: Tenant, outsider_client: Client
) -> None:
    services.agent_create(workspace=owner.workspace, name="Orders", slug="orders")
    assert outsider_client.get(page(outsider, "agent-edit", "orders")).status_code == 404
    assert outsider_client.post(page(outsider, "agent-delete", "orders")).status_code == 404
    assert "Orders" not in outsider_client.get(page(outsider, "agents")).content.decode()
    assert [agent.slug for agent in agents_of(owner)] == ["orders"]


def test_vocabulary_lines_empty_reply_and_voice_are_checked_and_saved(
    owner: Tenant, owner_client: Client, settings: Any
) -> None:
    settings.TTS_PROVIDER = "local"
    refused = owner_client.post(page(owner, "agent-new"), editor_post(voice="jess"))
    assert "has no voice" in field_errors(refused.content.decode(), "id_voice")
    assert agents_of(owner) == []
    owner_client.post(
        page(owner, "agent-new"),
        editor_post(
            name="Coder", voice="joe", vocabulary="index.js\n\n greet() \n", empty_reply="Hmm."
        ),
    )
    agent = selectors.agent_get(workspace=owner.workspace, slug="coder")
    assert agent.vocabulary == ["index.js", "greet()"] and agent.empty_reply == "Hmm."
    shown = submitted(owner_client.get(page(owner, "agent-edit", "coder")).content.decode())
    assert shown["vocabulary"] == "index.js\ngreet()"
    long_term = owner_client.post(
        page(owner, "agent-edit", "coder"),
        editor_post(name="Coder", slug="coder", vocabulary="x" * 51),
    )
    assert "at most 50 characters" in field_errors(long_term.content.decode(), "id_vocabulary")


@pytest.mark.postgres  # SQLite's shared in-memory test database locks whole tables
@pytest.mark.django_db(transaction=True)
def test_saves_at_the_same_moment_through_the_api_and_the_dashboard(owner: Tenant) -> None:
    """Two saves at once used to crash the web process (V8 on two request threads)."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.conftest import api_client
    from tests.frontend.dashboard.conftest import logged_in

    template_url = f"{page(owner, 'agent-new')}?template=weather"
    form = submitted(logged_in(owner).get(template_url).content.decode())
    handler_field = next(name for name in form if name.endswith("-handler"))

    def save_by_api(n: int) -> int:
        handler = "async (args) => ({ n: args.n })" if n % 3 else "async (args) => { oops("
        body = {"name": f"A{n}", "slug": f"api-{n}", "tools": [order_tool(handler=handler)]}
        return api_client(owner.secret_key).post("/api/v1/agents", body, format="json").status_code

    def save_by_dashboard(n: int) -> int:
        data = {**form, "slug": f"dash-{n}", "name": f"D{n}"}
        if n % 3 == 0:
            data[handler_field] = "async (args) => {"
        return logged_in(owner).post(page(owner, "agent-new"), data).status_code

    with ThreadPoolExecutor(max_workers=8) as threads:
        api = list(threads.map(save_by_api, range(12)))
        dashboard = list(threads.map(save_by_dashboard, range(6)))
    assert api == [400 if n % 3 == 0 else 201 for n in range(12)]
    assert dashboard == [200 if n % 3 == 0 else 302 for n in range(6)]
    assert len(agents_of(owner)) == 8 + 4


def test_fallbacks_are_typed_checked_and_saved(
    owner: Tenant, owner_client: Client, settings: Any
) -> None:
    from secrets_app.provider_credentials import provider_llm_set

    settings.TTS_PROVIDER, settings.OPENAI_API_KEY, settings.ORPHEUS_URL = "local", "sk-x", ""
    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    provider_llm_set(
        workspace=owner.workspace, name="spare", base_url="http://127.0.0.1:9/v1", model="m"
    )
    refused = owner_client.post(page(owner, "agent-new"), editor_post(tts_fallbacks="orpheus"))
    assert "has no key" in field_errors(refused.content.decode(), "id_tts_fallbacks")
    assert agents_of(owner) == []
    owner_client.post(
        page(owner, "agent-new"),
        editor_post(name="Spare", llm_fallbacks="spare small\nother-model", tts_fallbacks="openai"),
    )
    agent = selectors.agent_get(workspace=owner.workspace, slug="spare")
    assert agent.llm_fallbacks == [
        {"connection": "spare", "model": "small"}, {"connection": "", "model": "other-model"},
    ]  # fmt: skip
    assert agent.tts_fallbacks == ["openai"]
    shown = submitted(owner_client.get(page(owner, "agent-edit", "spare")).content.decode())
    assert shown["llm_fallbacks"] == "spare small\nother-model"
    assert shown["tts_fallbacks"] == "openai"


def test_the_scripted_fake_providers_are_neither_offered_nor_saved(
    owner: Tenant, owner_client: Client, settings: Any
) -> None:
    settings.ALLOW_FAKE_PROVIDERS = False  # as on every real platform
    blank = owner_client.get(page(owner, "agent-new")).content.decode()
    assert '<option value="local">Local (offline)</option>' in blank
    assert 'value="fake"' not in blank
    refused = owner_client.post(page(owner, "agent-new"), editor_post(stt_provider="fake"))
    assert refused.status_code == 200
    assert "valid choice" in field_errors(refused.content.decode(), "id_stt_provider")
    # One saved before (by a test platform): shown as chosen, refused on the field when saved.
    services.agent_create(workspace=owner.workspace, name="Old", slug="old")
    Agent.objects.filter(slug="old").update(tts_provider="fake")
    edit = owner_client.get(page(owner, "agent-edit", "old")).content.decode()
    assert submitted(edit)["tts_provider"] == "fake"
    saved = owner_client.post(
        page(owner, "agent-edit", "old"), editor_post(name="Old", slug="old", tts_provider="fake")
    )
    assert "choose one of" in field_errors(saved.content.decode(), "id_tts_provider")
    assert selectors.agent_get(workspace=owner.workspace, slug="old").name == "Old"


def test_the_form_names_the_platform_defaults_and_every_providers_voices(
    owner: Tenant, owner_client: Client, settings: Any
) -> None:
    settings.STT_PROVIDER, settings.TTS_PROVIDER = "assemblyai", "local"
    html = owner_client.get(page(owner, "agent-new")).content.decode()
    stt = html[html.index('name="stt_provider"') :].split("</select>")[0]
    tts = html[html.index('name="tts_provider"') :].split("</select>")[0]
    assert '<option value="" selected>Platform default (AssemblyAI' in stt
    assert '<option value="" selected>Platform default (Local (offline))</option>' in tts
    assert "Orpheus: tara (default), leah, jess" in html and "Local (offline): joe." in html
    assert "ElevenLabs: a voice id" in html and "OpenAI: alloy (default), ash" in html
