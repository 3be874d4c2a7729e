"""Knowledge bases: their documents with indexing progress and errors, uploads and URLs,
the model a base embeds with (``knowledge_embedding``: the workspace's embedding
connections), and which knowledge bases an agent answers from.

Members see everything; owners and admins add, refresh and delete (a URL is fetched on the
platform's behalf, and documents may hold what the workspace keeps private). A page with a
document still being indexed reloads itself every few seconds (a meta refresh: no script).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import path
from django.views.decorators.http import require_http_methods, require_POST

from core import outbound
from frontend.dashboard.scope import Scope, confirm_then, render_page, workspace_page
from knowledge_app import selectors, services
from knowledge_app.models import Document, KnowledgeBase
from secrets_app.audit import actor_for_request
from secrets_app.models import ProviderCredential
from sessions_app import selectors as agent_selectors

SECTION = "dashboard:knowledge"
STATUS_BADGES: dict[str, str] = {
    Document.Status.READY: "green",
    Document.Status.FAILED: "red",
    Document.Status.INDEXING: "amber",
    Document.Status.PENDING: "gray",
}
REFRESH_S = 3
OFFLINE_CHOICE = ""  # a base's embedding model: the offline one


class BaseForm(forms.Form):
    name = forms.CharField(max_length=100)
    description = forms.CharField(max_length=500, required=False)


class UploadForm(forms.Form):
    file = forms.FileField(help_text="PDF, Markdown, plain text, HTML or DOCX.")
    title = forms.CharField(max_length=200, required=False, help_text="Blank: the file's name.")


class UrlForm(forms.Form):
    url = forms.CharField(label="URL", max_length=500, widget=forms.URLInput())
    title = forms.CharField(max_length=200, required=False)
    refresh_hours = forms.IntegerField(
        label="Fetch again every (hours)", min_value=0, max_value=services.REFRESH_MAX_HOURS,
        initial=0, required=False, help_text="0: only when you press Fetch again.",
    )  # fmt: skip

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields[
            "url"
        ].help_text = f"Fetched in the background, then indexed. {outbound.rule_in_words()}"

    def clean_refresh_hours(self) -> int:
        return int(self.cleaned_data.get("refresh_hours") or 0)


class ScheduleForm(forms.Form):
    refresh_hours = forms.IntegerField(min_value=0, max_value=services.REFRESH_MAX_HOURS)


class AgentKnowledgeForm(forms.Form):
    knowledge_bases = forms.MultipleChoiceField(
        choices=[], required=False, widget=forms.CheckboxSelectMultiple
    )
    mode = forms.ChoiceField(
        choices=[
            ("tool", "The LLM calls a search_knowledge tool when it needs to"),
            ("prefetch", "Search with the user's words before every answer"),
        ],
        widget=forms.RadioSelect,
    )

    def __init__(self, *args: Any, bases: list[KnowledgeBase], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["knowledge_bases"]
        assert isinstance(field, forms.MultipleChoiceField)
        field.choices = [(str(base.uid), base.name) for base in bases]


class BaseEmbeddingForm(forms.Form):
    connection = forms.ChoiceField(label="Embedding model", required=False)

    def __init__(self, *args: Any, connections: list[ProviderCredential], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["connection"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(OFFLINE_CHOICE, "all-MiniLM-L6-v2 (offline, built in)")] + [
            (c.name, f"{c.model} (connection {c.name})") for c in connections
        ]


def base_embedding_form(scope: Scope, base: KnowledgeBase) -> BaseEmbeddingForm:
    """The form on a base's page, showing its current choice."""
    connections = list(selectors.embedding_connection_list(workspace=scope.workspace))
    current = base.embedding_connection.name if base.embedding_connection else OFFLINE_CHOICE
    return BaseEmbeddingForm(initial={"connection": current}, connections=connections)


def _require_manager(scope: Scope) -> None:
    if not scope.can_manage_keys:
        raise PermissionDenied("Only owners and admins can change knowledge bases.")


def _errors(form: forms.Form, error: ValidationError) -> None:
    if hasattr(error, "error_dict"):
        for name, texts in error.message_dict.items():
            form.add_error(name if name in form.fields else None, texts)
    else:
        form.add_error(None, error)


@workspace_page
@require_http_methods(["GET", "POST"])
def index(request: HttpRequest, scope: Scope) -> HttpResponse:
    form = BaseForm(request.POST or None)
    if request.method == "POST":
        _require_manager(scope)
        if form.is_valid():
            try:
                base = services.knowledge_base_create(
                    workspace=scope.workspace, actor=actor_for_request(request), **form.cleaned_data
                )
            except ValidationError as error:
                _errors(form, error)
            else:
                return redirect("dashboard:knowledge-base", scope.workspace.pk, base.uid)
    bases = selectors.knowledge_base_list(workspace=scope.workspace)
    context = {
        "bases": bases,
        "form": form,
        "can_manage": scope.can_manage_keys,
        "usage": services.workspace_usage(workspace=scope.workspace),
        "connections": selectors.embedding_connection_list(workspace=scope.workspace),
    }
    return render_page(request, scope, "dashboard/knowledge.html", context, section=SECTION)


@workspace_page
@require_http_methods(["GET", "POST"])
def detail(request: HttpRequest, scope: Scope, base_id: str) -> HttpResponse:
    base = selectors.knowledge_base_get(workspace=scope.workspace, uid=base_id)
    upload = UploadForm(prefix="upload")
    by_url = UrlForm(prefix="url")
    if request.method == "POST":
        _require_manager(scope)
        actor = actor_for_request(request)
        try:
            if "upload-file" in request.FILES:
                upload = UploadForm(request.POST, request.FILES, prefix="upload")
                if upload.is_valid():
                    file = upload.cleaned_data["file"]
                    content = services.upload_read(file=file)
                    services.document_upload(
                        base=base, filename=file.name or "", content=content,
                        content_type=file.content_type or "",
                        title=upload.cleaned_data["title"], actor=actor,
                    )  # fmt: skip
                    return redirect("dashboard:knowledge-base", scope.workspace.pk, base.uid)
            else:
                by_url = UrlForm(request.POST, prefix="url")
                if by_url.is_valid():
                    services.document_add_url(base=base, actor=actor, **by_url.cleaned_data)
                    return redirect("dashboard:knowledge-base", scope.workspace.pk, base.uid)
        except ValidationError as error:
            _errors(upload if "upload-file" in request.FILES else by_url, error)
    listed = list(selectors.document_list(base=base))
    documents = [{"document": d, "badge": STATUS_BADGES.get(d.status, "gray")} for d in listed]
    busy = any(d.status in ("pending", "indexing") for d in listed)
    context = {
        "base": base,
        "documents": documents,
        "upload": upload,
        "by_url": by_url,
        "refresh_s": REFRESH_S if busy else None,
        "can_manage": scope.can_manage_keys,
        "embedding": selectors.embedding_status(base=base),
        "embedding_form": base_embedding_form(scope, base),
    }
    return render_page(request, scope, "dashboard/knowledge_base.html", context, section=SECTION)


@workspace_page
@require_http_methods(["GET", "POST"])
def delete(request: HttpRequest, scope: Scope, base_id: str) -> HttpResponse:
    _require_manager(scope)
    base = selectors.knowledge_base_get(workspace=scope.workspace, uid=base_id)

    def act() -> str:
        services.knowledge_base_delete(base=base, actor=actor_for_request(request))
        return f"Knowledge base {base.name} deleted, with its documents."

    return confirm_then(
        request, scope, "dashboard/knowledge_delete.html", {"base": base}, section=SECTION, act=act
    )


@workspace_page
@require_POST
def document_action(
    request: HttpRequest, scope: Scope, base_id: str, document_id: str, action: str
) -> HttpResponse:
    _require_manager(scope)
    base = selectors.knowledge_base_get(workspace=scope.workspace, uid=base_id)
    document = selectors.document_get(base=base, uid=document_id)
    actor = actor_for_request(request)
    if action == "delete":
        services.document_delete(document=document, actor=actor)
        messages.success(request, f"{document.title} deleted.")
    elif action == "schedule":
        schedule = ScheduleForm(request.POST)
        try:
            if not schedule.is_valid():
                raise ValidationError(list(schedule.errors["refresh_hours"]))
            hours = schedule.cleaned_data["refresh_hours"]
            services.document_set_refresh(document=document, refresh_hours=hours, actor=actor)
            shown = f"every {hours} h" if hours else "only when asked"
            messages.success(request, f"{document.title} is fetched again {shown}.")
        except ValidationError as error:
            messages.error(request, " ".join(error.messages))
    else:
        try:
            services.document_refresh(document=document, actor=actor)
            messages.success(request, f"{document.title} is being indexed again.")
        except ValidationError as error:
            messages.error(request, " ".join(error.messages))
    return redirect("dashboard:knowledge-base", scope.workspace.pk, base.uid)


@workspace_page
@require_http_methods(["GET", "POST"])
def agent_knowledge(request: HttpRequest, scope: Scope, slug: str) -> HttpResponse:
    agent = agent_selectors.agent_get(workspace=scope.workspace, slug=slug)
    bases = list(selectors.knowledge_base_list(workspace=scope.workspace))
    initial = {
        "knowledge_bases": [str(b.uid) for b in agent.knowledge_bases.all()],
        "mode": agent.knowledge_mode,
    }
    form = AgentKnowledgeForm(request.POST or None, initial=initial, bases=bases)
    if request.method == "POST" and form.is_valid():
        try:
            services.agent_knowledge_set(
                agent=agent, knowledge_base_uids=form.cleaned_data["knowledge_bases"],
                mode=form.cleaned_data["mode"], actor=actor_for_request(request),
            )  # fmt: skip
        except ValidationError as error:
            _errors(form, error)
        else:
            messages.success(request, f"{agent.name}'s knowledge bases saved.")
            return redirect("dashboard:agent-knowledge", scope.workspace.pk, agent.slug)
    context = {"agent": agent, "form": form, "bases": bases}
    return render_page(
        request, scope, "dashboard/agent_knowledge.html", context, section="dashboard:agents"
    )


urlpatterns = [
    path("knowledge/", index, name="knowledge"),
    path("knowledge/<str:base_id>/", detail, name="knowledge-base"),
    path("knowledge/<str:base_id>/delete/", delete, name="knowledge-delete"),
    path(
        "knowledge/<str:base_id>/documents/<str:document_id>/<str:action>/",
        document_action,
        name="knowledge-document",
    ),
    path("agents/<slug:slug>/knowledge/", agent_knowledge, name="agent-knowledge"),
]
