"""``ingestion.reading.mkdocs.pages``: which files MkDocs builds as pages, their order with and without ``nav``,
and the gitignore subset that excludes them, on cases tests/test_mkdocs.py leaves out."""

from __future__ import annotations

from pathlib import Path

from ingestion.reading.mkdocs.pages import (
    NavEntry,
    default_nav,
    file_sort_key,
    matches_gitignore,
    nav_order,
    page_files,
    page_path,
    read_mkdocs,
)

DOCS = ("README.md", "index.md", "b.md", "a.md", "c.markdown", "note.txt", "secret.md", "wip/w.md",
        "my_guide/z.md", "my_guide/index.md", "API-Ref/x.md")


def _site(root: Path, config: str) -> Path:
    (root / "mkdocs.yml").write_text(config)
    for name in DOCS:
        (root / "docs" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / name).write_text("# Page\n")
    return root


def test_pages_leave_out_drafts_non_markdown_and_a_readme_beside_an_index(tmp_path):
    site = read_mkdocs(_site(tmp_path, "site_name: S\ndraft_docs: wip/\n"))
    assert page_files(site) == ["index.md", "a.md", "b.md", "c.markdown", "secret.md", "API-Ref/x.md",
                                "my_guide/index.md", "my_guide/z.md"]
    assert site.warnings == ["README.md is not a page: it conflicts with index.md"]


def test_the_default_nav_nests_folders_as_titled_sections_without_not_in_nav_pages(tmp_path):
    site = read_mkdocs(_site(tmp_path, "site_name: S\nnot_in_nav: secret.md\ndraft_docs: wip/\n"))
    nav = default_nav(site)
    assert [entry.title for entry in nav if entry.is_section] == ["API Ref", "My guide"]
    assert nav[-1].children == [NavEntry(None, rel_path="my_guide/index.md"), NavEntry(None, rel_path="my_guide/z.md")]
    assert "secret.md" not in nav_order(site) and "secret.md" in page_files(site)


def test_a_nav_mapping_lists_each_page_once_and_warns_on_other_values(tmp_path):
    config = "site_name: S\nnav:\n  Home: index.md\n  Again: index.md\n  Odd: 3\n  Guide:\n    - my_guide/z.md\n"
    site = read_mkdocs(_site(tmp_path, config))
    assert nav_order(site) == ["index.md", "my_guide/z.md"]
    assert "nav entry 'Odd': 3 is not a path or a section; ignored" in site.warnings


def test_a_nav_that_is_not_a_list_falls_back_to_folder_order(tmp_path):
    site = read_mkdocs(_site(tmp_path, "site_name: S\nnav: 3\n"))
    assert nav_order(site)[:2] == ["index.md", "a.md"]
    assert "nav is not a list; MkDocs' folder order is used" in site.warnings


def test_gitignore_stars_stay_within_a_folder_and_slashes_anchor():
    assert not matches_gitignore(["docs/*.md"], "docs/a/b.md")
    assert matches_gitignore(["docs/**/*.md"], "docs/a/b.md")
    assert matches_gitignore(["a?.md"], "x/ab.md")
    assert not matches_gitignore(["/ab.md"], "x/ab.md")
    assert not matches_gitignore(["b.md/"], "b.md")  # a folder-only pattern never matches the file itself


def test_folder_order_puts_a_folders_files_before_its_subfolders_and_index_first():
    paths = ["b/x.md", "a.md", "b/index.md", "a/z.md", "index.md"]
    assert sorted(paths, key=file_sort_key) == ["index.md", "a.md", "a/z.md", "b/index.md", "b/x.md"]


def test_readme_urls_are_the_folders_url():
    assert page_path("guide/README.md") == "guide/" and page_path("README.md", False) == "index.html"
