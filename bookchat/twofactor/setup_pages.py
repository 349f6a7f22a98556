"""The admin's "Two-factor authentication" pages for the logged-in staff user: its state, setting up an
authenticator app (QR code and key, then its first code), new recovery codes, turning it off (optional mode only),
and the code alone for a launched session (``verify``). Served under ``/admin/twofactor/`` by ``urlpatterns``
(``bookchat.urls``), through ``admin_view``: staff only, CSRF-protected, never cached. Recovery codes are shown
once, in the response that made them."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST
from django_otp import login as otp_login

from bookchat.twofactor.devices import (
    CodeThrottled,
    app_qr_svg,
    app_secret,
    code_check,
    recovery_codes_left,
    recovery_codes_new,
    required,
    twofactor_confirm,
    twofactor_off,
    twofactor_on,
    twofactor_start,
    unconfirmed_app,
)

TITLE = "Two-factor authentication"


class CodeForm(forms.Form):
    code = forms.CharField(label="Authenticator code", max_length=40,
                           widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "autocapitalize": "none",
                                                         "spellcheck": "false"}))


def _render(request, template: str, **context) -> TemplateResponse:
    return TemplateResponse(request, f"admin/twofactor/{template}",
                            {**admin.site.each_context(request), "title": TITLE, "required": required(), **context})


def status(request, off_form: CodeForm | None = None) -> TemplateResponse:
    user = request.user
    return _render(request, "status.html", on=twofactor_on(user), recovery_codes_left=recovery_codes_left(user),
                   off_form=off_form or CodeForm())


@require_POST
def start(request):
    if not twofactor_on(request.user):
        twofactor_start(user=request.user)
    return redirect("twofactor-setup")


def setup(request):
    device = unconfirmed_app(request.user)
    if device is None or twofactor_on(request.user):
        return redirect("twofactor")
    form = CodeForm(request.POST or None)
    if form.is_valid():
        codes = twofactor_confirm(device=device, code=form.cleaned_data["code"])
        if codes is not None:
            device.refresh_from_db()
            otp_login(request, device)
            messages.success(request, "Two-factor authentication is on.")
            return _render(request, "recovery_codes.html", codes=codes)
        form.add_error("code", "That code is not right: check that your phone's clock is set automatically and "
                               "enter the code the app shows now.")
    return _render(request, "setup.html", form=form, secret=app_secret(device), qr=mark_safe(app_qr_svg(device)))


@require_POST
def new_recovery_codes(request):
    if not twofactor_on(request.user):
        return redirect("twofactor")
    return _render(request, "recovery_codes.html", codes=recovery_codes_new(user=request.user))


@require_POST
def turn_off(request):
    if required():
        messages.error(request, "This site requires two-factor authentication: it can't be turned off.")
        return redirect("twofactor")
    form = CodeForm(request.POST)
    if _accepted(request, form) is not None:
        twofactor_off(user=request.user)
        messages.success(request, "Two-factor authentication is off.")
        return redirect("twofactor")
    return status(request, off_form=form)


def _accepted(request, form: CodeForm):
    """The device that accepts the form's code, or None with the form saying why (not right, or throttled)."""
    if not form.is_valid():
        return None
    try:
        device = code_check(user=request.user, code=form.cleaned_data["code"])
    except CodeThrottled as exc:
        form.add_error("code", exc.message)
        return None
    if device is None:
        form.add_error("code", "That code is not right: enter the code your app shows now, or a recovery code.")
    return device


def verify(request):
    """The code alone, for a session that is logged in but not verified while its user has an app, and that has no
    password to log in again with (staff who arrive by an LTI launch from their course: the middleware sends them
    here rather than to the login form)."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = reverse("admin:index")
    if not twofactor_on(request.user) or request.user.is_verified():
        return redirect(target)
    form = CodeForm(request.POST or None)
    device = _accepted(request, form)
    if device is not None:
        otp_login(request, device)
        return redirect(target)
    return _render(request, "verify.html", form=form, next=target)


urlpatterns = [
    path("", admin.site.admin_view(status), name="twofactor"),
    path("start", admin.site.admin_view(start), name="twofactor-start"),
    path("setup", admin.site.admin_view(setup), name="twofactor-setup"),
    path("recovery-codes", admin.site.admin_view(new_recovery_codes), name="twofactor-recovery-codes"),
    path("off", admin.site.admin_view(turn_off), name="twofactor-off"),
    path("verify", admin.site.admin_view(verify), name="twofactor-verify"),
]
