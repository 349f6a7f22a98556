"""Docusaurus rules: heading anchors, number prefixes, doc slugs, partials, category labels (no Django)."""

from __future__ import annotations

import pytest

from ingestion.reading.docusaurus import (
    category_label,
    category_label_with_issue,
    document_slug,
    github_slug,
    heading_anchor,
    humanize,
    is_partial,
    split_explicit_id,
    strip_number_prefix,
    title_from_path,
)
from ingestion.reading.parsing import parse_document
from tests.support.shared_data import shared_data

# -- explicit ids and anchors -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("Usage with Prettier {#usage-with-prettier}", ("Usage with Prettier", "usage-with-prettier")),
        ("`createData(name: string, data: any): Promise<string>` {#createData}",
         ("`createData(name: string, data: any): Promise<string>`", "createData")),
        ("Plain title", ("Plain title", None)),
        ("Braces {in} the middle", ("Braces {in} the middle", None)),
        ("Empty id {#}", ("Empty id {#}", None)),
        ("Wind shelter {/* #wind */}", ("Wind shelter", "wind")),  # the form future.v4 sites use
    ],
)
def test_split_explicit_id(title, expected):
    assert split_explicit_id(title) == expected


def test_a_heading_id_in_an_mdx_comment_names_the_anchor_and_other_comments_vanish():
    text = "# Page\n\n## Wind shelter {/* #wind */}\n\nPitch the tent {/* #not-an-id */} behind the rocks.\n"
    document = parse_document(text, rel_path="camp.mdx")
    assert [(h.title, h.anchor) for h in document.headings] == [("Page", "page"), ("Wind shelter", "wind")]
    text = " ".join(block.text for block in document.blocks)
    assert "Pitch the tent  behind the rocks." in text or "Pitch the tent behind the rocks." in text
    assert "not-an-id" not in text


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("Hello World", "hello-world"),
        ("What's next?", "whats-next"),
        ("<BrowserOnly>", "browseronly"),
        ("🎯 Course Overview", "-course-overview"),  # emoji dropped, its space kept (github-slugger)
        ("Chapter 7: Gazebo & Ignition Simulation", "chapter-7-gazebo--ignition-simulation"),
        ("snake_case and kebab-case", "snake_case-and-kebab-case"),
        ("Привет, мир", "привет-мир"),
        ("Ünïcödé Ñame", "ünïcödé-ñame"),
        ("docusaurus.config.js", "docusaurusconfigjs"),
    ],
)
def test_github_slug(title, slug):
    assert github_slug(title) == slug


def test_heading_anchor_counts_duplicates_like_github_slugger():
    seen: dict[str, int] = {}
    anchors = [heading_anchor(title, seen) for title in ["Intro", "Intro", "Intro-1", "Intro", "Setup"]]
    assert anchors == ["intro", "intro-1", "intro-1-1", "intro-2", "setup"]


# -- number prefixes and titles -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "stripped"),
    [
        ("01-intro", "intro"),
        ("01_intro", "intro"),
        ("1.intro", "intro"),
        ("01 - intro", "intro"),
        ("2023-release", "release"),
        ("03-ros2-fundamentals", "ros2-fundamentals"),
        ("2021-01-01-new-year", "2021-01-01-new-year"),  # date-like: not a number prefix
        ("1.2-notes", "1.2-notes"),  # version-like
        ("01", "01"),  # only a number
        ("01-", "01-"),
        ("page-11-gazebo-basics", "page-11-gazebo-basics"),
        ("intro", "intro"),
    ],
)
def test_strip_number_prefix(name, stripped):
    assert strip_number_prefix(name) == stripped


def test_humanize_and_title_from_path():
    assert humanize("03-ros2-fundamentals") == "Ros2 fundamentals"
    assert humanize("module_04__vision") == "Module 04 vision"
    assert title_from_path("docs/01-getting-started.md") == "Getting started"
    assert title_from_path("07-gazebo-ignition/index.md") == "Gazebo ignition"
    assert title_from_path("README.md") == "README"


# -- slugs ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel_path", "front_matter", "slug"),
    [
        ("intro.md", {}, "intro"),
        ("01-guides/02-setup.md", {}, "guides/setup"),
        ("guides/index.md", {}, "guides"),
        ("guides/INDEX.mdx", {}, "guides"),
        ("guides/README.md", {}, "guides"),
        ("guides/readme.mdx", {}, "guides"),
        ("guides/guides.md", {}, "guides"),
        ("01-guides/01-guides.md", {}, "guides"),  # Docusaurus compares the raw folder name
        ("index.md", {}, ""),
        ("guides/x.md", {"slug": "/foo/bar/"}, "foo/bar"),
        ("guides/x.md", {"slug": "bar"}, "guides/bar"),
        ("guides/x.md", {"slug": "../bar"}, "bar"),
        ("guides/x.md", {"slug": "/"}, ""),
        ("guides/index.md", {"slug": "start"}, "guides/start"),
        ("guides/02-x.md", {"id": "custom"}, "guides/custom"),
        ("guides/index.md", {"id": "custom"}, "guides"),  # index wins over id
        ("01-guides/02-x.md", {"parse_number_prefixes": False}, "01-guides/02-x"),
        ("guides/x.md", {"slug": 2023}, "guides/2023"),
        # real pages of the corpora
        ("guides/markdown-features/markdown-features-tabs.mdx",
         {"id": "tabs", "slug": "/markdown-features/tabs"}, "markdown-features/tabs"),
        ("api/misc/eslint-plugin/README.mdx", {}, "api/misc/eslint-plugin"),
        ("api/misc/logger/logger.mdx", {}, "api/misc/logger"),
        ("api/plugins/overview.mdx", {"id": "plugins-overview", "sidebar_label": "Overview"},
         "api/plugins/plugins-overview"),
        ("07-gazebo-ignition/index.md", {}, "gazebo-ignition"),
        ("intro.md", {"slug": "/", "title": "Welcome"}, ""),
        ("02-computational-complexity-theory.md", {}, "computational-complexity-theory"),
    ],
)
def test_document_slug(rel_path, front_matter, slug):
    assert document_slug(rel_path, front_matter) == slug


@pytest.mark.parametrize(
    ("rel_path", "partial"),
    [
        ("_mdx-template.mdx", True),
        ("guides/markdown-features/_markdown-partial-example.mdx", True),
        ("api/plugins/_partial-tags-file-api-ref-section.mdx", True),
        ("_drafts/page.md", True),
        ("guides/page.md", False),
        ("guides/my_page.md", False),
    ],
)
def test_is_partial(rel_path, partial):
    assert is_partial(rel_path) is partial


# -- category labels ----------------------------------------------------------------------------


def test_category_label_from_json_and_yml(tmp_path):
    (tmp_path / "01-introduction").mkdir()
    (tmp_path / "01-introduction" / "_category_.json").write_text(
        '{\n  "label": "Chapter 1: Introduction to Physical AI",\n  "position": 1\n}\n', encoding="utf-8")
    (tmp_path / "api" / "plugins").mkdir(parents=True)
    (tmp_path / "api" / "plugins" / "_category_.yml").write_text(
        "label: Plugins\nposition: 2\nlink:\n  type: doc\n  id: api/plugins/plugins-overview\n",
        encoding="utf-8")
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "_category_.yaml").write_text("label: Extras\n", encoding="utf-8")
    assert category_label(tmp_path, "01-introduction") == "Chapter 1: Introduction to Physical AI"
    assert category_label(tmp_path, "api/plugins") == "Plugins"
    assert category_label(tmp_path, "extra") == "Extras"


def test_category_label_fallbacks(tmp_path):
    (tmp_path / "03-ros2-fundamentals").mkdir()
    (tmp_path / "nolabel").mkdir()
    (tmp_path / "nolabel" / "_category_.json").write_text('{"position": 3}', encoding="utf-8")
    assert category_label(tmp_path, "03-ros2-fundamentals") == "Ros2 fundamentals"
    assert category_label(tmp_path, "nolabel") == "Nolabel"
    assert category_label(tmp_path, "") == ""
    assert category_label(tmp_path, ".") == ""
    assert category_label_with_issue(tmp_path, "missing-folder") == ("Missing folder", None)


def test_bad_category_files_fall_back_with_a_warning(tmp_path):
    (tmp_path / "02-broken-json").mkdir()
    (tmp_path / "02-broken-json" / "_category_.json").write_text('{\n  "label": "Oops",\n}\n')
    (tmp_path / "broken-yml").mkdir()
    (tmp_path / "broken-yml" / "_category_.yml").write_text("label: [unclosed\nposition: 1\n")
    label, issue = category_label_with_issue(tmp_path, "02-broken-json")
    assert label == "Broken json"
    assert issue is not None and issue.file == "02-broken-json/_category_.json" and issue.line == 3
    assert "invalid JSON" in issue.message
    label, issue = category_label_with_issue(tmp_path, "broken-yml")
    assert label == "Broken yml"
    assert issue is not None and issue.file == "broken-yml/_category_.yml" and issue.line == 2
    assert category_label(tmp_path, "broken-yml") == "Broken yml"  # never raises


@pytest.mark.needs("shared-data")
def test_category_labels_of_the_real_corpora():
    data = shared_data()
    docs = data / "docusaurus-docs" / "docs"
    assert category_label_with_issue(docs, "api/plugins") == ("Plugins", None)
    assert category_label(docs, "api/plugin-methods") == "Plugin method references"
    assert category_label(docs, "guides") == "Guides"  # no _category_ file
    book2 = data / "physical-ai-book-2" / "docs"
    assert category_label(book2, "01-introduction") == "Chapter 1: Introduction to Physical AI"
    assert category_label(book2, "07-gazebo-ignition") == "Gazebo ignition"
