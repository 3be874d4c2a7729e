"""Sign up, email verification, log in (throttled, with an optional second factor) and
out, password reset, and creating or entering a workspace.

Sign-up and password reset answer the same whether or not the address has an account, and
take the same time: the mail goes out from a background task (``secrets_app.mail``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django import forms
from django.contrib import messages
from django.contrib.auth import password_validation
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm, PasswordResetForm, UsernameField
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import path, reverse, reverse_lazy
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST
from django_otp import login as otp_login

from core import rates
from core.client_address import request_address
from frontend.dashboard.scope import LAST_WORKSPACE, Scope, signed_in_user, workspace_page
from secrets_app import accounts, mail, selectors, services, tasks
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
        return str(self.cleaned_data["email"]).strip().lower()

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


def _mail_refusal(request: HttpRequest) -> str | None:
    wait_s = rates.hit_sync(accounts.account_mail_rate(), request_address(request))
    if wait_s is None:
        return None
    return f"Too many requests from your network. Try again in {max(1, wait_s // 60)} min."


def _mail_from_template(request: HttpRequest, to: str, name: str, context: dict[str, Any]) -> None:
    subject = render_to_string(f"dashboard/{name}_subject.txt", context).strip()
    body = render_to_string(f"dashboard/{name}_email.txt", context)
    mail.send_later(tasks.mail_send, subject=subject, body=body, to=to)


def send_verification(request: HttpRequest, user: User) -> None:
    token = accounts.email_verification_token(user=user)
    link = request.build_absolute_uri(reverse("dashboard:verify-email", args=[token]))
    _mail_from_template(request, user.email, "verify", {"link": link, "email": user.email})


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    form = SignupForm(request.POST or None)
    next_url = _next_url(request) or ""
    if request.method == "POST" and form.is_valid():
        refusal = _mail_refusal(request)
        if refusal is None:
            email = form.cleaned_data["email"]
            user = accounts.user_sign_up(email=email, password=form.cleaned_data["password"])
            if user is not None:
                send_verification(request, user)
            else:  # the owner of the address hears of it; the visitor learns nothing
                login_url = request.build_absolute_uri(reverse("dashboard:login"))
                reset_url = request.build_absolute_uri(reverse("dashboard:password-reset"))
                context = {"email": email, "login": login_url, "reset": reset_url}
                _mail_from_template(request, email, "signup_exists", context)
            context = {"email": email, "next": next_url}
            return render(request, "dashboard/signup_done.html", context)
        form.add_error(None, refusal)
    return render(request, "dashboard/signup.html", {"form": form, "next": next_url})


@require_http_methods(["GET"])
def verify_email(request: HttpRequest, token: str) -> HttpResponse:
    try:
        user = accounts.email_verify(token=token)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
        return redirect("dashboard:login")
    messages.success(request, f"{user.email} is verified.")
    if request.user.is_authenticated:
        return redirect("dashboard:home")
    return redirect("dashboard:login")


@login_required
@require_POST
def resend_verification(request: HttpRequest) -> HttpResponse:
    user = signed_in_user(request)
    refusal = _mail_refusal(request)
    if refusal is not None:
        messages.error(request, refusal)
    elif user.email_verified_at is None:
        send_verification(request, user)
        messages.success(request, f"A new link is on its way to {user.email}.")
    return HttpResponseRedirect(_next_url(request) or reverse("dashboard:home"))


# ---------------------------------------------------------------- logging in


_Cleaned = TypeVar("_Cleaned")


class ThrottledLogin:
    """Refuses before checking the password once the account or the address has failed
    too often; every failure (password or code) counts. Mixed into the login form."""

    request: HttpRequest | None
    data: Any

    def throttled_clean(self, check: Callable[[], _Cleaned]) -> _Cleaned:
        email = str(self.data.get("username") or "")
        address = request_address(self.request) if self.request is not None else ""
        wait_s = accounts.login_refusal(email=email, address=address)
        if wait_s is not None:
            raise ValidationError(
                f"Too many failed logins. Try again in {max(1, -(-wait_s // 60))} min.",
                code="throttled",
            )
        try:
            return check()
        except ValidationError:
            accounts.login_failed(email=email, address=address)
            raise


# One answer for every refused login: a wrong password, a right one without the code, a
# wrong code. Telling them apart would tell a guesser that the password was right (the
# answer an account with two-factor login gave to its right password alone).
LOGIN_REFUSED = (
    "Enter a correct email address and password, and the 6-digit code from your "
    "authenticator app if you turned on two-factor login."
)


class LoginForm(ThrottledLogin, AuthenticationForm):
    # Users log in by email: the phone's keyboard and the password manager should know it.
    username = UsernameField(
        widget=forms.EmailInput(attrs={"autofocus": True, "autocomplete": "username"}),
    )
    otp_token = forms.CharField(
        required=False,
        label="Authentication code",
        max_length=12,
        widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "inputmode": "numeric"}),
        help_text="Only if you turned on two-factor login: the 6 digits from your app.",
    )

    def clean(self) -> dict[str, Any]:
        def check() -> dict[str, Any]:
            try:
                cleaned = super(ThrottledLogin, self).clean()
                self.device = accounts.second_factor_check(
                    user=self.get_user(), code=str(cleaned.get("otp_token") or "")
                )
            except ValidationError:
                raise ValidationError(LOGIN_REFUSED, code="invalid_login") from None
            return cleaned

        return self.throttled_clean(check)


class LoginView(auth_views.LoginView):
    form_class = LoginForm
    template_name = "dashboard/login.html"
    redirect_authenticated_user = True

    # Only ever given its own form_class (the stubs say any AuthenticationForm).
    def form_valid(self, form: LoginForm) -> HttpResponse:  # type: ignore[override]
        response = super().form_valid(form)
        if form.device is not None:
            otp_login(self.request, form.device)
        return response


class ResetForm(PasswordResetForm):
    # Queues the mail instead of sending it: every argument but the request is unused.
    def save(self, **kwargs: Any) -> None:  # type: ignore[override]
        request: HttpRequest = kwargs["request"]
        mail.send_later(
            tasks.mail_password_reset,
            email=self.cleaned_data["email"],
            domain=request.get_host(),
            use_https=request.is_secure(),
        )


class PasswordResetView(auth_views.PasswordResetView):
    form_class = ResetForm
    template_name = "dashboard/password_reset_form.html"
    success_url = reverse_lazy("dashboard:password-reset-done")

    # Only ever given its own form_class (the stubs say any PasswordResetForm).
    def form_valid(self, form: ResetForm) -> HttpResponse:  # type: ignore[override]
        refusal = _mail_refusal(self.request)
        if refusal is not None:
            form.add_error(None, refusal)
            return self.form_invalid(form)
        return super().form_valid(form)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The last workspace this browser used, else the first one, else: create one."""
    workspaces = selectors.workspace_list_for_user(user=signed_in_user(request))
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
            owner=signed_in_user(request),
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
    path("verify-email/<str:token>/", verify_email, name="verify-email"),
    path("verify-email/", resend_verification, name="verify-email-resend"),
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password-reset/", PasswordResetView.as_view(), name="password-reset"),
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
