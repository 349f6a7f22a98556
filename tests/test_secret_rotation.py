"""Rotating ``BOOKCHAT_SECRET_KEY`` without an outage: the old key listed in ``BOOKCHAT_SECRET_KEY_FALLBACKS``
keeps signed-in staff signed in and lets the worker read tasks queued before the switch; without it, both are
lost. What a rotation changes for good (rate-limit counters, audit IP hashes) is the manual's, Security page."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.contrib.auth.models import User
from django_q.conf import Conf
from django_q.models import OrmQ
from django_q.signing import BadSignature, SignedPackage
from django_q.tasks import async_task

from tests.conftest import REPO

pytestmark = pytest.mark.django_db

OLD, NEW = "old-key-" + "o" * 50, "new-key-" + "n" * 50


def test_the_fallbacks_come_from_the_environment_comma_separated():
    env = os.environ | {"BOOKCHAT_SECRET_KEY": NEW, "BOOKCHAT_SECRET_KEY_FALLBACKS": f" {OLD} ,, older ",
                        "DJANGO_SETTINGS_MODULE": "bookchat.settings"}
    shown = subprocess.run([sys.executable, "-c", "import django; django.setup(); from django.conf import settings; "
                            "import json; print(json.dumps([settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS]))"],
                           cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert json.loads(shown.stdout) == [NEW, [OLD, "older"]]


def test_a_signed_in_user_stays_signed_in_while_the_old_key_is_a_fallback(client, settings):
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = OLD, []
    client.force_login(User.objects.create_user("editor", password="editor-pass", is_staff=True))
    assert client.get("/").wsgi_request.user.is_authenticated
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW, [OLD]
    assert client.get("/").wsgi_request.user.is_authenticated, "the session made under the old key holds"
    settings.SECRET_KEY_FALLBACKS = []
    assert not client.get("/").wsgi_request.user.is_authenticated, "without the fallback it is signed out"


@pytest.fixture
def queued_under_the_old_key(monkeypatch, settings):
    """A task queued on the ORM broker (as an upload queues its indexing) while the old key was in force."""
    monkeypatch.setattr(Conf, "SECRET_KEY", OLD)
    async_task("math.floor", 2.5)
    monkeypatch.setattr(Conf, "SECRET_KEY", NEW)
    return OrmQ.objects.latest("id")


def test_the_worker_reads_a_task_queued_before_the_rotation(queued_under_the_old_key, settings):
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW, [OLD]
    task = queued_under_the_old_key.task  # how django-q2's broker reads it back
    assert task["func"] == "math.floor" and task["args"] == (2.5,)


def test_without_the_fallback_the_task_queued_before_is_unreadable(queued_under_the_old_key, settings):
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW, ["another-key-" + "x" * 40]
    with pytest.raises(BadSignature):
        SignedPackage.loads(queued_under_the_old_key.payload)
