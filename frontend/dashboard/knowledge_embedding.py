"""Knowledge bases' embedding models: the workspace's embedding connections (an
OpenAI-compatible ``/embeddings`` endpoint, its key sealed like an LLM connection's) and
which one a knowledge base embeds with (the offline model by default).

Owners and admins add, change and delete connections and choose a base's model; members
see which exist. A key goes in and never comes out, as on the Providers page.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import path
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST

from core import outbound
from frontend.dashboard.knowledge import SECTION, BaseEmbeddingForm, _require_manager
from frontend.dashboard.providers import LLMForm, _put_errors
from frontend.dashboard.scope import Scope, render_page, workspace_page
from knowledge_app import selectors, services
from secrets_app.audit import actor_for_request


class EmbeddingForm(LLMForm):
    """An LLM connection's fields, said of an ``/embeddings`` endpoint."""

    def __init__(self, *args: Any, replacing: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, replacing=replacing, **kwargs)
        self.fields["name"].help_text = "How knowledge bases choose it, like openai-small."
        self.fields["base_url"].help_text = (
            "An OpenAI-compatible API: the platform sends POST {base URL}/embeddings. "
            "https://api.openai.com/v1, Ollama http://localhost:11434/v1, vLLM. "
            + outbound.rule_in_words()
        )
        self.fields["model"].widget.attrs["placeholder"] = "text-embedding-3-small"
        self.fields["api_key"].help_text += " Sent as a Bearer token to this host only."


@sensitive_post_parameters("api_key")
@workspace_page
@require_http_methods(["GET", "POST"])
def connection_edit(request: HttpRequest, scope: Scope, name: str | None = None) -> HttpResponse:
    _require_manager(scope)
    current = None
    if name is not None:
        current = selectors.embedding_connection_get(workspace=scope.workspace, name=name)
    initial = (
        {"name": current.name, "base_url": current.base_url, "model": current.model}
        if current
        else None
    )
    form = EmbeddingForm(request.POST or None, initial=initial, replacing=current is not None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            saved = services.embedding_connection_set(
                workspace=scope.workspace, name=current.name if current else data["name"],
                base_url=data["base_url"], model=data["model"], api_key=data["api_key"] or None,
                actor=actor_for_request(request),
            )  # fmt: skip
        except ValidationError as error:
            _put_errors(form, error)
        else:
            messages.success(request, f"Embedding connection {saved.name} saved.")
            return redirect(SECTION, scope.workspace.pk)
    context = {"form": form, "current": current}
    return render_page(
        request, scope, "dashboard/knowledge_embedding.html", context, section=SECTION
    )


@workspace_page
@require_POST
def connection_delete(request: HttpRequest, scope: Scope, name: str) -> HttpResponse:
    _require_manager(scope)
    connection = selectors.embedding_connection_get(workspace=scope.workspace, name=name)
    try:
        services.embedding_connection_delete(
            workspace=scope.workspace, connection=connection, actor=actor_for_request(request)
        )
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    else:
        messages.success(request, f"Embedding connection {name} deleted.")
    return redirect(SECTION, scope.workspace.pk)


@workspace_page
@require_POST
def base_embedding(request: HttpRequest, scope: Scope, base_id: str) -> HttpResponse:
    _require_manager(scope)
    base = selectors.knowledge_base_get(workspace=scope.workspace, uid=base_id)
    connections = list(selectors.embedding_connection_list(workspace=scope.workspace))
    form = BaseEmbeddingForm(request.POST, connections=connections)
    try:
        if not form.is_valid():
            raise ValidationError(list(form.errors.get("connection", ["Choose a model."])))
        services.knowledge_base_set_embedding(
            base=base, connection_name=form.cleaned_data["connection"] or None,
            actor=actor_for_request(request),
        )  # fmt: skip
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    else:
        state = selectors.embedding_status(base=base)
        again = " Its documents are being embedded again." if state.reindexing else ""
        messages.success(request, f"{base.name} embeds with {state.model}.{again}")
    return redirect("dashboard:knowledge-base", scope.workspace.pk, base.uid)


urlpatterns = [
    path("knowledge-models/new/", connection_edit, name="knowledge-model-new"),
    path("knowledge-models/<slug:name>/", connection_edit, name="knowledge-model"),
    path("knowledge-models/<slug:name>/delete/", connection_delete, name="knowledge-model-delete"),
    path("knowledge/<str:base_id>/embedding/", base_embedding, name="knowledge-embedding"),
]
