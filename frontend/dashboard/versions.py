"""An agent's versions (publish, roll back, split, compare two) and its tests and
simulations (write, run, read the results side by side).

Every member reads; the buttons that change what callers get or start runs are the same
people's who may edit the agent (every member, as on the agent's page).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import path
from django.views.decorators.http import require_GET, require_POST

from core import parsers
from evals_app import selectors as eval_selectors
from evals_app import services as eval_services
from evals_app import tasks as eval_tasks
from evals_app.models import Status
from frontend.dashboard.scope import Scope, render_page, workspace_page
from secrets_app.audit import actor_for_request
from sessions_app import selectors, services, versions
from sessions_app.models import Agent

SECTION = "dashboard:agents"
REFRESH_S = 3


class SplitForm(forms.Form):
    version = forms.IntegerField(min_value=1, required=False)
    percent = forms.IntegerField(min_value=0, max_value=100)


class TestForm(forms.Form):
    name = forms.CharField(max_length=100)
    turns = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 8, "class": "mono"}),
        help_text='JSON: [{"user": "…", "spoken": true, "reply_contains": "…", '
        '"tool_called": "…", "tool_arguments": {"arg": "pattern"}, "judge": "…"}] '
        "(spoken: said by the offline voice, heard by the offline recogniser)",
    )
    tool_results = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "class": "mono"}),
        help_text='JSON: {"tool_name": result}; tools are not run in tests.',
    )


class SimulationForm(forms.Form):
    persona = forms.CharField(max_length=1000)
    goal = forms.CharField(max_length=1000)
    criteria = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), help_text="One a line.")
    max_turns = forms.IntegerField(min_value=1, initial=6)
    mode = forms.ChoiceField(
        choices=[("text", "Text"), ("voice", "Voice (spoken and heard offline)")],
        initial="text", required=False,
    )  # fmt: skip
    count = forms.IntegerField(min_value=1, initial=1, help_text="How many at once.")


def _agent(scope: Scope, slug: str) -> Agent:
    return selectors.agent_get(workspace=scope.workspace, slug=slug)


def _say_errors(request: HttpRequest, error: ValidationError) -> None:
    messages.error(request, " ".join(error.messages))


@workspace_page
@require_GET
def version_list(request: HttpRequest, scope: Scope, slug: str) -> HttpResponse:
    agent = _agent(scope, slug)
    found = list(agent.versions.filter(workspace=scope.workspace))
    diff, compared = None, None
    before, after = request.GET.get("from", ""), request.GET.get("to", "")
    if before.isdigit() and (after.isdigit() or after == "draft"):
        try:
            old = versions.version_get(agent=agent, number=int(before)).config
            new = (
                versions.agent_snapshot(agent)
                if after == "draft"
                else versions.version_get(agent=agent, number=int(after)).config
            )
            diff, compared = versions.versions_diff(old, new), (before, after)
        except ValidationError as error:
            _say_errors(request, error)
    published = agent.published_version
    context = {
        "agent": agent, "versions": found, "diff": diff, "compared": compared,
        "draft_changed": published is None or published.digest != versions.draft_digest(agent),
    }  # fmt: skip
    return render_page(request, scope, "dashboard/agent_versions.html", context, section=SECTION)


@workspace_page
@require_POST
def version_action(request: HttpRequest, scope: Scope, slug: str, action: str) -> HttpResponse:
    agent, actor = _agent(scope, slug), actor_for_request(request)
    try:
        if action == "publish":
            version = versions.agent_publish(
                agent=agent, actor=actor, note=request.POST.get("note", "")
            )
            messages.success(request, f"Version {version.number} published.")
        elif action == "rollback":
            version = versions.agent_rollback(
                agent=agent, number=int(request.POST.get("version", "0")), actor=actor
            )
            messages.success(request, f"Version {version.number} published again.")
        elif action == "split":
            form = SplitForm(request.POST)
            if form.is_valid():
                versions.agent_split_set(
                    agent=agent, number=form.cleaned_data["version"],
                    percent=form.cleaned_data["percent"], actor=actor,
                )  # fmt: skip
                messages.success(request, "Traffic split saved.")
        elif action == "settings":
            services.agent_update(
                agent=agent, actor=actor, drafts=request.POST.get("drafts") == "on",
                require_tests=request.POST.get("require_tests") == "on",
            )  # fmt: skip
            messages.success(request, "Saved.")
    except versions.PublishRefused as refused:
        messages.error(request, str(refused))
    except ValidationError as error:
        _say_errors(request, error)
    except ValueError:
        messages.error(request, "Choose a version.")
    return redirect("dashboard:agent-versions", scope.workspace.pk, agent.slug)


@workspace_page
@require_GET
def test_list(request: HttpRequest, scope: Scope, slug: str) -> HttpResponse:
    agent = _agent(scope, slug)
    runs = list(eval_selectors.test_runs(agent=agent)[:10])
    sims = list(eval_selectors.simulations(agent=agent)[:12])
    statuses = [run.status for run in runs] + [simulation.status for simulation in sims]
    busy = any(status in (Status.QUEUED, Status.RUNNING) for status in statuses)
    context = {
        "agent": agent, "tests": eval_selectors.agent_tests(agent=agent), "runs": runs,
        "simulations": sims, "test_form": TestForm(),
        "simulation_form": SimulationForm(), "refresh_s": REFRESH_S if busy else None,
    }  # fmt: skip
    return render_page(request, scope, "dashboard/agent_tests.html", context, section=SECTION)


def _json(text: str, default: Any) -> Any:
    try:
        return parsers.loads(text) if text.strip() else default
    except ValueError:
        raise ValidationError("not valid JSON") from None


@workspace_page
@require_POST
def test_action(request: HttpRequest, scope: Scope, slug: str, action: str) -> HttpResponse:
    agent, actor = _agent(scope, slug), actor_for_request(request)
    try:
        if action == "save":
            form = TestForm(request.POST)
            if form.is_valid():
                data = form.cleaned_data
                eval_services.agent_test_save(
                    agent=agent, name=data["name"], turns=_json(data["turns"], []),
                    tool_results=_json(data["tool_results"], {}), actor=actor,
                )  # fmt: skip
                messages.success(request, f"Test “{data['name']}” saved.")
        elif action == "run":
            spoken = request.POST.get("spoken") == "on"
            run = eval_services.test_run_create(agent=agent, spoken=spoken, actor=actor)
            eval_tasks.test_run_start(run.pk)
            messages.success(request, f"Tests started on the draft{', spoken' * spoken}.")
        elif action == "simulate":
            _simulate(request, agent)
    except ValidationError as error:
        _say_errors(request, error)
    return redirect("dashboard:agent-tests", scope.workspace.pk, agent.slug)


def _simulate(request: HttpRequest, agent: Agent) -> None:
    form = SimulationForm(request.POST)
    if not form.is_valid():
        raise ValidationError(" ".join(str(e) for errors in form.errors.values() for e in errors))
    data = form.cleaned_data
    scenario = {
        "persona": data["persona"], "goal": data["goal"], "max_turns": data["max_turns"],
        "mode": data["mode"] or "text",
        "criteria": [line.strip() for line in data["criteria"].splitlines() if line.strip()],
    }  # fmt: skip
    made = eval_services.simulations_create(
        agent=agent, scenarios=[scenario] * data["count"], actor=actor_for_request(request)
    )
    eval_tasks.simulations_start([simulation.pk for simulation in made])
    messages.success(request, f"{len(made)} simulation(s) started.")


urlpatterns = [
    path("agents/<slug:slug>/versions/", version_list, name="agent-versions"),
    path("agents/<slug:slug>/versions/<str:action>/", version_action, name="agent-version-do"),
    path("agents/<slug:slug>/tests/", test_list, name="agent-tests"),
    path("agents/<slug:slug>/tests/<str:action>/", test_action, name="agent-test-do"),
]
