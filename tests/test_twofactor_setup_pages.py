"""The two-factor set-up pages' own decisions (``bookchat.twofactor.setup_pages``), each view called directly: start
makes a pending app only while two-factor is off, the set-up page sends back to the status page without a pending
app, a wrong first code is asked again and the right one turns two-factor on with recovery codes shown once, new
recovery codes only while on, and turning off refused where the site requires it or without a right code. The pages
through the admin and a browser: tests/test_twofactor.py."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.contrib.messages.storage.cookie import CookieStorage
from django.contrib.sessions.backends.db import SessionStore
from django.test import RequestFactory
from django_otp.oath import totp
from django_otp.plugins.otp_totp.models import TOTPDevice

from bookchat.twofactor import setup_pages
from bookchat.twofactor.devices import twofactor_on, unconfirmed_app

pytestmark = pytest.mark.django_db


@pytest.fixture
def ada() -> User:
    return User.objects.create_user("ada-2fa", password="pw", is_staff=True)


def request_by(user: User, method: str = "get", data: dict | None = None):
    request = getattr(RequestFactory(), method)("/admin/twofactor/", data or {})
    request.user, request.session = user, SessionStore()
    request._messages = CookieStorage(request)
    return request


def app_of(user: User, *, confirmed: bool) -> TOTPDevice:
    return TOTPDevice.objects.create(user=user, name="authenticator app", confirmed=confirmed)


def test_start_makes_a_pending_app_only_while_two_factor_is_off(ada):
    response = setup_pages.start(request_by(ada, "post"))
    assert response.status_code == 302 and response["Location"] == "/admin/twofactor/setup"
    pending = unconfirmed_app(ada)
    assert pending is not None
    app_of(ada, confirmed=True)
    setup_pages.start(request_by(ada, "post"))
    assert unconfirmed_app(ada) == pending, "no new set-up while an app is confirmed"
    assert setup_pages.start(request_by(ada)).status_code == 405


def test_the_setup_page_without_a_pending_app_goes_back_to_the_status(ada):
    response = setup_pages.setup(request_by(ada))
    assert response.status_code == 302 and response["Location"] == "/admin/twofactor/"


def test_a_wrong_first_code_is_asked_again(ada):
    pending = app_of(ada, confirmed=False)
    wrong = "000000" if totp(pending.bin_key) else "111111"
    response = setup_pages.setup(request_by(ada, "post", {"code": wrong}))
    assert response.status_code == 200 and response.template_name == "admin/twofactor/setup.html"
    assert "That code is not right" in str(response.context_data["form"].errors["code"])
    assert response.context_data["secret"].replace(" ", "") and "<svg" in response.context_data["qr"]
    assert not twofactor_on(ada)


def test_the_right_first_code_turns_two_factor_on_and_shows_the_recovery_codes(ada):
    pending = app_of(ada, confirmed=False)
    request = request_by(ada, "post", {"code": f"{totp(pending.bin_key):06d}"})
    response = setup_pages.setup(request)
    assert response.template_name == "admin/twofactor/recovery_codes.html"
    assert len(response.context_data["codes"]) == 10 and twofactor_on(ada)
    assert request.user.otp_device == pending, "this session counts as verified"


def test_new_recovery_codes_only_while_two_factor_is_on(ada):
    response = setup_pages.new_recovery_codes(request_by(ada, "post"))
    assert response.status_code == 302 and response["Location"] == "/admin/twofactor/"
    app_of(ada, confirmed=True)
    response = setup_pages.new_recovery_codes(request_by(ada, "post"))
    assert response.template_name == "admin/twofactor/recovery_codes.html" and len(response.context_data["codes"]) == 10


def test_turning_off_is_refused_where_required_and_without_a_right_code(ada, settings):
    app_of(ada, confirmed=True)
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ADMIN_2FA": "required"}
    request = request_by(ada, "post", {"code": "123456"})
    response = setup_pages.turn_off(request)
    assert response.status_code == 302 and "requires two-factor" in str(list(get_messages(request))[0])
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ADMIN_2FA": "optional"}
    response = setup_pages.turn_off(request_by(ada, "post", {"code": "not-a-recovery-code"}))
    assert response.template_name == "admin/twofactor/status.html"
    assert "That code is not right" in str(response.context_data["off_form"].errors["code"])
    assert twofactor_on(ada)


def test_a_code_longer_than_any_is_refused_by_the_form():
    assert not setup_pages.CodeForm({"code": "1" * 41}).is_valid()
    assert setup_pages.CodeForm({"code": "123 456"}).is_valid()
