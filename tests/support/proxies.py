"""nginx and Caddy in front of bookchat, configured exactly as the manual says.

The configurations are read from the manual (``docs/operating/deployment.md``, section ``{#proxy}``): nginx's
server blocks from ``{#nginx}``, the location blocks that replace its own under a sub-path from ``{#sub-path}``, and
Caddy's site blocks from ``{#caddy}``. The tests change only what a machine decides: the ports (the upstream's, and
free loopback ports instead of 80 and 443), the certificate's paths (a self-signed one made for 127.0.0.1), and for
Caddy the site's name (the address the tests connect to) and a certificate given instead of one from an ACME CA.
Each proxy runs as a process of its own, unprivileged ports, everything it writes in the test's folder.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.support.nodes import free_port

MANUAL_PAGE = Path(__file__).resolve().parents[2] / "docs" / "operating" / "deployment.md"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
CADDY = shutil.which("caddy") or "/usr/bin/caddy"
START_SECONDS = 20


class ProxyError(RuntimeError):
    pass


def code_blocks(anchor: str, language: str, page: Path = MANUAL_PAGE) -> list[str]:
    """The ``language`` code blocks of the manual's section ``{#anchor}`` (up to the next heading)."""
    text = page.read_text(encoding="utf-8")
    start = text.index(f"{{#{anchor}}}")
    following = re.search(r"^#{1,6} ", text[start:], re.M)
    section = text[start:start + following.start() if following else None]
    return re.findall(rf"^```{language}\n(.*?)^```", section, re.S | re.M)


def replace_once(text: str, old: str, new: str) -> str:
    """``old`` replaced by ``new``, which must occur exactly once: a manual that changes its snippet is noticed."""
    if text.count(old) != 1:
        raise ProxyError(f"the manual's snippet should contain {old!r} once, it does {text.count(old)} times")
    return text.replace(old, new)


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key (openssl's command line), valid a day."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


def nginx_snippet(*, upstream: int, http: int, https: int, cert: Path, key: Path, sub_path: bool) -> str:
    """The manual's nginx configuration (``{#nginx}``; with ``sub_path``, its location blocks replaced by those of
    ``{#sub-path}``), with this machine's ports and certificate."""
    (snippet,) = code_blocks("nginx", "nginx")
    if sub_path:
        (locations,) = code_blocks("sub-path", "nginx")
        own = re.findall(r"^(?:    #[^\n]*\n)*    location [^\n]*\{\n.*?^    \}\n", snippet, re.S | re.M)
        if len(own) != 2:
            raise ProxyError(f"the manual's nginx snippet should hold two location blocks, it holds {len(own)}")
        snippet = replace_once(snippet, own[0], locations.strip("\n") + "\n")
        snippet = replace_once(snippet, own[1], "")
    for old, new in (("server 127.0.0.1:8000;", f"server 127.0.0.1:{upstream};"),
                     ("listen 80;", f"listen 127.0.0.1:{http};"), ("listen 443 ssl;", f"listen 127.0.0.1:{https} ssl;"),
                     ("/etc/ssl/certs/chat.example.org.pem", str(cert)),
                     ("/etc/ssl/private/chat.example.org.key", str(key))):
        snippet = replace_once(snippet, old, new)
    return snippet


def wait_for_port(port: int, proc: subprocess.Popen, log: Path, name: str) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ProxyError(f"{name} exited ({proc.returncode}):\n{tail(log)}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.1)
    raise ProxyError(f"{name} did not listen on {port} within {START_SECONDS} s:\n{tail(log)}")


def tail(log: Path, lines: int = 30) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


class Proxy:
    """A proxy in front of the server on port ``upstream``, run as a process of its own with everything it writes in
    ``folder``; a context manager. ``http_url`` and ``https_url`` are where it listens, with ``cert`` (made for
    127.0.0.1) on HTTPS. Each proxy writes its configuration (``configure``) and says how it is run (``command``)."""

    name = ""  # the program, as the tests' ``needs`` marker names it
    executable = ""

    def __init__(self, folder: Path, *, upstream: int, sub_path: bool = False):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.cert, self.key = self_signed_certificate(folder)
        self.log = folder / f"{self.name}.log"  # what it prints and logs, shown when it fails to start
        self.proc: subprocess.Popen | None = None
        self.upstream, self.sub_path = upstream, sub_path
        self.take_ports()

    def take_ports(self) -> None:
        self.http, self.https = free_port(), free_port()
        self.http_url, self.https_url = f"http://127.0.0.1:{self.http}", f"https://127.0.0.1:{self.https}"
        self.configure(upstream=self.upstream, sub_path=self.sub_path)

    def configure(self, *, upstream: int, sub_path: bool) -> None:
        raise NotImplementedError

    def command(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str] | None:
        return None  # the tests' own

    def __enter__(self) -> Proxy:
        if not Path(self.executable).exists():
            from tests.conftest import require

            require(self.name)
        for attempt in range(3):
            with self.log.open("ab") as out:
                self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                             env=self.environment(), start_new_session=True)
            try:
                for port in (self.https, self.http):
                    wait_for_port(port, self.proc, self.log, self.name)
                return self
            except ProxyError as error:
                stop(self.proc)
                # Another program took a port between free_port() and the proxy's start: new ports, once more.
                if attempt == 2 or "address already in use" not in str(error).lower():
                    raise
                self.take_ports()
        raise AssertionError("unreachable")

    def __exit__(self, *exc) -> None:
        stop(self.proc)


class Nginx(Proxy):
    """nginx (``nginx -p FOLDER -c CONF -g 'daemon off;'``) with the manual's configuration."""

    name, executable = "nginx", NGINX

    def configure(self, *, upstream: int, sub_path: bool) -> None:
        snippet = nginx_snippet(upstream=upstream, http=self.http, https=self.https, cert=self.cert, key=self.key,
                                sub_path=sub_path)
        temp = "\n".join(f"    {kind}_temp_path {self.folder / kind};" for kind in
                         ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        # What a distribution's nginx.conf holds around the site's file: here, everything in the folder.
        (self.folder / "nginx.conf").write_text(
            ("user root;\n" if os.geteuid() == 0 else "") +
            f"pid {self.folder / 'nginx.pid'};\nerror_log {self.log} warn;\nevents {{}}\n"
            f"http {{\n    access_log off;\n{temp}\n\n{snippet}}}\n", encoding="utf-8")

    def command(self) -> list[str]:
        return [self.executable, "-p", str(self.folder), "-e", str(self.log), "-c", str(self.folder / "nginx.conf"),
                "-g", "daemon off;"]


def caddy_snippet(*, upstream: int, sub_path: bool) -> str:
    """The manual's Caddyfile (``{#caddy}``: the first block at the root, the second under a sub-path), with the
    upstream's port and the site named by the address the tests connect to."""
    blocks = code_blocks("caddy", "caddyfile")
    if len(blocks) != 2:
        raise ProxyError(f"the manual's Caddy section should hold two caddyfile blocks, it holds {len(blocks)}")
    snippet = blocks[1 if sub_path else 0]
    snippet = replace_once(snippet, "reverse_proxy 127.0.0.1:8000", f"reverse_proxy 127.0.0.1:{upstream}")
    return replace_once(snippet, "www.example.org {" if sub_path else "chat.example.org {", "127.0.0.1 {")


class Caddy(Proxy):
    """Caddy (``caddy run``) with the manual's Caddyfile. What the tests add around the snippet: the ports, a
    certificate file instead of an ACME CA, no admin endpoint, and its state in the folder."""

    name, executable = "caddy", CADDY

    def configure(self, *, upstream: int, sub_path: bool) -> None:
        snippet = caddy_snippet(upstream=upstream, sub_path=sub_path)
        snippet = replace_once(snippet, "127.0.0.1 {\n", f"127.0.0.1 {{\n    tls {self.cert} {self.key}\n")
        (self.folder / "Caddyfile").write_text(
            f"{{\n    admin off\n    http_port {self.http}\n    https_port {self.https}\n    skip_install_trust\n"
            f"    storage file_system {self.folder / 'storage'}\n}}\n\n{snippet}", encoding="utf-8")

    def command(self) -> list[str]:
        return [self.executable, "run", "--config", str(self.folder / "Caddyfile"), "--adapter", "caddyfile"]

    def environment(self) -> dict[str, str]:
        return os.environ | {"HOME": str(self.folder), "XDG_DATA_HOME": str(self.folder / "data"),
                             "XDG_CONFIG_HOME": str(self.folder / "config")}
