"""Retention: old audit rows go to a gzip JSONL archive and then out of the database; nothing is deleted that
was not archived."""

from __future__ import annotations

import errno
import gzip
import json
import subprocess
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditLog
from audit.retention import read_archive
from tests.conftest import run_command

pytestmark = pytest.mark.django_db


@pytest.fixture
def rows(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    now = timezone.now()
    made = {}
    for name, age in [("ancient", 800), ("old", 366), ("recent", 364), ("today", 0)]:
        made[name] = AuditLog.objects.create(
            answer_id=uuid.uuid4(), channel="api", question=f"{name} question ünï", answer=f"{name} answer",
            created_at=now - timedelta(days=age), sources=[{"n": 1, "heading_path": "A > B"}],
            feedback_rating="down" if name == "old" else "", review_status="wrong" if name == "old" else "new")
    return made


def test_dry_run_counts_and_changes_nothing(rows, tmp_path):
    code, out, _ = run_command("audit_purge", "--dry-run")
    assert code == 0 and "2 audit records are older than 365 days" in out
    assert AuditLog.objects.count() == 4 and not (tmp_path / "archive").exists()
    code, out, _ = run_command("audit_purge", "--dry-run", "--json")
    assert json.loads(out)["matched"] == 2 and json.loads(out)["dry_run"] is True


def test_purge_archives_every_field_then_deletes(rows, tmp_path):
    code, out, _ = run_command("audit_purge", "--json")
    report = json.loads(out)
    assert code == 0 and (report["matched"], report["archived"], report["deleted"]) == (2, 2, 2)
    assert set(AuditLog.objects.values_list("question", flat=True)) == {"recent question ünï", "today question ünï"}
    archives = list((tmp_path / "archive").glob("audit-*.jsonl.gz"))
    assert [str(a) for a in archives] == [report["archive"]]
    lines = read_archive(archives[0])
    assert {line["question"] for line in lines} == {"ancient question ünï", "old question ünï"}
    old = next(line for line in lines if line["question"].startswith("old"))
    assert old["answer_id"] == str(rows["old"].answer_id) and old["feedback_rating"] == "down"
    assert old["review_status"] == "wrong" and old["sources"] == [{"n": 1, "heading_path": "A > B"}]
    assert "question_vector" not in old
    with gzip.open(archives[0], "rt") as raw:
        assert all(json.loads(line) for line in raw), "one JSON object per line"
    assert not list((tmp_path / "archive").glob("*.partial"))

    code, out, _ = run_command("audit_purge")
    assert code == 0 and "No audit record is older than 365 days" in out


def test_days_option_and_its_errors(rows):
    code, out, _ = run_command("audit_purge", "--days", "1")
    assert code == 0 and "Archived 3 audit records" in out
    code, _, err = run_command("audit_purge", "--days", "0")
    assert code == 2 and "at least 1 day" in err


@pytest.fixture
def full_disk(settings, tmp_path):
    """A real 64 KiB tmpfs as the data directory, filled to the last block: writes there fail with ENOSPC."""
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount_point)], check=True)
    try:
        with open(mount_point / "filler", "wb", buffering=0) as filler, pytest.raises(OSError) as full:
            while True:
                filler.write(b"\0" * 4096)
        assert full.value.errno == errno.ENOSPC
        settings.DATA_DIR = mount_point
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)


def assert_purge_fails_and_deletes_nothing(data_dir) -> None:
    code, out, err = run_command("audit_purge")
    assert code == 1 and "No space left on device" in err and "no audit record was deleted" in err
    assert AuditLog.objects.count() == 4
    assert not list((data_dir / "archive").glob("*")), "no partial archive is left behind"


@pytest.mark.needs("tmpfs")
def test_a_full_disk_deletes_nothing(rows, full_disk):
    assert_purge_fails_and_deletes_nothing(full_disk)


def test_a_failed_archive_write_deletes_nothing_simulated(rows, tmp_path, monkeypatch):
    """The same path as the full disk above, without a real one: every archive write raises ENOSPC."""
    def no_space(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(gzip.GzipFile, "write", no_space)
    assert_purge_fails_and_deletes_nothing(tmp_path)


def test_the_scheduled_task_is_registered():
    from django_q.models import Schedule

    from audit.tasks import purge_old_audit_records

    schedule = Schedule.objects.get(func="audit.tasks.purge_old_audit_records")
    assert schedule.schedule_type == Schedule.DAILY
    assert purge_old_audit_records()["dry_run"] is False
