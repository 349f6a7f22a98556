"""Logging in to the admin with a second factor: the login form's "Authenticator code", and the middleware that
keeps the admin's URLs to verified sessions (``bookchat.twofactor`` says why not django-otp's ``OTPAdminSite``)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import logout
from django.contrib.auth.signals import user_login_failed
from django.contrib.auth.views import redirect_to_login
from django.shortcuts import redirect
from django.urls import reverse

from bookchat.base.security import LTI_VERIFIED_SESSION
from bookchat.twofactor.devices import CodeThrottled, code_check, required, twofactor_on

NO_CODE = "This account has an authenticator app: enter the code it shows (or one of your recovery codes)."
WRONG_CODE = "That authenticator code is not right: enter the code your app shows now, or a recovery code."


class TwoFactorAuthenticationForm(AdminAuthenticationForm):
    """The admin's login form with one more field. The password is still checked by ``authenticate(request=…)``
    (``AuthenticationForm.clean``); a user with an app is then refused without a code the app or a recovery code
    accepts, and the refusal is sent as a failed login."""

    otp_token = forms.CharField(
        label="Authenticator code", required=False, max_length=40,
        help_text="Leave empty if you have not set up an authenticator app.",
        widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "autocapitalize": "none",
                                      "spellcheck": "false"}))

    def clean(self):
        cleaned = super().clean()
        user = self.get_user()
        if user is not None and twofactor_on(user):
            user.otp_device = self._verified_device(user)  # django-otp marks the session verified at login
        return cleaned

    def _verified_device(self, user):
        code = self.cleaned_data.get("otp_token") or ""
        try:
            device = code_check(user=user, code=code) if code else None
        except CodeThrottled as exc:
            self._login_failed(user)
            raise forms.ValidationError(exc.message, code=exc.code) from None
        if device is None:
            self._login_failed(user)
            raise forms.ValidationError(WRONG_CODE if code else NO_CODE, code="otp_token")
        return device

    def _login_failed(self, user) -> None:
        # What authenticate() sends for a wrong password, so that lockout counters count a wrong code too.
        user_login_failed.send(sender=__name__, credentials={"username": user.get_username()}, request=self.request)


class TwoFactorMiddleware:
    """On the admin's URLs, for a logged-in staff user: a session not verified by a code while the user has an app
    (one from before the app was set up) is logged out and sent to log in again (a user without a password, as an
    LTI launch makes, is asked for the code alone instead); in ``required`` mode, a user
    without an app is sent to set one up from every admin URL but the two-factor pages and logging out. Placed
    after django-otp's ``OTPMiddleware`` (which says whether the session is verified) and the messages'."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self._detour(request) or self.get_response(request)

    def _detour(self, request):
        user = request.user
        if not (request.path.startswith(reverse("admin:index")) and user.is_authenticated and user.is_staff):
            return None
        if user.is_verified() or request.session.get(LTI_VERIFIED_SESSION):
            return None
        if twofactor_on(user):
            if not user.has_usable_password():  # arrived by an LTI launch: no password to log in again with
                if request.path.startswith((reverse("twofactor-verify"), reverse("admin:logout"))):
                    return None
                return redirect_to_login(request.get_full_path(), reverse("twofactor-verify"))
            logout(request)
            messages.info(request, "Log in again with your authenticator code.")
            return redirect_to_login(request.get_full_path(), reverse("admin:login"))
        if required() and not request.path.startswith((reverse("twofactor"), reverse("admin:logout"))):
            return redirect("twofactor")
        return None

