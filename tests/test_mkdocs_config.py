"""``ingestion.reading.mkdocs.config``: mkdocs.yml read as MkDocs reads it — INHERIT merged (mappings key by key,
lists replaced), MkDocs' YAML tags read without running anything, extension options gathered — on cases
tests/test_mkdocs.py leaves out."""

from __future__ import annotations

from pathlib import Path

from ingestion.reading.mkdocs.config import MAX_CONFIG_BYTES, PythonRef, Slugify, find_config, load_site, merge

CHILD = """INHERIT: base/base.yml
site_url: https://example.org/h
site_name: !ENV [SITE_NAME_NOT_SET, "Child"]
repo: !ENV REPO_URL
dir: !relative docs
extra: {b: {d: 3}, l: [9]}
markdown_extensions:
  - markdown.extensions.toc:
      slugify: !!python/name:unknown.slug
  - pymdownx.snippets: {base_path: includes, auto_append: x.md, check_paths: true}
mdx_configs: {toc: {permalink: "#"}, not_enabled: {a: 1}}
exclude_docs: |
  # a comment
  drafts/
  *.tmp
"""
BASE = "site_name: Base\nextra: {a: 1, b: {c: 2}, l: [1, 2]}\nmarkdown_extensions: [admonition]\n"


def _write(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    return root


def test_merge_is_mergedeeps_replace():
    parent = {"a": 1, "b": {"c": 2, "e": {"f": 1}}, "l": [1, 2]}
    assert merge(parent, {"b": {"d": 3, "e": 5}, "l": [9]}) == {"a": 1, "b": {"c": 2, "d": 3, "e": 5}, "l": [9]}
    assert parent["b"] == {"c": 2, "e": {"f": 1}}  # the parent is not changed


def test_an_inheriting_config_with_mkdocs_tags(tmp_path):
    site = load_site(_write(tmp_path, {"mkdocs.yml": CHILD, "base/base.yml": BASE, "docs/index.md": "# I\n"}))
    assert site.site_name == "Child"  # !ENV's default; the environment is never read
    assert site.config["repo"] is None and site.config["dir"] == "docs"
    assert site.config["extra"] == {"a": 1, "b": {"c": 2, "d": 3}, "l": [9]}
    assert site.site_url == "https://example.org/h/"
    assert site.inherited == [tmp_path / "base" / "base.yml"]
    assert "admonition" not in site.markdown_extensions  # the child's list replaces the parent's


def test_extension_options_from_the_list_and_mdx_configs(tmp_path):
    site = load_site(_write(tmp_path, {"mkdocs.yml": CHILD, "base/base.yml": BASE, "docs/index.md": "# I\n"}))
    assert list(site.markdown_extensions)[:3] == ["toc", "tables", "fenced_code"]
    assert site.markdown_extensions["toc"]["slugify"] == PythonRef("unknown.slug")
    assert "not_enabled" not in site.markdown_extensions
    assert site.toc.permalink == "#" and site.toc.slugify == Slugify()
    assert site.warnings == ["toc slugify 'unknown.slug' is not known; Python-Markdown's default is used"]
    assert site.snippets.base_path == [tmp_path / "includes"] and site.snippets.auto_append == ["x.md"]
    assert site.snippets.check_paths is True and site.snippets.restrict_base_path is True
    assert site.exclude_docs == ["drafts/", "*.tmp"]


def test_a_python_object_tag_is_named_not_called(tmp_path):
    config = ("site_name: S\nmarkdown_extensions:\n  - toc:\n      slugify: !!python/object/apply:pymdownx.slugs."
              "slugify [lower-ascii]\n")
    site = load_site(_write(tmp_path, {"mkdocs.yml": config}))
    assert site.markdown_extensions["toc"]["slugify"] == PythonRef("pymdownx.slugs.slugify", ("lower-ascii",), {})


def test_mkdocs_yml_is_preferred_and_an_oversized_config_is_not_read(tmp_path):
    _write(tmp_path, {"mkdocs.yaml": "site_name: Yaml\n", "mkdocs.yml": "site_name: Yml\n"})
    assert find_config(tmp_path) == tmp_path / "mkdocs.yml"
    _write(tmp_path, {"mkdocs.yml": "site_name: Big\n" + "#" * MAX_CONFIG_BYTES})
    site = load_site(tmp_path)
    assert site.site_name == tmp_path.name
    assert site.warnings[0] == f"mkdocs.yml: larger than {MAX_CONFIG_BYTES} bytes; not read"


def test_an_inherit_chain_that_loops_is_read_once(tmp_path):
    _write(tmp_path, {"mkdocs.yml": "INHERIT: a.yml\nsite_name: Top\n", "a.yml": "INHERIT: mkdocs.yml\nx: 1\n"})
    site = load_site(tmp_path)
    assert site.site_name == "Top" and site.config["x"] == 1
    assert any("INHERIT loop" in warning for warning in site.warnings)
