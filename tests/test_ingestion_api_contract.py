"""ingestion.api.contract and ingestion.api.text: the queries of publishing's two routes (a repository folder, the
wait and output checked), the HTTP status a CI log's report answers with, and a sync as plain text or as GitHub
workflow commands."""

from __future__ import annotations

import pytest

from bookchat.base.errors import RequestError
from ingestion.api.contract import MAX_WAIT_SECONDS, PublishQuerySerializer, SyncQuerySerializer, checked_query
from ingestion.api.text import outcome_status, sync_text


def sync(status="done", *, report=None, error=None, dry_run=False, revision="", stage="") -> dict:
    return {"sync": 7, "book": "guide", "status": status, "dry_run": dry_run, "revision": revision, "stage": stage,
            "report": report, "error": error}


def report(*, errors=(), warnings=()) -> dict:
    return {"pages": {"added": 2, "changed": 1, "unchanged": 5, "removed": 0, "failed": len(errors), "skipped": 0},
            "passages": {"embedded": 9, "added": 9, "kept": 40, "removed": 0},
            "errors": list(errors), "warnings": list(warnings)}


def test_publish_query_defaults_and_a_folder_without_its_slashes():
    assert checked_query(PublishQuerySerializer, {}) == {"dry_run": False, "revision": "", "source_dir": "",
                                                         "language": ""}
    query = checked_query(PublishQuerySerializer, {"dry_run": "true", "source_dir": "/website/docs/"})
    assert query["dry_run"] is True and query["source_dir"] == "website/docs"


@pytest.mark.parametrize("folder", ["../outside", "docs/../../etc", "a b", "docs//x"])
def test_publish_query_refuses_a_folder_outside_the_repository_or_not_a_path(folder):
    with pytest.raises(RequestError) as refused:
        checked_query(PublishQuerySerializer, {"source_dir": folder})
    assert refused.value.code == "invalid_source_dir" and refused.value.field == "source_dir"


def test_sync_query_refuses_a_wait_over_the_limit_an_unknown_output_and_an_unknown_parameter():
    assert checked_query(SyncQuerySerializer, {}) == {"wait": 0, "output": "json"}
    with pytest.raises(RequestError) as too_long:
        checked_query(SyncQuerySerializer, {"wait": str(MAX_WAIT_SECONDS + 1)})
    assert too_long.value.field == "wait"
    with pytest.raises(RequestError) as unknown_output:
        checked_query(SyncQuerySerializer, {"output": "xml"})
    assert unknown_output.value.field == "output"
    with pytest.raises(RequestError) as unknown:
        checked_query(SyncQuerySerializer, {"verbose": "1"})
    assert unknown.value.code == "unknown_field"


@pytest.mark.parametrize(("state", "expected"), [
    (sync("queued"), 202),
    (sync("running"), 202),
    (sync("done", report=report()), 200),
    (sync("done", report=report(warnings=[{"file": "a.md", "line": 1, "message": "odd"}])), 200),
    (sync("done", report=report(errors=[{"file": "a.md", "line": 3, "message": "bad"}])), 422),
    (sync("failed", error={"code": "bad_archive", "message": "not gzip"}), 422),
])
def test_outcome_status_fails_a_ci_step_on_failure_or_page_errors_only(state, expected):
    assert outcome_status(state) == expected


def test_text_report_names_each_issue_by_file_and_line_under_the_source_folder():
    done = sync(report=report(errors=[{"file": "intro.md", "line": 3, "message": "unclosed fence"}],
                              warnings=[{"file": "guide.md", "line": None, "message": "no title"},
                                        {"file": None, "line": None, "message": "no sidebar"}]),
                revision="abc123")
    lines = sync_text(done, github=False, source_dir="website/").splitlines()
    assert lines[0] == ("bookchat sync 7 of guide: done (revision abc123); pages added 2, changed 1, unchanged 5, "
                        "removed 0, failed 1; passages embedded 9; 1 errors, 2 warnings")
    assert lines[1:] == ["website/intro.md:3: error: unclosed fence", "website/guide.md: warning: no title",
                         "warning: no sidebar"]


def test_text_report_of_a_dry_run_says_would_and_of_a_running_sync_its_stage():
    assert "pages would be added 2" in sync_text(sync(report=report(), dry_run=True), github=False)
    assert sync_text(sync("running", stage="embedding"), github=False) == \
        "bookchat sync 7 of guide: running; embedding\n"


def test_github_report_annotates_files_and_escapes_what_would_break_a_workflow_command():
    failed = sync("failed", report=report(errors=[{"file": "a,b:c.md", "line": 4, "message": "50% done\nthen"}]),
                  error={"code": "timeout", "message": "took\rtoo long"})
    lines = sync_text(failed, github=True).splitlines()
    assert lines[0].startswith("::notice title=bookchat::bookchat sync 7 of guide: failed")
    assert lines[1] == "::error file=a%2Cb%3Ac.md,line=4::50%25 done%0Athen"
    assert lines[2] == "::error title=bookchat::sync failed (timeout): took%0Dtoo long"


def test_github_report_of_an_issue_without_a_file_is_a_bare_command():
    lines = sync_text(sync(report=report(warnings=[{"file": None, "line": None, "message": "w"}])),
                      github=True).splitlines()
    assert lines[1] == "::warning::w"
