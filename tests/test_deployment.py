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

from bookchat.broker import q_cluster_broker
from bookchat.errors import ConfigurationError
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
