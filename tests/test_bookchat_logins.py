"""Login lockouts' own decisions (``bookchat.logins``), on failure records made by hand: django-axes configured to
count names and addresses apart, the current lockouts (a name or an address at the limit within the period, until
the period after its last failure; older failures forgotten), lifting one name's, and the locked-out page's 429 with
``Retry-After``. Logins end to end: tests/test_logins.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import AnonymousUser
from django.test import RequestFactory
from django.utils import timezone

from bookchat.logins import Lockout, axes_settings, current_lockouts, lift, locked_out

pytestmark = pytest.mark.django_db


@pytest.fixture
def limits(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "LOGIN_FAILURES": 3, "LOGIN_LOCKOUT_MINUTES": 15}


def failed(username: str, address: str, failures: int, *, minutes_ago: float = 0) -> AccessAttempt:
    attempt = AccessAttempt.objects.create(username=username, ip_address=address, failures_since_start=failures,
                                           user_agent="test", http_accept="*/*", path_info="/admin/login/",
                                           get_data="", post_data="")
    if minutes_ago:
        AccessAttempt.objects.filter(pk=attempt.pk).update(attempt_time=timezone.now() - timedelta(minutes=minutes_ago))
    return attempt


def test_axes_counts_names_and_addresses_apart_and_never_keeps_the_password():
    configured = axes_settings({"LOGIN_FAILURES": 5, "LOGIN_LOCKOUT_MINUTES": 20})
    assert configured["AXES_FAILURE_LIMIT"] == 5 and configured["AXES_COOLOFF_TIME"] == timedelta(minutes=20)
    assert configured["AXES_LOCKOUT_PARAMETERS"] == ["username", "ip_address"]
    assert {"password", "otp_token"} <= set(configured["AXES_SENSITIVE_PARAMETERS"])


def test_a_name_or_address_at_the_limit_is_locked_until_the_period_after_its_last_failure(limits):
    failed("ada", "198.51.100.1", 3)
    failed("bob", "198.51.100.2", 1)
    failed("cy", "198.51.100.3", 9, minutes_ago=60)  # before the period: forgotten
    locked = {(lockout.kind, lockout.value): lockout for lockout in current_lockouts()}
    assert set(locked) == {("user", "ada"), ("address", "198.51.100.1")}
    ada = locked["user", "ada"]
    assert ada.failures == 3 and ada.until == ada.last_failure + timedelta(minutes=15)
    every = {(lockout.kind, lockout.value, lockout.locked) for lockout in current_lockouts(include_unlocked=True)}
    assert ("user", "bob", False) in every and ("address", "198.51.100.2", False) in every
    assert not any(value == "cy" for _, value, _ in every)


def test_lifting_a_name_forgets_only_its_failures(limits):
    failed("ada", "198.51.100.1", 3)
    failed("bob", "198.51.100.2", 3)
    assert lift(username="ada") == 1
    assert {lockout.value for lockout in current_lockouts() if lockout.kind == "user"} == {"bob"}


def test_a_lockout_as_json_has_its_times_as_text():
    at = timezone.now()
    assert Lockout("user", "ada", 3, at, False, None).as_dict() == {
        "kind": "user", "value": "ada", "failures": 3, "last_failure": at.isoformat(), "locked": False,
        "until": None}


def test_the_locked_out_page_is_a_429_saying_when_to_retry(limits):
    request = RequestFactory().post("/admin/login/")
    request.user = AnonymousUser()
    response = locked_out(request)
    assert response.status_code == 429 and response["Retry-After"] == str(15 * 60)
    assert b"Too many failed logins" in response.content
