"""What the real-browser tests run against: bookchat on a live WSGI server in this process (on the test
database, so it sees the committed test corpora), a static "docs site" on another port (another origin)
that embeds the widget, and Debian's Chromium driven by Playwright (never a downloaded browser)."""

from __future__ import annotations

import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CHROMIUM = os.environ.get("BOOKCHAT_CHROMIUM", "/usr/bin/chromium")
# Flags for a headless Chromium on a machine without network: no sandbox (CI runs as root), no background
# connections (they are refused here, many at a time), no first-run work.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
DOCS_PAGE = Path(__file__).resolve().parent / "docs_site" / "index.html"


def chromium() -> str:
    """The Chromium binary (the "browser" group of ``NEEDS`` in tests/conftest.py: missing, the session stops
    before it starts, unless BOOKCHAT_TEST_SKIP names the group)."""
    if not Path(CHROMIUM).exists():
        from tests.conftest import require  # conftest imports this module

        require("browser")
    return CHROMIUM


class _Served:
    """A server (``self.httpd``) run on a daemon thread for the length of a ``with`` block."""

    httpd = None

    def __enter__(self):
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class LiveServer(_Served):
    """bookchat's WSGI application served on 127.0.0.1 by Django's threaded server (one thread per request;
    each closes its database connection when the request ends)."""

    def __init__(self) -> None:
        from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
        from django.core.wsgi import get_wsgi_application

        class QuietHandler(WSGIRequestHandler):
            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadedWSGIServer(("127.0.0.1", 0), QuietHandler, allow_reuse_address=False)
        self.httpd.set_app(get_wsgi_application())
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"


class StaticHandler(BaseHTTPRequestHandler):
    """A static site's handler, quiet."""

    def log_message(self, *args) -> None:
        pass


def send(handler: BaseHTTPRequestHandler, body: bytes, content_type: str) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class DocsSite(_Served):
    """A static page that looks like a built Docusaurus page and embeds the widget with ``key`` and ``book``;
    every path serves it, so citation links into the site land on a page. Requests are recorded."""

    def __init__(self, widget_src: str) -> None:
        self.widget_src = widget_src
        self.key = ""
        self.book = ""
        self.widget_attributes = ""  # more of the script tag's attributes, e.g. ' data-search="replace"'
        site = self

        class Handler(StaticHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                html = (DOCS_PAGE.read_text(encoding="utf-8").replace("{{WIDGET_SRC}}", site.widget_src)
                        .replace("{{KEY}}", site.key).replace("{{BOOK}}", site.book)
                        .replace("{{WIDGET_ATTRS}}", site.widget_attributes)).encode()
                send(self, html, "text/html; charset=utf-8")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.httpd.server_port}"

    def page_url(self, path: str = "/using/ingest") -> str:
        return self.origin + path


class BuiltSite(_Served):
    """A built static site (a real ``docusaurus build`` folder) served under its base path, each HTML page with the
    widget's script tag (``self.attributes``: its data-* attributes, set once the origin is known) added before
    ``</body>``, as a site's ``scripts`` config entry would load it."""

    TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css",
             ".svg": "image/svg+xml", ".png": "image/png", ".json": "application/json", ".ico": "image/x-icon"}

    def __init__(self, build: Path, base_path: str, widget_src: str) -> None:
        self.attributes = ""
        site = self

        class Handler(StaticHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                path = self.path.split("?", 1)[0].split("#", 1)[0]
                relative = path[len(base_path):] if path.startswith(base_path) else None
                target = (build / relative) if relative is not None else None
                if target is not None and target.is_dir():
                    target = target / "index.html"
                elif target is not None and not target.exists() and target.with_suffix(".html").is_file():
                    target = target.with_suffix(".html")
                if target is None or not target.is_file() or build.resolve() not in target.resolve().parents:
                    self.send_error(404)
                    return
                body = target.read_bytes()
                if target.suffix == ".html":
                    tag = f'<script src="{widget_src}" {site.attributes} async></script></body>'
                    body = body.replace(b"</body>", tag.encode(), 1)
                send(self, body, site.TYPES.get(target.suffix, "application/octet-stream"))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.httpd.server_port}"


class ConsoleErrors(list):
    """Console errors and uncaught exceptions of a page, collected as they happen."""

    def watch(self, page) -> None:
        page.on("console", lambda message: message.type == "error"
                and self.append(f"{message.text} [{message.location.get('url', '')}]"))
        page.on("pageerror", lambda error: self.append(f"uncaught: {error}"))
