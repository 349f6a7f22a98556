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
OURS = ("lock-ada", "lock-bob", "lock-cy", "192.0.2.201", "192.0.2.202", "192.0.2.203")


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


def ours(lockout: Lockout) -> bool:
    """Only this file's names and addresses (a server another test ran may have left failures of its own)."""
    return lockout.value in OURS


def test_axes_counts_names_and_addresses_apart_and_never_keeps_the_password():
    configured = axes_settings({"LOGIN_FAILURES": 5, "LOGIN_LOCKOUT_MINUTES": 20})
    assert configured["AXES_FAILURE_LIMIT"] == 5 and configured["AXES_COOLOFF_TIME"] == timedelta(minutes=20)
    assert configured["AXES_LOCKOUT_PARAMETERS"] == ["username", "ip_address"]
    assert {"password", "otp_token"} <= set(configured["AXES_SENSITIVE_PARAMETERS"])


def test_a_name_or_address_at_the_limit_is_locked_until_the_period_after_its_last_failure(limits):
    failed("lock-ada", "192.0.2.201", 3)
    failed("lock-bob", "192.0.2.202", 1)
    failed("lock-cy", "192.0.2.203", 9, minutes_ago=60)  # before the period: forgotten
    locked = {(lockout.kind, lockout.value): lockout for lockout in current_lockouts() if ours(lockout)}
    assert set(locked) == {("user", "lock-ada"), ("address", "192.0.2.201")}
    ada = locked["user", "lock-ada"]
    assert ada.failures == 3 and ada.until == ada.last_failure + timedelta(minutes=15)
    every = {(lockout.kind, lockout.value, lockout.locked) for lockout in current_lockouts(include_unlocked=True)
             if ours(lockout)}
    assert every == {("user", "lock-ada", True), ("address", "192.0.2.201", True), ("user", "lock-bob", False),
                     ("address", "192.0.2.202", False)}


def test_lifting_a_name_forgets_only_its_failures(limits):
    failed("lock-ada", "192.0.2.201", 3)
    failed("lock-bob", "192.0.2.202", 3)
    assert lift(username="lock-ada") == 1
    users = {lockout.value for lockout in current_lockouts() if ours(lockout) and lockout.kind == "user"}
    assert users == {"lock-bob"}


def test_a_lockout_as_json_has_its_times_as_text():
    at = timezone.now()
    assert Lockout("user", "lock-ada", 3, at, False, None).as_dict() == {
        "kind": "user", "value": "lock-ada", "failures": 3, "last_failure": at.isoformat(), "locked": False,
        "until": None}


def test_the_locked_out_page_is_a_429_saying_when_to_retry(limits):
    request = RequestFactory().post("/admin/login/")
    request.user = AnonymousUser()
    response = locked_out(request)
    assert response.status_code == 429 and response["Retry-After"] == str(15 * 60)
    assert b"Too many failed logins" in response.content
