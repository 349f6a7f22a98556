"""The function-length rule `make lint` checks: no function in the checkout's Python packages (every folder at its top
with an ``__init__.py``, so a new package is held to it too, but those the rule excludes) is longer than the limit,
counted from its ``def`` line to its last line (decorators and blank lines inside count as the code reads; migrations
are Django's, not ours). The limit, the packages excluded and the allowed exceptions, each with the reason it is
kept, are ``[tool.bookchat.function-length]`` in pyproject.toml.

``python -m tests.support.long_functions`` prints each function over the limit and exits 1 when there is one that
the allow-list doesn't name, or when the allow-list names a function that is no longer over it (so the list stays
short and true)."""

from __future__ import annotations

import ast
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tests.support.codemap import parse

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class LongFunction:
    path: str  # relative to the checkout, with forward slashes
    line: int
    name: str  # qualified within its module: Class.method, outer.inner
    length: int

    @property
    def key(self) -> str:
        return f"{self.path}:{self.name}"


@dataclass(frozen=True)
class Rule:
    limit: int
    exclude: tuple[str, ...]  # packages the rule leaves out
    allowed: dict[str, str]  # "path:name" → why it stays long


def rule(root: Path = REPO) -> Rule:
    section = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["bookchat"]["function-length"]
    return Rule(limit=section["limit"], exclude=tuple(section.get("exclude", ())),
                allowed=dict(section.get("allowed", {})))


def packages(root: Path, exclude: tuple[str, ...]) -> tuple[str, ...]:
    """Every Python package at the top of the checkout (a folder with an ``__init__.py``) but those in ``exclude``."""
    return tuple(sorted(init.parent.name for init in root.glob("*/__init__.py") if init.parent.name not in exclude))


def functions_of(tree: ast.AST, prefix: str = ""):
    """Every function in a module with its qualified name, nested ones and methods included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield f"{prefix}{node.name}", node
            yield from functions_of(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from functions_of(node, f"{prefix}{node.name}.")
        else:
            yield from functions_of(node, prefix)


def long_functions(root: Path, folders: tuple[str, ...], limit: int) -> list[LongFunction]:
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            if "migrations" in path.relative_to(root).parts:
                continue
            for name, node in functions_of(parse(path)):
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    found.append(LongFunction(path.relative_to(root).as_posix(), node.lineno, name, length))
    return found


def problems(root: Path = REPO) -> list[str]:
    """What breaks the rule: a long function not allowed, an allowance for a function no longer long."""
    current = rule(root)
    found = long_functions(root, packages(root, current.exclude), current.limit)
    over = [f"{f.path}:{f.line}: {f.name} is {f.length} lines (limit {current.limit})"
            for f in found if f.key not in current.allowed]
    keys = {f.key for f in found}
    stale = [f"{key}: allowed in pyproject.toml but not over {current.limit} lines (remove it from the list)"
             for key in current.allowed if key not in keys]
    return over + stale


def main() -> int:
    found = problems()
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
