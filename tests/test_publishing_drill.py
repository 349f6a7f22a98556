"""The publishing drill: a book's repository keeps its chatbot current over HTTP, as its CI would. A drill
(``make drills``): it brings up a deployment of its own.

A real git repository is made from five pages of docusaurus-docs; ``serve --role web`` and ``serve --role worker``
run on the test database. Commit 1 is published by the manual's own GitHub Actions step, run verbatim; commit 2 (one
page edited with a sentence nobody could guess, one deleted, one added) by ``manage.py push``, while readers search
continuously: every answer comes from the old book or the new one, never a mix. The new sentence is then answered
with its citation and the deleted page is gone from answers, search and the page list. A worker killed mid-sync
leaves the previous book answering, and publishing again completes it. The manual's GitLab CI and pull-request
recipes run verbatim too, on a held-out book (the mdBook guide), as dry runs; and the GitHub recipe publishes through
the manual's nginx with TLS, to a server without its proxy settings, while another sync of the book runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import REPO, committed, server_environment
from tests.support.nodes import Node
from tests.support.shared_data import shared_data

pytestmark = [pytest.mark.django_db, pytest.mark.slow, pytest.mark.drill]

MANUAL_PAGE = REPO / "docs" / "using" / "08-publish-from-ci.md"
EDITED, DELETED, ADDED = "browser-support.mdx", "seo.mdx", "harbour-signals.md"
# The pages of docusaurus-docs the repository starts with (~25 passages to embed).
PAGES = ("playground.mdx", EDITED, "typescript-support.mdx", "static-assets.mdx", DELETED)
NEW_SENTENCE = ("The harbour master, Ottoline Brackenbury, rings the Wexcombe bell 417 times every leap day to test "
                "the fog signal.")
ADDED_PAGE = ("# Harbour signals\n\nThe Wexcombe breakwater lamp shows a cobalt-blue light through a lens ground in "
              "1887, so that pilots can tell it from the town's street lamps.\n")
GIT = {"GIT_AUTHOR_NAME": "Drill", "GIT_AUTHOR_EMAIL": "drill@example.org", "GIT_COMMITTER_NAME": "Drill",
       "GIT_COMMITTER_EMAIL": "drill@example.org"}


# -- the servers and the repository ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def servers(tmp_path_factory, django_db_setup, django_db_blocker):
    """``serve --role web`` and ``serve --role worker`` on the test database, sharing a data folder. Everything the
    drill publishes is removed afterwards."""
    root = tmp_path_factory.mktemp("publishing-drill")
    with django_db_blocker.unblock():
        env = server_environment()
    env |= {"BOOKCHAT_DATA_DIR": str(root / "data"), "BOOKCHAT_DEBUG": "false",
            "BOOKCHAT_ALLOWED_HOSTS": "127.0.0.1", "BOOKCHAT_ANONYMOUS_API": "true", "BOOKCHAT_RATE_ANONYMOUS": "",
            "BOOKCHAT_RATE_SEARCH": "", "BOOKCHAT_WEB_WORKERS": "1", "BOOKCHAT_TASK_WORKERS": "1",
            "BOOKCHAT_LOG_LEVEL": "INFO", "DJANGO_SETTINGS_MODULE": "tests.support.node_settings"}
    logs = root / "logs"
    logs.mkdir()
    nodes = {"web": Node("web", "web", env, logs), "worker": Node("worker", "worker", env, logs), "env": env,
             "logs": logs, "lost": []}
    try:
        nodes["web"].wait_ready()
        nodes["worker"].wait_ready()
        yield nodes
    finally:
        for node in (nodes["web"], nodes["worker"]):
            if not node.lost:
                node.terminate()
                node.reap()
        with django_db_blocker.unblock():
            committed(forget_the_drill)


def forget_the_drill() -> None:
    """The drill's books, keys, syncs and their queued tasks (a killed worker leaves one): other tests count rows."""
    from django_q.models import OrmQ

    from chat.models import ApiKey
    from ingestion.models import Book, IngestionJob

    tasks = set(IngestionJob.objects.filter(book_slug__startswith="drill-").values_list("task_id", flat=True))
    for package in OrmQ.objects.all():
        if package.task_id() in tasks:
            package.delete()
    IngestionJob.objects.filter(book_slug__startswith="drill-").delete()
    ApiKey.objects.filter(publish_book__startswith="drill-").delete()
    Book.objects.filter(slug__startswith="drill-").delete()


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=os.environ | GIT,
                          check=True)
    return done.stdout.strip()


def make_repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    for page in PAGES:
        shutil.copy(shared_data() / "docusaurus-docs" / "docs" / page, repo / "docs" / page)
    (repo / "README.md").write_text("# The harbour book\n\nIts pages are in docs/.\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "The book as it is")
    return repo


def publishing_key(slug: str) -> str:
    from chat.channels.keys import api_key_create
    from chat.models import ApiKey

    return committed(lambda: api_key_create(kind=ApiKey.SECRET, publish_book=slug)[1])


# -- the manual's recipes, run verbatim --------------------------------------------------------------------
def manual_yaml(title: str) -> dict:
    """The YAML block of the manual's CI page whose fence is titled ``title``, parsed."""
    text = MANUAL_PAGE.read_text()
    found = re.search(rf'```yaml title="{re.escape(title)}"\n(.*?)\n```', text, re.S)
    assert found, f"the manual has no {title} block"
    return yaml.safe_load(found.group(1))


def expressions(value: str, values: dict[str, str]) -> str:
    """GitHub's ``${{ … }}`` expressions in an env value, as the runner would give them."""
    return re.sub(r"\$\{\{\s*([^}]+?)\s*\}\}", lambda m: values[m.group(1)], value)


def run_github_step(workflow: dict, job: str, *, cwd: Path, values: dict[str, str], env: dict[str, str]):
    """The ``run`` step of ``job``, as GitHub runs it (bash -e -o pipefail), with the workflow's and the step's
    env; ``env`` stands for what the repository's settings and the runner give (it overrides the workflow's)."""
    step = next(step for step in workflow["jobs"][job]["steps"] if "run" in step)
    variables = {name: expressions(str(value), values) for name, value in workflow.get("env", {}).items()}
    variables |= {name: expressions(str(value), values) for name, value in step.get("env", {}).items()}
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=cwd,
                          env=os.environ | variables | env, capture_output=True, text=True, timeout=600)


def run_gitlab_job(pipeline: dict, job: str, *, cwd: Path, env: dict[str, str]):
    """The ``script`` of ``job`` in one POSIX shell with ``set -e``, as GitLab's runner runs it on alpine."""
    script = "\n".join(pipeline[job]["script"])
    variables = {name: str(value) for name, value in pipeline.get("variables", {}).items()}
    return subprocess.run(["sh", "-ec", script], cwd=cwd, env=os.environ | variables | env, capture_output=True,
                          text=True, timeout=600)


# -- readers -----------------------------------------------------------------------------------------------
def search(url: str, slug: str, query: str) -> dict:
    response = httpx.get(f"{url}/api/v1/search", params={"q": query, "book": slug}, timeout=30)
    response.raise_for_status()
    return response.json()


def documents_found(result: dict) -> set[str]:
    return {page["document"] for page in result["pages"]}


class Readers:
    """Search the book continuously for the three changes of commit 2; each observation says whether it saw the
    book's new version (the edit in, the added page in, the deleted page out) and when it was asked and answered."""

    CHECKS = {
        "edited": ("Ottoline Brackenbury Wexcombe bell",
                   lambda result: any("Brackenbury" in section["snippet"] for page in result["pages"]
                                      for section in page["sections"])),
        "added": ("cobalt-blue breakwater lamp", lambda result: ADDED in documents_found(result)),
        "deleted": ("search engine optimization", lambda result: DELETED not in documents_found(result)),
    }

    def __init__(self, url: str, slug: str):
        self.url, self.slug = url, slug
        self.seen: list[tuple[float, float, str, bool]] = []  # (asked, answered, check, saw the new version)
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stopping.is_set():
            for name, (query, is_new) in self.CHECKS.items():
                asked = time.monotonic()
                try:
                    result = search(self.url, self.slug, query)
                except httpx.HTTPError as exc:
                    self.errors.append(f"{name}: {exc}")
                    continue
                self.seen.append((asked, time.monotonic(), name, is_new(result)))

    def __enter__(self) -> Readers:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.thread.join(timeout=60)

    def mixed(self) -> list[str]:
        """Pairs of observations that no atomic switch explains: one saw the new version and ended before another,
        which then saw the old one."""
        first_new = min((answered for _, answered, _, new in self.seen if new), default=None)
        if first_new is None:
            return []
        return [f"{name} saw the old book {asked - first_new:.2f} s after the new one was seen"
                for asked, _, name, new in self.seen if not new and asked > first_new]


# -- the drill ---------------------------------------------------------------------------------------------
def test_a_book_published_from_its_repository_follows_each_commit(servers, tmp_path, served):
    repo = make_repository(tmp_path)
    web = servers["web"].url
    slug = f"drill-{uuid.uuid4().hex[:8]}"
    key = publishing_key(slug)

    # Commit 1, published by the manual's GitHub Actions step, verbatim.
    workflow = manual_yaml(".github/workflows/bookchat.yml")
    values = {"vars.BOOKCHAT_URL": web, "secrets.BOOKCHAT_PUBLISH_KEY": key}
    runner = {"BOOKCHAT_BOOK": slug, "BOOK_DIR": "docs", "GITHUB_SHA": git(repo, "rev-parse", "HEAD")}
    first = run_github_step(workflow, "publish", cwd=repo, values=values, env=runner)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "::notice title=bookchat::bookchat sync" in first.stdout and ": done" in first.stdout
    pages = sorted(path.relative_to(repo / "docs").as_posix() for path in (repo / "docs").rglob("*.md*")
                   if not any(part.startswith("_") for part in path.relative_to(repo / "docs").parts))
    assert outline_paths(web, slug) == set(pages)
    assert DELETED in documents_found(search(web, slug, "search engine optimization"))

    # Commit 2: one page edited, one deleted, one added.
    before = passage_ids(slug)
    edited = repo / "docs" / EDITED
    edited.write_text(edited.read_text() + f"\n## Harbour duties\n\n{NEW_SENTENCE}\n")
    (repo / "docs" / DELETED).unlink()
    (repo / "docs" / ADDED).write_text(ADDED_PAGE)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Harbour duties, signals; SEO moved out")
    with Readers(web, slug) as readers:
        time.sleep(1.0)  # readers see the old book first
        pushed = subprocess.run([sys.executable, str(REPO / "manage.py"), "push", "docs", "--server", web, "--book",
                                 slug, "--json"], cwd=repo, env=os.environ | {"BOOKCHAT_PUBLISH_KEY": key},
                                capture_output=True, text=True, timeout=600)
        time.sleep(1.5)  # and the new one after
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    sync = json.loads(pushed.stdout)
    report = sync["report"]
    assert sync["status"] == "done" and sync["revision"] == git(repo, "rev-parse", "HEAD")
    assert (report["added"], report["changed"], report["removed"]) == ([ADDED], [EDITED], [DELETED])
    assert report["pages"]["unchanged"] == len(pages) - 2
    # Only the edited and the added page were embedded: every other page kept its passages as they were.
    after = passage_ids(slug)
    assert {path: ids for path, ids in after.items() if path not in (EDITED, ADDED)} == \
        {path: ids for path, ids in before.items() if path not in (EDITED, DELETED)}
    assert report["passages"]["embedded"] == len((after[EDITED] - before[EDITED]) | after[ADDED]), report
    assert not readers.errors, readers.errors[:3]
    assert {name for _, _, name, new in readers.seen if not new} == set(Readers.CHECKS), "the old book was read"
    assert {name for _, _, name, new in readers.seen if new} == set(Readers.CHECKS), "the new book was read"
    assert readers.mixed() == []

    # The new sentence is answered, quoted with its citation; the deleted page is gone everywhere.
    answer = ask(web, slug, "How many times does Ottoline Brackenbury ring the Wexcombe bell?")
    assert "417" in answer["answer"], answer["answer"]
    cited = [source for source in answer["sources"] if source["cited"]]
    assert any(source["document"] == EDITED and "Brackenbury" in source["excerpt"] for source in cited), cited
    gone = ask(web, slug, "How do I improve search engine optimization (SEO) of my site?")
    assert DELETED not in {source["document"] for source in gone["sources"]}
    assert DELETED not in documents_found(search(web, slug, "search engine optimization"))
    assert outline_paths(web, slug) == (set(pages) - {DELETED}) | {ADDED}


def test_a_worker_killed_mid_sync_leaves_the_old_book_answering_and_publishing_again_completes(servers, tmp_path,
                                                                                              served):
    web = servers["web"].url
    slug = f"drill-killed-{uuid.uuid4().hex[:8]}"
    key = publishing_key(slug)
    headers = {"Authorization": f"Bearer {key}"}
    site = tmp_path / "site"
    (site / "docs").mkdir(parents=True)
    (site / "docs" / "lights.md").write_text("# Harbour lights\n\nThe harbour light at Port Ellis flashes green "
                                             "every four seconds, so that ships find the channel at night.\n")
    first = post_sources(web, slug, site, key)
    assert first.status_code == 202, first.text
    assert wait_for_sync(first.json()["status_url"], headers)["status"] == "done"

    # A long page: its embedding takes the sync long enough to be killed in the middle of it.
    section = " ".join(f"Rule {n} of the quay concerns mooring lines, fenders and the tide board." for n in range(12))
    (site / "docs" / "quay.md").write_text("# Quay rules\n\n" + "".join(
        f"## Berth {k}\n\n{section} Berth {k} is for the {['pilot', 'ferry', 'trawler', 'lifeboat'][k % 4]}.\n\n"
        for k in range(24)))
    accepted = post_sources(web, slug, site, key)
    assert accepted.status_code == 202, accepted.text
    status_url = accepted.json()["status_url"]
    deadline = time.monotonic() + 120
    while True:
        sync = httpx.get(status_url, headers=headers, timeout=30).json()
        if sync["status"] == "running" and sync["progress"]["files_total"] and \
                sync["progress"]["files_done"] == sync["progress"]["files_total"]:
            break  # every page read; the long page's passages are being embedded
        assert sync["status"] in ("queued", "running") and time.monotonic() < deadline, sync
        time.sleep(0.1)
    servers["worker"].lose()
    servers["lost"].append(servers["worker"])

    # The old book answers, and only the old book.
    assert "quay.md" not in documents_found(search(web, slug, "mooring lines fenders tide board berth"))
    assert "lights.md" in documents_found(search(web, slug, "harbour light flashes green"))
    assert httpx.get(status_url, headers=headers, timeout=30).json()["status"] == "running"

    # A new worker; publishing again fails the dead sync (its worker's lock is gone) and completes the book.
    servers["worker"] = Node("worker-2", "worker", servers["env"], servers["logs"])
    servers["worker"].wait_ready()
    deadline = time.monotonic() + 60
    while (again := post_sources(web, slug, site, key)).status_code == 409:
        assert again.json()["error"] == "sync_in_progress" and time.monotonic() < deadline, again.text
        time.sleep(1.0)
    assert again.status_code == 202, again.text
    done = wait_for_sync(again.json()["status_url"], headers)
    assert done["status"] == "done" and done["report"]["added"] == ["quay.md"], done
    assert "quay.md" in documents_found(search(web, slug, "mooring lines fenders tide board berth"))
    dead = httpx.get(status_url, headers=headers, timeout=30).json()
    assert dead["status"] == "failed" and dead["error"]["code"] == "worker_lost"


def test_the_manuals_ci_recipes_check_a_held_out_book_verbatim(servers, tmp_path):
    """The pull-request recipes (GitHub and GitLab) on the mdBook guide, a book this feature was not built on."""
    pipeline = manual_yaml(".gitlab-ci.yml")
    assert {"bookchat-publish", "bookchat-preview"} <= set(pipeline)
    repo = tmp_path / "guide-repo"
    shutil.copytree(shared_data() / "mdbook-guide", repo / "guide")
    web = servers["web"].url
    slug = f"drill-guide-{uuid.uuid4().hex[:8]}"
    key = publishing_key(slug)
    runner = {"BOOKCHAT_URL": web, "BOOKCHAT_PUBLISH_KEY": key, "BOOKCHAT_BOOK": slug, "BOOK_DIR": "guide",
              "CI_COMMIT_SHA": "0123abcd"}
    gitlab = run_gitlab_job(pipeline, "bookchat-preview", cwd=repo, env=runner)
    assert gitlab.returncode == 0, gitlab.stdout + gitlab.stderr
    assert re.search(r"bookchat dry run \d+ of drill-guide-\w+: done \(revision 0123abcd\); pages would be added "
                     r"\d+", gitlab.stdout), gitlab.stdout

    workflow = manual_yaml(".github/workflows/bookchat.yml")
    values = {"vars.BOOKCHAT_URL": web, "secrets.BOOKCHAT_PUBLISH_KEY": key}
    reading = repo / "guide" / "src" / "guide" / "reading.md"  # a chapter of SUMMARY.md, now with a fence never closed
    lines = len(reading.read_text().splitlines())
    reading.write_text(reading.read_text() + "\n```rust\nfn main() {}\n")
    github = run_github_step(workflow, "preview", cwd=repo, values=values,
                             env={"BOOKCHAT_BOOK": slug, "BOOK_DIR": "guide", "GITHUB_SHA": "4567cdef"})
    assert github.returncode == 1, "a page error fails the pull request's check"
    assert f"::error file=guide/src/guide/reading.md,line={lines + 2}::" in github.stdout, github.stdout
    # push, as an author runs it: a page error is exit 1 (0 with --allow-errors).
    pushed = subprocess.run([sys.executable, str(REPO / "manage.py"), "push", "guide", "--server", web, "--book", slug,
                             "--dry-run"], cwd=repo, env=os.environ | {"BOOKCHAT_PUBLISH_KEY": key},
                            capture_output=True, text=True, timeout=300)
    assert pushed.returncode == 1 and f"src/guide/reading.md:{lines + 2}: error:" in pushed.stdout, pushed.stdout
    from ingestion.models import Book

    assert not committed(lambda: Book.objects.filter(slug=slug).exists()), "dry runs store nothing"


@pytest.mark.needs("nginx")
def test_the_github_recipe_publishes_through_nginx_with_tls_waiting_out_a_sync_in_progress(servers, tmp_path, served):
    """Behind the manual's nginx, with TLS, on a server without its proxy settings (so the status URL it builds
    says http:// and no port), while another sync of the book runs: the recipe waits out the 409 as Retry-After
    says, then polls the status URL on BOOKCHAT_URL's address to the end."""
    from ingestion.models import IngestionJob
    from tests.support.proxies import Nginx

    web = servers["web"]
    slug = f"drill-tls-{uuid.uuid4().hex[:8]}"
    key = publishing_key(slug)
    site = tmp_path / "site"
    (site / "docs").mkdir(parents=True)
    rules = " ".join(f"Rule {n} of the lock concerns gates, sluices and the water level." for n in range(12))
    (site / "docs" / "locks.md").write_text("# Lock rules\n\n" + "".join(
        f"## Chamber {k}\n\n{rules} Chamber {k} is for narrowboats.\n\n" for k in range(24)))
    busy = post_sources(web.url, slug, site, key)  # long enough to embed that the recipe meets it running
    assert busy.status_code == 202, busy.text
    repo = tmp_path / "repo"
    shutil.copytree(site, repo / "book")
    (repo / "book" / "docs" / "bridges.md").write_text("# Bridges\n\nThe swing bridge at Calder Quay opens on "
                                                       "the hour for boats taller than 2.4 metres.\n")
    with Nginx(tmp_path / "nginx", upstream=web.port) as nginx:
        workflow = manual_yaml(".github/workflows/bookchat.yml")
        values = {"vars.BOOKCHAT_URL": nginx.https_url, "secrets.BOOKCHAT_PUBLISH_KEY": key}
        runner = {"BOOKCHAT_BOOK": slug, "BOOK_DIR": "book", "GITHUB_SHA": "89abcdef",
                  "CURL_CA_BUNDLE": str(nginx.cert)}
        result = run_github_step(workflow, "publish", cwd=repo, values=values, env=runner)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"sync queued: {nginx.https_url}/api/v1/" in result.stdout, result.stdout
    assert ": done" in result.stdout, result.stdout
    refused = committed(lambda: list(IngestionJob.objects.filter(book_slug=slug, status="refused")
                                     .values_list("error_code", flat=True)))
    assert refused and set(refused) == {"sync_in_progress"}, refused
    assert "bridges.md" in documents_found(search(web.url, slug, "swing bridge Calder Quay"))


# -- helpers -----------------------------------------------------------------------------------------------
def outline_paths(url: str, slug: str) -> set[str]:
    book = httpx.get(f"{url}/api/v1/books/{slug}", timeout=30).json()
    return {page["path"] for chapter in book["outline"] for page in chapter["pages"]}


def ask(url: str, slug: str, question: str) -> dict:
    response = httpx.post(f"{url}/api/v1/ask", json={"question": question, "book": slug}, timeout=60)
    response.raise_for_status()
    return response.json()


def passage_ids(slug: str) -> dict[str, set[str]]:
    """The book's passages, page by page."""
    from ingestion.models import Chunk

    rows = committed(lambda: list(Chunk.objects.filter(book__slug=slug).values_list("document__path", "id")))
    pages: dict[str, set[str]] = {}
    for path, chunk_id in rows:
        pages.setdefault(path, set()).add(chunk_id)
    return pages


def post_sources(url: str, slug: str, site: Path, key: str) -> httpx.Response:
    archive = site.parent / "book.tar.gz"
    subprocess.run(["tar", "czf", str(archive), "-C", str(site), "."], check=True)
    return httpx.post(f"{url}/api/v1/books/{slug}/sources", content=archive.read_bytes(), timeout=120,
                      headers={"Authorization": f"Bearer {key}", "Content-Type": "application/gzip"})


def wait_for_sync(status_url: str, headers: dict) -> dict:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        sync = httpx.get(status_url, params={"wait": 20}, headers=headers, timeout=60).json()
        if sync["status"] in ("done", "failed"):
            return sync
    raise AssertionError(f"{status_url} did not end")
