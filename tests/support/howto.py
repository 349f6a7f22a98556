"""The commands a how-to page gives, as the reader would type them: each fenced ``bash`` block's commands (a line
ending in ``\\`` joined to the next, comments and blank lines dropped) and each inline code span that starts with a
command, in the order the page gives them, each with the file and line it was written on. The deploy test
(tests/test_deployed.py) and the kubectl dry run (tests/test_kubectl_lines.py) run these lines, not copies of
them, so that a page whose command no longer runs fails the test that names its line."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEPLOYMENT = REPO / "docs" / "operating" / "deployment.md"
# The words an inline code span must start with to be a command rather than a name (`docker compose down` is one,
# `deploy/compose.yaml` or `docker.io/library/redis:8` are not).
COMMANDS = ("docker ", "podman ", "podman-compose ", "kubectl ", "kustomize ", "curl ", "cd ", "make ", "export ")
_FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
_SPAN = re.compile(r"`([^`\n]+)`")
_ANCHOR = re.compile(r"^#{2,3} .*\{#([\w-]+)\}\s*$")


@dataclass(frozen=True)
class Line:
    """One command as the page writes it, and where: ``docs/operating/deployment.md:88``."""

    text: str
    where: str
    fenced: bool  # from a ```bash block (else an inline span in the prose)

    def __str__(self) -> str:
        return f"{self.where}: {self.text}"


def commands(path: Path = DEPLOYMENT, section: str | None = None) -> list[Line]:
    """The commands of ``path`` (of the section whose heading carries ``{#section}``, up to the next such heading,
    when given), in page order."""
    found, inside, fence, block = [], section is None, None, []
    text = path.read_text(encoding="utf-8").splitlines()
    where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    for number, raw in enumerate(text, 1):
        if fence is None and raw.startswith("## "):
            anchor = _ANCHOR.match(raw)
            inside = section is None or bool(anchor and anchor.group(1) == section)
            continue
        if not inside:
            continue
        opening = _FENCE.match(raw)
        if opening and fence is None:
            fence, block = opening.group(2), []
            continue
        if opening and fence is not None:
            if fence in ("bash", "sh", "shell"):
                found += _block(block, where)
            fence = None
            continue
        if fence is not None:
            block.append((number, raw.strip()))
            continue
        for span in _SPAN.finditer(raw):
            if span.group(1).startswith(COMMANDS):
                found.append(Line(span.group(1), f"{where}:{number}", fenced=False))
    return found


def _block(block: list[tuple[int, str]], where: Path) -> list[Line]:
    """A bash block's commands: continuations joined, comments and blank lines dropped. A ``for … do`` loop is
    kept whole (its lines joined by newlines), as bash reads it."""
    found, current, first, depth = [], "", 0, 0
    for number, line in block:
        if not current:
            if not line or line.startswith("#"):
                continue
            first = number
        current += line[:-1].rstrip() + " " if line.endswith("\\") else line
        if line.endswith("\\"):
            continue
        depth += len(re.findall(r"\bdo\b", line)) - len(re.findall(r"\bdone\b", line))
        if depth > 0:
            current += "\n"
            continue
        found.append(Line(current, f"{where}:{first}", fenced=True))
        current = ""
    return found


def find(lines: list[Line], start: str) -> Line:
    """The one line that starts with ``start``: the test says which of the page's commands it runs by how it
    begins, and fails, naming the section's commands, when the page has none or several."""
    matching = [line for line in lines if line.text.startswith(start)]
    listing = "\n".join(map(str, lines))
    assert len(matching) == 1, f"the page has {len(matching)} commands starting {start!r}, not one:\n{listing}"
    return matching[0]
