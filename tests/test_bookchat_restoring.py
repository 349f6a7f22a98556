"""Restoring's own decisions (``bookchat.restoring``), on folders made by hand: the restored uploads replace a forced
install's, an audit archive is never lost (one of the same name with other contents is kept aside), what becomes of
the backup's secret key (and what the restore warns; a key among this install's fallbacks is known), a backup with
migrations this code doesn't know refused, and what the database holds counted by kind. The restore itself:
tests/test_backup.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from bookchat.backups import BackupError
from bookchat.restoring import (
    WITHOUT_KEY,
    _check_migrations_known,
    _key_plan,
    _move_files,
    _put_secrets,
    database_contents,
)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_restored_files_replace_the_uploads_and_keep_a_clashing_archive_aside(tmp_path):
    staging, data = tmp_path / "staging", tmp_path / "data"
    write(staging / "uploads" / "7" / "page.md", "new page")
    write(staging / "archive" / "audit-1.jsonl.gz", "backed up")
    write(staging / "archive" / "audit-2.jsonl.gz", "same")
    write(data / "uploads" / "3" / "old.md", "old upload")
    write(data / "archive" / "audit-1.jsonl.gz", "other contents")
    write(data / "archive" / "audit-2.jsonl.gz", "same")
    moved = _move_files(staging, data, replace_uploads=True)
    aside = data / "archive" / "audit-1.jsonl.gz.before-restore"
    assert moved == {"uploads": 1, "archive": 2, "uploads_removed": 1, "archives_kept_aside": [str(aside)],
                     "tombstones_added": 0}
    assert not (data / "uploads" / "3").exists() and (data / "uploads" / "7" / "page.md").read_text() == "new page"
    assert aside.read_text() == "other contents"
    assert (data / "archive" / "audit-1.jsonl.gz").read_text() == "backed up"
    assert not (data / "archive" / "audit-2.jsonl.gz.before-restore").exists()  # the same file: nothing to keep


def test_into_an_empty_install_the_uploads_waiting_there_stay(tmp_path):
    write(tmp_path / "data" / "uploads" / "3" / "old.md", "old upload")
    write(tmp_path / "staging" / "uploads" / "7" / "page.md", "new page")
    moved = _move_files(tmp_path / "staging", tmp_path / "data", replace_uploads=False)
    assert moved["uploads_removed"] == 0 and (tmp_path / "data" / "uploads" / "3" / "old.md").exists()


@pytest.fixture
def key_folders(tmp_path, settings):
    settings.SECRET_KEY = "the-key-in-use-" + "u" * 40
    settings.BOOKCHAT = {**settings.BOOKCHAT, "SECRET_KEY": ""}
    return tmp_path / "staging", tmp_path / "data"


def test_what_becomes_of_the_backups_secret_key(key_folders, settings):
    staging, data = key_folders
    data.mkdir()
    staging.mkdir()
    state, warnings = _key_plan(staging, with_secrets=True)
    assert state == "not_in_backup" and warnings[0].endswith(WITHOUT_KEY)
    write(staging / "secret_key", settings.SECRET_KEY)
    assert _key_plan(staging, with_secrets=False) == ("already_in_use", [])
    write(staging / "secret_key", "the-backed-up-key-" + "b" * 40)
    state, warnings = _key_plan(staging, with_secrets=False)
    assert state == "not_restored" and "add --with-secrets" in warnings[0] and not (data / "secret_key").exists()
    settings.SECRET_KEY_FALLBACKS = ["the-backed-up-key-" + "b" * 40]
    assert _key_plan(staging, with_secrets=False) == _key_plan(staging, with_secrets=True) == (
        "one_of_the_fallbacks", [])
    settings.SECRET_KEY_FALLBACKS = []
    assert _key_plan(staging, with_secrets=True) == ("restored", [])
    _put_secrets(staging, data, "restored", with_secrets=True)
    assert (data / "secret_key").read_text() == "the-backed-up-key-" + "b" * 40
    assert (data / "secret_key").stat().st_mode & 0o777 == 0o600


def test_a_restored_key_that_the_environments_key_overrides_is_warned_about(key_folders, settings):
    staging, data = key_folders
    data.mkdir()
    write(staging / "secret_key", "the-backed-up-key-" + "b" * 40)
    settings.BOOKCHAT = {**settings.BOOKCHAT, "SECRET_KEY": settings.SECRET_KEY}
    state, warnings = _key_plan(staging, with_secrets=True)
    assert state == "restored" and "BOOKCHAT_SECRET_KEY is set and wins" in warnings[0]


def test_a_backup_with_migrations_this_code_does_not_know_is_refused():
    _check_migrations_known({"database": {"migrations": {"audit": "0001_auditlog", "someone_elses_app": "0042_x"}}})
    with pytest.raises(BackupError) as caught:
        _check_migrations_known({"bookchat_version": "9.0", "database": {"migrations": {"audit": "9999_future"}}})
    assert caught.value.code == "newer_backup" and caught.value.status == 2
    assert "audit.9999_future" in caught.value.message and "(9.0;" in caught.value.message


@pytest.mark.django_db
def test_the_database_contents_are_counted_by_kind():
    contents = database_contents()
    assert set(contents["rows"]) == {"books", "users", "API keys", "audit records"}
    assert contents["tables"] > len(contents["rows"])


def test_a_restore_merges_the_backups_erasure_tombstones_into_the_installs_and_never_drops_one(tmp_path):
    from audit.privacy import tombstones

    staging, data = tmp_path / "staging", tmp_path / "data"
    tombstones.append({"erasure": "old", "pseudonyms": ["h1"]}, to=staging / tombstones.FILE)
    tombstones.append({"erasure": "shared", "pseudonyms": ["h2"]}, to=staging / tombstones.FILE)
    tombstones.append({"erasure": "shared", "pseudonyms": ["h2"]}, to=data / tombstones.FILE)
    tombstones.append({"erasure": "since", "pseudonyms": ["h3"]}, to=data / tombstones.FILE)
    moved = _move_files(staging, data, replace_uploads=False)
    assert moved["tombstones_added"] == 1
    assert [entry["erasure"] for entry in tombstones.read(data / tombstones.FILE)] == ["shared", "since", "old"]
