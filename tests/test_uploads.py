"""Staff uploads in the admin: safe intake of files and zips, the upload form, background indexing on a real
django-q2 worker, and jobs whose worker was killed."""

from __future__ import annotations

import io
import re
import stat
import struct
import time
import uuid
import zipfile

import pytest
from django.contrib.auth.models import Permission, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connections
from django.urls import reverse
from django.utils import timezone
from django.utils.datastructures import MultiValueDict

from ingestion.indexing.ingesting import BookLock, index_book
from ingestion.indexing.reports import IndexingError
from ingestion.models import Book, Chunk, Document, IndexRun, IngestionJob
from ingestion.uploads import jobs
from ingestion.uploads.forms import UploadForm
from ingestion.uploads.intake import UploadError, check_upload, clean_folder, receive_upload
from tests.conftest import committed, run_command
from tests.support.workers import Cluster

pytestmark = pytest.mark.django_db

PAGE = "# {title}\n\n{title} explains how {topic} works in the sample book, with a worked example.\n"


def page(title: str, topic: str = "uploading") -> bytes:
    return PAGE.format(title=title, topic=topic).encode()


def make_zip(entries: dict[str, bytes], *, symlinks: tuple[str, ...] = ()) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            if name in symlinks:
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, data)
    return buffer.getvalue()


def patch_central_directory(data: bytes, *, flag_bits: int | None = None, file_size: int | None = None) -> bytes:
    """Rewrite the first central directory record: its flags (offset 8) or its uncompressed size (offset 24)."""
    out = bytearray(data)
    at = out.index(b"PK\x01\x02")
    if flag_bits is not None:
        out[at + 8:at + 10] = struct.pack("<H", flag_bits)
    if file_size is not None:
        out[at + 24:at + 28] = struct.pack("<I", file_size)
    return bytes(out)


def upload(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data)


def limits(settings, **values) -> None:
    settings.BOOKCHAT = {**settings.BOOKCHAT, **values}


def stored(data_dir) -> list:
    folder = data_dir / "uploads"
    return list(folder.iterdir()) if folder.exists() else []


@pytest.fixture
def data_dir(settings, tmp_path):
    """Uploads go to a temporary DATA_DIR (what the worker subprocess is told too)."""
    settings.DATA_DIR = tmp_path
    return tmp_path


# -- intake: zip safety ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("entries", "message"), [
    ({"../evil.md": b"x"}, "'../evil.md' points outside the upload"),
    ({"docs/../../evil.md": b"x"}, "points outside the upload"),
    ({"..\\..\\evil.md": b"x"}, "'..\\\\..\\\\evil.md' points outside the upload"),
    ({"/etc/evil.md": b"x"}, "'/etc/evil.md' has an absolute path"),
    ({"C:\\Windows\\evil.md": b"x"}, "has an absolute path"),
    ({"docs/img/logo.png": b"png"}, "has no .md or .mdx page"),
])
def test_zip_with_unsafe_or_no_pages_is_refused_naming_the_entry(data_dir, entries, message):
    with pytest.raises(UploadError, match=re.escape(message)):
        receive_upload([upload("book.zip", make_zip(entries))])
    assert stored(data_dir) == [], "a refused upload stores nothing"


def test_zip_with_a_symlink_is_refused(data_dir):
    data = make_zip({"docs/intro.md": page("Intro"), "docs/link.md": b"/etc/passwd"}, symlinks=("docs/link.md",))
    with pytest.raises(UploadError, match="'docs/link.md' is a symbolic link"):
        receive_upload([upload("book.zip", data)])


def test_zip_with_too_many_entries_is_refused(data_dir, settings):
    limits(settings, UPLOAD_MAX_FILES=3)
    data = make_zip({f"p{n}.md": page(f"P{n}") for n in range(4)})
    with pytest.raises(UploadError, match="4 entries, over the limit of 3"):
        receive_upload([upload("book.zip", data)])


def test_zip_bomb_is_refused_on_its_declared_size(data_dir, settings):
    limits(settings, UPLOAD_MAX_UNCOMPRESSED_BYTES=100_000)
    data = make_zip({"intro.md": page("Intro"), "huge.md": b"a" * 200_000})
    assert len(data) < 5_000
    with pytest.raises(UploadError, match="would expand to 200,.* over the 100,000-byte limit"):
        receive_upload([upload("book.zip", data)])


def test_zip_whose_header_understates_its_size_gets_nowhere(data_dir, settings):
    limits(settings, UPLOAD_MAX_UNCOMPRESSED_BYTES=100_000)
    data = patch_central_directory(make_zip({"huge.md": b"a" * 200_000}), file_size=10)
    with pytest.raises(UploadError, match="'huge.md' is corrupt") as refused:
        receive_upload([upload("book.zip", data)])
    assert "CRC" in str(refused.value)
    assert stored(data_dir) == []


def test_unpacking_counts_the_bytes_it_really_writes(tmp_path):
    from ingestion.uploads.intake import _extract_entry

    with zipfile.ZipFile(io.BytesIO(make_zip({"a.md": b"a" * 5000}))) as archive:
        info = archive.getinfo("a.md")
        with pytest.raises(UploadError, match="'a.md' takes the upload over the 4,096-byte limit once unpacked"):
            _extract_entry(archive, info, tmp_path / "a.md", "book.zip", written=0, max_bytes=4096)
        info.file_size = 100  # a header that understates the entry
        with pytest.raises(UploadError, match="'a.md' is larger than its header says|'a.md' is corrupt"):
            _extract_entry(archive, info, tmp_path / "b.md", "book.zip", written=0, max_bytes=10_000)


def test_encrypted_zip_entry_is_refused(data_dir):
    data = patch_central_directory(make_zip({"secret.md": page("Secret")}), flag_bits=0x1)
    with pytest.raises(UploadError, match="'secret.md' is encrypted"):
        receive_upload([upload("book.zip", data)])


@pytest.mark.parametrize("data", [b"PK\x03\x04 this is not a zip at all", make_zip({"a.md": page("A")})[:40]])
def test_corrupt_zip_is_refused(data_dir, data):
    with pytest.raises(UploadError, match="book.zip is not a valid zip file"):
        receive_upload([upload("book.zip", data)])


def test_zip_entry_with_bad_data_is_refused(data_dir):
    good = make_zip({"a.md": page("A") * 20})
    start = good.index(b"a.md") + len(b"a.md")
    broken = good[:start + 5] + bytes(b ^ 0xFF for b in good[start + 5:start + 15]) + good[start + 15:]
    with pytest.raises(UploadError, match="entry 'a.md' is corrupt"):
        receive_upload([upload("book.zip", broken)])


def test_zip_keeps_pages_and_category_files_lists_the_rest_and_uses_its_single_top_folder(data_dir):
    data = make_zip({
        "docs/intro.md": page("Intro"),
        "docs/guide/_category_.json": b'{"label": "The guide"}',
        "docs/guide/01-setup.mdx": page("Setup"),
        "docs/guide/img/diagram.png": b"\x89PNG",
        "docs/.DS_Store": b"\x00",
        "__MACOSX/docs/._intro.md": b"\x00\x05",
    })
    intake = receive_upload([upload("docs.zip", data)])
    assert intake.top_folder == "docs"
    assert sorted(intake.pages) == ["guide/01-setup.mdx", "intro.md"]
    assert sorted(intake.ignored) == ["__MACOSX/docs/._intro.md", "docs/.DS_Store", "docs/guide/img/diagram.png"]
    assert (intake.root / "guide" / "_category_.json").is_file()
    assert not (intake.root / "guide" / "img").exists()
    assert intake.root.parent == data_dir / "uploads"


def test_zip_goes_under_the_folder_given(data_dir):
    intake = receive_upload([upload("ch.zip", make_zip({"01-a.md": page("A"), "02-b.md": page("B")}))],
                            folder="using/")
    assert intake.top_folder == "" and sorted(intake.pages) == ["using/01-a.md", "using/02-b.md"]


# -- intake: single files and the folder ---------------------------------------------------------------------
def test_markdown_files_are_stored_as_they_are_under_the_folder(data_dir):
    binary = b"\x00\x01binary"
    intake = receive_upload([upload("01-ingest.md", page("Ingest")), upload("tabs.mdx", binary)], folder="using")
    assert intake.pages == ["using/01-ingest.md", "using/tabs.mdx"]
    assert (intake.root / "using" / "tabs.mdx").read_bytes() == binary, "content is indexing's business"


@pytest.mark.parametrize(("name", "data", "message"), [
    ("notes.pdf", b"%PDF", "notes.pdf: not a .md, .mdx or .zip file"),
    ("intro.md", b"", "intro.md is empty"),
    ("big.md", b"x" * 101, "big.md is 101 bytes, over the 100-byte limit"),
    ("big.zip", b"x" * 101, "big.zip is 101 bytes, over the 100-byte limit"),
    ("_partial.md", b"# P\n", "starts with '.' or '_'"),
])
def test_refused_files_say_why(data_dir, settings, name, data, message):
    limits(settings, UPLOAD_MAX_BYTES=100)
    with pytest.raises(UploadError, match=re.escape(message)):
        receive_upload([upload(name, data)])
    assert stored(data_dir) == []


def test_a_zip_goes_alone(data_dir):
    with pytest.raises(UploadError, match="one .zip on its own"):
        receive_upload([upload("a.md", page("A")), upload("b.zip", make_zip({"b.md": page("B")}))])


@pytest.mark.parametrize("folder", ["../up", "a/../../b", "/abs", "C:\\docs", "_partials", "docs/.hidden"])
def test_folder_inside_the_book_must_be_relative_and_published(folder):
    with pytest.raises(UploadError, match="folder"):
        clean_folder(folder)


def test_folder_is_normalised():
    assert clean_folder(" using/ ") == "using"
    assert clean_folder("a\\b/./c/") == "a/b/c"
    assert clean_folder("") == ""


# -- the admin form -------------------------------------------------------------------------------------------
ADD = "admin:ingestion_ingestionjob_add"


@pytest.fixture
def admin_client(client):
    """A logged-in superuser, without hashing a password (pytest-django's own fixture hashes one: ~1 s)."""
    client.force_login(User.objects.create(username="upload-admin", is_staff=True, is_superuser=True))
    return client


def post_upload(client, files, **fields):
    data = {"book": "", "new_book_slug": "", "new_book_title": "", "folder": "", **fields, "upload": files}
    return client.post(reverse(ADD), data)


@pytest.mark.parametrize(("fields", "files", "field", "message"), [
    ({"new_book_slug": "new-book"}, [], "upload", "This field is required."),
    ({"new_book_slug": "new-book"}, [("notes.txt", b"hi")], "upload", "not a .md, .mdx or .zip file"),
    ({"new_book_slug": "new-book"}, [("evil.zip", make_zip({"../x.md": b"x"}))], "upload", "points outside"),
    ({}, [("a.md", page("A"))], "book", "Choose the book to upload into"),
    ({"new_book_slug": "Not A Slug"}, [("a.md", page("A"))], "new_book_slug", "lowercase"),
    ({"new_book_slug": "new-book", "folder": "../x"}, [("a.md", page("A"))], "folder", "may not contain '..'"),
    ({"new_book_slug": "new-book", "prune": "on"}, [("a.md", page("A"))], "prune", "only for a single .zip"),
])
def test_bad_uploads_show_form_errors_and_create_nothing(admin_client, data_dir, fields, files, field, message):
    response = post_upload(admin_client, [upload(n, d) for n, d in files], **fields)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert message in " ".join(errors.get(field, [])), errors
    assert not IngestionJob.objects.exists()
    assert stored(data_dir) == []


def upload_form(files, **fields) -> UploadForm:
    data = {"book": "", "new_book_slug": "form-book", "new_book_title": "", "folder": "", **fields}
    return UploadForm(data, MultiValueDict({"upload": files}))


def test_validating_the_upload_form_writes_nothing(data_dir):
    good = upload_form([upload("docs.zip", make_zip({"docs/a.md": page("A"), "docs/img.png": b"png"}))])
    assert good.is_valid(), good.errors
    assert good.checked.pages == ["a.md"] and good.checked.ignored == ["docs/img.png"]
    corrupt = make_zip({"a.md": page("A") * 20})
    start = corrupt.index(b"a.md") + len(b"a.md")
    corrupt = corrupt[:start + 5] + bytes(b ^ 0xFF for b in corrupt[start + 5:start + 15]) + corrupt[start + 15:]
    bad = upload_form([upload("book.zip", corrupt)])
    assert not bad.is_valid() and "is corrupt" in bad.errors["upload"][0], "read through, in memory"
    assert stored(data_dir) == [], "neither a valid nor an invalid form stored anything"
    job = good.save()
    assert job.pk is None and (job.book_slug, job.book_title) == ("form-book", "form-book")
    assert stored(data_dir) == []


@pytest.mark.parametrize(("entries", "message"), [
    ({"a.md": b"# A\n", "a.md/b.md": b"# B\n"}, "'a.md/b.md' cannot be stored (another entry is stored as a file"),
    ({"x" * 256 + ".md": b"# X\n"}, "cannot be stored (a name in it is longer than 255 bytes)"),
])
def test_zip_entries_the_file_system_could_not_hold_are_refused_before_writing(data_dir, entries, message):
    with pytest.raises(UploadError, match=re.escape(message)):
        check_upload([upload("book.zip", make_zip(entries))])
    assert stored(data_dir) == []


def test_a_store_that_fails_on_the_server_is_an_admin_message_and_queues_nothing(admin_client, data_dir):
    (data_dir / "uploads").write_text("a file where the uploads folder should be")  # every store fails
    from django_q.models import OrmQ

    queued = OrmQ.objects.count()
    response = post_upload(admin_client, [upload("a.md", page("A"))], new_book_slug="upload-store-fails")
    assert response.status_code == 302 and response["Location"] == reverse(ADD)
    shown = admin_client.get(response["Location"]).content.decode()
    assert "The upload was not stored, and nothing is queued: the upload cannot be stored on the server" in shown
    assert not IngestionJob.objects.exists() and OrmQ.objects.count() == queued
    assert (data_dir / "uploads").is_file(), "nothing written"


def test_existing_book_and_new_slug_conflict(admin_client, data_dir):
    book = Book.objects.create(slug="taken", title="Taken", embedder_name="x", embedder_dimension=3)
    response = post_upload(admin_client, [upload("a.md", page("A"))], book=book.pk, new_book_slug="other")
    assert "not both" in str(response.context["adminform"].form.errors)
    response = post_upload(admin_client, [upload("a.md", page("A"))], new_book_slug="taken")
    assert "exists already" in str(response.context["adminform"].form.errors)
    assert not IngestionJob.objects.exists()


def test_uploading_needs_the_add_permission(client, data_dir):
    user = User.objects.create(username="staff", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_ingestionjob"))
    client.force_login(user)
    assert client.get(reverse(ADD)).status_code == 403
    assert post_upload(client, [upload("a.md", page("A"))], new_book_slug="nope").status_code == 403
    assert client.get(reverse("admin:ingestion_ingestionjob_changelist")).status_code == 200
    assert not IngestionJob.objects.exists()
    client.logout()
    assert client.get(reverse(ADD)).status_code == 302  # to the login page


def test_upload_form_renders_for_multiple_files(admin_client, data_dir):
    response = admin_client.get(reverse(ADD))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'enctype="multipart/form-data"' in html
    assert 'type="file" name="upload"' in html and "multiple" in html
    assert "Upload chapters" in html


def upload_and_run(client, files, **fields) -> IngestionJob:
    """Upload through the admin form, check it queued the job, then run the task here (in-process)."""
    from django_q.models import OrmQ

    queued_before = OrmQ.objects.count()
    response = post_upload(client, files, **fields)
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else response
    job = IngestionJob.objects.latest("pk")
    assert response["Location"] == reverse("admin:ingestion_ingestionjob_change", args=[job.pk])
    assert job.status == "queued" and job.task_id and OrmQ.objects.count() == queued_before + 1
    page_html = client.get(response["Location"]).content.decode()
    assert '<meta http-equiv="refresh" content="2">' in page_html
    from ingestion.tasks import run_ingestion_job

    result = run_ingestion_job(job.pk)
    assert result["job"] == job.pk
    job.refresh_from_db()
    return job


def test_good_upload_is_indexed_and_its_page_shows_the_report(admin_client, data_dir):
    data = make_zip({
        "docs/guide/_category_.json": b'{"label": "The guide"}',
        "docs/guide/01-alpha.md": page("Alpha", "queueing"),
        "docs/guide/02-beta.md": page("Beta", "sweeping"),
        "docs/guide/03-broken.md": b"# Broken\n\nfine line\n\x00\x01\x02 binary junk",
        "docs/guide/photo.jpg": b"\xff\xd8",
    })
    job = upload_and_run(admin_client, [upload("docs.zip", data)], new_book_slug="upload-good",
                         new_book_title="Upload good")
    assert job.status == "done", job.error
    assert job.book.slug == "upload-good" and job.book.title == "Upload good"
    assert job.files_done == job.files_total == 3
    assert job.report["files_indexed"] == 2 and job.report["files_failed"] == 1
    assert job.report["errors"] == [{"file": "guide/03-broken.md", "line": 4,
                                     "message": "binary file (it contains NUL bytes), not Markdown text"}]
    assert job.index_run.status == "partial" and job.index_run.trigger == "upload"
    assert job.ignored == ["docs/guide/photo.jpg"]
    assert job.index_seconds is not None and job.total_seconds >= job.index_seconds
    assert not jobs.job_folder(job.pk).exists(), "a done job's files are removed"
    assert set(Document.objects.filter(book=job.book).values_list("path", "category")) == {
        ("guide/01-alpha.md", "The guide"), ("guide/02-beta.md", "The guide")}
    assert job.book.source_path == "", "the job's temporary folder is not where the book lives"

    html = admin_client.get(reverse("admin:ingestion_ingestionjob_change", args=[job.pk])).content.decode()
    assert "http-equiv=\"refresh\"" not in html
    assert "<td>guide/03-broken.md</td><td>4</td><td>binary file (it contains NUL bytes)" in html
    assert "<progress value='3' max='3'" in html and "3 of 3 files" in html
    assert reverse("admin:ingestion_indexrun_change", args=[job.index_run_id]) in html
    assert "docs/guide/photo.jpg" in html
    listing = admin_client.get(reverse("admin:ingestion_ingestionjob_changelist")).content.decode()
    assert "upload-good" in listing and "3/3 files, 1 failed" in listing


def test_reuploading_an_unchanged_chapter_embeds_nothing_and_keeps_its_chapter(admin_client, data_dir, book_dir):
    book_dir.write("using/_category_.json", '{"label": "Using the book"}')
    book_dir.write("using/01-ingest.md", page("Ingest", "indexing").decode())
    book_dir.write("intro.md", page("Intro").decode())
    code, _, _ = run_command("ingest", str(book_dir.root), "--book", "upload-same", "--json")
    assert code == 0
    book = Book.objects.get(slug="upload-same")
    chunks = set(Chunk.objects.filter(book=book).values_list("id", flat=True))

    job = upload_and_run(admin_client, [upload("01-ingest.md", page("Ingest", "indexing"))], book=book.pk,
                         folder="using/")
    assert job.status == "done", job.error
    assert job.report["files_unchanged"] == 1 and job.report["chunks_embedded"] == 0
    assert set(Chunk.objects.filter(book=book).values_list("id", flat=True)) == chunks

    edited = page("Ingest", "indexing") + b"\n## More\n\nA new section about re-indexing one chapter alone.\n"
    job = upload_and_run(admin_client, [upload("01-ingest.md", edited)], book=book.pk, folder="using")
    assert job.status == "done" and job.report["files_indexed"] == 1
    assert Document.objects.get(book=book, path="using/01-ingest.md").category == "Using the book"
    book.refresh_from_db()
    assert book.source_path == str(book_dir.root.resolve()) and book.documents.count() == 2


def test_failed_job_keeps_its_files_and_retry_queues_it_again(admin_client, data_dir):
    job = upload_and_run(admin_client, [upload("only.md", b"\x00 nothing but binary")], new_book_slug="upload-retry")
    assert job.status == "failed" and "no page could be indexed" in job.error
    assert job.report["errors"][0]["file"] == "only.md"
    assert jobs.job_folder(job.pk).is_dir()
    page_url = reverse("admin:ingestion_ingestionjob_change", args=[job.pk])
    assert 'value="retry_jobs"' in admin_client.get(page_url).content.decode()

    old_task = job.task_id
    response = admin_client.post(reverse("admin:ingestion_ingestionjob_changelist"),
                                 {"action": "retry_jobs", "_selected_action": [job.pk]})
    assert response.status_code == 302 and response["Location"] == page_url
    job.refresh_from_db()
    assert job.status == "queued" and job.task_id != old_task and job.error == "" and job.report == {}
    jobs.run_job(job.pk)
    job.refresh_from_db()
    assert job.status == "failed" and job.attempts == 2

    jobs.delete_job_files(job)
    with pytest.raises(UploadError, match="files are gone"):
        jobs.retry_job(job)


def test_job_on_a_busy_book_waits_then_fails_clearly(data_dir, monkeypatch):
    monkeypatch.setattr(jobs, "BUSY_WAIT_SECONDS", 0.5)
    monkeypatch.setattr(jobs, "BUSY_POLL_SECONDS", 0.1)
    job = IngestionJob(book_slug="upload-busy")
    jobs.start_job(job=job, intake=receive_upload([upload("a.md", page("A"))]))
    holder = connections.create_connection("default")  # another session holds the book's lock
    try:
        with holder.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [BookLock("upload-busy").key])
        jobs.run_job(job.pk)
    finally:
        holder.close()
    job.refresh_from_db()
    assert job.status == "failed"
    assert "being indexed by another run" in job.error and "use Retry" in job.error


def test_sweep_fails_a_running_job_whose_heartbeat_stopped(data_dir, settings):
    limits(settings, JOB_STALE_SECONDS=60)
    book = Book.objects.create(slug="upload-stale", title="Stale", embedder_name="x", embedder_dimension=3)
    run = IndexRun.objects.create(book=book, trigger="upload")
    old = timezone.now() - timezone.timedelta(seconds=120)
    stale = IngestionJob.objects.create(book=book, book_slug=book.slug, status="running", started_at=old,
                                        heartbeat_at=old, index_run=run)
    alive = IngestionJob.objects.create(book_slug="upload-alive", status="running", started_at=old,
                                        heartbeat_at=timezone.now())
    assert jobs.sweep_stale_jobs() == 1
    stale.refresh_from_db(), alive.refresh_from_db(), run.refresh_from_db()
    assert stale.status == "failed" and stale.error == jobs.STALE_MESSAGE
    assert run.status == "failed" and run.finished_at is not None
    assert alive.status == "running"


def test_sweep_fails_a_queued_job_whose_task_was_lost(data_dir):
    from django_q.models import OrmQ

    lost, waiting = (jobs.start_job(job=IngestionJob(book_slug=slug),
                                    intake=receive_upload([upload("a.md", page("A"))]))
                     for slug in ("upload-lost", "upload-waiting"))
    for package in OrmQ.objects.all():
        if package.task_id() == lost.task_id:
            package.delete()  # as django-q2 does with a task it cannot read
    assert jobs.sweep_stale_jobs() == 1
    lost.refresh_from_db(), waiting.refresh_from_db()
    assert lost.status == "failed" and lost.error == jobs.LOST_MESSAGE
    assert waiting.status == "queued"


def test_sweep_on_a_redis_worker_names_a_job_queued_in_the_database_by_a_node_without_the_broker(data_dir, settings):
    """A web node without BOOKCHAT_Q_BROKER queues in Postgres; the workers read Redis and would never see it."""
    job = jobs.start_job(job=IngestionJob(book_slug="upload-other-broker"),
                         intake=receive_upload([upload("a.md", page("A"))]))
    IngestionJob.objects.filter(pk=job.pk).update(queued_at=timezone.now() - timezone.timedelta(hours=1))
    settings.Q_CLUSTER = {"name": "bookchat", "redis": "redis://127.0.0.1:9/0", "retry": 60}  # the workers' view
    assert jobs.sweep_stale_jobs() == 1
    job.refresh_from_db()
    assert job.status == "failed" and job.error == jobs.OTHER_BROKER_MESSAGE
    assert "BOOKCHAT_Q_BROKER" in job.error and "Retry" in job.error


def test_a_book_lock_another_session_holds_is_busy_and_if_free_says_so():
    lock = BookLock("upload-lock-drill")
    holder = connections.create_connection("default")
    try:
        with holder.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [lock.key])
        with pytest.raises(IndexingError, match="'upload-lock-drill' is being indexed by another run"), lock:
            pass
        with lock.if_free() as free:
            assert not free
        with holder.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [lock.key])
        with lock.if_free() as free, holder.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [lock.key])
            assert free and cursor.fetchone()[0] is False, "held inside the block"
        with lock as held:
            assert held is lock
        with holder.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [lock.key])
            assert cursor.fetchone()[0] is True, "released after the block"
    finally:
        holder.close()


def test_the_indexer_tells_the_job_its_run(data_dir, book_dir):
    book_dir.write("a.md", page("A").decode())
    told = []
    for _ in range(2):  # a new book's run comes with its first version; an existing book's before its pages
        index_book(path=book_dir.root, book_slug="upload-run-id", trigger="upload",
                   on_run=lambda slug, run_id: told.append((slug, run_id)))
    runs = IndexRun.objects.filter(book__slug="upload-run-id").order_by("pk").values_list("pk", flat=True)
    assert told == [("upload-run-id", run) for run in runs] and len(told) == 2


def test_sweep_is_scheduled_every_minute():
    from django_q.models import Schedule

    schedule = Schedule.objects.get(func="ingestion.tasks.sweep_stale_jobs")
    assert schedule.schedule_type == Schedule.MINUTES and schedule.minutes == 1 and schedule.repeats == -1


# -- a real django-q2 worker -----------------------------------------------------------------------------
@pytest.fixture
def cluster(data_dir):
    started: list[Cluster] = []

    def start() -> Cluster:
        started.append(Cluster(data_dir))
        return started[-1]

    try:
        yield start
    finally:  # whatever the test did: no worker outlives it
        for each in started:
            each.stop()


def committed_job(slug: str, files: list[SimpleUploadedFile], **fields) -> int:
    """Upload through the same service the admin uses, committed so that the worker sees it."""
    return committed(lambda: jobs.start_job(job=IngestionJob(book_slug=slug, **fields),
                                            intake=receive_upload(files)).pk)


def read_job(job_id: int) -> IngestionJob:
    return committed(lambda: IngestionJob.objects.select_related("index_run").get(pk=job_id))


def wait_for_job(job_id: int, until, *, seconds: float, cluster: Cluster) -> IngestionJob:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        job = read_job(job_id)
        if until(job):
            return job
        assert cluster.proc.poll() is None, cluster.output()
        time.sleep(0.1)
    raise AssertionError(f"upload #{job_id} is {read_job(job_id).status}\n{cluster.output()}")


@pytest.mark.slow
@pytest.mark.drill  # seconds long: run with the drills, for make test's time
def test_worker_runs_an_upload_to_done(data_dir, cluster):
    slug = f"upload-worker-{uuid.uuid4().hex[:8]}"
    job_id = committed_job(slug, [upload("worker.md", page("Worker", "background indexing"))], book_title="Worker")
    worker = cluster()
    job = wait_for_job(job_id, lambda j: j.status in ("done", "failed"), seconds=60, cluster=worker)
    assert job.status == "done", job.error
    assert job.report["files_indexed"] == 1 and job.index_run.status == "done"
    assert committed(lambda: Book.objects.get(slug=slug).chunks.count()) >= 1


@pytest.mark.slow
@pytest.mark.drill  # a real worker SIGKILLed mid-job: make drills
def test_killed_worker_fails_the_job_and_the_book_keeps_its_index(data_dir, cluster, book_dir, settings):
    slug = f"upload-killed-{uuid.uuid4().hex[:8]}"
    book_dir.write("intro.md", page("Intro", "the lighthouse keeper's logbook").decode())
    code, _, _ = committed(lambda: run_command("ingest", str(book_dir.root), "--book", slug, "--json"))
    assert code == 0
    before = committed(lambda: sorted(Chunk.objects.filter(book__slug=slug).values_list("id", flat=True)))

    section = " ".join(f"Sentence {n} of this section talks about tides, ships and harbour lights." for n in range(14))
    pages = {f"docs/{n:02d}-chapter.md": (f"# Chapter {n}\n\n" + "".join(
        f"## Part {k}\n\n{section} Chapter {n} part {k}.\n\n" for k in range(3))).encode() for n in range(6)}
    job_id = committed_job(slug, [upload("big.zip", make_zip(pages))])
    worker = cluster()
    # Every page is read and chunked; embedding them (several seconds) has started.
    running = wait_for_job(job_id, lambda j: j.status == "running" and j.files_total and j.files_done == j.files_total,
                           seconds=60, cluster=worker)
    assert running.index_run is not None and running.index_run.status == "running"
    worker.kill()

    limits(settings, JOB_STALE_SECONDS=1)
    deadline = time.monotonic() + 30
    while read_job(job_id).status == "running" and time.monotonic() < deadline:
        time.sleep(0.5)
        committed(jobs.sweep_stale_jobs)
    job = read_job(job_id)
    assert job.status == "failed" and job.error == jobs.STALE_MESSAGE
    assert job.index_run.status == "failed", "the run is not left running"
    assert committed(lambda: sorted(Chunk.objects.filter(book__slug=slug).values_list("id", flat=True))) == before

    from chat.pipeline.retrieval import retrieve

    found = committed(lambda: retrieve(book=Book.objects.get(slug=slug), question="lighthouse keeper logbook"))
    assert found.chunks and found.chunks[0].document_path == "intro.md"

    # Retry on the files the job kept: done, this time in-process (as a worker would run it).
    committed(lambda: jobs.retry_job(IngestionJob.objects.get(pk=job_id)))
    result = committed(lambda: jobs.run_job(job_id))
    job = read_job(job_id)
    assert result["status"] == "done" and job.status == "done", job.error
    assert job.report["files_indexed"] == 6 and job.report["chunks_embedded"] > 16  # two batches or more
    assert committed(lambda: Document.objects.filter(book__slug=slug).count()) == 7

