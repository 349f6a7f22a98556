"""One deployment, several nodes: the broker setting is checked at start, `serve` knows its roles, the readiness
probe says whether a node can answer, and a database that was never set up gets one line saying what to run.
(The multi-node drill itself is tests/test_nodes.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import psycopg
import pytest
from django.core.checks import run_checks
from django.core.management import CommandError, call_command
from django.test import override_settings

from bookchat.base.broker import q_cluster_broker
from bookchat.base.errors import ConfigurationError
from tests.conftest import REPO


@pytest.mark.parametrize(("value", "expected"), [
    ("", {"orm": "default"}), ("postgres", {"orm": "default"}), ("POSTGRES", {"orm": "default"}),
    ("redis://127.0.0.1:6379/0", {"redis": "redis://127.0.0.1:6379/0"}),
    ("rediss://:secret@cache.example.org:6380", {"redis": "rediss://:secret@cache.example.org:6380"}),
    ("unix:///run/redis.sock?db=1", {"redis": "unix:///run/redis.sock?db=1"}),
])
def test_the_broker_is_postgres_or_a_redis_url(value, expected):
    assert q_cluster_broker(value) == expected


@pytest.mark.parametrize(("value", "why"), [
    ("redis", "neither `postgres` nor a Redis URL"), ("amqp://rabbit:5672", "neither"),
    ("redis://:6379/0", "names no host"), ("redis://cache:99999/0", "port is not a number"),
    ("redis://cache:port/0", "port is not a number"), ("redis://cache:6379/zero", "database number"),
    ("unix://", "socket's path"),
])
def test_a_malformed_broker_is_refused_at_start(settings, value, why):
    with pytest.raises(ConfigurationError, match=why):
        q_cluster_broker(value)
    with override_settings(BOOKCHAT={**settings.BOOKCHAT, "Q_BROKER": value}):
        errors = run_checks(tags=["bookchat"])
    assert [e.id for e in errors] == ["bookchat.E006"] and "BOOKCHAT_Q_BROKER" in errors[0].msg


def test_an_unknown_role_is_refused():
    with pytest.raises(CommandError, match="invalid choice: 'db'"):
        call_command("serve", "--role", "db")


@pytest.mark.django_db
def test_a_ready_node_says_so(client):
    response = client.get("/api/v1/ready")
    body = response.json()
    assert response.status_code == 200 and body["status"] == "ready", body
    assert body["database"]["ok"] and body["migrations"]["ok"] and body["embedder"]["dimensions"] == 384
    assert body["broker"] == {"name": "postgres"}


@pytest.mark.slow
@pytest.mark.drill  # a bootstrap process against a database not ready for it
def test_an_unset_up_database_gets_one_line_saying_what_to_run(django_db_setup, tmp_path):
    """As a new user meets it: `ingest` (or a web node) on a database that was never migrated."""
    from django.db import connection

    name = f"unmigrated_{uuid.uuid4().hex[:8]}"
    host = connection.settings_dict["HOST"]
    with psycopg.connect(host=host, user="postgres", dbname="postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    env = os.environ | {"DATABASE_URL": f"postgresql://postgres@/{name}?host={host}",
                        "BOOKCHAT_DATA_DIR": str(tmp_path)}
    try:
        for command in (["ingest", "docs", "--book", "manual"], ["serve", "--role", "web"]):
            done = subprocess.run([sys.executable, "manage.py", *command], cwd=REPO, env=env, capture_output=True,
                                  text=True, timeout=120)
            assert done.returncode == 1, done
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and "run `manage.py bootstrap`" in lines[0], done.stderr
            assert "Traceback" not in done.stderr and "does not exist" not in done.stderr
    finally:
        with psycopg.connect(host=host, user="postgres", dbname="postgres", autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


# -- pgvector: missing, too old, or not ours to install -------------------------------------------------------
@pytest.mark.parametrize(("state", "expected"), [
    ({"installed": "0.8.0"}, None),
    ({"installed": "0.7.4"}, "the database has pgvector 0.7.4; bookchat needs 0.8 or later"),
    ({"available": None}, "the PostgreSQL server has no pgvector extension"),
    ({"available": "0.6.2"}, "the PostgreSQL server offers pgvector 0.6.2; bookchat needs 0.8"),
    ({"available": "0.8.1", "superuser": False}, "may not create the vector extension in 'books'"),
    ({"available": "0.8.1", "superuser": False, "trusted": True}, "may not create the vector extension"),
    ({"available": "0.8.1", "superuser": False, "trusted": True, "may_create": True}, None),
    ({"available": "0.10.0"}, None),
])
def test_each_pgvector_problem_is_one_line_saying_what_to_do(state, expected):
    from bookchat.base.deployment import pgvector_problem

    given = {"installed": None, "available": "0.8.0", "superuser": True, "trusted": False, "may_create": False,
             "user": "app", "database": "books"} | state
    problem = pgvector_problem(**given)
    assert (problem is None) if expected is None else (expected in problem and "\n" not in problem)


@pytest.mark.slow
@pytest.mark.drill  # a bootstrap process against a database not ready for it
def test_bootstrap_by_a_user_who_may_not_install_pgvector_says_so_in_one_line(django_db_setup, tmp_path):
    """A managed database where the app's user may not run CREATE EXTENSION: one line, before any migration."""
    from django.db import connection

    from bookchat.base.deployment import PGVECTOR_MINIMUM, _version, check_pgvector

    name = f"managed_{uuid.uuid4().hex[:8]}"
    host = connection.settings_dict["HOST"]
    with psycopg.connect(host=host, user="postgres", dbname=connection.settings_dict["NAME"]) as conn:
        assert _version(check_pgvector(conn.cursor())) >= PGVECTOR_MINIMUM, "the embedded server's is usable"
    with psycopg.connect(host=host, user="postgres", dbname="postgres", autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {name} LOGIN")
        conn.execute(f"CREATE DATABASE {name}")
    env = os.environ | {"DATABASE_URL": f"postgresql://{name}@/{name}?host={host}", "BOOKCHAT_DATA_DIR": str(tmp_path)}
    try:
        done = subprocess.run([sys.executable, "manage.py", "bootstrap", "--no-index"], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 1, done
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and f"the database user '{name}' may not create the vector extension" in lines[0]
        assert "CREATE EXTENSION vector" in lines[0] and "Traceback" not in done.stderr
        with psycopg.connect(host=host, user="postgres", dbname=name) as conn:
            assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone() == (0,)
    finally:
        with psycopg.connect(host=host, user="postgres", dbname="postgres", autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")
            conn.execute(f"DROP ROLE {name}")


@pytest.mark.slow
@pytest.mark.drill  # a bootstrap process against a database not ready for it
def test_bootstrap_waits_for_a_database_that_is_not_up_then_says_why_in_one_line(tmp_path):
    """--wait keeps trying (a container platform starts PostgreSQL beside it); past the wait, one line, no trace."""
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = os.environ | {"DATABASE_URL": f"postgresql://app:secret@127.0.0.1:{port}/books",
                        "BOOKCHAT_DATA_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "manage.py", "bootstrap", "--no-index", "--wait", "2"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "Waiting up to 2 s for the database …", lines
    assert len(lines) == 2 and "bootstrapping failed: OperationalError" in lines[1], lines
    assert "Traceback" not in done.stderr and "secret" not in done.stderr


def test_bootstrap_refuses_a_wait_that_is_not_a_number():
    with pytest.raises(CommandError, match="--wait"):
        call_command("bootstrap", "--wait", "soon")
