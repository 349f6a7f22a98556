"""``ingestion.reading.mkdocs.headings``: heading ids as Python-Markdown's ``toc`` makes them — attr-list ids, the
text that is slugged, and duplicate counting — on cases tests/test_mkdocs.py leaves out."""

from __future__ import annotations

from pathlib import Path

from ingestion.reading.mkdocs.config import MkDocsSite
from ingestion.reading.mkdocs.headings import heading_id, heading_ids, heading_text, split_heading_attrs, unique_id


def test_attr_list_ids_in_either_form_and_only_when_enabled():
    assert split_heading_attrs("Title { #custom .cls }") == ("Title", "custom")
    assert split_heading_attrs('Title {: id="q" }') == ("Title", "q")
    assert split_heading_attrs("Title ## {#y}") == ("Title", "y")
    assert split_heading_attrs("Title {#x}", enabled=False) == ("Title {#x}", None)


def test_the_slugged_text_drops_images_tags_markup_and_emoji_but_keeps_code():
    markdown = "![img](a.png) [Link](x) `<code>` <b>bold</b> **strong** snake_case &amp; :smile:"
    assert heading_text(markdown, emoji=True) == "Link <code> bold strong snake_case &"
    assert heading_text(":smile: face") == ":smile: face"


def test_duplicates_count_past_ids_already_taken():
    seen = {"x": 0, "x_1": 0}
    assert unique_id("x", seen) == "x_2"
    assert unique_id("", seen) == "_1"
    assert unique_id("y_1", {"y_1": 0}) == "y_2"


def test_an_explicit_id_is_reserved_before_earlier_headings_are_named():
    assert heading_ids(["Intro", "Intro {#intro}", "Intro"]) == ["intro_1", "intro", "intro_2"]


def test_without_attr_list_the_braces_are_part_of_the_slug(tmp_path):
    site = MkDocsSite(root=tmp_path, config_file=tmp_path / "mkdocs.yml", site_name="S", docs_dir=Path("docs"),
                      markdown_extensions={"toc": {}})
    assert heading_id("Title {#x}", {}, site) == "title-x"
