"""The admin's second factor (bookchat.twofactor): logging in with an authenticator app's code or a recovery code,
``BOOKCHAT_ADMIN_2FA=required`` sending staff without an app to set one up first, the set-up pages, and
``manage.py twofactor``. Codes are computed as the app would (RFC 6238, django-otp's ``oath``) from the stored
key, or, in the browser, from the key the page shows. The browser test runs on a live server of its own (no book
needed) in this process, so ``settings`` reaches it."""

from __future__ import annotations

import json
import re
from base64 import b32decode

import pytest
from django.contrib.auth.models import User
from django.contrib.auth.signals import user_login_failed
from django_otp.oath import TOTP, totp
from django_otp.plugins.otp_static.models import StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

from bookchat.twofactor.devices import recovery_codes_new, twofactor_on
from bookchat.twofactor.login import NO_CODE, WRONG_CODE
from tests.conftest import committed, run_command
from tests.support.browser import LiveServer
from tests.test_browser import browser, log_in, open_page, screenshot  # noqa: F401 (the real-browser fixtures)


def staff(name: str = "ada", *, superuser: bool = True) -> User:
    return User.objects.create_user(name, password=f"pw-{name}", is_staff=True, is_superuser=superuser)


def with_app(user: User) -> TOTPDevice:
    return TOTPDevice.objects.create(user=user, name="authenticator app", confirmed=True)


def code_of(device: TOTPDevice) -> str:
    return f"{totp(device.bin_key):06d}"


def post_login(client, name: str, code: str = ""):
    return client.post("/admin/login/?next=/admin/", {"username": name, "password": f"pw-{name}", "otp_token": code})


@pytest.fixture
def failed_logins():
    """The usernames of every failed login sent while the test runs (what lockout counters count)."""
    seen = []

    def record(sender, credentials, request=None, **kwargs):
        seen.append(credentials.get("username"))

    user_login_failed.connect(record)
    yield seen
    user_login_failed.disconnect(record)


@pytest.fixture
def required_mode(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ADMIN_2FA": "required"}


# -- logging in -----------------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_login_page_asks_for_an_authenticator_code_that_may_stay_empty(client):
    page = client.get("/admin/login/").content.decode()
    assert "Authenticator code" in page and "Leave empty if you have not set up an authenticator app." in page


@pytest.mark.django_db
def test_login_without_an_app_needs_only_the_password(client):
    staff()
    response = post_login(client, "ada")
    assert response.status_code == 302 and response["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("code, message", [("", NO_CODE), ("000000", WRONG_CODE), ("not-a-code", WRONG_CODE)],
                         ids=["no-code", "wrong-code", "wrong-recovery-code"])
def test_login_with_an_app_is_refused_without_its_code_and_counts_as_a_failed_login(client, failed_logins, code,
                                                                                     message):
    device = with_app(staff())
    if code == "000000" and code_of(device) == code:
        code = "000001"
    response = post_login(client, "ada", code)
    assert response.status_code == 200 and message in response.content.decode()
    assert failed_logins == ["ada"]
    assert client.get("/admin/").status_code == 302, "not logged in"


@pytest.mark.django_db
def test_login_with_an_app_and_its_code_reaches_the_admin(client, failed_logins):
    device = with_app(staff())
    response = post_login(client, "ada", code_of(device))
    assert response.status_code == 302 and response["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200
    assert failed_logins == []


@pytest.mark.django_db
def test_a_wrong_password_with_a_right_code_is_still_a_wrong_password(client):
    device = with_app(staff())
    response = client.post("/admin/login/", {"username": "ada", "password": "nope", "otp_token": code_of(device)})
    assert response.status_code == 200 and "correct username and password" in response.content.decode()


@pytest.mark.django_db
def test_a_recovery_code_logs_in_once_only(client):
    user = staff()
    with_app(user)
    code = recovery_codes_new(user=user)[3]
    assert post_login(client, "ada", code.upper()).status_code == 302, "case doesn't matter"
    assert client.get("/admin/").status_code == 200
    client.post("/admin/logout/")
    response = post_login(client, "ada", code)
    assert response.status_code == 200 and WRONG_CODE in response.content.decode()
    assert StaticToken.objects.filter(device__user=user).count() == 9


@pytest.mark.django_db
def test_a_session_from_before_the_app_is_sent_back_to_log_in(client):
    user = staff()
    client.force_login(user)
    with_app(user)
    response = client.get("/admin/auth/user/")
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/?next=/admin/auth/user/")
    assert client.get("/admin/").status_code == 302, "logged out"


# -- required mode -------------------------------------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/admin/", "/admin/auth/user/", "/admin/password_change/"])
def test_required_mode_sends_staff_without_an_app_to_set_one_up_first(client, required_mode, path):
    client.force_login(staff())
    response = client.get(path)
    assert response.status_code == 302 and response["Location"] == "/admin/twofactor/"
    page = client.get("/admin/twofactor/").content.decode()
    assert "set up an authenticator app before anything else" in page and "Turn off" not in page


@pytest.mark.django_db
def test_required_mode_lets_staff_without_an_app_log_out(client, required_mode):
    client.force_login(staff())
    response = client.post("/admin/logout/")
    assert response.status_code == 200 and "Logged out" in response.content.decode()


@pytest.mark.django_db
def test_optional_mode_lets_staff_without_an_app_anywhere(client):
    client.force_login(staff())
    assert client.get("/admin/auth/user/").status_code == 200


# -- the pages ------------------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_setting_up_an_app_shows_its_qr_code_and_key_then_recovery_codes_once(client, settings):
    settings.OTP_TOTP_THROTTLE_FACTOR = 0  # a wrong code, then the right one at once
    user = staff()
    client.force_login(user)
    assert "Two-factor authentication" in client.get("/admin/").content.decode(), "linked from the user tools"
    assert client.post("/admin/twofactor/start")["Location"] == "/admin/twofactor/setup"
    page = client.get("/admin/twofactor/setup").content.decode()
    device = TOTPDevice.objects.get(user=user, confirmed=False)
    assert "<svg" in page and "<img" not in page
    assert not re.search(r"<script(?![^>]*\ssrc=)", page), "no inline script (the Content-Security-Policy)"
    secret = page.split('id="twofactor-secret">')[1].split("<")[0]
    assert b32decode(secret.replace(" ", "")) == device.bin_key

    wrong = client.post("/admin/twofactor/setup", {"code": "00000" + str((int(code_of(device)[-1]) + 1) % 10)})
    assert "That code is not right" in wrong.content.decode() and not twofactor_on(user)
    shown = client.post("/admin/twofactor/setup", {"code": code_of(device)})
    codes = shown.context["codes"]
    assert len(codes) == 10 and all(code in shown.content.decode() for code in codes)
    assert twofactor_on(user)
    assert client.get("/admin/auth/user/").status_code == 200, "this session gave the code"
    status = client.get("/admin/twofactor/")
    assert status.context["on"] and status.context["recovery_codes_left"] == 10
    assert codes[0] not in status.content.decode(), "shown once"


@pytest.mark.django_db
def test_new_recovery_codes_replace_the_old_ones(client):
    user = staff()
    device = with_app(user)
    old = recovery_codes_new(user=user)
    assert post_login(client, "ada", code_of(device)).status_code == 302
    new = client.post("/admin/twofactor/recovery-codes").context["codes"]
    assert len(new) == 10 and not set(new) & set(old)
    assert set(StaticToken.objects.filter(device__user=user).values_list("token", flat=True)) == set(new)


@pytest.mark.django_db
def test_turning_off_asks_for_a_current_code(client):
    user = staff()
    device = with_app(user)
    code = recovery_codes_new(user=user)[0]
    assert post_login(client, "ada", code_of(device)).status_code == 302
    wrong = "00000" + str((int(code_of(device)[-1]) + 1) % 10)  # on the app: the recovery codes aren't throttled
    refused = client.post("/admin/twofactor/off", {"code": wrong})
    assert "That code is not right" in refused.content.decode() and twofactor_on(user)
    assert client.post("/admin/twofactor/off", {"code": code})["Location"] == "/admin/twofactor/"
    assert not twofactor_on(user) and not StaticToken.objects.filter(device__user=user).exists()
    assert client.get("/admin/").status_code == 200, "still logged in, now without a second factor"


@pytest.mark.django_db
def test_turning_off_is_refused_when_required(client, required_mode):
    user = staff()
    device = with_app(user)
    assert post_login(client, "ada", code_of(device)).status_code == 302
    assert "Turn off" not in client.get("/admin/twofactor/").content.decode()
    client.post("/admin/twofactor/off", {"code": recovery_codes_new(user=user)[0]})
    assert twofactor_on(user)


# -- manage.py twofactor --------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_command_lists_staff_with_their_second_factor():
    user = staff()
    with_app(user)
    recovery_codes_new(user=user)
    staff("bo", superuser=False)
    code, out, _ = run_command("twofactor")
    assert code == 0 and "optional" in out
    lines = {line.split()[0]: " ".join(line.split()[1:]) for line in out.splitlines()[1:]}  # other tests' staff too
    assert lines["ada"] == "authenticator app, 10 recovery codes left (superuser)"
    assert lines["bo"] == "no authenticator app, 0 recovery codes left"
    code, out, _ = run_command("twofactor", "--json")
    assert [row for row in json.loads(out)["staff"] if row["username"] in ("ada", "bo")] == [
        {"username": "ada", "superuser": True, "app": True, "recovery_codes_left": 10},
        {"username": "bo", "superuser": False, "app": False, "recovery_codes_left": 0}]


@pytest.mark.django_db
def test_command_resets_a_lost_phone_so_the_password_alone_logs_in(client):
    user = staff()
    with_app(user)
    recovery_codes_new(user=user)
    code, out, _ = run_command("twofactor", "--reset", "ada")
    assert code == 0 and "Deleted ada's authenticator app and 10 recovery codes" in out
    assert not twofactor_on(user) and post_login(client, "ada").status_code == 302
    code, out, _ = run_command("twofactor", "--reset", "ada", "--json")
    assert code == 0 and json.loads(out) == {"username": "ada", "had_app": False, "recovery_codes_deleted": 0}


@pytest.mark.django_db
def test_command_names_an_unknown_user_and_fails():
    code, out, err = run_command("twofactor", "--reset", "nobody")
    assert code == 1 and "there is no user 'nobody'" in err
    code, out, _ = run_command("twofactor", "--reset", "nobody", "--json")
    assert code == 1 and json.loads(out)["error"] == "unknown_user"


# -- in a real browser ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def live_bookchat(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock(), LiveServer() as server:
        yield server


@pytest.fixture
def tess(live_bookchat, django_db_blocker):
    """A committed staff login for the live server; removed (with its devices) after the test."""
    with django_db_blocker.unblock():
        yield committed(lambda: staff("tess", superuser=False))
        committed(lambda: User.objects.filter(username="tess").delete())


@pytest.mark.slow
@pytest.mark.needs("browser")
def test_staff_sets_up_an_authenticator_app_and_logs_in_with_its_code(live_bookchat, tess, django_db_blocker,
                                                                      open_page):  # noqa: F811 (imported fixture)
    base = live_bookchat.url
    page, errors = open_page(f"{base}/admin/login/")
    log_in(page, base, "tess")
    page.click("#user-tools >> text=Two-factor authentication")
    page.click("input[value='Set up an authenticator app']")
    assert page.locator(".twofactor-qr svg").count() == 1
    screenshot(page, "twofactor-setup")
    key = b32decode(page.inner_text("#twofactor-secret").replace(" ", ""))
    page.fill("#id_code", f"{totp(key):06d}")
    page.click("input[value=Confirm]")
    assert page.locator("#twofactor-recovery-codes code").count() == 10
    page.click("#logout-form button")

    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", "tess")
    page.fill("#id_password", "pw-tess")
    with django_db_blocker.unblock():  # the next code the app shows (the one just given can't be used again)
        last_t = committed(lambda: TOTPDevice.objects.get(user__username="tess").last_t)
    app = TOTP(key)
    app.time = (last_t + 1) * 30
    page.fill("#id_otp_token", f"{app.token():06d}")
    screenshot(page, "twofactor-login")
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}/admin/")
    assert page.locator("#user-tools").count() == 1
    assert errors == []
