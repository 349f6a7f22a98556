"""Make the database of an older release that tests/test_upgrade.py upgrades: ``python -m tests.support.upgrade_fixture
COMMIT`` checks COMMIT out beside the repository (a git worktree), runs that release's own code with this checkout's
virtualenv on an embedded PostgreSQL of its own, and as a user of that release would: ``migrate``, ``ingest`` the
small book in tests/data/upgrade/book, a superuser, an API key, one question asked (its audit row). Then
``pg_dump`` (plain SQL, no owners or privileges, so that it loads into any database) into
tests/data/upgrade/release-COMMIT.sql.gz, with what was made in release-COMMIT.json beside it.

Run it again only to add a newer "older release"; the committed dumps are what the test reads.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bookchat.base.pgtools import bundled_bin_dirs

REPO = Path(__file__).resolve().parents[2]
HERE = REPO / "tests" / "data" / "upgrade"
BOOK, QUESTION = "keeping-bees", "How often should I inspect the hive?"
KEY_NAME = "made by an older release"


def make(commit: str) -> Path:
    with tempfile.TemporaryDirectory(prefix="bookchat-release-") as tmp:
        tree, data = Path(tmp) / "tree", Path(tmp) / "var"
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), commit], cwd=REPO, check=True)
        try:
            env = {k: v for k, v in os.environ.items() if not k.startswith("BOOKCHAT_") and k != "DATABASE_URL"} | {
                "BOOKCHAT_DATA_DIR": str(data), "DJANGO_SUPERUSER_PASSWORD": "an-old-admin-pass",
                "PYTHONPATH": str(tree)}

            def manage(*args: str) -> str:
                done = subprocess.run([sys.executable, "manage.py", *args], cwd=tree, env=env, check=True,
                                      capture_output=True, text=True)
                return done.stdout

            where = subprocess.run([sys.executable, "-c", "import bookchat; print(bookchat.__file__)"], cwd=tree,
                                   env=env, capture_output=True, text=True, check=True).stdout
            assert where.startswith(str(tree)), f"the release's own code must run, not {where}"
            manage("migrate", "--noinput")
            manage("ingest", str(HERE / "book"), "--book", BOOK, "--json")
            manage("createsuperuser", "--noinput", "--username", "old-admin", "--email", "old-admin@example.org")
            key = json.loads(manage("apikey", "create", "--kind", "secret", "--name", KEY_NAME, "--json"))
            answer = json.loads(manage("ask", QUESTION, "--book", BOOK, "--json"))
            heads = json.loads(subprocess.run(
                [sys.executable, "-c", "import django, json; django.setup(); from django.db.migrations.loader import "
                 "MigrationLoader; print(json.dumps(sorted(f'{a}.{n}' for a, n in MigrationLoader(None, "
                 "ignore_no_migrations=True).graph.leaf_nodes() if a in ('audit', 'bookchat', 'chat', "
                 "'ingestion'))))"], cwd=tree, env=env | {"DJANGO_SETTINGS_MODULE": "bookchat.settings"},
                capture_output=True, text=True, check=True).stdout)
            db = json.loads(subprocess.run(
                [sys.executable, "-c", "import django, json; django.setup(); from django.conf import settings; "
                 "db = settings.DATABASES['default']; print(json.dumps({k: db[k] for k in ('HOST', 'USER', 'NAME')}))"],
                cwd=tree, env=env | {"DJANGO_SETTINGS_MODULE": "bookchat.settings"}, capture_output=True, text=True,
                check=True).stdout)
            newest = bundled_bin_dirs()[max(bundled_bin_dirs())]
            dump = subprocess.run([str(newest / "pg_dump"), "--no-owner", "--no-privileges", "-h",
                                   db["HOST"], "-U", db["USER"], db["NAME"]], capture_output=True, check=True)
            subprocess.run([sys.executable, "-m", "bookchat.cli", "db", "stop"], cwd=tree, env=env, check=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, check=False)
    out = HERE / f"release-{commit[:7]}.sql.gz"
    with gzip.GzipFile(out, "wb", mtime=0) as file:
        file.write(dump.stdout)
    made = {"commit": commit[:7], "migrations": heads, "book": BOOK, "question": QUESTION,
            "answer_sources": [s["url"] for s in answer.get("sources", [])], "superuser": "old-admin",
            "api_key": {"name": KEY_NAME, "prefix": key["prefix"]}}
    (HERE / f"release-{commit[:7]}.json").write_text(json.dumps(made, indent=2) + "\n")
    return out


if __name__ == "__main__":
    print(make(sys.argv[1]))
