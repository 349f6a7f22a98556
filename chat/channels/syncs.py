"""The contract of publishing a book from CI: the queries of ``POST /books/{slug}/sources`` and ``GET
/books/{slug}/syncs/{id}``, the sync as the schema states it, and the sync as plain text for a CI log (``text``:
``file:line: message``, as compilers write; ``github``: GitHub Actions' workflow commands, which annotate the
files of a pull request).
"""

from __future__ import annotations

import re

from rest_framework import serializers

from chat.channels.serializers import StrictSerializer

MAX_WAIT_SECONDS = 60
OUTPUTS = ("json", "text", "github")
_SOURCE_DIR = re.compile(r"^[\w.@+~-]+(?:/[\w.@+~-]+)*/?$")


class SourceDirField(serializers.CharField):
    def to_internal_value(self, data):
        value = super().to_internal_value(data).strip().strip("/")
        if value and (not _SOURCE_DIR.fullmatch(value) or ".." in value.split("/")):
            raise serializers.ValidationError("source_dir must be a relative folder of the repository, like "
                                              "`website`", code="invalid_source_dir")
        return value


class PublishQuerySerializer(StrictSerializer):
    """``?dry_run=&revision=&source_dir=`` of ``POST /books/{slug}/sources``."""

    order = ("dry_run", "revision", "source_dir")

    def get_fields(self):
        return {
            "dry_run": serializers.BooleanField(required=False, default=False, help_text=(
                "Only read and check the sources, store nothing, and report what would change (a pull request's "
                "preview).")),
            "revision": serializers.CharField(required=False, default="", max_length=100, help_text=(
                "What is published, for the record (a commit's SHA).")),
            "source_dir": SourceDirField(required=False, default="", max_length=300, help_text=(
                "The site root's folder in the repository (`website`), so that the text reports name files as the "
                "repository does.")),
        }


class SyncQuerySerializer(StrictSerializer):
    """``?wait=&output=`` of ``GET /books/{slug}/syncs/{id}``."""

    order = ("wait", "output")

    def get_fields(self):
        return {
            "wait": serializers.IntegerField(required=False, default=0, min_value=0, max_value=MAX_WAIT_SECONDS,
                                             help_text="Wait up to this many seconds for the sync to end before "
                                                       "answering (0–60)."),
            "output": serializers.ChoiceField(OUTPUTS, required=False, default="json", help_text=(
                "`json`; or for a CI log `text` (`file:line: message`) or `github` (annotations). The text outputs "
                "answer 200 when the sync is done without page errors, 202 while it is queued or running, 422 when "
                "it failed or has page errors.")),
        }


def checked_query(serializer_class, query_params) -> dict:
    return serializer_class(data={key: query_params[key] for key in query_params}).checked()


class SyncAcceptedSerializer(serializers.Serializer):
    sync = serializers.IntegerField()
    book = serializers.CharField()
    status = serializers.ChoiceField(["queued"])
    dry_run = serializers.BooleanField()
    status_url = serializers.CharField(help_text="Where the sync's status is (also the `Location` header).")


class SyncPagesSerializer(serializers.Serializer):
    added = serializers.IntegerField()
    changed = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    removed = serializers.IntegerField()
    failed = serializers.IntegerField()
    skipped = serializers.IntegerField()


class SyncPassagesSerializer(serializers.Serializer):
    embedded = serializers.IntegerField()
    added = serializers.IntegerField()
    kept = serializers.IntegerField()
    removed = serializers.IntegerField()


class SyncIssueSerializer(serializers.Serializer):
    file = serializers.CharField(allow_null=True, help_text="From the root of the published sources.")
    line = serializers.IntegerField(allow_null=True)
    message = serializers.CharField()
    book = serializers.CharField(required=False, help_text="The edition (version, locale) it is about.")


class SyncReportSerializer(serializers.Serializer):
    pages = SyncPagesSerializer()
    passages = SyncPassagesSerializer()
    added = serializers.ListField(child=serializers.CharField(), help_text="Pages added (the first 500).")
    changed = serializers.ListField(child=serializers.CharField())
    removed = serializers.ListField(child=serializers.CharField())
    errors = SyncIssueSerializer(many=True, help_text="Pages that could not be indexed: each keeps its previous "
                                                      "version, if it had one.")
    warnings = SyncIssueSerializer(many=True)
    books = serializers.ListField(child=serializers.CharField(), help_text="The books (editions) it indexed.")
    seconds = serializers.FloatField(allow_null=True)


class SyncErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()


class SyncProgressSerializer(serializers.Serializer):
    files_done = serializers.IntegerField()
    files_total = serializers.IntegerField()


class SyncSerializer(serializers.Serializer):
    """A sync: one publish of a book's sources and its indexing, or a dry run of it."""

    sync = serializers.IntegerField()
    book = serializers.CharField()
    status = serializers.ChoiceField(["queued", "running", "done", "failed"])
    dry_run = serializers.BooleanField()
    revision = serializers.CharField(allow_null=True)
    published_by = serializers.CharField(allow_null=True)
    stage = serializers.CharField(allow_null=True)
    progress = SyncProgressSerializer()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    error = SyncErrorSerializer(allow_null=True, help_text="Why it failed; the book serves its previous version.")
    report = SyncReportSerializer(allow_null=True, help_text="Once it has ended: what changed (a dry run: what "
                                                             "would), and every page error with its file and line.")
    ignored = serializers.ListField(child=serializers.CharField(), help_text="Files of the archive not stored: "
                                    "dependencies, build caches, binary files that are not pages.")


def outcome_status(sync: dict) -> int:
    """The HTTP status a text report of ``sync`` is answered with, so that ``curl --fail`` fails a CI step."""
    if sync["status"] in ("queued", "running"):
        return 202
    if sync["status"] == "failed" or (sync["report"] or {}).get("errors"):
        return 422
    return 200


def sync_text(sync: dict, *, github: bool, source_dir: str = "") -> str:
    """``sync`` as lines for a CI log: a summary, then each page error and warning with its file and line."""
    prefix = f"{source_dir.strip('/')}/" if source_dir.strip("/") else ""
    lines = [_summary(sync)]
    report = sync["report"] or {}
    if github:
        lines[0] = f"::notice title=bookchat::{_escape_data(lines[0])}"
    for kind in ("errors", "warnings"):
        for issue in report.get(kind, ()):
            lines.append(_issue_line(issue, kind, github=github, prefix=prefix))
    if sync["error"]:
        message = f"sync failed ({sync['error']['code']}): {sync['error']['message']}"
        lines.append(f"::error title=bookchat::{_escape_data(message)}" if github else f"error: {message}")
    return "\n".join(lines) + "\n"


def _summary(sync: dict) -> str:
    what = "dry run" if sync["dry_run"] else "sync"
    head = f"bookchat {what} {sync['sync']} of {sync['book']}: {sync['status']}"
    if sync["revision"]:
        head += f" (revision {sync['revision']})"
    report = sync["report"]
    if report is None:
        return head + (f"; {sync['stage']}" if sync["stage"] else "")
    pages, passages = report["pages"], report["passages"]
    verb = "would be " if sync["dry_run"] else ""
    return (f"{head}; pages {verb}added {pages['added']}, changed {pages['changed']}, unchanged {pages['unchanged']}, "
            f"removed {pages['removed']}, failed {pages['failed']}; passages {verb}embedded {passages['embedded']}; "
            f"{len(report['errors'])} errors, {len(report['warnings'])} warnings")


def _issue_line(issue: dict, kind: str, *, github: bool, prefix: str) -> str:
    file = f"{prefix}{issue['file']}" if issue.get("file") else None
    message = issue["message"]
    if github:
        command = "error" if kind == "errors" else "warning"
        properties = ",".join(part for part in (
            f"file={_escape_property(file)}" if file else "",
            f"line={int(issue['line'])}" if issue.get("line") else "") if part)
        return f"::{command}{' ' + properties if properties else ''}::{_escape_data(message)}"
    where = f"{file}:{issue['line']}: " if file and issue.get("line") else f"{file}: " if file else ""
    return f"{where}{'error' if kind == 'errors' else 'warning'}: {message}"


def _escape_data(text: str) -> str:
    """A workflow command's message: GitHub's escapes for ``%``, CR and LF."""
    return str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")

