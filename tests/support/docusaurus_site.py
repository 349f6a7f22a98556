"""A real Docusaurus 3 site for tests (the "Field Handbook"), built once and cached, and a checker that a public
URL (page and #fragment) exists in its build the way a static host would serve it.

Decisions:
- The recipe: scaffold ``create-docusaurus@3.10.2 classic --javascript``, copy ``field_handbook/before-version``
  over it (config, a ``Step`` component, five docs pages, a partial), ``npm install``, ``docs:version 1.0``, copy
  ``field_handbook/after-version`` (one page changed and one added in current, French pages), ``docusaurus build``.
  So 1.0 is served at /handbook/docs/…, current at /handbook/docs/next/…, French under /handbook/fr/….
- The template's ``future.v4`` and ``@docusaurus/faster`` stay: npm 11 skips ``@swc/core``'s postinstall, but
  that only checks the native binding (an optional dependency, installed), and the Rspack build of both locales
  takes ~10 s. ``future.v4`` does turn off the ``## Title {#custom-id}`` syntax (the build fails: "Could not parse
  expression with acorn"), so the config turns ``markdown.mdx1Compat.headingIds`` back on.
- Links to a page translated in some locale or version are written from the docs root (``reference/equipment.md``),
  others as ``./``/``../``: Docusaurus resolves ``./x.md`` only beside the file it is in, so an untranslated
  English page linking ``./`` to a translated one breaks the French build (``onBrokenLinks: 'throw'``).
- Cached outside the checkout, like the LLM wheels and the base images (``BOOKCHAT_TEST_CACHE``, else
  ``$XDG_CACHE_HOME/bookchat``, else ``~/.cache/bookchat``), in ``docusaurus-site-<key>``, ``<key>`` a hash of
  RECIPE_VERSION, the pinned version and the recipe files (bump RECIPE_VERSION when changing the steps): every clone
  on a machine reuses one build, so a fresh clone's CI doesn't spend a minute on npm. Built in ``…-<key>.partial``
  and renamed into place, under a file lock so parallel sessions build once; older keys are removed first. npm's
  cache stays in ``npm/`` beside it: a cold build takes ~85 s (npm install 70 s), a rebuild after a recipe change
  ~40 s.
  Transitive npm versions are not pinned (the template has no lockfile): a rebuild may get newer ones.

Stdlib only, so ``.ci/run`` pre-warms the cache with the system python3: ``python3 tests/support/docusaurus_site.py``.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

RECIPE_VERSION = 1
CREATE_DOCUSAURUS = "create-docusaurus@3.10.2"
SITE_URL = "https://handbook.example.org/handbook/"  # the config's url + baseUrl
RECIPE = Path(__file__).resolve().parent / "field_handbook"
REPO = next(p for p in Path(__file__).resolve().parents if (p / "manage.py").is_file())
STEP_TIMEOUT = 900  # seconds; npm install takes ~70 s cold here


class SiteBuildError(RuntimeError):
    """A step of the recipe failed; the message names it and ends with the tail of its output."""


def unavailable_reason() -> str | None:
    """Why the site can't be built here (None when it can)."""
    missing = [tool for tool in ("node", "npm", "npx") if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not found on PATH: the Docusaurus test site needs Node.js 20+ with npm"
    return None


def recipe_key() -> str:
    digest = hashlib.sha256(f"{RECIPE_VERSION}\n{CREATE_DOCUSAURUS}\n".encode())
    for path in sorted(p for p in RECIPE.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(RECIPE).as_posix()}\n".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def default_cache_root() -> Path:
    """Where the built site is kept when the caller names no folder: shared by every clone on the machine."""
    if os.environ.get("BOOKCHAT_TEST_CACHE"):
        return Path(os.environ["BOOKCHAT_TEST_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bookchat"


def _final(cache_root: Path | None) -> Path:
    return (cache_root or default_cache_root()).resolve() / f"docusaurus-site-{recipe_key()}"


def _built(final: Path) -> bool:
    return (final / "build" / "index.html").is_file()


def is_built(cache_root: Path | None = None) -> bool:
    """Whether the cache holds this recipe's built site."""
    return _built(_final(cache_root))


def site(cache_root: Path | None = None) -> Path:
    """The root of the built site (its output in ``build/``), building it when the cache lacks this recipe."""
    final = _final(cache_root)
    cache_root = final.parent
    if _built(final):
        return final
    cache_root.mkdir(parents=True, exist_ok=True)
    with open(cache_root / "docusaurus-site.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _built(final):
            for stale in cache_root.glob("docusaurus-site-*"):  # older recipes' sites, interrupted builds
                if stale.is_dir():
                    shutil.rmtree(stale)
            _build(final, npm_cache=cache_root / "npm")
    return final


def _build(final: Path, npm_cache: Path) -> None:
    partial = final.with_name(final.name + ".partial")
    partial.mkdir()
    npm_flags = ["--cache", str(npm_cache), "--prefer-offline"]
    _run("scaffold", ["npx", "--yes", *npm_flags, CREATE_DOCUSAURUS, "site", "classic", "--javascript",
                      "--skip-install"], cwd=partial)
    root = partial / "site"
    shutil.rmtree(root / "docs")
    shutil.rmtree(root / "blog")
    shutil.copytree(RECIPE / "before-version", root, dirs_exist_ok=True)
    _run("npm install", ["npm", "install", "--no-audit", "--no-fund", *npm_flags], cwd=root)
    docusaurus = str(root / "node_modules" / ".bin" / "docusaurus")
    _run("docs:version 1.0", [docusaurus, "docs:version", "1.0"], cwd=root)
    shutil.copytree(RECIPE / "after-version", root, dirs_exist_ok=True)
    _run("docusaurus build", [docusaurus, "build"], cwd=root)
    root.rename(final)
    shutil.rmtree(partial)


def _run(step: str, command: list[str], cwd: Path) -> None:
    started = time.monotonic()
    env = os.environ | {"npm_config_update_notifier": "false"}
    try:
        done = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=STEP_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SiteBuildError(f"Docusaurus test site: step '{step}' failed in {cwd}: {exc}") from exc
    if done.returncode != 0:
        tail = "\n".join(done.stdout.splitlines()[-40:])
        raise SiteBuildError(f"Docusaurus test site: step '{step}' exited with {done.returncode} in {cwd}:\n{tail}")
    print(f"docusaurus site: {step} took {time.monotonic() - started:.1f} s", file=sys.stderr)


def page_for(url: str, build: Path, site_url: str) -> Path | None:
    """The file of ``build`` a static host serves for ``url`` (``path/index.html``, ``path.html`` or ``path``)."""
    rel = _site_path(url, site_url)
    if rel is None or rel.startswith("/") or ".." in rel.split("/"):
        return None
    folder = rel == "" or rel.endswith("/")
    candidates = [rel + "index.html"] if folder else [rel + "/index.html", rel + ".html", rel]
    return next((build / c for c in candidates if (build / c).is_file()), None)


def anchors(html_file: Path) -> frozenset[str]:
    """Every ``id`` attribute value in ``html_file`` (parsed once per file and modification time)."""
    return _ids(html_file.resolve(), html_file.stat().st_mtime_ns)


def check_url(url: str, build: Path, site_url: str) -> str | None:
    """None when the page of ``url`` is in ``build`` and its fragment (if any) is an id in it, else why not."""
    if _site_path(url, site_url) is None:
        return f"{url} is not under {site_url}"
    page = page_for(url, build, site_url)
    if page is None:
        return f"{url}: no page in {build} serves it"
    fragment = unquote(urlsplit(url).fragment)
    if fragment and fragment not in anchors(page):
        return f"{url}: no id {fragment!r} in {page.relative_to(build)}"
    return None


def _site_path(url: str, site_url: str) -> str | None:
    """The decoded path of ``url`` below ``site_url`` ("" for its home page), or None when outside it."""
    parts, base = urlsplit(url), urlsplit(site_url)
    base_path = base.path.rstrip("/") + "/"
    path = parts.path + "/" if parts.path + "/" == base_path else parts.path
    if (parts.scheme, parts.netloc) != (base.scheme, base.netloc) or not path.startswith(base_path):
        return None
    return unquote(path.removeprefix(base_path))


class _IdCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids.update(value for name, value in attrs if name == "id" and value)


@functools.lru_cache(maxsize=4096)
def _ids(path: Path, mtime_ns: int) -> frozenset[str]:
    collector = _IdCollector()
    collector.feed(path.read_text(encoding="utf-8"))
    collector.close()
    return frozenset(collector.ids)


def main() -> int:
    reason = unavailable_reason()
    if reason:
        print(f"docusaurus site: cannot build here: {reason}", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        root = site()
    except SiteBuildError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"{root} ({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
