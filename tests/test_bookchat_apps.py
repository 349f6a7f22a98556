"""Tasks signed with a previous secret key (``bookchat.apps.read_tasks_signed_with_fallbacks``), without a broker:
a package signed under the old key is read while that key is a fallback (after any fallback that doesn't match),
refused without it, and installing the reader again doesn't wrap it twice. A queued task across a rotation:
tests/test_secret_rotation.py."""

from __future__ import annotations

import pytest
from django_q.conf import Conf
from django_q.signing import BadSignature, SignedPackage

from bookchat.apps import read_tasks_signed_with_fallbacks

OLD, NEW = "old-key-" + "o" * 40, "new-key-" + "n" * 40


@pytest.fixture
def signed_under_old_key(monkeypatch, settings) -> str:
    monkeypatch.setattr(Conf, "SECRET_KEY", OLD)
    package = SignedPackage.dumps({"func": "math.floor", "args": (2.5,)})
    monkeypatch.setattr(Conf, "SECRET_KEY", NEW)
    settings.SECRET_KEY = NEW
    return package


def test_a_package_signed_under_a_fallback_key_is_read(signed_under_old_key, settings):
    settings.SECRET_KEY_FALLBACKS = ["unrelated-" + "u" * 40, OLD]
    assert SignedPackage.loads(signed_under_old_key) == {"func": "math.floor", "args": (2.5,)}


def test_without_the_old_key_among_the_fallbacks_it_is_refused(signed_under_old_key, settings):
    settings.SECRET_KEY_FALLBACKS = ["unrelated-" + "u" * 40]
    with pytest.raises(BadSignature):
        SignedPackage.loads(signed_under_old_key)


def test_the_reader_is_installed_once():
    installed = SignedPackage.loads
    assert installed.reads_fallbacks
    read_tasks_signed_with_fallbacks()
    assert SignedPackage.loads is installed
