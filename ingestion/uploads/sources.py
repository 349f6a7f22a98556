"""Where a job's sources come from, one strategy per ``IngestionJob.Source``: what must exist before it runs, how its
folder is prepared and indexed, where its book's ``source_path`` points after, how its stored report names files,
and the trigger its index runs are recorded with. The runner (``jobs``) does the rest alike for every job.

- an **upload** (the admin): pages indexed into the book (``index_book``), each folder keeping the chapter label its
  pages already have; the book keeps pointing at where it was indexed from before (the job's folder is temporary);
- a **publish** (a book's CI, ``publishing``): the whole site (``index_path``), confined to its files, pages it
  lacks removed; the book and its editions point at no folder (their sources are in their repository), and the
  report names files from the root of the published sources, as the publisher's repository does;
- a **local** job (``make run``'s books): a folder of this server indexed in place, as ``ingest`` would; it stays
  the book's source.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.db.models import Q

from ingestion.indexing.ingesting import index_book, index_path
from ingestion.indexing.reports import IndexReport, SiteReport
from ingestion.models import Book, Document, IngestionJob
from ingestion.reading.docusaurus import category_label
from ingestion.uploads.intake import CATEGORY_FILES, UploadError


class JobSource:
    """What one kind of job does its own way. ``folder`` is the job's folder (``jobs.job_folder``)."""

    trigger = ""

    def check(self, job: IngestionJob, folder: Path) -> None:
        """Raise ``UploadError`` when what the job indexes is gone."""
        if not folder.is_dir():
            raise UploadError("the uploaded files are gone (deleted from the server); upload them again")

    def prepare(self, job: IngestionJob, folder: Path, book: Book | None) -> None:
        """Ready the folder for indexing into ``book`` (None: a new book)."""

    def index(self, job: IngestionJob, folder: Path, **followed) -> IndexReport | SiteReport:
        """Index the job's sources; ``followed``: the trigger, progress and run callbacks."""
        raise NotImplementedError

    def settle(self, job: IngestionJob, folder: Path, previous_source: str) -> None:
        """Point the books indexed from the job's temporary folder somewhere that lasts (``previous_source``: the
        job's book's ``source_path`` before the run)."""
        inside_folder(folder).filter(slug=job.book_slug).update(source_path=previous_source)

    def stored_report(self, report: IndexReport | SiteReport, folder: Path) -> dict:
        """The report the job stores, in its final shape."""
        return report.as_dict()


class UploadSource(JobSource):
    trigger = "upload"

    def prepare(self, job: IngestionJob, folder: Path, book: Book | None) -> None:
        if book is not None:
            keep_category_labels(folder, book)

    def index(self, job: IngestionJob, folder: Path, **followed) -> IndexReport:
        return index_book(path=folder, book_slug=job.book_slug, title=job.book_title or None, prune=job.prune,
                          language=job.language or None, **followed)


class PublishSource(JobSource):
    trigger = "publish"

    def index(self, job: IngestionJob, folder: Path, **followed) -> IndexReport | SiteReport:
        return index_path(folder, book_slug=job.book_slug, prune=True, dry_run=job.dry_run, confined=True,
                          language=job.language or None, **followed)

    def settle(self, job: IngestionJob, folder: Path, previous_source: str) -> None:
        inside_folder(folder).update(source_path="")

    def stored_report(self, report: IndexReport | SiteReport, folder: Path) -> dict:
        return named_from_sources(report.as_dict(), folder)


class LocalSource(JobSource):
    trigger = "make run"

    def check(self, job: IngestionJob, folder: Path) -> None:
        if not Path(job.local_path).exists():
            raise UploadError(f"{job.local_path} does not exist")

    def index(self, job: IngestionJob, folder: Path, **followed) -> IndexReport | SiteReport:
        return index_path(job.local_path, book_slug=job.book_slug, title=job.book_title or None,
                          language=job.language or None, **followed)

    def settle(self, job: IngestionJob, folder: Path, previous_source: str) -> None:
        """The folder indexed is the server's own, and stays the book's source."""


SOURCES: dict[str, JobSource] = {IngestionJob.Source.UPLOAD: UploadSource(),
                                 IngestionJob.Source.PUBLISH: PublishSource(),
                                 IngestionJob.Source.LOCAL: LocalSource()}
# The triggers of the index runs that jobs make (what runs on the task worker).
TRIGGERS = {kind: source.trigger for kind, source in SOURCES.items()}


def source_of(job: IngestionJob) -> JobSource:
    return SOURCES[job.source]


def inside_folder(folder: Path):
    """The books whose ``source_path`` is ``folder`` or a folder in it."""
    folder_path = str(folder.resolve())
    return Book.objects.filter(Q(source_path=folder_path) | Q(source_path__startswith=folder_path + "/"))


def keep_category_labels(root: Path, book: Book) -> None:
    """Give each folder of the upload that has no ``_category_`` file the chapter label its pages already have
    in the book, so that uploading ``using/01-ingest.md`` alone keeps the chapter "Using bookchat" (not "Using")."""
    folders = {p.parent.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    folders.discard(".")
    missing = [f for f in folders if not any((root / f / name).exists() for name in CATEGORY_FILES)]
    if not missing:
        return
    labels: dict[str, str] = {}
    for path, category in Document.objects.filter(book=book).exclude(category="").values_list("path", "category"):
        labels.setdefault(path.rpartition("/")[0], category)
    for folder in missing:
        label = labels.get(folder)
        if label and label != category_label(root, folder):
            (root / folder / "_category_.json").write_text(json.dumps({"label": label}), encoding="utf-8")


# -- a publish's report, its files named from the root of the published sources -----------------------------------
def named_from_sources(report: dict, root: Path) -> dict:
    """``report`` (``as_dict``: a book's, or a site's with its editions in ``books``) with its files named from
    ``root``, the published sources (``docs/intro.md``, not the pages folder's ``intro.md`` or a path on this
    server), as the publisher's repository names them. A site's summed report lists its pages that way already
    (``index_site``); its issues name their edition (``book``), whose folder they are relative to."""
    root = root.resolve()
    editions = {book["slug"]: _relative_folder(book.get("pages_folder", ""), root) for book in report.get("books", ())}

    def named(entry: dict, folder: str, *, own_pages: bool) -> dict:
        result = {**entry, "pages_folder": folder}
        for kind in ("errors", "warnings"):
            result[kind] = [_issue_named(issue, editions.get(issue.get("book"), folder), root) for issue in entry[kind]]
        if own_pages:
            result["pages"] = {change: [_rebased(path, folder, root) for path in paths]
                               for change, paths in entry["pages"].items()}
        return result

    result = named(report, _relative_folder(report.get("pages_folder", ""), root), own_pages=not editions)
    if "books" in report:
        result["books"] = [named(book, editions[book["slug"]], own_pages=True) for book in report["books"]]
    return result


def _relative_folder(folder: str, root: Path) -> str:
    try:
        return Path(folder).resolve().relative_to(root).as_posix() if folder else ""
    except ValueError:
        return ""


def _rebased(path: str, folder: str, root: Path) -> str:
    if not path or not folder or folder == "." or (root / path).exists() and not (root / folder / path).exists():
        return path
    return f"{folder}/{path}"


def _issue_named(issue: dict, folder: str, root: Path) -> dict:
    named = dict(issue)
    file = issue.get("file")
    if file:
        file = str(file)
        if Path(file).is_absolute():  # a message about a file of the job's folder: name it from the root
            try:
                named["file"] = Path(file).resolve().relative_to(root).as_posix()
            except ValueError:
                named["file"] = Path(file).name
        else:
            named["file"] = _rebased(file, folder, root)
    message = issue.get("message")
    if isinstance(message, str) and str(root) in message:
        named["message"] = message.replace(str(root) + "/", "").replace(str(root), ".")
    return named
