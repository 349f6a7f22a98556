"""The contract of publishing a book from CI: the queries of ``POST /books/{slug}/sources`` and ``GET
/books/{slug}/syncs/{id}``, and the sync as the schema states it (``ingestion.uploads.publishing.sync_summary``
makes it; ``text`` writes it for a CI log).
"""

from __future__ import annotations

import re

from rest_framework import serializers

from bookchat.base.api import StrictSerializer
from ingestion.languages import LanguageError, language_tag

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


class LanguageField(serializers.CharField):
    """A BCP 47 tag (``es``, ``pt-BR``), kept as its base tag; "" when not given."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data).strip()
        try:
            return language_tag(value) if value else ""
        except LanguageError as exc:
            raise serializers.ValidationError(exc.message, code="invalid_language") from None


class PublishQuerySerializer(StrictSerializer):
    """``?dry_run=&revision=&source_dir=&language=`` of ``POST /books/{slug}/sources``."""

    order = ("dry_run", "revision", "source_dir", "language")

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
            "language": LanguageField(required=False, default="", allow_blank=True, max_length=35, help_text=(
                "What the pages are written in, a BCP 47 tag (`es`, `zh`, `pt-BR`): it picks the book's text "
                "search. Default: the site's config (theme.language, book.toml's language, the Docusaurus "
                "locale), else the book's stored language, else `en`.")),
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
