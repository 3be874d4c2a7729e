"""Sign up, log in and out, password reset, and creating or entering a workspace."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth import login, password_validation
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse_lazy
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods

from frontend.dashboard.scope import LAST_WORKSPACE, Scope, workspace_page
from secrets_app import selectors, services
from secrets_app.audit import actor_for_request
from secrets_app.models import User


class SignupForm(forms.Form):
    email = forms.EmailField(widget=forms.EmailInput(attrs={"autocomplete": "email"}))
    password = forms.CharField(
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text="At least 8 characters, not only digits, not a common password.",
    )

    def clean_email(self) -> str:
        email = self.cleaned_data["email"].strip().lower()
        if User.objects.filter(email__iexact=email).exists():
            raise forms.ValidationError("An account with this email exists. Log in instead.")
        return email

    def clean(self) -> dict[str, object]:
        cleaned = super().clean() or {}
        if "email" in cleaned and "password" in cleaned:
            candidate = User(email=cleaned["email"])
            try:
                password_validation.validate_password(cleaned["password"], candidate)
            except forms.ValidationError as error:
                self.add_error("password", error)
        return cleaned


class WorkspaceForm(forms.Form):
    name = forms.CharField(
        max_length=100, help_text="Your company or project; you can have several."
    )


def _next_url(request: HttpRequest) -> str | None:
    target = request.POST.get("next") or request.GET.get("next")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return None


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user, _ = services.user_get_or_create(
            email=form.cleaned_data["email"], password=form.cleaned_data["password"]
        )
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect(_next_url(request) or "dashboard:workspace-new")
    context = {"form": form, "next": _next_url(request) or ""}
    return render(request, "dashboard/signup.html", context)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The last workspace this browser used, else the first one, else: create one."""
    workspaces = selectors.workspace_list_for_user(user=request.user)  # type: ignore[arg-type]
    last = request.session.get(LAST_WORKSPACE)
    workspace = workspaces.filter(pk=last).first() if last else None
    workspace = workspace or workspaces.first()
    if workspace is None:
        return redirect("dashboard:workspace-new")
    return redirect("dashboard:workspace", workspace.pk)


@login_required
@require_http_methods(["GET", "POST"])
def workspace_new(request: HttpRequest) -> HttpResponse:
    form = WorkspaceForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        workspace = services.workspace_create(
            actor=actor_for_request(request),
            name=form.cleaned_data["name"].strip(),
            owner=request.user,  # type: ignore[arg-type]
        )
        messages.success(request, f"Workspace “{workspace.name}” is ready.")
        return redirect("dashboard:workspace", workspace.pk)
    return render(request, "dashboard/workspace_new.html", {"form": form})


@workspace_page
def workspace(request: HttpRequest, scope: Scope) -> HttpResponse:
    return redirect("dashboard:agents", scope.workspace.pk)


_RESET = "dashboard/password_reset"

urlpatterns = [
    path("", home, name="home"),
    path("signup/", signup, name="signup"),
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="dashboard/login.html", redirect_authenticated_user=True
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path(
        "password-reset/",
        auth_views.PasswordResetView.as_view(
            template_name=f"{_RESET}_form.html",
            email_template_name=f"{_RESET}_email.txt",
            subject_template_name=f"{_RESET}_subject.txt",
            success_url=reverse_lazy("dashboard:password-reset-done"),
        ),
        name="password-reset",
    ),
    path(
        "password-reset/sent/",
        auth_views.PasswordResetDoneView.as_view(template_name=f"{_RESET}_done.html"),
        name="password-reset-done",
    ),
    path(
        "password-reset/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(
            template_name=f"{_RESET}_confirm.html",
            success_url=reverse_lazy("dashboard:password-reset-complete"),
        ),
        name="password-reset-confirm",
    ),
    path(
        "password-reset/complete/",
        auth_views.PasswordResetCompleteView.as_view(template_name=f"{_RESET}_complete.html"),
        name="password-reset-complete",
    ),
    path("workspaces/new/", workspace_new, name="workspace-new"),
]
