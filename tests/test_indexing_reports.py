"""``ingestion.indexing.reports``: what an indexing run reports — its exit status (0 all indexed, 1 some files
failed, 2 nothing indexable), page lists capped while counts stay whole, times rounded in JSON, and a site's report
with its own warnings and one entry per edition."""

from __future__ import annotations

from pathlib import Path

from ingestion.indexing.reports import LISTED_PAGES, IndexReport, SiteReport
from ingestion.reading.documents import Issue
from ingestion.reading.site import Edition


def test_the_exit_status_says_whether_the_book_is_searchable():
    assert IndexReport(book="b").exit_code == 0
    assert IndexReport(book="b", files_failed=1, files_unchanged=3).exit_code == 1
    assert IndexReport(book="b", files_failed=1, files_indexed=1).exit_code == 1
    assert IndexReport(book="b", files_failed=2).exit_code == 2


def test_page_lists_are_capped_and_times_rounded():
    report = IndexReport(book="b", embed_seconds=1.23456, total_seconds=2.0004)
    for n in range(LISTED_PAGES + 5):
        report.page_changed("added", f"p{n}.md")
    report.warn(Issue("a.md", 3, "odd"))
    data = report.as_dict()
    assert len(data["pages"]["added"]) == LISTED_PAGES and data["pages"]["added"][-1] == f"p{LISTED_PAGES - 1}.md"
    assert (data["embed_seconds"], data["total_seconds"]) == (1.235, 2.0)
    assert data["warnings"] == [{"file": "a.md", "line": 3, "message": "odd"}]


def test_a_site_report_sums_its_editions_and_keeps_the_sites_own_warnings():
    total = IndexReport(book="site", files_indexed=3,
                        warnings=[{"file": "versions.json", "line": None, "message": "not read"},
                                  {"file": "a.md", "line": 1, "message": "odd", "book": "handbook--fr"}])
    edition = Edition(slug="handbook--fr", title="Handbook", folder=Path("docs"), base_url="https://x.org/fr/docs",
                      version="current", version_label="Next", version_path="", version_rank=0, latest=True,
                      locale="fr", trailing_slash=None)
    report = SiteReport(total=total, site={"config": "docusaurus.config.js"},
                        editions=[(edition, IndexReport(book="handbook--fr", files_indexed=3))])
    assert report.files_indexed == 3  # the sums' fields read through
    assert report.site_warnings == [{"file": "versions.json", "line": None, "message": "not read"}]
    [book] = report.as_dict()["books"]
    assert (book["slug"], book["locale"], book["files_indexed"]) == ("handbook--fr", "fr", 3)
    assert "book" not in book and "dry_run" not in book
