"""Backup archives' own checks (``bookchat.backups``), on archives made by hand: which member names are plain relative
paths, where an archive may be written (not over a folder or an existing file unless forced, not into a missing
folder), a manifest that doesn't list its files properly, and a whole archive unpacked with every file checked. The
commands on damaged archives and the whole drill: tests/test_backup.py."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from bookchat.backups import (
    DUMP,
    MANIFEST,
    BackupError,
    _check_manifest,
    _member_name,
    check_destination,
    read_manifest,
    unpack_archive,
)
from tests.test_backup import write_tar

FILES = {DUMP: b"PGDMP" + bytes(range(256)), "uploads/7/page.md": b"# Page\n"}


def manifest(contents: dict[str, bytes], **changes) -> dict:
    return {"format": "bookchat-backup", "format_version": 1, "created_at": "2026-11-01T00:00:00+00:00",
            "files": {name: {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
                      for name, data in contents.items()}} | changes


@pytest.mark.parametrize(("name", "kept"), [
    ("database.dump", "database.dump"), ("uploads/7/page.md", "uploads/7/page.md"), ("../etc/passwd", None),
    ("/etc/passwd", None), ("uploads/./x", "uploads/x"), ("uploads//x", "uploads/x"), ("a\\b", None), ("", None),
])
def test_only_plain_relative_member_names_are_kept(name, kept):
    assert _member_name(name) == kept


def test_an_archive_is_never_written_over_a_folder_an_existing_file_or_into_a_missing_folder(tmp_path):
    existing = tmp_path / "b.tar.gz"
    existing.write_bytes(b"old")
    refusals = {}
    for out in (tmp_path, existing, tmp_path / "missing" / "b.tar.gz"):
        with pytest.raises(BackupError) as caught:
            check_destination(out, force=False)
        refusals[caught.value.code] = caught.value.status
    assert refusals == {"destination_is_folder": 2, "destination_exists": 2, "no_such_folder": 2}
    assert check_destination(existing, force=True) == existing
    assert check_destination(Path("relative.tar.gz"), force=False).is_absolute()


@pytest.mark.parametrize("files", [
    {"uploads/x": {"sha256": "0" * 64, "bytes": 1}},  # no database dump
    {DUMP: {"sha256": "0" * 64, "bytes": "12"}},  # a size that isn't a number
    {DUMP: {"sha256": "0" * 64, "bytes": 1}, "../x": {"sha256": "0" * 64, "bytes": 1}},  # a name outside
])
def test_a_manifest_whose_file_list_is_not_valid_is_damaged(files):
    with pytest.raises(BackupError) as caught:
        _check_manifest(manifest({}, files=files), Path("b.tar.gz"))
    assert caught.value.code == "bad_manifest"


def test_a_manifest_of_another_format_or_a_newer_one_is_refused():
    codes = []
    for bad in ([], manifest(FILES, format="tarball"), manifest(FILES, format_version=2),
                manifest(FILES, format_version="1")):
        with pytest.raises(BackupError) as caught:
            _check_manifest(bad, Path("b.tar.gz"))
        codes.append(caught.value.code)
    assert codes == ["not_a_backup", "not_a_backup", "newer_format", "newer_format"]


def test_a_whole_archive_unpacks_every_file_checked(tmp_path):
    path = write_tar(tmp_path / "b.tar.gz", {MANIFEST: json.dumps(manifest(FILES)).encode(), **FILES})
    into = tmp_path / "into"
    assert unpack_archive(path, into)["files"].keys() == FILES.keys()
    assert {name: (into / name).read_bytes() for name in FILES} == FILES
    assert read_manifest(path)["created_at"] == "2026-11-01T00:00:00+00:00"


def test_a_member_listed_twice_is_refused(tmp_path):
    path = tmp_path / "b.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in [(MANIFEST, json.dumps(manifest(FILES)).encode()), *FILES.items(), (DUMP, FILES[DUMP])]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(BackupError) as caught:
        read_manifest(path)
    assert caught.value.code == "bad_member"
