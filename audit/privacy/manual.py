"""The manual's "Privacy and data" page (``docs/operating/privacy.md``), made from the inventory and the notices:
``make docs`` writes it, ``make lint`` and ``tests/test_privacy.py`` fail when the checked-in page differs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from audit.privacy import inventory, notices
from bookchat.base.conf import SETTINGS, shown_default

PAGE = "docs/operating/privacy.md"
WHOSE = {inventory.LEARNER: "About learners", inventory.STAFF: "About staff"}


def governed_by(entry: inventory.Held) -> str:
    """How long, with the setting that governs it and its default."""
    if not entry.setting:
        return entry.kept
    spec = next(spec for spec in SETTINGS if spec.name == entry.setting)
    return f"{entry.kept} `{spec.env}` (default {shown_default(spec.default)})."


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def held_table(whose: str) -> list[str]:
    lines = ["| where (table: fields) | what | why | how long | on erasure |", "|---|---|---|---|---|"]
    for entry in inventory.HELD:
        if entry.whose == whose:
            where = f"`{entry.model}`: " + ", ".join(f"`{name}`" for name in entry.fields)
            lines.append("| " + " | ".join(_cell(cell) for cell in (where, entry.what, entry.why, governed_by(entry),
                                                                    entry.erased)) + " |")
    return lines


def privacy_reference() -> str:
    """The whole page, as ``make docs`` writes it."""
    lines = ["---", "id: privacy", "title: Privacy and data", "sidebar_position: 3.6", "---", "",
             "<!-- Generated from audit/privacy/ by `make docs`: edit the declaration there, not here. -->", "",
             "# Privacy and data", "", notices.INTRO, ""]
    for whose, heading in WHOSE.items():
        lines += [f"## What bookchat keeps: {heading.lower()}", "", *held_table(whose), ""]
    lines += ["## What leaves the server", "", *_paragraphs(notices.OUTBOUND),
              "## What the browser sends and keeps", "", *_paragraphs(notices.BROWSER),
              "## A learner's requests", "", notices.FINDING, "",
              "| the request | under | what to run |", "|---|---|---|",
              *[f"| {_cell(what)} | {_cell(law)} | {_cell(how)} |" for what, law, how in notices.REQUESTS], "",
              "Both commands print human text, or one JSON object with `--json`, and exit non-zero when the learner "
              "is unknown. An export or erasure in the admin needs the permission \"Can export and erase a "
              "learner's data\" and is written to the admin log; one from the command line to the command-line log, "
              "named by its tombstone, never by the learner's id.", "",
              "## Erasure, backups and restores", "", *_paragraphs(notices.ERASURE),
              "## The licence", "", "bookchat is free software under the MIT licence (the `LICENSE` file at the top "
              "of its repository).", ""]
    return "\n".join(lines)


def _paragraphs(texts: list[str]) -> list[str]:
    return [line for text in texts for line in (text, "")]


def main(argv: list[str]) -> int:
    """``python -m audit.privacy.manual --write`` (``make docs``) writes the page; ``--check`` (``make lint``) fails,
    naming what to run, when the checked-in page is not what the inventory makes."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bookchat.settings")
    django.setup()
    page, made = Path(PAGE), privacy_reference()
    if argv == ["--write"]:
        page.write_text(made)
        return 0
    if argv == ["--check"]:
        if page.read_text() == made:
            return 0
        print(f"{PAGE} differs from the data inventory (audit/privacy/): run make docs and commit it", file=sys.stderr)
        return 1
    print("usage: python -m audit.privacy.manual --write | --check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
