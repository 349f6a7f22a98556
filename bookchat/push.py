"""``manage.py push ROOT --server URL --book SLUG`` (also ``bookchat push``): publish a book's sources to a bookchat
server from a machine that has bookchat installed (a CI job, an author's laptop), as the manual's CI recipes do with
``tar`` and ``curl``.

It packs ROOT (the site's root: the folder with ``docusaurus.config.*``, ``book.toml`` or ``mkdocs.yml``, or a
folder of Markdown) into a ``.tar.gz`` without what is never a source (``.git``, ``node_modules``, build caches and
the generator's output folder), posts it with the key in ``BOOKCHAT_PUBLISH_KEY``, then follows the sync to its end
(a progress line on a terminal). When ROOT is in a git checkout, the commit and ROOT's folder in the repository go
with it (the record names the commit; the errors name files as the repository does).

Output: the sync's report as the server writes it for a CI log (``file:line: error: …``), or its JSON with
``--json``. Exit status: 0 done
without page errors; 1 done with page errors (0 with ``--allow-errors``); 2 the sync failed, the server refused the
publish, or the options are wrong. A server busy with another sync of the book (409) is asked again until
``--busy-wait`` seconds have passed.

Runs without Django's settings (``manage.py`` and ``bookchat`` call ``main`` before loading them), so it never
starts the embedded database.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

KEY_VARIABLE = "BOOKCHAT_PUBLISH_KEY"
# Folders never packed, wherever they are: version control, dependencies, caches.
NEVER_PACKED = frozenset({".git", ".hg", ".svn", "node_modules", ".docusaurus", ".cache", "__pycache__", ".venv"})
# The generators' output folders, at the root, by the config that makes them.
OUTPUT_FOLDERS = {"docusaurus.config.js": "build", "docusaurus.config.ts": "build", "docusaurus.config.mjs": "build",
                  "docusaurus.config.cjs": "build", "docusaurus.config.mts": "build", "docusaurus.config.cts": "build",
                  "book.toml": "book", "mkdocs.yml": "site", "mkdocs.yaml": "site"}
POLL_SECONDS = 30  # each status request waits this long for the sync to end
TIMEOUT = 120.0


class PushError(Exception):
    """A publish that can't be made: the message says why; exit status 2."""


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(prog="manage.py push", description=DESCRIPTION)
    add_arguments(parse)
    return parse


DESCRIPTION = ("Publish a book's sources to a bookchat server (POST /api/v1/books/SLUG/sources) and follow the sync. "
               f"The publishing key is read from {KEY_VARIABLE}.")


def add_arguments(parse: argparse.ArgumentParser) -> None:
    parse.add_argument("root", metavar="ROOT", help="The site's root: the folder with docusaurus.config.*, book.toml "
                       "or mkdocs.yml, or a folder of Markdown.")
    parse.add_argument("--server", required=True, metavar="URL", help="The bookchat server, like "
                       "https://chat.example.org (its API is under /api/v1/).")
    parse.add_argument("--book", required=True, metavar="SLUG", help="The book to publish (the key must publish it).")
    parse.add_argument("--dry-run", action="store_true", help="Only check the sources and say what would change.")
    parse.add_argument("--allow-errors", action="store_true", help="Exit 0 though some pages could not be indexed.")
    parse.add_argument("--language", help="What the pages are written in, a BCP 47 tag (es, zh, pt-BR); the server "
                       "checks it (default: the site's config, else the book's stored language, else en).")
    parse.add_argument("--revision", help="What is published, for the record (default: the git commit of ROOT).")
    parse.add_argument("--busy-wait", type=float, default=600, metavar="SECONDS", help="How long to keep asking "
                       "while another sync of the book runs (default 600).")
    parse.add_argument("--json", action="store_true", help="Print the sync as JSON.")


def main(argv: list[str] | None = None) -> int:
    try:
        options = parser().parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    return run(options, stdout=sys.stdout, stderr=sys.stderr)


def run(options: argparse.Namespace, *, stdout, stderr) -> int:
    """Publish as ``options`` say; the exit status."""
    try:
        sync = push(options, stderr=stderr)
    except PushError as exc:
        if options.json:
            stdout.write(json.dumps({"error": "push_failed", "message": str(exc)}) + "\n")
        else:
            stderr.write(f"push: {exc}\n")
        return 2
    text = sync.pop("text")
    stdout.write(json.dumps(sync, ensure_ascii=False) + "\n" if options.json else text)
    if sync["status"] != "done":
        return 2
    errors = (sync.get("report") or {}).get("errors") or []
    return 1 if errors and not options.allow_errors else 0


def push(options: argparse.Namespace, *, stderr) -> dict:
    """Pack, post and follow; the sync as the server reports it at its end (with ``text``, its report for a log),
    or PushError."""
    import httpx  # a dependency of bookchat's (through openai); imported here to keep --help fast

    key = os.environ.get(KEY_VARIABLE, "").strip()
    if not key:
        raise PushError(f"set {KEY_VARIABLE} to the book's publishing key (manage.py apikey create --kind secret "
                        f"--publish {options.book})")
    root = Path(options.root).expanduser()
    if not root.is_dir():
        raise PushError(f"{root} is not a folder")
    revision, source_dir = options.revision or git_revision(root), git_prefix(root)
    progress = Progress(stderr)
    with tempfile.TemporaryDirectory(prefix="bookchat-push-") as scratch:
        archive = Path(scratch) / "book.tar.gz"
        count = pack(root, archive)
        progress.note(f"packed {count} files of {root} ({archive.stat().st_size:,} bytes)")
        url = f"{options.server.rstrip('/')}/api/v1/books/{options.book}/sources"
        params = {"dry_run": "true" if options.dry_run else "false", "revision": revision or "",
                  "source_dir": source_dir or "", "language": options.language or ""}
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/gzip"}
        body = archive.read_bytes()
        with httpx.Client(timeout=TIMEOUT) as client:
            accepted = _post(client, url, params={k: v for k, v in params.items() if v}, headers=headers, body=body,
                             busy_wait=options.busy_wait, progress=progress)
            status_url = accepted["status_url"]
            progress.note(f"sync {accepted['sync']} queued: {status_url}")
            while True:
                sync = _json(_request(client, "GET", status_url, params={"wait": POLL_SECONDS}, headers=headers))
                if sync["status"] in ("done", "failed"):
                    progress.close()
                    text = _request(client, "GET", status_url, params={"output": "text"}, headers=headers)
                    return {**sync, "text": text.text}
                progress.show(sync)


def _post(client, url: str, *, params: dict, headers: dict, body: bytes, busy_wait: float, progress) -> dict:
    deadline = time.monotonic() + busy_wait
    while True:
        response = _request(client, "POST", url, params=params, headers=headers, content=body)
        if response.status_code == 202:
            return response.json()
        if response.status_code == 409 and time.monotonic() < deadline:
            wait = min(float(response.headers.get("Retry-After") or 10), max(1.0, deadline - time.monotonic()))
            progress.note(f"another sync of the book is under way; asking again in {wait:.0f} s")
            time.sleep(wait)
            continue
        raise PushError(_refusal(response))


def _request(client, method: str, url: str, **kwargs):
    import httpx

    try:
        return client.request(method, url, **kwargs)
    except httpx.HTTPError as exc:
        raise PushError(f"cannot reach {url}: {exc}") from None


def _json(response) -> dict:
    if response.status_code != 200:
        raise PushError(_refusal(response))
    return response.json()


def _refusal(response) -> str:
    try:
        body = response.json()
        return f"the server refused ({response.status_code} {body.get('error')}): {body.get('message')}"
    except ValueError:
        return f"the server answered {response.status_code}: {response.text[:300]}"


def pack(root: Path, archive: Path) -> int:
    """Write ROOT's sources to ``archive`` (a .tar.gz, paths relative to ROOT); how many files went in."""
    output = {folder for config, folder in OUTPUT_FOLDERS.items() if (root / config).is_file()}
    count = 0
    with tarfile.open(archive, "w:gz") as tar:
        for folder, dirnames, filenames in os.walk(root):
            here = Path(folder)
            relative = here.relative_to(root)
            dirnames[:] = sorted(name for name in dirnames if name not in NEVER_PACKED
                                 and not (relative == Path(".") and name in output))
            for name in sorted(filenames):
                path = here / name
                tar.add(path, arcname=(relative / name).as_posix(), recursive=False)
                count += 1
    return count


def git_revision(root: Path) -> str | None:
    return _git(root, "rev-parse", "HEAD")


def git_prefix(root: Path) -> str | None:
    """ROOT's folder in its git repository ("" at the top), or None outside one."""
    prefix = _git(root, "rev-parse", "--show-prefix")
    return prefix.strip("/") if prefix is not None else None


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


class Progress:
    """Notes and a one-line progress display on stderr; only the notes when it is not a terminal."""

    def __init__(self, stream):
        self.stream = stream
        self.tty = stream.isatty()
        self.drawn = False

    def note(self, text: str) -> None:
        self.close()
        self.stream.write(text + "\n")
        self.stream.flush()

    def show(self, sync: dict) -> None:
        progress = sync.get("progress") or {}
        line = f"sync {sync['sync']}: {sync['status']}; {sync.get('stage') or ''}"
        if progress.get("files_total"):
            line += f" [{progress['files_done']}/{progress['files_total']} pages]"
        if self.tty:
            self.stream.write("\r" + line[:100].ljust(100))
            self.drawn = True
        self.stream.flush()

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\r" + " " * 100 + "\r")
            self.drawn = False


if __name__ == "__main__":
    sys.exit(main())
