"""The embedded PostgreSQL: one server shared by processes, long checkout paths, recovery after a crash,
``manage.py mcp`` stopping the server it started, and DATABASE_URL taking over. Each scenario runs in a
subprocess, as separate bookchat processes would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import psycopg
import pytest

from bookchat.base.embedded_db import server_running
from tests.conftest import REPO

START = """
import json, sys
from pathlib import Path
from bookchat.base import embedded_db
db = embedded_db.ensure_running(Path(sys.argv[1]))
pid = int((db.pgdata / "postmaster.pid").read_text().split()[0])
print(json.dumps({"socket_dir": str(db.socket_dir), "pid": pid, "started_here": embedded_db.started_here}))
"""


def start(data_dir: Path) -> dict:
    result = subprocess.run([sys.executable, "-c", START, str(data_dir)], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def stop(data_dir: Path) -> None:
    code = ("import sys; from pathlib import Path; from bookchat.base import embedded_db; "
            "embedded_db.stop(Path(sys.argv[1]))")
    subprocess.run([sys.executable, "-c", code, str(data_dir)], cwd=REPO, check=True, timeout=60)


def query(socket_dir: str, sql: str):
    with psycopg.connect(host=socket_dir, user="postgres", dbname="bookchat", connect_timeout=5) as conn:
        return conn.execute(sql).fetchone()


@pytest.mark.slow
@pytest.mark.drill  # kills the server: make drills
def test_server_is_shared_survives_a_crash_and_starts_from_a_long_path(tmp_path):
    data_dir = tmp_path / ("a-checkout-folder-with-a-rather-long-name-" * 3) / "var"
    assert len(str(data_dir / "pgdata" / ".s.PGSQL.5432")) > 107, "the path must be too long for a socket"
    data_dir.mkdir(parents=True)
    try:
        first = start(data_dir)
        assert first["started_here"] is True
        assert len(first["socket_dir"] + "/.s.PGSQL.5432") <= 107
        assert query(first["socket_dir"], "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'") == (1,)

        second = start(data_dir)
        assert second["pid"] == first["pid"] and second["started_here"] is False, "one server, reused"

        # A crash: the postmaster and its children die without cleaning up postmaster.pid.
        postmaster = psutil.Process(first["pid"])
        children = postmaster.children(recursive=True)
        postmaster.send_signal(signal.SIGKILL)
        psutil.wait_procs([postmaster, *children], timeout=30)
        for child in children:
            if child.is_running():
                child.kill()
        assert (data_dir / "pgdata" / "postmaster.pid").exists()
        third = start(data_dir)
        assert third["pid"] != first["pid"] and third["started_here"] is True
        assert query(third["socket_dir"], "SELECT 1") == (1,)

        # A stale postmaster.pid whose pid now belongs to another, live process.
        stop(data_dir)
        sleeper = subprocess.Popen(["sleep", "60"])
        try:
            lines = [str(sleeper.pid), str(data_dir / "pgdata"), str(int(time.time())), "5432", third["socket_dir"],
                     "", "0 0", "ready"]
            (data_dir / "pgdata" / "postmaster.pid").write_text("\n".join(lines) + "\n")
            fourth = start(data_dir)
            assert fourth["pid"] != sleeper.pid
            assert query(fourth["socket_dir"], "SELECT 1") == (1,)
        finally:
            sleeper.kill()

        # An assistant starts `manage.py mcp` and closes it: a server that process found running (make run's)
        # keeps running; one it started itself must not outlive it, as nobody else would stop it.
        ended = mcp(data_dir)
        assert ended.returncode == 1 and "mcp: the database is unavailable" in ended.stderr, "no tables here"
        assert "stopped the embedded" not in ended.stderr and query(fourth["socket_dir"], "SELECT 1") == (1,)
        stop(data_dir)
        ended = mcp(data_dir)
        assert ended.returncode == 1 and "stopped the embedded PostgreSQL it had started" in ended.stderr
        assert not server_running((data_dir / "pgdata").resolve())
    finally:
        stop(data_dir)


def mcp(data_dir: Path) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"} | {
        "BOOKCHAT_DATA_DIR": str(data_dir)}
    return subprocess.run([sys.executable, "manage.py", "mcp"], cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=180)


def test_database_url_is_used_and_no_server_is_started(tmp_path, settings):
    db = settings.DATABASES["default"]
    url = f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}" if db["HOST"].startswith("/") else \
        f"postgresql://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"
    code = ("import django, json; django.setup(); from django.db import connection; "
            "from bookchat.base import embedded_db; connection.ensure_connection(); "
            "print(json.dumps([connection.settings_dict['NAME'], embedded_db.started_here]))")
    env = os.environ | {"DATABASE_URL": url, "BOOKCHAT_DATA_DIR": str(tmp_path / "data"),
                        "DJANGO_SETTINGS_MODULE": "bookchat.settings"}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [db["NAME"], False]
    assert not (tmp_path / "data" / "pgdata").exists()
