"""Admin logins resist guessing (``bookchat.logins``, django-axes): failed logins are counted per user name and
per client address, each locks out after ``LOGIN_FAILURES`` (5) for ``LOGIN_LOCKOUT_MINUTES`` (15), a success
resets the count, and ``manage.py lockouts`` lists and lifts lockouts."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError
from django.utils import timezone

from tests.conftest import run_command

pytestmark = pytest.mark.django_db

LOGIN = "/admin/login/"
LIMIT = 5


@pytest.fixture
def staff():
    return User.objects.create_user("lena", password="right-password", is_staff=True)


def attempt(client, username: str, password: str, address: str = "203.0.113.1", **headers):
    return client.post(LOGIN, {"username": username, "password": password, "next": "/admin/"},
                       REMOTE_ADDR=address, **headers)


def logged_in(response) -> bool:
    return response.status_code == 302 and response["Location"] == "/admin/"


def refused_as_wrong(response) -> bool:
    return response.status_code == 200 and b"Please enter the correct username and password" in response.content


def locked(response) -> bool:
    return response.status_code == 429 and b"Too many failed logins" in response.content


def test_thirty_guesses_at_one_user_from_thirty_addresses_are_stopped_after_the_limit(client, staff):
    answers = [attempt(client, "lena", f"guess-{n}", address=f"198.51.100.{n + 1}") for n in range(30)]
    assert [refused_as_wrong(r) for r in answers[:LIMIT - 1]] == [True] * (LIMIT - 1)
    assert all(locked(r) for r in answers[LIMIT - 1:]), "the limit-th failure and every one after it is locked out"
    assert answers[-1]["Retry-After"] == str(15 * 60)
    correct = attempt(client, "lena", "right-password", address="192.0.2.200")
    assert locked(correct), "a locked user name's right password is refused too, from any address"


def test_thirty_names_from_one_address_are_stopped_after_the_limit(client, staff):
    answers = [attempt(client, f"user{n}", "guess", address="203.0.113.9") for n in range(30)]
    assert sum(refused_as_wrong(r) for r in answers) == LIMIT - 1
    assert sum(locked(r) for r in answers) == 30 - (LIMIT - 1)
    assert locked(attempt(client, "lena", "right-password", address="203.0.113.9")), "the address is locked"
    assert logged_in(attempt(client, "lena", "right-password", address="203.0.113.10")), \
        "another address is not locked by this one's failures"


def test_a_lockout_ends_after_its_minutes(client, staff):
    from axes.models import AccessAttempt

    for n in range(LIMIT):
        attempt(client, "lena", f"guess-{n}")
    assert locked(attempt(client, "lena", "right-password"))
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=15, seconds=5))
    assert logged_in(attempt(client, "lena", "right-password"))


def test_a_successful_login_resets_the_count(client, staff):
    for n in range(LIMIT - 1):
        attempt(client, "lena", f"guess-{n}")
    assert logged_in(attempt(client, "lena", "right-password"))
    client.logout()
    for n in range(LIMIT - 1):
        assert refused_as_wrong(attempt(client, "lena", f"again-{n}"))
    assert logged_in(attempt(client, "lena", "right-password"))


def test_lockouts_lists_and_lifts(client, staff):
    for n in range(LIMIT):
        attempt(client, "lena", f"guess-{n}", address=f"198.51.100.{n + 1}")
    code, out, _ = run_command("lockouts", "--json")
    listed = json.loads(out)["lockouts"]
    assert code == 0 and [(row["kind"], row["value"], row["failures"], row["locked"]) for row in listed] == \
        [("user", "lena", LIMIT, True)]
    assert "user lena: 5 failed login(s)" in run_command("lockouts")[1]

    code, out, _ = run_command("lockouts", "--lift", "lena")
    assert code == 0 and out.startswith("Lifted: user lena")
    assert logged_in(attempt(client, "lena", "right-password", address="198.51.100.1"))
    assert run_command("lockouts")[1].strip() == "Nobody is locked out."
    assert "Nothing to lift" in run_command("lockouts", "--lift", "nobody-at-all")[1]
    with pytest.raises(CommandError, match="Give the user name"):
        run_command("lockouts", "--lift", " ")


def test_lifting_an_address(client, staff):
    for n in range(LIMIT):
        attempt(client, f"user{n}", "guess", address="203.0.113.50")
    assert [row["value"] for row in json.loads(run_command("lockouts", "--json")[1])["lockouts"]] == ["203.0.113.50"]
    assert json.loads(run_command("lockouts", "--lift-address", "203.0.113.50", "--json")[1])["records"] == LIMIT
    assert logged_in(attempt(client, "lena", "right-password", address="203.0.113.50"))


def test_behind_a_trusted_proxy_the_address_is_the_one_the_proxy_saw(client, staff, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "TRUSTED_PROXIES": 1}
    # The client writes whatever it likes on the left of X-Forwarded-For; the proxy appends what it saw.
    for n in range(LIMIT):
        attempt(client, f"user{n}", "guess", address="10.0.0.2", HTTP_X_FORWARDED_FOR=f"192.0.2.{n}, 198.51.100.77")
    assert locked(attempt(client, "lena", "right-password", address="10.0.0.2",
                          HTTP_X_FORWARDED_FOR="192.0.2.99, 198.51.100.77"))
    assert logged_in(attempt(client, "lena", "right-password", address="10.0.0.2",
                             HTTP_X_FORWARDED_FOR="198.51.100.78")), "the proxy's own address is not what is locked"


def test_failures_are_recorded_without_the_password(client, staff):
    from axes.models import AccessFailureLog

    attempt(client, "lena", "not-my-password", address="198.51.100.5", HTTP_USER_AGENT="curl/8")
    failure = AccessFailureLog.objects.get()
    assert (failure.username, failure.ip_address, failure.user_agent) == ("lena", "198.51.100.5", "curl/8")
    assert "not-my-password" not in json.dumps([str(v) for v in vars(failure).values()])


def test_an_operator_reads_failures_and_lockouts_in_the_admin(client, staff, admin_client):
    for n in range(LIMIT):
        attempt(client, "lena", f"guess-{n}", address="198.51.100.6")
    failures = admin_client.get("/admin/axes/accessfailurelog/")
    assert failures.status_code == 200 and failures.content.decode().count("198.51.100.6") >= LIMIT
    attempts = admin_client.get("/admin/axes/accessattempt/")
    assert "lena" in attempts.content.decode()


def test_the_admin_login_make_run_creates_still_works(client, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ADMIN_PASSWORD": "first-login-pw"}
    assert run_command("ensure_admin")[0] == 0
    response = attempt(client, "admin", "first-login-pw")
    assert logged_in(response)
    assert client.get("/admin/").status_code == 200
