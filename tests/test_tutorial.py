"""The instructor's tutorial (docs/getting-started/03-your-book.md) followed literally on a real Docusaurus book: a
copy of the cached "Field Handbook" project (tests/support/docusaurus_site.py) stands for the reader's ``~/my-course``.
Every command and snippet comes from the page itself (the fenced blocks under its step anchors and the command its
widget step names), with only the substitutions a reader makes (``READER``): ``make run BOOK=…`` must print the
slug line the page shows (its example read as a pattern, so the page fails here when it no longer matches what
``make run`` prints), the key command runs as written with that slug, the ``scripts`` entry goes into the copy's
``docusaurus.config.js``, the page's ``npm start`` serves the book at http://localhost:3000 (the origin the key
allows), and Chromium asks in the widget on one of the book's pages: the answer is the book's, and its citations
name pages and sections that exist in the built site.

Decisions:
- ``npm start`` (the page's command: Docusaurus' dev server, one locale, ~10 s here), not ``npm run build``, which
  builds both of the handbook's locales (~35 s here, most of the drill's budget) for a static host the page doesn't
  ask for; the citations are checked against the cached ``build/`` instead.
- ``npm install`` (the page's "once"): the copy's ``node_modules`` links each package the cache installed, so that
  the dev server's own cache (``node_modules/.cache``) is written in the copy, never in the shared cache.
- The steps in the page's order, each waiting for the one before (the key for the indexed book, the dev server for
  the key); only the publishing key's command runs beside the dev server's start. ``make run`` gets its port, the
  test database and data folder through the environment, as a reader's shell could set them.
- The handbook's passage vectors come from the session's cache (``BOOKCHAT_EMBEDDING_CACHE``, a setting a reader
  could set too), where tests/test_docusaurus_build.py put them in ``make test``: embedding them again took 10–18 s
  of the drill here. Nothing here times or interrupts the indexing.
- A drill (``make drills``): a whole ``make run``, a dev server and a browser.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.conftest import REPO, VECTOR_CACHE, committed, server_environment
from tests.support import docusaurus_site
from tests.support.browser import CHROMIUM_ARGS, ConsoleErrors, chromium
from tests.support.nodes import free_port

pytestmark = [pytest.mark.django_db, pytest.mark.slow, pytest.mark.drill, pytest.mark.needs("node"),
              pytest.mark.needs("browser")]

PAGE = REPO / "docs" / "getting-started" / "03-your-book.md"
# What the page writes that a reader replaces, and with what here: the values the steps reveal are added as they
# do (the slug from make run's line, the key from the apikey command, the server's address).
READER = {"~/bookchat": "the repository", "~/my-course": "a copy of the Field Handbook's project folder",
          "my-book": "the slug make run printed", "pk_…": "the key the apikey command printed",
          "https://HOST": "the server make run started"}
DEV_SERVER = "http://localhost:3000"  # the origin the page's key allows, where `npm start` serves
QUESTION = "How far from lakes and streams should we camp?"
TIMEOUT = 60  # seconds for each wait; the steps take seconds, but CI machines are busy


def steps() -> dict[str, str]:
    """The page's steps by anchor: ``{"trial": its text up to the next heading of its level, …}``."""
    text = PAGE.read_text(encoding="utf-8")
    found = list(re.finditer(r"^## .*\{#([\w-]+)\}\s*$", text, re.M))
    return {m[1]: text[m.end():found[i + 1].start() if i + 1 < len(found) else len(text)]
            for i, m in enumerate(found)}


def blocks(step: str, language: str) -> list[str]:
    """The fenced ``language`` blocks of a step, as written."""
    return re.findall(rf"^```{language}\b[^\n]*\n(.*?)^```", step, re.M | re.S)


def as_reader(text: str, reader: dict[str, str]) -> str:
    for written, value in reader.items():
        if value is not None:
            text = text.replace(written, value)
    return text


def example_slug(example: str) -> str:
    """The slug in the page's example of make run's line (after ``--book``)."""
    return re.search(r"--book ([\w-]+)", example)[1]


def slug_line(example: str) -> re.Pattern:
    """The page's example of make run's line as a pattern: its path and its slug (after ``--book``) are the
    reader's, the rest is make run's own words."""
    path = re.search(r"\S*my-course", example)[0]
    slug = example_slug(example)
    pattern = re.escape(example.strip()).replace(re.escape(path), r"(?P<path>\S+)", 1)
    pattern = pattern.replace(re.escape(slug), r"(?P<slug>[\w-]+)", 1).replace(re.escape(slug), r"(?P=slug)")
    return re.compile(pattern)


class Output:
    """A process's output lines, read on a thread of their own, to wait on."""

    def __init__(self, process: subprocess.Popen):
        self.lines: list[str] = []
        self.process = process
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern: re.Pattern | str) -> re.Match:
        deadline, seen = time.monotonic() + TIMEOUT, 0
        while time.monotonic() < deadline:
            for line in self.lines[seen:]:
                if found := re.search(pattern, line):
                    return found
            seen = len(self.lines)
            assert self.process.poll() is None or self.thread.is_alive(), self.text()
            time.sleep(0.2)
        raise AssertionError(f"no line matching {pattern!r} in time:\n{self.text()}")

    def text(self) -> str:
        return "\n".join(self.lines)


def start(script: str, cwd: Path, env: dict[str, str]) -> tuple[subprocess.Popen, Output]:
    process = subprocess.Popen(["bash", "-c", script], cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    return process, Output(process)


def stop(*processes: subprocess.Popen | None) -> None:
    """Ctrl-C to each one's whole foreground group, as a terminal sends it, all at once; whatever outlives it is
    killed."""
    processes = [process for process in processes if process is not None]
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGINT)
    for process in processes:
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            for child in [*psutil.Process(process.pid).children(recursive=True), psutil.Process(process.pid)]:
                with contextlib.suppress(psutil.NoSuchProcess):
                    child.kill()
            process.wait()


def copy_project(site: Path, course: Path) -> None:
    """The book's project folder as a reader has it after ``npm install``: its files, and the installed packages."""
    shutil.copytree(site, course, ignore=shutil.ignore_patterns("node_modules", "build", ".docusaurus"))
    (course / "node_modules").mkdir()
    for package in (site / "node_modules").iterdir():
        if package.name != ".cache":
            (course / "node_modules" / package.name).symlink_to(package)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def test_the_tutorial_followed_literally_on_a_docusaurus_book(manual_book, tmp_path):
    page = steps()
    assert {"trial", "slug", "key", "widget", "publish"} <= set(page), sorted(page)
    run_bash, = blocks(page["trial"], "bash")
    example, = blocks(page["slug"], "text")
    key_bash, = blocks(page["key"], "bash")
    scripts_entry, = blocks(page["widget"], "js")
    publish_bash, = blocks(page["publish"], "bash")
    assert sum(len(blocks(text, "bash")) for text in page.values()) == 3, "a new command on the page: follow it here"
    npm_start = re.search(r"Run `(npm [^`]+)` in the book", page["widget"])[1]
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", 3000)) != 0, "port 3000 is taken: the tutorial's dev server needs it"

    site = docusaurus_site.site()
    course = tmp_path / "my-course"
    copy_project(site, course)
    port = free_port()
    reader = dict.fromkeys(READER) | {"~/bookchat": str(REPO), "~/my-course": str(course)}
    env = {k: v for k, v in server_environment().items() if k != "BOOKCHAT_DEFAULT_BOOK"} | {
        "PORT": str(port), "PYTHONUNBUFFERED": "1", "BOOKCHAT_WEB_WORKERS": "1",
        "BOOKCHAT_ADMIN_PASSWORD": "tutorial-admin-pass", "BOOKCHAT_EMBEDDING_CACHE": str(VECTOR_CACHE)}
    serving, dev_server, slug = None, None, None
    try:
        # 1. make run BOOK=~/my-course, and 2. the slug it prints, read by the page's own example line.
        serving, served = start(as_reader(run_bash, reader), tmp_path, env)
        line = served.wait_for(r"Indexing your book in .*")
        shown = slug_line(example).fullmatch(line[0])
        assert shown, f"the page's line no longer reads as make run's:\n page: {example.strip()}\n make: {line[0]}"
        assert shown["path"] == str(course)
        slug = reader["my-book"] = shown["slug"]
        assert slug == "field-handbook", "the slug is made from the site's title"
        # 3. The key for the site's origin, as written, with that slug, once make run says the book is indexed.
        indexed = re.search(r"prints\s+`(Your book [^`]+)`", page["key"])[1]
        served.wait_for(re.escape(indexed).replace(re.escape(example_slug(example)), re.escape(slug)))
        done = subprocess.run(["bash", "-c", as_reader(key_bash, reader)], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=TIMEOUT)
        assert done.returncode == 0, done.stderr
        reader["pk_…"] = re.search(r"^pk_\S+$", done.stdout, re.M)[0]
        # 4. The widget: the scripts entry in the book's config, the page's npm start, a question from a page.
        reader["https://HOST"] = f"http://127.0.0.1:{port}"
        config = course / "docusaurus.config.js"
        source = config.read_text(encoding="utf-8")
        assert "scripts:" not in source
        config.write_text(source.replace("const config = {\n", "const config = {\n" + as_reader(scripts_entry, reader),
                                         1), encoding="utf-8")
        dev_server, started = start(npm_start, course, os.environ | {"BROWSER": "none",
                                                                     "npm_config_update_notifier": "false"})
        # 6. The publishing key, as written (the book need not have been published), meanwhile.
        publishing = subprocess.Popen(["bash", "-c", as_reader(publish_bash, reader)], cwd=REPO, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        home = started.wait_for(r"running at: (http://\S+)")[1]
        assert home.startswith(DEV_SERVER), home
        deadline = time.monotonic() + TIMEOUT
        while not answers(home):
            assert time.monotonic() < deadline and dev_server.poll() is None, started.text()
            time.sleep(0.3)
        out, _ = publishing.communicate(timeout=TIMEOUT)
        assert publishing.returncode == 0 and f'"publishes": "{slug}"' in out, out
        links = ask_in_the_widget(home + "docs/next/guide/setup", f"http://127.0.0.1:{port}")
        build = site / "build"
        assert any("/guide/setup" in link for link in links), f"the answer cites the page it came from: {links}"
        broken = {link: why for link in links
                  if (why := docusaurus_site.check_url(link.split(":~:")[0], build, docusaurus_site.SITE_URL))}
        assert broken == {}, "each citation names a page and a section of the site"
    finally:
        stop(dev_server, serving)
        cleanup(slug)
    assert "Stopped." in served.text()


def ask_in_the_widget(url: str, bookchat: str) -> list[str]:
    """Chromium on the book's page: the widget asked QUESTION; the answer's source links."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(TIMEOUT * 1000)
            errors = ConsoleErrors()
            errors.watch(page)
            page.goto(url)
            page.locator(".bc-launcher").click()  # Playwright's CSS selectors pierce the widget's open shadow root
            page.locator(".bc-input").fill(QUESTION)
            page.locator(".bc-input").press("Enter")
            answer = page.locator(".bc-answer[data-state=done]").last
            answer.wait_for()
            text = answer.locator(".bc-answer-text").text_content() + " ".join(
                answer.locator(".bc-excerpt").all_text_contents())
            assert "60 metres" in text, text
            assert [e for e in errors if bookchat in e or "bookchat" in e] == []
            return answer.locator(".bc-sources a").evaluate_all("links => links.map(a => a.href)")
        finally:
            browser.close()


def cleanup(slug: str | None) -> None:
    from chat.models import ApiKey
    from ingestion.models import Book, DefaultBook, IngestionJob

    def delete():
        ApiKey.objects.filter(name="course site").delete()
        if slug:
            ApiKey.objects.filter(publish_book=slug).delete()
            Book.objects.filter(slug__startswith=slug).delete()
            IngestionJob.objects.filter(book_slug=slug).delete()
        DefaultBook.objects.all().delete()

    committed(delete)
