"""Upgrading: the database of an older release (a dump committed in tests/data/upgrade, made by that release's own
code: tests/support/upgrade_fixture.py) is migrated forward by this release's ``migrate`` and then answers as it
did, with everything it held still there; and a book whose embedder changed is embedded again from its stored
passages, with no source folder (``manage.py reembed``)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import psycopg
import pytest
from django.conf import settings as django_settings

from bookchat.base import pgtools
from tests.conftest import REPO

pytestmark = [pytest.mark.drill, pytest.mark.django_db]

FIXTURES = REPO / "tests" / "data" / "upgrade"
RELEASES = sorted(FIXTURES.glob("release-*.json"))


def server(dbname: str = "postgres") -> psycopg.Connection:
    db = django_settings.DATABASES["default"]
    return psycopg.connect(host=db["HOST"], port=db.get("PORT") or 5432, user=db["USER"], dbname=dbname,
                           password=db.get("PASSWORD") or None, autocommit=True)


@pytest.fixture(params=RELEASES, ids=lambda path: path.stem)
def old_release(request) -> tuple[dict, str, dict[str, str]]:
    """A database holding what the older release made, loaded from its dump: (what it made, the database's name,
    the environment of a bookchat process on it)."""
    made = json.loads(request.param.read_text())
    name = f"upgrade_from_{made['commit']}"
    with server() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    db = django_settings.DATABASES["default"]
    dump = gzip.decompress(request.param.with_suffix("").with_suffix(".sql.gz").read_bytes())
    loaded = subprocess.run([str(pgtools.tool("psql")), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", db["HOST"], "-U",
                             db["USER"], "-d", name], input=dump, capture_output=True)
    assert loaded.returncode == 0, loaded.stderr.decode()
    env = {k: v for k, v in os.environ.items() if k != "BOOKCHAT_DEFAULT_BOOK"} | {
        "DATABASE_URL": f"postgresql://{db['USER']}@/{name}?host={db['HOST']}"}
    yield made, name, env
    with server() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)


def test_an_older_release_database_migrates_forward_and_answers_as_before(old_release):
    made, dbname, env = old_release
    pending = manage(env, "migrate", "--check")
    assert pending.returncode != 0, "the dump is of an older schema: it has migrations to run"
    migrated = manage(env, "migrate", "--noinput")
    assert migrated.returncode == 0, migrated.stderr
    assert manage(env, "migrate", "--check").returncode == 0
    asked = manage(env, "ask", made["question"], "--book", made["book"], "--json")
    assert asked.returncode == 0, asked.stderr
    answer = json.loads(asked.stdout)
    assert not answer["refused"] and answer["sources"]
    assert answer["sources"][0]["url"] == made["answer_sources"][0], "the same passage answers first"
    with server(dbname) as conn:
        assert conn.execute("SELECT count(*) FROM ingestion_chunk WHERE book_id = (SELECT id FROM ingestion_book "
                            "WHERE slug = %s)", [made["book"]]).fetchone()[0] >= 3
        key = conn.execute("SELECT active, expires_at FROM chat_apikey WHERE name = %s",
                           [made["api_key"]["name"]]).fetchone()
        assert key == (True, None), "the old release's key still works, with no expiry"
        assert conn.execute("SELECT is_superuser FROM auth_user WHERE username = %s",
                            [made["superuser"]]).fetchone() == (True,)
        rows = conn.execute("SELECT question, section_url FROM audit_auditlog ORDER BY id").fetchall()
        assert [question for question, _ in rows] == [made["question"]] * 2, "the old row kept, the new one added"
        (_, old_landing), (_, new_landing) = rows
        assert old_landing == new_landing and old_landing.startswith("/"), "the old row's landing filled in as new"
        assert conn.execute("SELECT count(*) FROM ingestion_defaultbook").fetchone() == (0,)
