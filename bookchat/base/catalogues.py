"""The interface's translation catalogues: compiled, checked and brought up to date without GNU gettext.

Decided: the ``.po`` files are the source (in git, reviewed); the ``.mo`` files Django reads are generated (not in
git) by ``python -m bookchat.base.catalogues``, which ``make run``/``test``/``drills`` and the image build run: it
compiles every ``<app>/locale/<locale>/LC_MESSAGES/*.po`` of the apps whose ``.mo`` is missing or older, with
babel's reader and writer. ``--update`` brings the catalogues of ``CATALOGUES`` up to date with the code (the
strings of the templates, the Python and the scripts they cover: new ones added untranslated, gone ones dropped),
for a translator to fill in; ``tests/test_catalogues.py`` fails on an untranslated, stale or mis-placeheld entry.
"""

from __future__ import annotations

import argparse
import io
from dataclasses import dataclass
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parent.parent.parent  # the checkout (or site-packages, from a wheel)
APPS = ("bookchat", "chat", "ingestion", "audit")
# Django's locale folders, one per interface language besides English.
LOCALES = ("es", "fr", "pt", "hi", "ur", "ar", "zh_Hans")
KEYWORDS = {"gettext": None, "gettext_lazy": None, "_": None, "gettext_noop": None, "pgettext": ((1, "c"), 2),
            "pgettext_lazy": ((1, "c"), 2), "ngettext": (1, 2), "ngettext_lazy": (1, 2), "t": None, "N_": None}


@dataclass(frozen=True)
class Domain:
    """One catalogue of an app (``bookchat/locale/<locale>/LC_MESSAGES/django.po``) and the sources it covers."""

    app: str
    name: str  # "django" (templates, Python) or "djangojs" (scripts)
    sources: tuple[str, ...]  # globs under the checkout

    def po(self, locale: str) -> Path:
        return ROOT / self.app / "locale" / locale / "LC_MESSAGES" / f"{self.name}.po"


# The interface's catalogues (the pipeline's own, chat/locale, is listed by the pipeline's engineer beside it).
CATALOGUES = [
    Domain("bookchat", "django", ("templates/bookchat/*.html", "chat/channels/page.py", "chat/lti/*.py")),
    Domain("bookchat", "djangojs", ("static/bookchat/chat.js", "static/bookchat/widget.js")),
]
# Everything whose strings may be in some catalogue: a msgid found in none of these is stale.
ALL_SOURCES = {"django": ("templates/**/*.html", *(f"{app}/**/*.py" for app in APPS)),
               "djangojs": ("static/bookchat/*.js",)}


def _strings_of(path: Path) -> set[str]:
    if path.suffix == ".html":
        from django.utils.translation.template import templatize

        # templatize keeps the template's layout (as X's) around its gettext calls: unindented, Python's tokenizer
        # reads it whatever the template's indentation.
        text = templatize(path.read_text(encoding="utf-8"), origin=str(path))
        method, data = "python", "\n".join(line.lstrip() for line in text.splitlines()).encode()
    else:
        method, data = ("javascript" if path.suffix == ".js" else "python"), path.read_bytes()
    found = set()
    for _, message, _, _ in extract(method, io.BytesIO(data), keywords=KEYWORDS):
        found.update([message] if isinstance(message, str) else [m for m in message if m])
    return found


def extracted(globs: tuple[str, ...]) -> set[str]:
    """The msgids the files matching ``globs`` (under the checkout) pass to gettext."""
    return {msgid for pattern in globs for path in sorted(ROOT.glob(pattern)) for msgid in _strings_of(path)}


def po_files() -> list[Path]:
    return sorted(path for app in APPS for path in (ROOT / app / "locale").glob("*/LC_MESSAGES/*.po"))


def outdated(*, by_time: bool = True) -> list[Path]:
    """The ``.po`` files whose ``.mo`` is missing or (``by_time``) older than they are; an installed wheel's files
    carry the times of their unpacking, so there only a missing one counts."""
    return [po for po in po_files() if not po.with_suffix(".mo").is_file()
            or by_time and po.with_suffix(".mo").stat().st_mtime < po.stat().st_mtime]


def read(po: Path) -> Catalog:
    with po.open("rb") as handle:
        return read_po(handle, locale=po.parent.parent.name, domain=po.stem)


def compile_all(*, force: bool = False) -> list[Path]:
    """Writes the ``.mo`` of every outdated ``.po`` (every one with ``force``); the ones written."""
    written = []
    for po in po_files() if force else outdated():
        with po.with_suffix(".mo").open("wb") as handle:
            write_mo(handle, read(po))
        written.append(po)
    return written


HEADER = """# bookchat's interface in {language} ({domain}: {what}).
# New strings come from `python -m bookchat.base.catalogues --update`, untranslated; tests/test_catalogues.py
# fails until each is translated with the same placeholders."""


def update(domain: Domain, locale: str) -> tuple[int, int]:
    """Adds the domain's new strings to its catalogue for ``locale`` (untranslated) and drops the gone ones;
    (added, dropped)."""
    wanted, po = extracted(domain.sources), domain.po(locale)
    catalogue = read(po) if po.is_file() else Catalog(locale=locale, domain=domain.name)
    catalogue.project, catalogue.version, catalogue.msgid_bugs_address = "bookchat", "1", ""
    catalogue.header_comment = HEADER.format(domain=domain.name, language=catalogue.locale.english_name,
                                              what="the scripts" if domain.name == "djangojs" else "the pages")
    catalogue.last_translator = catalogue.language_team = "bookchat's contributors"
    catalogue.fuzzy = False
    have = {message.id for message in catalogue if message.id}
    for msgid in sorted(wanted - have):
        catalogue.add(msgid, "")
    for msgid in have - wanted:
        del catalogue[msgid]
    po.parent.mkdir(parents=True, exist_ok=True)
    with po.open("wb") as handle:
        write_po(handle, catalogue, width=0, omit_header=False, sort_output=True)
    return len(wanted - have), len(have - wanted)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bookchat.base.catalogues", description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="add new strings to the catalogues, drop gone ones")
    parser.add_argument("--force", action="store_true", help="compile every catalogue, outdated or not")
    args = parser.parse_args(argv)
    if args.update:
        from django.conf import settings

        if not settings.configured:
            settings.configure()  # templatize reads none of bookchat's (whose import would start the database)
        for domain in CATALOGUES:
            for locale in LOCALES:
                added, dropped = update(domain, locale)
                print(f"{domain.po(locale).relative_to(ROOT)}: {added} added, {dropped} dropped")
    for po in compile_all(force=args.force):
        print(f"compiled {po.relative_to(ROOT).with_suffix('.mo')}")


if __name__ == "__main__":
    main()
