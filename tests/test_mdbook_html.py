"""``ingestion.reading.mdbook.html``: the file, URL and heading ids mdBook's HTML renderer gives a chapter, on the
cases tests/test_mdbook.py leaves out (README in any case and extension, base URLs, id collisions)."""

from __future__ import annotations

from ingestion.reading.mdbook.html import (
    heading_id,
    html_path,
    normalize_id,
    page_url,
    smart_dashes,
    split_heading_attributes,
    unique_id,
)


def test_a_readme_of_any_case_and_extension_is_its_folders_index():
    assert html_path("guide/Readme.markdown") == "guide/index.html"
    assert html_path("guide/README.md", index_readme=False) == "guide/README.html"
    assert html_path("noext") == "noext.html"
    assert html_path(".\\a\\b.md") == "a/b.html"


def test_a_url_joins_the_base_with_one_slash_and_percent_encodes_the_path():
    assert page_url("https://example.org/book/", "ünï code/a b.md") == \
        "https://example.org/book/%C3%BCn%C3%AF%20code/a%20b.html"
    assert page_url("", "ch01.md") == "/ch01.html"


def test_ids_keep_letters_of_any_script_and_drop_punctuation():
    assert normalize_id("  Hello, World! 2.0  ") == "hello-world-20"
    assert normalize_id("Café — über") == "café--über"
    assert normalize_id("\u00a0a\u00a0b") == "a-b"  # no-break spaces: trimmed, then a dash
    assert normalize_id("!!!") == "section"


def test_unique_ids_skip_a_suffix_already_taken():
    seen = {"x": 0, "x-1": 0}
    assert unique_id("x", seen) == "x-2"
    ids = {}
    assert [heading_id(text, ids) for text in ("A", "A", "A-1")] == ["a", "a-1", "a-1-1"]
    assert heading_id("A", ids, custom_id="mine") == "mine" and "mine" not in ids  # custom ids are not counted


def test_heading_attributes_last_id_wins_and_closing_hashes_go():
    assert split_heading_attributes("Title ## {#custom .c1 . key=v #second}") == ("Title", "second", ["c1"])
    assert split_heading_attributes("C# language") == ("C# language", None, [])
    assert split_heading_attributes("Title {not<an attribute}") == ("Title {not<an attribute}", None, [])


def test_smart_dashes_split_long_runs_as_pulldown_cmark():
    assert smart_dashes("a--b---c-----d ... e") == "a–b—c—–d … e"
    assert smart_dashes("a----b") == "a––b"
