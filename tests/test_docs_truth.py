"""The docs name only what exists: every ``manage.py`` command and its flags (and the same commands run in a
container, ``exec web-1 bookchat …``, ``kubectl exec … -- bookchat …``, and on a bare host ``deploy/bare/manage
…``), every ``make`` target, every file of the repository and every path under ``/api/``, ``/admin/`` and ``/mcp``
that README.md, CONTRIBUTING.md, CHANGELOG.md and the bundled manual (``docs/``) name is checked against the code
(argparse, the Makefile, the file tree, the URL resolver), so that a renamed flag, file or route fails here rather
than in a newcomer's terminal."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from django.core.management import get_commands, load_command_class
from django.urls import Resolver404, resolve

from bookchat.views import api_not_found
from tests.conftest import REPO

_COMMAND = re.compile(r"(?:manage\.py|exec [\w/-]+ bookchat|-- bookchat|deploy/bare/manage) ([a-z_]+)([^`|\n]*)")
_FLAG = re.compile(r"(?<![\w-])(--?[a-z][a-z0-9-]*)")
_MAKE = re.compile(r"(?:`|^\s*(?:\$ )?)make ([a-z][a-z-]*)", re.M)
_PATH = re.compile(r"(?<![\w/.])(/(?:api|admin|mcp)(?:/[^\s`'\")\]|,]*)?)")
# A file of the repository, as the docs write it in code: `deploy/kubernetes/ingress.yaml`, `tests/test_upgrade.py`.
_FILE = re.compile(r"`((?:deploy|tests|docs|bench|bookchat|chat|ingestion|audit|static|templates)/[\w./-]*[\w-]"
                   r"\.(?:py|ya?ml|sh|md|mdx|json|jsonl|txt|js|css|html|env|service))`")
_PLACEHOLDER = re.compile(r"\{[^}]*\}|<[^>]*>|\b[A-Z][A-Z_]+\b|…")


def documents() -> list[Path]:
    return [*(REPO / name for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md") if (REPO / name).exists()),
            *sorted((REPO / "docs").rglob("*.md")), *sorted((REPO / "docs").rglob("*.mdx"))]


def mentions(pattern: re.Pattern) -> list[tuple[str, re.Match]]:
    return [(f"{path.relative_to(REPO)}:{text.count(chr(10), 0, found.start()) + 1}", found)
            for path in documents() for text in [path.read_text()] for found in pattern.finditer(text)]


def options_of(name: str) -> set[str]:
    """Every option string of a management command, its subcommands' (``apikey create``) included."""
    parser = load_command_class(get_commands()[name], name).create_parser("manage.py", name)
    parsers, options = [parser], set()
    while parsers:
        current = parsers.pop()
        for action in current._actions:
            options.update(action.option_strings)
            if hasattr(action, "_name_parser_map"):
                parsers.extend(action._name_parser_map.values())
    return options


def test_every_manage_py_command_and_flag_the_docs_name_exists():
    commands = get_commands()
    wrong = []
    for where, found in mentions(_COMMAND):
        name, rest = found.groups()
        if name not in commands:
            wrong.append(f"{where}: manage.py {name} (no such command)")
            continue
        rest = rest.split("#")[0]  # a shell comment after the command is prose
        known = options_of(name)
        wrong += [f"{where}: manage.py {name} {flag}" for flag in _FLAG.findall(rest) if flag not in known]
    assert mentions(_COMMAND), "the pattern finds the docs' commands"
    assert not wrong, "\n".join(wrong)


def test_a_command_or_flag_that_does_not_exist_is_caught():
    assert {"--kind", "--name", "--book", "--json"} <= options_of("apikey"), "the subcommands' options count"
    assert "--nope" not in options_of("ingest")
    rest = _COMMAND.search("`manage.py ingest path/to/my-book --book b --dry-run -v 2`").group(2)
    assert _FLAG.findall(rest) == ["--book", "--dry-run", "-v"]


def test_every_make_target_the_docs_name_exists():
    targets = set(re.findall(r"^([a-z][\w-]*):", (REPO / "Makefile").read_text(), re.M))
    named = mentions(_MAKE)
    assert {found.group(1) for _, found in named} >= {"run", "test"}
    wrong = [f"{where}: make {found.group(1)}" for where, found in named if found.group(1) not in targets]
    assert not wrong, "\n".join(wrong)


# Named as where a family of routes lives ("every path under /api/"), not as routes.
PREFIXES = {"/api/", "/api/v1/"}


def resolves(path: str) -> bool:
    """Whether a path (placeholders such as ``{slug}``, ``<id>`` or ``ANSWER_ID`` filled in) reaches a view
    other than the JSON 404 that answers every unknown path under /api/."""
    path = path.split("?")[0].split("#")[0].rstrip(".:;")
    if path in PREFIXES:
        return True
    for filler in (str(uuid.uuid4()), "x", "1"):
        try:
            match = resolve(_PLACEHOLDER.sub(filler, path))
        except Resolver404:
            continue
        if match.func is not api_not_found and getattr(match.func, "__wrapped__", None) is not api_not_found:
            return True
    return False


@pytest.mark.parametrize("path", ["/api/v1/nope", "/api/v1/books/{slug}/nope", "/admin-x/"])
def test_a_path_that_does_not_exist_is_caught(path):
    assert not resolves(path)


def test_every_path_the_docs_name_exists():
    named = mentions(_PATH)
    assert any(found.group(1).startswith("/api/v1/ask") for _, found in named)
    wrong = [f"{where}: {found.group(1)}" for where, found in named if not resolves(found.group(1))]
    assert not wrong, "\n".join(wrong)


def test_every_file_the_docs_name_exists():
    named = mentions(_FILE)
    assert any(found.group(1) == "deploy/compose.yaml" for _, found in named), "the pattern finds the docs' files"
    wrong = [f"{where}: {found.group(1)}" for where, found in named if not (REPO / found.group(1)).exists()]
    assert not wrong, "\n".join(wrong)


def test_a_command_run_in_a_container_is_checked_like_manage_py():
    found = _COMMAND.search("`kubectl exec deploy/bookchat-web -- bookchat apikey create --kind secret`")
    assert found.groups() == ("apikey", " create --kind secret")
    assert _COMMAND.search("`docker compose exec web-1 bookchat backup /data/b.tar.gz`").group(1) == "backup"
