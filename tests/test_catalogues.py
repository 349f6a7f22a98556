"""Every translation catalogue of the repository (the interface's in bookchat/locale, the pipeline's in chat/locale)
reviewed against the English strings of the code: each entry translated, with the placeholders of its English
(``%(name)s``, ``%s``, ``%d``, ``{name}``) and the markup of a sentence that carries some, none missing and none
extra; no entry the code no longer has (stale); every string of the interface's pages and scripts in each of its
catalogues; and compiled, so that Django reads what the .po says. Reads the .po files with babel; cheap."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from bookchat.base import catalogues

PLACEHOLDER = re.compile(r"%\(\w+\)[sdif]|%[sdif]|\{\w*\}")
MARKUP = re.compile(r"</?[a-z]+|\s[a-z-]+=")  # the tags and attribute names a sentence's HTML keeps
PO_FILES = catalogues.po_files()


def entries(po: Path):
    return [message for message in catalogues.read(po) if message.id]


def placeholders(text: str) -> list[str]:
    return sorted(PLACEHOLDER.findall(text))


def test_the_interface_has_a_catalogue_for_each_of_its_languages():
    for domain in catalogues.CATALOGUES:
        for locale in catalogues.LOCALES:
            assert domain.po(locale).is_file(), f"no {domain.name} catalogue for {locale}"
    assert len(PO_FILES) >= 2 * len(catalogues.LOCALES)


@pytest.mark.parametrize("po", PO_FILES, ids=lambda po: str(po.relative_to(catalogues.ROOT)))
def test_every_entry_is_translated_with_the_placeholders_of_its_english(po):
    problems = []
    for message in entries(po):
        msgids = message.id if isinstance(message.id, tuple) else (message.id,)
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        if not all(strings) or message.fuzzy:
            problems.append(f"untranslated{' (fuzzy)' if message.fuzzy else ''}: {msgids[0]!r}")
            continue
        for text in strings:
            if placeholders(text) != placeholders(msgids[-1]) and placeholders(text) != placeholders(msgids[0]):
                problems.append(f"placeholders {placeholders(text)} where the English has "
                                f"{placeholders(msgids[0])}: {msgids[0]!r} → {text!r}")
            if sorted(MARKUP.findall(text)) != sorted(MARKUP.findall(msgids[0])):
                problems.append(f"markup differs: {msgids[0]!r} → {text!r}")
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def in_the_code() -> dict[str, set[str]]:
    return {domain: catalogues.extracted(globs) for domain, globs in catalogues.ALL_SOURCES.items()}


@pytest.mark.parametrize("po", PO_FILES, ids=lambda po: str(po.relative_to(catalogues.ROOT)))
def test_no_entry_is_stale(po, in_the_code):
    stale = [message.id for message in entries(po)
             if (message.id if isinstance(message.id, str) else message.id[0]) not in in_the_code[po.stem]]
    assert not stale, f"{po.name} translates strings the code no longer has (python -m bookchat.base.catalogues " \
                      f"--update drops them): {stale}"


@pytest.mark.parametrize("domain", catalogues.CATALOGUES, ids=lambda d: f"{d.app}-{d.name}")
def test_every_string_of_the_interface_is_in_each_catalogue(domain):
    wanted = catalogues.extracted(domain.sources)
    assert len(wanted) > 50, "the extraction found the interface's strings"
    for locale in catalogues.LOCALES:
        missing = wanted - {message.id for message in entries(domain.po(locale))}
        assert not missing, f"{domain.po(locale).name} ({locale}) lacks {sorted(missing)}: run python -m " \
                            f"bookchat.base.catalogues --update, then translate them"


def test_the_placeholder_check_catches_a_missing_or_extra_one():
    assert placeholders("Up to %(limit)s characters.") != placeholders("Hasta caracteres.")
    assert placeholders("{n} of {max} characters") != placeholders("{n} de {max} {max} caracteres")
    assert placeholders("Indexing %(title)s: %(progress)s.") == placeholders("%(progress)s — %(title)s")
    assert sorted(MARKUP.findall('on <time datetime="%(iso)s">')) != sorted(MARKUP.findall("el %(iso)s"))


def test_every_catalogue_is_compiled_and_django_reads_it():
    catalogues.compile_all()
    assert not catalogues.outdated()
    from django.utils import translation

    with translation.override("es"):
        assert translation.gettext("Ask about this") == "Preguntar sobre esto"
    with translation.override("zh-hans"):
        assert translation.gettext("Sources") == "来源"


def test_the_system_check_warns_of_a_catalogue_changed_since_it_was_compiled():
    from bookchat.checks import check_catalogues

    catalogues.compile_all()
    assert check_catalogues() == []
    po = catalogues.CATALOGUES[0].po("ur")
    mo = po.with_suffix(".mo")
    stat = mo.stat()
    try:
        os.utime(mo, (stat.st_atime, po.stat().st_mtime - 60))  # the .po edited after the last compile
        warnings = check_catalogues()
        assert [w.id for w in warnings] == ["bookchat.W001"] and "ur" in warnings[0].msg
    finally:
        catalogues.compile_all()
    assert check_catalogues() == []
