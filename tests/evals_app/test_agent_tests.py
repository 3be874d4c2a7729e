"""Agent tests against the scripted LLM server: per-turn checks (tools with argument
patterns, reply text, an LLM judge with its reason), a failing test blocking a publish that
requires tests, a run without an LLM saying so, the CI command's exit code, simulations."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.management import CommandError, call_command

from evals_app import services as eval_services
from evals_app.models import Simulation
from sessions_app import services as agent_services
from sessions_app.models import Session
from tests.conftest import api_client
from tests.engine.providers.llm.openai.fake_server import (
    Done,
    FakeOpenAIServer,
    Finish,
    text_reply,
    tool_call,
)
from tests.factories import Tenant, order_tool

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def eager(settings: Any) -> Any:
    settings.CELERY_TASK_ALWAYS_EAGER = True
    return settings


def _verdict(passed: bool, reason: str) -> list[Any]:
    return text_reply(json.dumps({"pass": passed, "reason": reason}))


async def _post(tenant: Tenant, path: str, body: dict[str, Any]) -> Any:
    client = api_client(tenant.secret_key)
    return await sync_to_async(client.post)(f"/api/v1/{path}", body, format="json")


async def _get(tenant: Tenant, path: str) -> Any:
    client = api_client(tenant.secret_key)
    return await sync_to_async(client.get)(f"/api/v1/{path}")


async def _agent(tenant: Tenant, **fields: Any) -> Any:
    return await sync_to_async(agent_services.agent_create)(
        workspace=tenant.workspace, name="Shop", slug="shop", mode="text",
        instructions="Help with orders.", tools=[order_tool()], **fields,
    )  # fmt: skip


ORDER_TEST = {
    "name": "looks up an order",
    "turns": [
        {
            "user": "Where is order 1234?",
            "tool_called": "track_order",
            "tool_arguments": {"order_number": "^1234$"},
            "reply_contains": "shipped",
        },
        {"user": "Thanks, bye!", "tool_not_called": "*", "judge": "The agent says goodbye."},
    ],
    "tool_results": {"track_order": {"status": "shipped", "eta": "Friday"}},
}


async def test_a_run_checks_tools_replies_and_the_judges_verdict(
    owner: Tenant, llm: FakeOpenAIServer, eager: Any
) -> None:
    await _agent(owner)
    saved = await _post(owner, "agents/shop/tests", ORDER_TEST)
    assert saved.status_code == 201, saved.content
    llm.script(*tool_call(0, "call_1", "track_order", '{"order_number": "1234"}'),
               Finish("tool_calls"), Done())  # fmt: skip
    llm.script(text_reply("It has shipped and arrives Friday."))
    llm.script(text_reply("Goodbye, have a nice day!"))
    llm.script(_verdict(True, "It says goodbye."))

    started = await _post(owner, "agents/shop/test-runs", {})
    assert started.status_code == 202, started.content
    run = (await _get(owner, f"test-runs/{started.json()['id']}")).json()

    assert run["status"] == "passed", run
    assert run["message"] == "1 of 1 tests passed"
    first, second = run["results"][0]["turns"]
    assert first["tools"] == [{"name": "track_order", "arguments": {"order_number": "1234"}}]
    assert first["reply"] == "It has shipped and arrives Friday."
    assert [c["passed"] for c in first["checks"]] == [True, True]
    assert second["checks"][-1] == {
        "check": "judge 'The agent says goodbye.'", "passed": True, "detail": "It says goodbye."
    }  # fmt: skip
    # The tool was not run: the agent heard the test's result instead.
    tool_message = llm.requests[1].json["messages"][-1]
    assert json.loads(tool_message["content"]) == {"status": "shipped", "eta": "Friday"}
    # What the run consumed counts as the workspace's usage.
    metered = await sync_to_async(Session.objects.get)(workspace=owner.workspace, origin="test run")
    assert metered.agent_version is None and metered.usage


async def test_a_failed_check_says_what_it_saw(
    owner: Tenant, llm: FakeOpenAIServer, eager: Any
) -> None:
    await _agent(owner)
    await _post(owner, "agents/shop/tests", ORDER_TEST)
    llm.script(*tool_call(0, "call_1", "track_order", '{"order_number": "99"}'),
               Finish("tool_calls"), Done())  # fmt: skip
    llm.script(text_reply("It has shipped."))
    llm.script(text_reply("See you."))
    llm.script(_verdict(False, "It never says goodbye."))

    started = await _post(owner, "agents/shop/test-runs", {})
    run = (await _get(owner, f"test-runs/{started.json()['id']}")).json()

    assert run["status"] == "failed"
    first, second = run["results"][0]["turns"]
    tool_check = first["checks"][0]
    assert not tool_check["passed"]
    assert tool_check["detail"] == "track_order was called with {'order_number': '99'}"
    assert second["checks"][-1]["detail"] == "It never says goodbye."


async def test_a_failing_test_blocks_a_publish_that_requires_it(
    owner: Tenant, llm: FakeOpenAIServer, eager: Any
) -> None:
    await _agent(owner, require_tests=True)
    test = {
        "name": "refunds",
        "turns": [{"user": "Can I get a refund?", "reply_contains": "30 days"}],
    }
    await _post(owner, "agents/shop/tests", test)

    refused = await _post(owner, "agents/shop/publish", {})
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "tests_required"
    assert "run them on the draft first" in refused.json()["error"]["message"]

    llm.script(text_reply("No idea, sorry."))
    failed = await _post(owner, "agents/shop/test-runs", {})
    assert (await _get(owner, f"test-runs/{failed.json()['id']}")).json()["status"] == "failed"
    refused = await _post(owner, "agents/shop/publish", {})
    assert refused.status_code == 409
    assert "have not passed" in refused.json()["error"]["message"]
    agent = (await _get(owner, "agents/shop")).json()
    assert agent["published_version"] is None  # nothing went live

    client = api_client(owner.secret_key)
    await sync_to_async(client.patch)(
        "/api/v1/agents/shop", {"instructions": "Refunds: within 30 days."}, format="json"
    )
    llm.script(text_reply("Yes, within 30 days of delivery."))
    passed = await _post(owner, "agents/shop/test-runs", {})
    assert (await _get(owner, f"test-runs/{passed.json()['id']}")).json()["status"] == "passed"
    published = await _post(owner, "agents/shop/publish", {"note": "refund policy"})
    assert published.status_code == 201, published.content
    assert published.json()["number"] == 1


async def test_without_an_llm_a_run_says_so(owner: Tenant, eager: Any, settings: Any) -> None:
    settings.LLM_BASE_URL = ""
    await _agent(owner)
    await _post(owner, "agents/shop/tests", ORDER_TEST)
    started = await _post(owner, "agents/shop/test-runs", {})
    run = (await _get(owner, f"test-runs/{started.json()['id']}")).json()
    assert run["status"] == "error"
    assert run["message"].startswith("No language model is configured for this workspace")


async def test_the_ci_command_exits_non_zero_on_failure(
    owner: Tenant, llm: FakeOpenAIServer
) -> None:
    await _agent(owner)
    test = {"name": "greets", "turns": [{"user": "Hi", "reply_matches": "(?i)hello"}]}
    await _post(owner, "agents/shop/tests", test)
    args = ("run_agent_tests", "--workspace", str(owner.workspace.pk), "--agent", "shop")

    llm.script(text_reply("Hello! How can I help?"))
    await sync_to_async(call_command)(*args)  # passes: returns

    llm.script(text_reply("Yes?"))
    with pytest.raises(CommandError) as failed:
        await sync_to_async(call_command)(*args)
    assert failed.value.returncode == 1


async def test_a_simulated_user_talks_to_the_agent_and_is_judged(
    owner: Tenant, llm: FakeOpenAIServer, eager: Any
) -> None:
    await _agent(owner)
    scenario = {
        "persona": "A hurried customer.",
        "goal": "Learn where order 1234 is.",
        "criteria": ["The agent asks for the order number."],
        "max_turns": 4,
    }
    llm.script(text_reply("Where is my order?"))  # the simulated user
    llm.script(text_reply("Which order number?"))  # the agent
    llm.script(text_reply("It is 1234."))
    llm.script(*tool_call(0, "c1", "track_order", '{"order_number": "1234"}'),
               Finish("tool_calls"), Done())  # fmt: skip
    llm.script(text_reply("Order 1234 has shipped."))
    llm.script(text_reply("[done]"))
    llm.script(_verdict(True, "It asked for the number first."))

    started = await _post(owner, "agents/shop/simulations", {"scenarios": [scenario]})
    assert started.status_code == 202, started.content
    batch = started.json()[0]["batch"]
    [result] = (await _get(owner, f"agents/shop/simulations?batch={batch}")).json()

    assert result["status"] == "passed", result
    assert [(t["role"], t["text"]) for t in result["transcript"]] == [
        ("user", "Where is my order?"), ("assistant", "Which order number?"),
        ("user", "It is 1234."), ("assistant", "Order 1234 has shipped."),
    ]  # fmt: skip
    assert result["verdicts"] == [
        {
            "criterion": "The agent asks for the order number.",
            "passed": True,
            "reason": "It asked for the number first.",
        }
    ]
    # The simulated user saw the agent's lines as the other side of its conversation.
    user_view = llm.requests[2].json["messages"]
    assert [m["role"] for m in user_view[1:]] == ["assistant", "user"]
    assert await sync_to_async(Session.objects.filter(origin="simulation").count)() == 1


async def test_simulations_are_bounded(owner: Tenant, settings: Any) -> None:
    settings.SIMULATIONS_PER_BATCH_MAX = 2
    await _agent(owner)
    scenario = {"persona": "p", "goal": "g", "criteria": ["c"]}
    refused = await _post(owner, "agents/shop/simulations", {"scenarios": [scenario] * 3})
    assert refused.status_code == 400
    assert "1 to 2 scenarios at once" in refused.json()["error"]["message"]
    settings.SIMULATIONS_IN_FLIGHT_MAX = 1
    agent = await sync_to_async(lambda: owner.workspace.agents.get(slug="shop"))()
    await sync_to_async(eval_services.simulations_create)(agent=agent, scenarios=[scenario])
    refused = await _post(owner, "agents/shop/simulations", {"scenarios": [scenario]})
    assert "at most 1 simulations running" in refused.json()["error"]["message"]
    assert await sync_to_async(Simulation.objects.count)() == 1


async def test_the_outsider_sees_nothing(
    owner: Tenant, outsider: Tenant, eager: Any, settings: Any
) -> None:
    settings.LLM_BASE_URL = ""
    await _agent(owner)
    await _post(owner, "agents/shop/tests", ORDER_TEST)
    run = (await _post(owner, "agents/shop/test-runs", {})).json()
    for path in ("agents/shop/tests", "agents/shop/test-runs", f"test-runs/{run['id']}",
                 "agents/shop/simulations"):  # fmt: skip
        assert (await _get(outsider, path)).status_code == 404, path
    assert (await _post(outsider, "agents/shop/test-runs", {})).status_code == 404
