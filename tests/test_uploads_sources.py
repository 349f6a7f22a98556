"""ingestion.uploads.sources: one strategy per kind of job (what an upload, a publish and a local job each do their
own way), and a publish's report naming its files from the root of the published sources. The jobs run end to end:
tests/test_uploads.py and tests/test_publishing.py."""

from __future__ import annotations

import pytest

from ingestion.indexing.reports import IndexReport, SiteReport
from ingestion.models import IngestionJob
from ingestion.reading.site import Edition
from ingestion.uploads.intake import UploadError
from ingestion.uploads.sources import SOURCES, TRIGGERS, named_from_sources, source_of


def test_every_kind_of_job_has_its_strategy_and_trigger():
    assert set(SOURCES) == set(IngestionJob.Source.values)
    assert TRIGGERS == {"upload": "upload", "publish": "publish", "local": "make run"}
    assert source_of(IngestionJob(source="publish")) is SOURCES["publish"]


def test_what_a_job_indexes_must_still_be_there(tmp_path):
    gone = tmp_path / "gone"
    for kind in ("upload", "publish"):
        with pytest.raises(UploadError, match="uploaded files are gone"):
            SOURCES[kind].check(IngestionJob(source=kind), gone)
    with pytest.raises(UploadError, match="does not exist"):
        SOURCES["local"].check(IngestionJob(source="local", local_path=str(gone)), tmp_path)
    SOURCES["local"].check(IngestionJob(source="local", local_path=str(tmp_path)), gone)  # its own folder: no need


def site_report(root) -> SiteReport:
    """A site's report as a publish makes it: the site at ``root`` (the job's folder), its one edition's pages in
    ``docs/``."""
    docs = root / "docs"
    docs.mkdir(parents=True)
    (docs / "intro.md").write_text("# Intro\n")
    total = IndexReport(book="guide", pages_folder=str(root))
    edition = IndexReport(book="guide", pages_folder=str(docs))
    edition.page_changed("added", "intro.md")
    edition.errors.append({"file": "intro.md", "line": 3, "message": f"bad link to {docs}/gone.md"})
    edition.warnings.append({"file": str(docs / "intro.md"), "line": None, "message": "odd"})
    total.errors.append({**edition.errors[0], "book": "guide"})
    total.page_changed("added", "docs/intro.md")  # a site's sum names its pages from the site's root
    report = SiteReport(total, {"books": ["guide"]})
    report.editions.append((Edition(slug="guide", title="Guide", folder=docs, base_url="", version="current",
                                    version_label="Next", version_path="", version_rank=0, latest=True, locale="en",
                                    trailing_slash=None, is_root=True), edition))
    return report


def test_a_publishs_report_names_files_as_the_repository_does(tmp_path):
    report = site_report(tmp_path)
    stored = report.as_dict()
    named = SOURCES["publish"].stored_report(report, tmp_path)
    assert named["pages"]["added"] == ["docs/intro.md"] and named["pages_folder"] == "."
    assert named["errors"] == [{"file": "docs/intro.md", "line": 3, "message": "bad link to docs/gone.md",
                                "book": "guide"}]
    edition = named["books"][0]
    assert edition["pages"]["added"] == ["docs/intro.md"] and edition["pages_folder"] == "docs"
    assert edition["errors"][0]["file"] == edition["warnings"][0]["file"] == "docs/intro.md"
    assert named_from_sources(stored, tmp_path) == named
    assert stored == report.as_dict(), "the report itself is left as it was"


def test_an_uploads_report_is_stored_as_the_run_made_it(tmp_path):
    report = site_report(tmp_path)
    assert SOURCES["upload"].stored_report(report, tmp_path) == report.as_dict()
