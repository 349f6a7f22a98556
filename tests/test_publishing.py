"""Publishing a book from its CI, in-process: the keys that publish, the archive's checks (every bad input refused
with its error, the book unchanged and the refusal on record), syncs run as the worker runs them (only what changed
is embedded, pages the sources lack are removed, a dry run stores nothing), the sync's status in JSON and as CI
text, and the indexer's switch (a run that stops before it commits leaves the book as it was; a site's editions
switch together, so that one failing leaves every one as it was).
The same over HTTP with a real server and worker: tests/test_publishing_drill.py."""

from __future__ import annotations

import io
import json
import re
import tarfile
import uuid

import pytest
from django.db import connection
from django.urls import reverse

from chat.channels.keys import api_key_create
from chat.models import ApiKey
from ingestion.indexing.embedders import get_embedder
from ingestion.indexing.ingesting import index_book
from ingestion.models import Book, Chunk, Document, IndexRun, IngestionJob
from ingestion.uploads import jobs
from ingestion.uploads.publishing import slug_refusal, sync_summary
from tests.conftest import run_command
from tests.support.versioned_site import write_versioned_site

pytestmark = pytest.mark.django_db

PAGES = {
    "docs/intro.md": "# Harbour lights\n\nThe harbour light at Port Ellis flashes green every four seconds.\n",
    "docs/tides.md": "# Tides\n\nHigh tide at Port Ellis comes about fifty minutes later each day.\n",
    "docs/boats.md": "# Boats\n\nThe ferry to Gull Island leaves from the north pier at nine.\n",
}


def tarball(files: dict[str, str | bytes], *, extra: list[tuple[tarfile.TarInfo, bytes | None]] = (),
            top: str = "") -> bytes:
    """A .tar.gz of ``files`` (name → content), then the ``extra`` members as given (links, devices, …)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(f"{top}{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for info, data in extra:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def member(name: str, kind: bytes, *, link: str = "", size: int = 0) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.size = size
    return info, (b"x" * size if size else None)


@pytest.fixture
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    return tmp_path


@pytest.fixture
def book():
    """A fresh slug and the raw value of the secret key that publishes it."""
    slug = f"published-{uuid.uuid4().hex[:8]}"
    _, raw = api_key_create(kind=ApiKey.SECRET, publish_book=slug)
    return slug, raw


def publish(client, slug: str, key: str, body: bytes, *, query: str = "", content_type: str = "application/gzip"):
    return client.post(f"/api/v1/books/{slug}/sources{query}", data=body, content_type=content_type,
                       headers={"Authorization": f"Bearer {key}"})


def status(client, slug: str, key: str, sync: int, query: str = ""):
    return client.get(f"/api/v1/books/{slug}/syncs/{sync}{query}", headers={"Authorization": f"Bearer {key}"})


def publish_and_run(client, slug: str, key: str, files: dict, *, query: str = "") -> dict:
    response = publish(client, slug, key, tarball(files), query=query)
    assert response.status_code == 202, response.content
    sync = response.json()["sync"]
    jobs.run_job(sync)
    return status(client, slug, key, sync).json()


def book_state(slug: str) -> tuple[list[str], list[str]]:
    return (sorted(Document.objects.filter(book__slug=slug).values_list("path", flat=True)),
            sorted(Chunk.objects.filter(book__slug=slug).values_list("id", flat=True)))


# -- keys --------------------------------------------------------------------------------------------------
def test_a_publishing_key_can_do_nothing_but_publish_its_book(client, data_dir, book):
    slug, key = book
    headers = {"Authorization": f"Bearer {key}"}
    ask = client.post("/api/v1/ask", data={"question": "When does the ferry leave?"}, content_type="application/json",
                      headers=headers)
    assert ask.status_code == 403 and ask.json()["error"] == "publishing_key"
    assert client.get("/api/v1/search?q=ferry", headers=headers).json()["error"] == "publishing_key"
    assert client.get("/api/v1/books", headers=headers).json()["error"] == "publishing_key"
    mcp = client.post("/mcp", data="{}", content_type="application/json", headers=headers)
    assert mcp.status_code == 403 and mcp.json()["error"] == "publishing_key"
    other = publish(client, "some-other-book", key, tarball(PAGES))
    assert other.status_code == 403 and other.json()["error"] == "key_book"


def test_only_a_publishing_key_may_publish(client, data_dir, book):
    slug, _ = book
    body = tarball(PAGES)
    nobody = client.post(f"/api/v1/books/{slug}/sources", data=body, content_type="application/gzip")
    assert nobody.status_code == 401 and nobody.json()["error"] == "key_required"
    assert "--publish" in nobody.json()["message"]
    _, asking = api_key_create(kind=ApiKey.SECRET, name="backend")
    refused = publish(client, slug, asking, body)
    assert refused.status_code == 403 and refused.json()["error"] == "not_a_publishing_key"
    revoked_key, revoked = api_key_create(kind=ApiKey.SECRET, publish_book=slug)
    ApiKey.objects.filter(pk=revoked_key.pk).update(active=False)
    assert publish(client, slug, revoked, body).json()["error"] == "invalid_key"
    assert publish(client, slug, "sk_not-a-key", body).json()["error"] == "invalid_key"
    from_page = client.post(f"/api/v1/books/{slug}/sources", data=body, content_type="application/gzip",
                            headers={"Authorization": f"Bearer {book[1]}", "Origin": "https://docs.example.org"})
    assert from_page.status_code == 403 and from_page.json()["error"] == "secret_key_in_browser"
    assert not Book.objects.filter(slug=slug).exists()
    # A known key's refusal is on record; a stranger's only in the log.
    assert list(IngestionJob.objects.filter(book_slug=slug, status="refused").values_list("error_code", flat=True)) \
        == ["not_a_publishing_key"]


def test_apikey_create_publish_makes_a_key_for_one_book_that_need_not_exist(data_dir):
    code, out, _ = run_command("apikey", "create", "--kind", "secret", "--publish", "future-book", "--json")
    created = json.loads(out)
    assert code == 0 and created["publishes"] == "future-book" and created["key"].startswith("sk_")
    assert ApiKey.objects.get(prefix=created["prefix"]).publish_book == "future-book"
    code, out, _ = run_command("apikey", "list")
    assert "publishes future-book" in out
    code, out, _ = run_command("apikey", "create", "--kind", "publishable", "--publish", "future-book",
                               "--origin", "https://docs.example.org", "--json")
    assert code == 2 and json.loads(out)["error"] == "invalid_api_key" and "secret" in json.loads(out)["message"]
    code, out, _ = run_command("apikey", "create", "--kind", "secret", "--publish", "Not A Slug", "--json")
    assert code == 2
    code, _, err = run_command("apikey", "create", "--kind", "secret")
    assert code == 2 and "--name" in err


# -- syncs -------------------------------------------------------------------------------------------------
def test_first_publish_creates_the_book_and_the_next_embeds_only_what_changed(client, data_dir, book):
    slug, key = book
    first = publish_and_run(client, slug, key, PAGES, query="?revision=c1")
    assert first["status"] == "done" and first["revision"] == "c1" and first["error"] is None
    assert first["report"]["pages"] == {"added": 3, "changed": 0, "unchanged": 0, "removed": 0, "failed": 0,
                                        "skipped": 0}
    assert book_state(slug)[0] == ["boats.md", "intro.md", "tides.md"]  # the archive's one top folder is its root
    kept_ids = set(Chunk.objects.filter(book__slug=slug, document__path="tides.md").values_list("id", flat=True))

    second_pages = {**PAGES, "docs/intro.md": PAGES["docs/intro.md"] + "\nThe keeper's cat is called Marmalade.\n",
                    "docs/fog.md": "# Fog\n\nIn fog the keeper sounds the horn twice a minute.\n"}
    del second_pages["docs/boats.md"]
    second = publish_and_run(client, slug, key, second_pages, query="?revision=c2")
    report = second["report"]
    assert second["status"] == "done"
    assert report["pages"] == {"added": 1, "changed": 1, "unchanged": 1, "removed": 1, "failed": 0, "skipped": 0}
    assert (report["added"], report["changed"], report["removed"]) == (["fog.md"], ["intro.md"], ["boats.md"])
    # Only the edited and the new page are embedded; the unchanged one keeps its passages.
    new_passages = Chunk.objects.filter(book__slug=slug, document__path__in=["intro.md", "fog.md"]).count()
    assert report["passages"]["embedded"] == new_passages
    assert set(Chunk.objects.filter(book__slug=slug, document__path="tides.md").values_list("id", flat=True)) \
        == kept_ids
    assert book_state(slug)[0] == ["fog.md", "intro.md", "tides.md"]
    assert not Chunk.objects.filter(book__slug=slug, text__contains="ferry").exists()
    assert IndexRun.objects.filter(book__slug=slug, trigger="publish", status="done").count() == 2
    detail = client.get(f"/api/v1/books/{slug}").json()
    paths = [page["path"] for chapter in detail["outline"] for page in chapter["pages"]]
    assert "boats.md" not in paths and "fog.md" in paths


def test_the_same_sources_published_as_another_book_reuse_its_vectors(client, data_dir, book):
    slug, key = book
    assert publish_and_run(client, slug, key, PAGES)["report"]["passages"]["embedded"] == 3
    copy = f"{slug}-copy"
    _, copy_key = api_key_create(kind=ApiKey.SECRET, publish_book=copy)
    again = publish_and_run(client, copy, copy_key, PAGES)
    assert again["report"]["passages"] == {"embedded": 0, "added": 3, "kept": 0, "removed": 0}
    assert Chunk.objects.filter(book__slug=copy).count() == 3


def test_a_dry_run_reports_what_would_change_with_each_page_error_and_stores_nothing(client, data_dir, book):
    slug, key = book
    publish_and_run(client, slug, key, PAGES)
    before = book_state(slug)
    pages = {**PAGES, "docs/broken.mdx": "# Broken\n\nIntro.\n\n<Tabs>\n<TabItem value=\"a\">\n\nText\n",
             "docs/new.md": "# New\n\nA new page about buoys.\n"}
    del pages["docs/tides.md"]
    response = publish(client, slug, key, tarball(pages), query="?dry_run=true&revision=pr-7")
    assert response.status_code == 202 and response.json()["dry_run"] is True
    sync = response.json()["sync"]
    jobs.run_job(sync)
    preview = status(client, slug, key, sync).json()
    assert preview["status"] == "done" and preview["dry_run"] is True
    assert preview["report"]["added"] == ["new.md"] and preview["report"]["removed"] == ["tides.md"]
    assert preview["report"]["errors"] == [{"file": "broken.mdx", "line": 6,
                                            "message": "JSX tag <TabItem> is never closed"}]
    assert book_state(slug) == before
    # As CI text: the status follows the outcome, and the files are named from the repository's root.
    job = IngestionJob.objects.get(pk=sync)
    job.source_dir = "website/docs"
    job.save()
    text = status(client, slug, key, sync, "?output=text")
    assert text.status_code == 422 and text["Content-Type"].startswith("text/plain")
    assert "website/docs/broken.mdx:6: error: JSX tag <TabItem> is never closed" in text.content.decode()
    github = status(client, slug, key, sync, "?output=github").content.decode()
    assert "::error file=website/docs/broken.mdx,line=6::JSX tag <TabItem> is never closed" in github
    assert github.startswith("::notice title=bookchat::bookchat dry run")


def test_a_site_is_read_from_its_config_without_running_it_and_confined_to_its_files(client, data_dir, book,
                                                                                     tmp_path):
    slug, key = book
    marker = tmp_path / "config-was-run"
    config = ("const fs = require('fs');\n"
              f"fs.writeFileSync({json.dumps(str(marker))}, 'ran');\n"
              "module.exports = {title: 'Harbour Guide', url: 'https://harbour.example.org', baseUrl: '/'};\n")
    site = {"docusaurus.config.js": config, **PAGES, "src/pages/index.js": "export default () => null;\n"}
    done = publish_and_run(client, slug, key, site, query="?source_dir=website")
    assert done["status"] == "done", done
    assert not marker.exists(), "the published config was run on the server"
    assert Book.objects.get(slug=slug).title == "Harbour Guide"
    assert Document.objects.get(book__slug=slug, path="intro.md").url == "https://harbour.example.org/docs/intro"
    assert done["report"]["added"] == ["docs/boats.md", "docs/intro.md", "docs/tides.md"]
    before = book_state(slug)

    outside = ("module.exports = {title: 'T', url: 'https://x.example.org', baseUrl: '/', presets: [['classic', "
               "{docs: {path: '../../../../../../../../../etc'}}]]};\n")
    failed = publish_and_run(client, slug, key, {"docusaurus.config.js": outside, **PAGES})
    assert failed["status"] == "failed" and failed["error"]["code"] == "outside_sources", failed
    assert book_state(slug) == before


def test_mkdocs_pages_folder_or_inherited_config_outside_the_sources_is_refused(client, data_dir, book, tmp_path):
    slug, key = book
    failed = publish_and_run(client, slug, key, {"mkdocs.yml": "site_name: Harbour\ndocs_dir: /etc\n",
                                                 "docs/index.md": "# Home\n\nWelcome.\n"})
    assert failed["status"] == "failed" and failed["error"]["code"] == "outside_sources"
    server_file = tmp_path / "server-settings.yml"
    server_file.write_text("site_name: A name only the server knows\n")
    inherits = publish_and_run(client, slug, key, {"mkdocs.yml": f"INHERIT: {server_file}\n",
                                                   "docs/index.md": "# Home\n\nWelcome.\n"})
    assert inherits["status"] == "failed" and inherits["error"]["code"] == "outside_sources"
    assert not Book.objects.filter(slug=slug).exists()


# -- bad input ---------------------------------------------------------------------------------------------
def gzip_of(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data)


BAD_ARCHIVES = [
    ("empty", b"", 400, "empty_body"),
    ("not-gzip", b"PK\x03\x04 a zip, not a tar.gz", 415, "not_gzip"),
    ("gzip-not-tar", gzip_of(b"just some text, no tar header " * 40), 400, "not_tar"),
    ("cut-short", tarball(PAGES)[:60], 400, "corrupt_archive"),
    ("dot-dot", tarball({"../escape.md": "# Out\n\nx\n", **PAGES}), 400, "unsafe_path"),
    ("absolute", tarball({"/etc/cron.d/book.md": "# Out\n\nx\n", **PAGES}), 400, "unsafe_path"),
    ("symlink-out", tarball(PAGES, extra=[member("docs/passwd.md", tarfile.SYMTYPE, link="../../etc/passwd")]),
     400, "unsafe_link"),
    ("symlink-abs", tarball(PAGES, extra=[member("docs/key.md", tarfile.SYMTYPE, link="/etc/ssh/ssh_host_key")]),
     400, "unsafe_link"),
    ("hardlink-out", tarball(PAGES, extra=[member("docs/h.md", tarfile.LNKTYPE, link="../outside.md")]), 400,
     "unsafe_link"),
    ("device", tarball(PAGES, extra=[member("docs/dev.md", tarfile.CHRTYPE)]), 400, "unsafe_member"),
    ("fifo", tarball(PAGES, extra=[member("docs/pipe.md", tarfile.FIFOTYPE)]), 400, "unsafe_member"),
    ("twice", tarball(PAGES, extra=[member("docs/intro.md", tarfile.REGTYPE, size=10)]), 400, "duplicate_member"),
    ("control", tarball({"docs/bad\x07name.md": "# B\n\nx\n"}), 400, "unsafe_path"),
    ("no-pages", tarball({"README.txt": "no markdown here", "logo.svg": "<svg/>"}), 400, "no_pages"),
    ("too-many", tarball({f"docs/p{n}.md": "# P\n\nx\n" for n in range(12)}), 413, "too_many_files"),
    ("bomb", tarball({"docs/zeros.md": b"\x00" * 3_000_000}), 413, "too_large"),
]


@pytest.mark.parametrize(("name", "body", "status_code", "code"), BAD_ARCHIVES, ids=[b[0] for b in BAD_ARCHIVES])
def test_bad_archives_are_refused_with_their_error_and_change_nothing(client, data_dir, book, settings, name, body,
                                                                      status_code, code):
    slug, key = book
    publish_and_run(client, slug, key, PAGES)
    before = book_state(slug)
    settings.BOOKCHAT = {**settings.BOOKCHAT, "PUBLISH_MAX_FILES": 10, "PUBLISH_MAX_UNCOMPRESSED_BYTES": 2_000_000}
    response = publish(client, slug, key, body)
    assert response.status_code == status_code, response.content
    assert response.json()["error"] == code and response.json()["message"]
    assert book_state(slug) == before
    assert not [p for p in (data_dir / "uploads").iterdir() if p.name.startswith("incoming-")], "staging left behind"
    refused = IngestionJob.objects.filter(book_slug=slug, status="refused").get()
    assert refused.error_code == code and refused.published_by.startswith(key[:10])


@pytest.mark.parametrize(("query", "content_type", "status_code", "code"), [
    ("?dry_run=perhaps", "application/gzip", 400, "invalid"),
    ("?colour=blue", "application/gzip", 400, "unknown_field"),
    ("?source_dir=../up", "application/gzip", 400, "invalid_source_dir"),
    ("?language=klingon", "application/gzip", 400, "invalid_language"),
    ("?revision=" + "x" * 101, "application/gzip", 400, "max_length"),
    ("", "application/json", 415, "unsupported_media_type"),
    ("", "multipart/form-data; boundary=x", 415, "unsupported_media_type"),
])
def test_bad_requests_are_refused_before_the_body_is_read(client, data_dir, book, query, content_type, status_code,
                                                          code):
    slug, key = book
    response = publish(client, slug, key, tarball(PAGES), query=query, content_type=content_type)
    assert (response.status_code, response.json()["error"]) == (status_code, code)
    assert not Book.objects.filter(slug=slug).exists()


def test_a_key_that_publishes_no_real_slug_is_refused_400_and_nothing_is_recorded(client, data_dir):
    """The URL's slug is checked once: refused as ``invalid_book``, and no refusal is kept under a slug that is none."""
    key, raw = api_key_create(kind=ApiKey.SECRET, publish_book="guide")
    ApiKey.objects.filter(pk=key.pk).update(publish_book="Not_A_Slug")  # what the key's own checks never let in
    response = publish(client, "Not_A_Slug", raw, tarball(PAGES))
    assert (response.status_code, response.json()["error"], response.json()["field"]) == (400, "invalid_book", "slug")
    assert not IngestionJob.objects.filter(book_slug__iexact="not_a_slug").exists()
    assert slug_refusal("guide") is None and slug_refusal("guide-2") is None
    assert all(slug_refusal(bad).code == "invalid_book" for bad in ("Guide", "-guide", "guide\n", "x" * 65, ""))


def test_the_files_left_out_are_named_up_to_a_limit_then_counted(client, data_dir, book, monkeypatch):
    from ingestion.uploads import tarball as archives

    monkeypatch.setattr(archives, "LISTED_IGNORED", 2)
    slug, key = book
    site = {**PAGES, **{f"node_modules/pkg{n}/index.js": "module.exports = 1;\n" for n in range(5)}}
    response = publish(client, slug, key, tarball(site))
    assert response.status_code == 202, response.content
    job = IngestionJob.objects.get(pk=response.json()["sync"])
    assert job.ignored == ["node_modules/pkg0/index.js", "node_modules/pkg1/index.js", "… and 3 more"]
    assert job.files_total == 3


def test_an_archive_over_the_size_limit_is_refused_from_its_length(client, data_dir, book, settings):
    slug, key = book
    settings.BOOKCHAT = {**settings.BOOKCHAT, "PUBLISH_MAX_BYTES": 200}
    response = publish(client, slug, key, tarball(PAGES) + b"\x00" * 400)
    assert response.status_code == 413 and response.json()["error"] == "too_large"


def test_what_is_not_a_source_is_left_out_and_listed(client, data_dir, book):
    slug, key = book
    site = {**PAGES, "node_modules/react/index.js": "module.exports = 1;\n", ".git/HEAD": "ref: refs/heads/main\n",
            "docs/img/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 64,
            "sidebars.js": "module.exports = {};\n"}
    extra = [member("docs/again.md", tarfile.SYMTYPE, link="intro.md")]
    response = publish(client, slug, key, tarball(site, extra=extra))
    sync = response.json()["sync"]
    folder = jobs.job_folder(sync)
    assert not (folder / "node_modules").exists() and not (folder / ".git").exists()
    assert (folder / "docs" / "again.md").read_text() == PAGES["docs/intro.md"] and not (
        folder / "docs" / "again.md").is_symlink()
    jobs.run_job(sync)
    done = status(client, slug, key, sync).json()
    assert set(done["ignored"]) == {"node_modules/react/index.js", ".git/HEAD", "docs/img/logo.png"}
    assert done["report"]["pages"]["added"] == 4


def test_publishes_are_rate_limited_per_key(client, data_dir, book, settings):
    slug, key = book
    settings.BOOKCHAT = {**settings.BOOKCHAT, "RATE_PUBLISH": "2/hour"}
    body = tarball(PAGES)
    assert publish(client, slug, key, body, query="?dry_run=true").status_code == 202
    assert publish(client, slug, key, body, query="?dry_run=true").status_code == 202
    third = publish(client, slug, key, body, query="?dry_run=true")
    assert third.status_code == 429 and third.json()["error"] == "rate_limited" and int(third["Retry-After"]) > 0


def test_a_second_publish_while_one_is_under_way_is_a_409_until_its_worker_is_found_dead(client, data_dir, book):
    slug, key = book
    first = publish(client, slug, key, tarball(PAGES))
    assert first.status_code == 202
    busy = publish(client, slug, key, tarball(PAGES))
    assert busy.status_code == 409 and busy.json()["error"] == "sync_in_progress" and busy["Retry-After"] == "30"
    assert f"sync {first.json()['sync']}" in busy.json()["message"]
    # A dry run is no sync of the book: it may run beside one.
    assert publish(client, slug, key, tarball(PAGES), query="?dry_run=1").status_code == 202
    # The first sync's worker claimed it and died (its lock went with it): a new publish fails it and goes ahead.
    from datetime import timedelta

    from django.utils import timezone

    long_ago = timezone.now() - timedelta(seconds=60)
    IngestionJob.objects.filter(pk=first.json()["sync"]).update(status="running", started_at=long_ago,
                                                                heartbeat_at=long_ago)
    again = publish(client, slug, key, tarball(PAGES))
    assert again.status_code == 202, again.content
    dead = IngestionJob.objects.get(pk=first.json()["sync"])
    assert dead.status == "failed" and dead.error_code == "worker_lost"


def test_the_status_of_a_sync_is_for_its_book_only_and_its_query_is_checked(client, data_dir, book):
    slug, key = book
    accepted = publish(client, slug, key, tarball(PAGES))
    sync = accepted.json()["sync"]
    assert accepted["Location"] == accepted.json()["status_url"] and accepted.json()["status_url"].endswith(
        reverse("api-sync", args=[slug, sync]))
    queued = status(client, slug, key, sync)
    assert queued.status_code == 200 and queued.json()["status"] == "queued"
    assert status(client, slug, key, sync, "?output=text").status_code == 202
    assert status(client, slug, key, sync + 1000).json()["error"] == "unknown_sync"
    other, other_key = f"{slug}-b", api_key_create(kind=ApiKey.SECRET, publish_book=f"{slug}-b")[1]
    assert status(client, other, other_key, sync).status_code == 404
    assert status(client, slug, other_key, sync).json()["error"] == "key_book"
    assert status(client, slug, key, sync, "?wait=61").json()["field"] == "wait"
    assert status(client, slug, key, sync, "?output=xml").json()["field"] == "output"


# -- the switch --------------------------------------------------------------------------------------------
class Killed(BaseException):
    """What a killed worker is to the run: it stops where it is."""


def test_a_run_stopped_before_its_switch_leaves_the_book_as_it_was(book_dir, monkeypatch):
    slug = f"switch-{uuid.uuid4().hex[:8]}"
    for name, text in PAGES.items():
        book_dir.write(name.removeprefix("docs/"), text)
    index_book(path=book_dir.root, book_slug=slug, prune=True)
    before = book_state(slug)
    book_dir.write("intro.md", PAGES["docs/intro.md"] + "\nA new paragraph about the lamp's clockwork.\n")
    book_dir.write("new.md", "# New\n\nThe pilot boat waits by the breakwater.\n")
    (book_dir.root / "boats.md").unlink()
    embedder = get_embedder()
    calls = []

    def embed_then_die(texts, **kwargs):
        calls.append(len(texts))
        raise Killed()

    monkeypatch.setattr(embedder, "embed_documents", embed_then_die)
    with pytest.raises(Killed):
        index_book(path=book_dir.root, book_slug=slug, prune=True)
    assert calls and book_state(slug) == before
    assert IndexRun.objects.filter(book__slug=slug).first().status == "failed"


def refuse_updates_of(slug: str) -> None:
    """A real failure for one book's switch: a trigger that makes PostgreSQL refuse to update its row (dropped with
    the test's transaction)."""
    assert re.fullmatch(r"[a-z0-9-]+", slug)
    with connection.cursor() as cursor:
        cursor.execute(f"""
            CREATE FUNCTION test_refuse_book_update() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.slug = '{slug}' THEN RAISE EXCEPTION 'book % may not change (a test)', NEW.slug; END IF;
                RETURN NEW;
            END $$;
            CREATE TRIGGER test_refuse_book_update BEFORE UPDATE ON ingestion_book
                FOR EACH ROW EXECUTE FUNCTION test_refuse_book_update();""")


def test_a_sites_editions_switch_together_and_one_that_fails_leaves_every_one_as_it_was(client, data_dir, book,
                                                                                        tmp_path):
    slug, key = book
    root = write_versioned_site(tmp_path / "site")
    site = {path.relative_to(root).as_posix(): path.read_text() for path in root.rglob("*") if path.is_file()}
    first = publish_and_run(client, slug, key, site)
    assert first["status"] == "done" and len(first["report"]["books"]) == 3, first
    first_edition, second_edition = first["report"]["books"][:2]  # switched in this order
    before = {edition: book_state(edition) for edition in first["report"]["books"]}
    # Every edition changes: current's setup (which the translation falls back to) and 2.0's.
    new_sentence = "Lock the tripod's feet before levelling it."
    site["docs/setup.md"] += f"\n{new_sentence}\n"
    site["versioned_docs/version-2.0/setup.md"] += f"\n{new_sentence}\n"
    refuse_updates_of(second_edition)

    failed = publish_and_run(client, slug, key, site)
    assert failed["status"] == "failed" and failed["error"]["code"] == "switch_failed", failed
    assert repr(second_edition) in failed["error"]["message"] and "may not change" in failed["error"]["message"]
    assert {edition: book_state(edition) for edition in before} == before, "an edition was switched alone"
    assert not Chunk.objects.filter(book__slug=first_edition, text__contains="tripod").exists()
    runs = IndexRun.objects.filter(book__slug__in=before, trigger="publish").order_by("-pk")
    assert {run.book.slug: run.status for run in runs[:3]} == dict.fromkeys(before, "failed")

    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER test_refuse_book_update ON ingestion_book")
    again = publish_and_run(client, slug, key, site)
    assert again["status"] == "done", again
    assert all(Chunk.objects.filter(book__slug=edition, text__contains="tripod").exists() for edition in before)


def test_sync_summary_of_a_refused_publish_says_failed(data_dir):
    job = IngestionJob.objects.create(book_slug="some-book", source="publish", status="refused",
                                      error="the body is not gzip", error_code="not_gzip")
    summary = sync_summary(job)
    assert summary["status"] == "failed" and summary["error"] == {"code": "not_gzip",
                                                                  "message": "the body is not gzip"}


def test_an_edited_partial_reindexes_the_pages_that_import_it(client, data_dir, book):
    slug, key = book
    site = {**PAGES, "docs/_tide-table.mdx": "The tide table is posted on the harbour office door every Monday.\n",
            "docs/tides.md": "# Tides\n\nimport TideTable from './_tide-table.mdx';\n\nHigh tide comes later each "
                             "day.\n\n<TideTable />\n"}
    publish_and_run(client, slug, key, site)
    assert Chunk.objects.filter(book__slug=slug, document__path="tides.md", text__contains="every Monday").exists()
    site["docs/_tide-table.mdx"] = "The tide table is posted on the harbour office door every Friday at noon.\n"
    again = publish_and_run(client, slug, key, site)
    assert again["report"]["changed"] == ["tides.md"] and again["report"]["pages"]["unchanged"] == 2
    assert again["report"]["passages"]["embedded"] >= 1
    assert Chunk.objects.filter(book__slug=slug, document__path="tides.md", text__contains="every Friday").exists()


def test_publishes_and_refusals_are_on_record_in_the_admin(admin_client, client, data_dir, book):
    slug, key = book
    publish_and_run(client, slug, key, PAGES, query="?revision=abc1234")
    publish(client, slug, key, b"not an archive")
    listing = admin_client.get(reverse("admin:ingestion_ingestionjob_changelist") + f"?q={slug}").content.decode()
    assert "publish abc1234" in listing and "refused" in listing and key[:10] in listing
    refused = IngestionJob.objects.get(book_slug=slug, status="refused")
    page = admin_client.get(reverse("admin:ingestion_ingestionjob_change", args=[refused.pk])).content.decode()
    assert "the body is not gzip" in page


def test_push_says_what_is_missing_and_exits_2_without_starting_a_database(tmp_path):
    """``manage.py push`` is a client: it loads no settings, so it runs where bookchat has no database."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    (tmp_path / "site").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("BOOKCHAT_PUBLISH_KEY", "DATABASE_URL")} | {
        "BOOKCHAT_DATA_DIR": str(tmp_path / "no-data")}

    def push(*args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(REPO / "manage.py"), "push", *args], env=env | extra,
                              capture_output=True, text=True, timeout=60)

    no_key = push(str(tmp_path / "site"), "--server", "http://127.0.0.1:9", "--book", "harbour")
    assert no_key.returncode == 2 and "BOOKCHAT_PUBLISH_KEY" in no_key.stderr
    unreachable = push(str(tmp_path / "site"), "--server", "http://127.0.0.1:9", "--book", "harbour", "--json",
                       BOOKCHAT_PUBLISH_KEY="sk_x")
    assert unreachable.returncode == 2 and json.loads(unreachable.stdout)["error"] == "push_failed"
    assert "cannot reach" in json.loads(unreachable.stdout)["message"]
    assert push("--server", "x").returncode == 2
    assert not (tmp_path / "no-data").exists(), "push started the embedded database"


def test_after_a_sync_its_sentence_vectors_and_recalibration_are_tasks_of_their_own(client, data_dir, book, settings):
    """The sync is done once its pages are stored; what follows runs behind it on the worker. A new book is
    calibrated before its first sync ends (it never answers without a threshold of its own)."""
    from django_q.models import OrmQ

    from chat import tasks
    from chat.models import ScopeCalibration, SentenceVectors

    settings.BOOKCHAT = {**settings.BOOKCHAT, "SENTENCE_VECTORS": "on"}
    slug, key = book

    def queued() -> list[str]:
        return sorted(package.func() for package in OrmQ.objects.all() if package.func().startswith("chat.tasks"))

    OrmQ.objects.all().delete()  # tasks queued by earlier tests that ran a worker (test_uploads' do) are not ours
    first = publish_and_run(client, slug, key, PAGES)
    calibrated = ScopeCalibration.objects.get(book__slug=slug).computed_at
    assert first["status"] == "done" and queued() == ["chat.tasks.embed_sentences"]
    assert not SentenceVectors.objects.filter(chunk__book__slug=slug).exists(), "not made in the sync itself"

    OrmQ.objects.all().delete()
    edited = {**PAGES, "docs/intro.md": PAGES["docs/intro.md"] + "\nThe lamp was first lit in 1887.\n"}
    publish_and_run(client, slug, key, edited)
    assert queued() == ["chat.tasks.calibrate", "chat.tasks.embed_sentences"]
    assert ScopeCalibration.objects.get(book__slug=slug).computed_at == calibrated, "the old threshold serves"

    book_id = Book.objects.get(slug=slug).pk
    assert tasks.embed_sentences(book_id)["passages"] == Chunk.objects.filter(book__slug=slug).count()
    assert tasks.calibrate(book_id)["threshold"] > 0
    assert ScopeCalibration.objects.get(book__slug=slug).computed_at > calibrated
    assert tasks.calibrate(book_id + 10_000) is None, "a book deleted since is nothing to do"
