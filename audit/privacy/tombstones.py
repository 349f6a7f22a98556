"""Erasures that survive a restore: each erasure appends a tombstone to ``DATA_DIR/privacy/erasures.jsonl`` (outside
the database dump: ``manage.py backup`` carries the folder), holding no personal data, only SHA-256 hashes of the
erased pseudonyms, conversation ids and hand-off tokens. ``manage.py restore`` merges the backup's tombstones into
the install's (``merge``: lines it lacks are appended, none is ever removed) and applies them all again
(``reapply``) once the database is restored and migrated, before the install serves.

Decisions where the issue is silent:
- The hashes are plain SHA-256 (with a prefix), not keyed by the secret key: a restore without the backup's key must
  still match them. The ids hashed are random (UUIDs, 256-bit tokens) or keyed (pseudonyms), so a hash can't be
  turned back into one by guessing.
- ``reapply`` hashes the ids the restored database and archives hold and erases those a tombstone names, without a
  new tombstone. An archive's rows count as found when their conversation or pseudonym is named.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from django.conf import settings
from django.utils import timezone

FILE = Path("privacy") / "erasures.jsonl"
KINDS = ("pseudonyms", "conversations", "handoff_tokens")


def path() -> Path:
    return Path(settings.DATA_DIR) / FILE


def hashed(value) -> str:
    return hashlib.sha256(f"bookchat-erasure:{value}".encode()).hexdigest()


def tombstone(learner, *, erasure: str) -> dict:
    ids = learner.as_dict()
    return {"erasure": erasure, "at": timezone.now().isoformat(), **{
        kind: sorted(hashed(value) for value in ids[kind]) for kind in KINDS}}


def append(entry: dict, *, to: Path | None = None) -> None:
    """Append ``entry`` as one line, flushed to disk before the erasure reports done."""
    target = to or path()
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "a", encoding="utf-8") as file:
        file.write(json.dumps(entry, sort_keys=True) + "\n")
        file.flush()
        os.fsync(file.fileno())


def read(source: Path | None = None) -> list[dict]:
    source = source or path()
    if not source.is_file():
        return []
    entries = []
    for line in source.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:  # a line cut by a crash mid-write: the others stand
            continue
        if isinstance(entry, dict) and entry.get("erasure"):
            entries.append(entry)
    return entries


def merge(source: Path, *, into: Path | None = None) -> int:
    """Append the tombstones of ``source`` (a backup's file) that this install's file (``into``) lacks; how many."""
    into = into or path()
    known = {entry["erasure"] for entry in read(into)}
    added = 0
    for entry in read(source):
        if entry["erasure"] not in known:
            append(entry, to=into)
            known.add(entry["erasure"])
            added += 1
    return added


def reapply() -> dict:
    """Erase again whatever the database and the archives hold that a tombstone names; what was found and erased."""
    from audit.privacy import archives
    from audit.privacy.erasure import erase_learner
    from audit.privacy.learners import Learner, as_uuid

    entries = read()
    wanted = {kind: {value for entry in entries for value in entry.get(kind, [])} for kind in KINDS}
    learner = Learner()
    if entries:
        for kind, value in _held_ids(archives.archive_files()):
            if value and hashed(value) in wanted[kind]:
                {"pseudonyms": learner.pseudonyms, "conversations": learner.sessions,
                 "handoff_tokens": learner.tokens}[kind].add(as_uuid(value) if kind == "conversations" else value)
    report = {"tombstones": len(entries), "found": not learner.empty, "erased": None}
    if not learner.empty:
        report["erased"] = erase_learner(learner=learner, record=False).as_dict()
    return report


def _held_ids(archive_paths):
    """``(kind, id)`` of every pseudonym, conversation id and hand-off token the database and archives hold."""
    from audit.models import AuditLog, Handoff
    from audit.retention import read_archive
    from chat.models import Conversation, Feedback

    for learner, session in AuditLog.objects.values_list("learner", "session_id").distinct():
        yield from (("pseudonyms", learner), ("conversations", session))
    for learner, session in Conversation.objects.values_list("learner", "id"):
        yield from (("pseudonyms", learner), ("conversations", session))
    for token, learner, session in Handoff.objects.values_list("token", "learner", "session_id"):
        yield from (("handoff_tokens", token), ("pseudonyms", learner), ("conversations", session))
    for session in Feedback.objects.values_list("conversation_id", flat=True).distinct():
        yield "conversations", session
    for archive in archive_paths:
        for row in read_archive(archive):
            yield from (("pseudonyms", row.get("learner") or ""), ("conversations", row.get("session_id") or ""))
