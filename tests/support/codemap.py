"""Which test covers which module: the map in tests/MODULES.md, generated from the code and the tests.

A module "has logic" when it defines a function or a class (anywhere in it); one that only lists settings, routes
or re-exports has none and needs no test of its own. A test file (``tests/**/test_*.py``) covers a module when it
imports it, directly and by name: ``import chat.pipeline.grounding``, ``from chat.pipeline.grounding import
ground`` or ``from chat.pipeline import grounding``, at the top or inside a test (a package's ``__init__`` counts
only where a name defined in it is imported). A management command is also covered by a test that runs it by name:
``call_command("ingest", ...)``, ``run_command("ingest", ...)``, or a ``[..., "manage.py", "ingest", ...]``
command line. Imports that reach a module through another one don't count: the map says where to look first.

``python -m tests.support.codemap --write`` writes the map (``make codemap``); ``--check`` exits 1 when the
committed map differs from the code's (``make lint``). tests/test_code_map.py fails on a module with logic that no
test covers and that ``UNTESTED`` doesn't name with a reason."""

from __future__ import annotations

import argparse
import ast
import functools
import re
import sys
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
APPS = ("chat", "ingestion", "audit", "bookchat")
MAP = Path("tests") / "MODULES.md"

# Modules with logic that no test imports on purpose: each with why.
UNTESTED: dict[str, str] = {
    "chat.apps": "Django's app config: its ready() only imports the signal receivers and the schema's extensions",
    "audit.apps": "Django's app config: its ready() only connects audit.recording to chat's announcements",
    "ingestion.apps": "Django's app config: its ready() only connects the mirrors' clean-up to a book's deletion",
}

_DOTTED = re.compile(r"[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+")
_RUNNERS = {"call_command", "run_command"}


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def app_modules(root: Path = REPO) -> dict[str, Path]:
    """Every module of the apps, migrations aside (Django writes them), by dotted name."""
    return {module_name(path, root): path for app in APPS for path in sorted((root / app).rglob("*.py"))
            if "migrations" not in path.relative_to(root).parts}


def parse(path: Path) -> ast.Module:
    return _parsed(path, path.stat().st_mtime_ns)


@functools.cache
def _parsed(path: Path, mtime_ns: int) -> ast.Module:  # a file parsed once while it stays the same
    return ast.parse(path.read_text(), str(path))


def has_logic(tree: ast.AST) -> bool:
    return any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for node in ast.walk(tree))


def command_of(module: str) -> str | None:
    """The management command a module is (``ingestion.management.commands.ingest`` → ``ingest``), or None."""
    package, _, name = module.rpartition(".")
    return name if package.endswith(".management.commands") else None


def _base_of(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    package = importer if is_package else importer.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def imported(tree: ast.AST, known: Iterable[str], importer: str = "", is_package: bool = False) -> set[str]:
    """The known modules a file imports by name (see the module docstring for what counts)."""
    known, found = set(known), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = _base_of(node, importer, is_package)
            submodules = {f"{base}.{alias.name}" for alias in node.names} & known
            found |= submodules
            if base in known and len(submodules) < len(node.names):
                found.add(base)
    return found


def commands_run(tree: ast.AST) -> set[str]:
    """The management commands a file runs by name."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in _RUNNERS:
            found.update(arg.value for arg in node.args[:1] if isinstance(arg, ast.Constant))
        elif isinstance(node, (ast.List, ast.Tuple)):
            found.update(after.value for before, after in zip(node.elts, node.elts[1:], strict=False)
                         if isinstance(after, ast.Constant) and isinstance(after.value, str)
                         and "manage.py" in ast.unparse(before))
    return found


def named_in_strings(tree: ast.AST, known: Iterable[str]) -> set[str]:
    """The known modules a file names in a dotted string, as Django and django-q2 load code
    (``async_task("chat.tasks.calibrate", ...)``, ``ROOT_URLCONF = "bookchat.urls"``): the longest known module
    the string starts with, a package's name alone aside (``"audit.answered"`` names no module)."""
    known, found = set(known), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _DOTTED.fullmatch(node.value):
            parts = node.value.split(".")
            named = next((name for end in range(len(parts), 1, -1) if (name := ".".join(parts[:end])) in known),
                         None)
            if named:
                found.add(named)
    return found


def import_graph(root: Path = REPO) -> dict[str, set[str]]:
    """Each app module → the app modules it imports or names in a dotted string."""
    modules = app_modules(root)
    graph = {}
    for name, path in modules.items():
        tree = parse(path)
        graph[name] = (imported(tree, modules, name, path.name == "__init__.py")
                       | named_in_strings(tree, modules)) - {name}
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """The modules ``start`` reaches by imports, itself included."""
    seen, todo = {start}, [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_files(root: Path = REPO) -> list[Path]:
    return sorted((root / "tests").rglob("test_*.py"))


def coverage(root: Path = REPO) -> dict[str, list[str]]:
    """Each module with logic → the test files that cover it (paths under tests/), in name order."""
    modules = {name: path for name, path in app_modules(root).items() if has_logic(parse(path))}
    covered: dict[str, list[str]] = {name: [] for name in modules}
    for test in test_files(root):
        tree = parse(test)
        commands = commands_run(tree)
        hits = imported(tree, modules) | {name for name in modules if command_of(name) in commands}
        for name in sorted(hits):
            covered[name].append(test.relative_to(root / "tests").as_posix())
    return dict(sorted(covered.items(), key=lambda item: modules[item[0]].relative_to(root).as_posix()))


def uncovered(root: Path = REPO) -> list[str]:
    """Modules with logic that no test covers and ``UNTESTED`` doesn't name."""
    return [name for name, tests in coverage(root).items() if not tests and name not in UNTESTED]


def render(root: Path = REPO) -> str:
    rows, modules = [], app_modules(root)
    for name, tests in coverage(root).items():
        path = modules[name].relative_to(root).as_posix()
        shown = ", ".join(f"`{test}`" for test in tests) or (
            f"none: {UNTESTED[name]}" if name in UNTESTED else "**none**")
        rows.append(f"| `{path}` | {shown} |")
    return "\n".join([
        "# Which test covers which module",
        "",
        "Generated by `make codemap` from the code and the tests (tests/support/codemap.py says how it counts: a",
        "test file that imports the module by name, or runs its management command by name); `make lint` fails",
        "when this file and the code differ, and tests/test_code_map.py when a module with logic has no test.",
        "Every module of chat/, ingestion/, audit/ and bookchat/ that defines a function or a class is listed;",
        "test files are under tests/.",
        "",
        "| module | tests |",
        "|---|---|",
        *rows,
        "",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help=f"write {MAP}")
    action.add_argument("--check", action="store_true", help=f"exit 1 when {MAP} differs from the code's map")
    options = parser.parse_args(argv)
    generated = render()
    if options.write:
        (REPO / MAP).write_text(generated)
        return 0
    if not (REPO / MAP).exists() or (REPO / MAP).read_text() != generated:
        print(f"{MAP} differs from the code and the tests: run make codemap and commit it", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
