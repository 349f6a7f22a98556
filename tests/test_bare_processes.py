"""The bare-processes how-to (docs/operating/deployment.md, "Bare processes: one machine") followed as written, on
this machine: every command of its numbered steps is either run, with the substitutions a test needs (the table
below), or named in NOT_RUN with why; a command the page gains that is neither fails here. The settings are the
shipped ``deploy/bare/bookchat.env``, the service is the shipped unit's ``ExecStart`` run with its
``WorkingDirectory`` and ``EnvironmentFile`` as systemd would, on an embedded database of its own; the page's
smoke test must answer, the page must answer as the proxy in front would ask, and SIGTERM (what ``systemctl stop``
sends) must stop it. "Your own PostgreSQL" is the session's test database, with the manual already indexed (so
``bootstrap`` finds it unchanged). A drill (``make drills``): it starts a whole ``serve``."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from django.utils import timezone

from bench.latency import database_environment
from ingestion.models import IngestionJob
from tests.conftest import REPO, VECTOR_CACHE, committed
from tests.support import howto
from tests.support.nodes import free_port

pytestmark = [pytest.mark.django_db, pytest.mark.slow, pytest.mark.drill]

PAGE = howto.DEPLOYMENT
BARE = REPO / "deploy" / "bare"
# Commands of the steps that this machine can't or needn't run, by how they start, with why.
NOT_RUN = {
    "apt-get install": "the packages: .ci/run installs what the suite needs",
    "useradd": "the service's user: the test runs as whoever runs the suite",
    "git clone": "the checkout is this one",
    "python3 -m venv": "the .venv that make made",
    ".venv/bin/pip install -e .": "installed by make",
    "install -d": "/etc/bookchat is a folder of the test's own (SUBSTITUTE)",
    "install -m 640 -g bookchat deploy/bare/bookchat.env": "the settings file is copied with SUBSTITUTE applied",
    "chgrp bookchat": "no bookchat group here",
    "install -m 644 deploy/bare/bookchat.service": "no systemd here: the unit's ExecStart is run as systemd would",
    "systemctl": "no systemd here",
    "curl -fsS https://chat.example.org": "DNS and a certificate: nginx in front is tests/test_proxy.py's",
}


def substitutions(root: Path, port: int, database_url: str) -> dict[str, str]:
    """What a reader's host has that a test's doesn't: paths of the test's own, its port, no other user, and the
    session's database as "your own PostgreSQL"."""
    return {"/etc/bookchat": str(root / "etc"), "/var/lib/bookchat": str(root / "data"), "/opt/bookchat": str(REPO),
            "runuser -u bookchat -- ": "", "127.0.0.1:8000": f"127.0.0.1:{port}", "--port 8000": f"--port {port}",
            "# DATABASE_URL=postgresql://bookchat:PASSWORD@db.example.org/bookchat": f"DATABASE_URL={database_url}"}


# Settings a test adds to the shipped file: the vectors the sessions kept (the manual indexes in seconds), and no
# sentence vectors (minutes of embedding that this drill doesn't look at).
TEST_SETTINGS = {"BOOKCHAT_EMBEDDING_CACHE": str(VECTOR_CACHE), "BOOKCHAT_SENTENCE_VECTORS": "off"}


def step_commands() -> list[str]:
    """The commands of the section's fenced blocks (its steps; "Running it" names commands only in the prose),
    those chained with ``&&`` taken one by one."""
    return [part.strip() for line in howto.commands(PAGE, "one-machine") if line.fenced
            for part in line.text.split(" && ")]


def apply(text: str, table: dict[str, str]) -> str:
    for old, new in table.items():
        text = text.replace(old, new)
    return text


def unit(path: Path) -> dict[str, str]:
    """The ``[Service]`` keys of a systemd unit (the ones this drill reads occur once)."""
    service = path.read_text().split("[Service]", 1)[1].split("\n[", 1)[0]
    return dict(line.split("=", 1) for line in service.splitlines() if "=" in line and not line.startswith("#"))


def environment_file(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines()
                if "=" in line and not line.lstrip().startswith("#"))


def run(command: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run(["bash", "-c", command], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{command!r} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def test_the_page_names_what_it_leaves_out_and_nothing_else():
    commands = step_commands()
    assert commands, "the how-to's steps have no commands"
    for prefix in NOT_RUN:
        assert any(command.startswith(prefix) for command in commands), f"NOT_RUN names {prefix!r}: no step runs it"


def test_the_how_to_runs_as_written_from_settings_to_smoke_test(tmp_path, manual_book, django_db_blocker):
    port = free_port()
    with django_db_blocker.unblock():
        database_url = database_environment()["DATABASE_URL"]
    table = substitutions(tmp_path, port, database_url)
    (tmp_path / "etc").mkdir()
    (tmp_path / "data").mkdir()
    env_file = tmp_path / "etc" / "bookchat.env"
    settings = apply((BARE / "bookchat.env").read_text(), table)
    assert f"DATABASE_URL={database_url}" in settings, "the shipped file's DATABASE_URL line moved"
    env_file.write_text(settings + "".join(f"{name}={value}\n" for name, value in TEST_SETTINGS.items()))
    base = {name: value for name, value in os.environ.items()
            if not name.startswith(("BOOKCHAT_", "DJANGO_")) and name != "DATABASE_URL"}
    shell = base | {"BOOKCHAT_ENV_FILE": str(env_file)}
    service = unit(BARE / "bookchat.service")
    assert apply(service["EnvironmentFile"], table) == str(env_file)
    process, started = None, timezone.now()
    try:
        for command in step_commands():
            if command.startswith(tuple(NOT_RUN)):
                continue
            if "/api/v1/ready" in command:  # the smoke test, once the service runs
                process = process or start(service, table, base | environment_file(env_file), tmp_path)
                wait_ready(port, process, tmp_path)
            run(apply(command, table), shell)
        assert process is not None, "the steps never reached the smoke test"
        as_the_proxy_asks(port)
        process.send_signal(signal.SIGTERM)  # systemctl stop, KillMode=mixed: the main process first
        assert process.wait(timeout=60) == 0, (tmp_path / "service.log").read_text()[-3000:]
    finally:
        if process and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        # The manual's indexing runs (bootstrap's, the service's): the drills after this one count their own.
        committed(lambda: IngestionJob.objects.filter(created_at__gte=started).delete())


def start(service: dict[str, str], table: dict[str, str], env: dict[str, str], root: Path) -> subprocess.Popen:
    """The unit's ExecStart in its WorkingDirectory with its EnvironmentFile, as systemd starts it."""
    argv = shlex.split(apply(service["ExecStart"], table))
    assert argv[0] == str(REPO / ".venv" / "bin" / "python"), argv
    argv[0] = sys.executable  # the same interpreter, however the suite was started
    log = open(root / "service.log", "w")  # noqa: SIM115 (the service writes it until it stops)
    return subprocess.Popen(argv, cwd=apply(service["WorkingDirectory"], table), env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def wait_ready(port: int, process: subprocess.Popen, root: Path, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, (root / "service.log").read_text()[-3000:]
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v1/ready", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError("the service was not ready:\n" + (root / "service.log").read_text()[-3000:])


def as_the_proxy_asks(port: int) -> None:
    """The page and a refusal of plain HTTP, as nginx in front would pass requests on (Host, X-Forwarded-*)."""
    proxied = {"Host": "chat.example.org", "X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.7"}
    page = httpx.get(f"http://127.0.0.1:{port}/", headers=proxied, timeout=30)
    assert page.status_code == 200 and 'name="question"' in page.text, (page.status_code, page.text[:500])
    assert "Secure" in page.headers.get("set-cookie", "Secure"), "cookies are secure-only behind HTTPS"
    plain = httpx.get(f"http://127.0.0.1:{port}/", headers=proxied | {"X-Forwarded-Proto": "http"}, timeout=30)
    assert plain.status_code == 301 and plain.headers["location"].startswith("https://chat.example.org/")
    other = httpx.get(f"http://127.0.0.1:{port}/", headers=proxied | {"Host": "evil.example.net"}, timeout=30)
    assert other.status_code == 400, "a host not in BOOKCHAT_ALLOWED_HOSTS"
