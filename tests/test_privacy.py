"""Each learner's data (``audit/privacy/``, ``manage.py privacy``): the inventory covers every text-like field of the
project's models and the manual's page is the one it makes; a canary put in every place a learner's words reach is
in the export, then gone from every text and JSON column of every table and from the audit archives after the
erasure, while counts and sections stay; the commands' wrong input; the admin actions' permission; "My data"; and
the request a language model receives carries no identity."""

from __future__ import annotations

import gzip
import json
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.utils import timezone
from lti_tool.models import LtiRegistration, LtiUser

from audit.models import AuditLog, Handoff, TopicRun
from audit.privacy import admin_actions, archives, inventory, tombstones, views
from audit.privacy.erasure import figures
from audit.privacy.learners import Learner, browser_learner, find_learner
from audit.privacy.manual import PAGE, privacy_reference
from audit.retention import purge_old_records
from bookchat.base.conf import SETTINGS
from bookchat.base.models import StaffCommand
from chat.lti.identity import pseudonym
from chat.models import Conversation, Feedback, StaffAnswer, Turn
from ingestion.models import Book
from tests.conftest import run_command

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parent.parent
CANARY = "zebracanary"
SECTION = "https://docs.example.org/guide/install#folders"


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    return tmp_path


# --- the inventory and its page ---------------------------------------------------------------------------------

def test_every_text_like_field_of_the_projects_models_is_declared():
    assert inventory.undeclared() == [], "declare these in audit/privacy/inventory.py (HELD or NOT_PERSONAL)"


def test_the_declaration_names_real_fields_and_settings():
    from django.apps import apps

    for label, names in inventory.declared().items():
        fields = {f.name for f in apps.get_model(label)._meta.concrete_fields}
        assert names <= fields, (label, names - fields)
    known = {spec.name for spec in SETTINGS}
    assert all(entry.setting in known for entry in inventory.HELD if entry.setting)


def test_a_model_gaining_an_undeclared_text_field_fails_the_coverage(monkeypatch):
    held = [entry for entry in inventory.HELD if entry.model != "chat.Feedback"]
    monkeypatch.setattr(inventory, "HELD", held)
    assert {"chat.Feedback.comment", "chat.Feedback.conversation_id"} <= set(inventory.undeclared())


def test_the_manuals_privacy_page_is_the_one_the_declaration_makes():
    assert (REPO / PAGE).read_text() == privacy_reference(), "run `make docs` after changing audit/privacy/"
    page = privacy_reference()
    for text in ("manage.py privacy export --learner", "manage.py privacy erase --learner", "GDPR article 15",
                 "FERPA", "sessionStorage", "localStorage", "`BOOKCHAT_AUDIT_RETENTION_DAYS` (default `365`)"):
        assert text in page


def test_make_lints_check_fails_on_a_page_the_inventory_did_not_make(tmp_path, monkeypatch, capsys):
    from audit.privacy import manual

    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs" / "operating").mkdir(parents=True)
    assert manual.main(["--write"]) == 0 and manual.main(["--check"]) == 0
    (tmp_path / PAGE).write_text((tmp_path / PAGE).read_text() + "A sentence nobody generated.\n")
    assert manual.main(["--check"]) == 1 and "run make docs" in capsys.readouterr().err
    assert manual.main(["--bogus"]) == 2


def test_an_erased_rows_figures_keep_numbers_and_truths_only():
    assert figures({"covered": True, "best_cosine": 0.8, "terms": ["a", 2], "matched": "meaning", "none": None,
                    "nested": {"n": 1, "why": "text"}}) == {"covered": True, "best_cosine": 0.8, "terms": [2],
                                                             "none": None, "nested": {"n": 1}}
    assert views.inline("run `a<b`") == "run <code>a&lt;b</code>"
    assert admin_actions.PERMISSION == "audit.manage_learner_data"


def test_a_browser_names_only_what_it_holds_and_a_staff_lookup_finds_the_whole_learner(data_dir):
    made = canary_learner(data_dir)
    mine = browser_learner(session_ids=[str(made["session"])], tokens=[])
    assert mine.pseudonyms == set() and mine.sessions == {made["session"]}
    whole = find_learner(identifier=made["session"].hex)
    assert whole.pseudonyms == {made["learner"]} and made["token"] in whole.tokens
    assert len(archives.learner_rows(whole)) == 1 and archives.learner_rows(Learner()) == []


# --- a learner with a canary everywhere ---------------------------------------------------------------------------

def canary_learner(data_dir) -> dict:
    """A learner (LMS launched) whose words, with the canary, reach every place they can; another reader beside."""
    book = Book.objects.create(slug=f"privacy-{uuid.uuid4().hex[:8]}", title="Guide", embedder_name="test",
                               embedder_dimension=3)
    registration = LtiRegistration.objects.create(name="LMS", issuer="https://lms.example.org", client_id="c1",
                                                  auth_url="https://lms.example.org/auth",
                                                  token_url="https://lms.example.org/token",
                                                  keyset_url="https://lms.example.org/jwks")
    LtiUser.objects.create(registration=registration, sub="student-7", name=f"Ada {CANARY}",
                           email=f"{CANARY}@example.org")
    learner = pseudonym("https://lms.example.org", "student-7")
    question = f"How do I {CANARY} the folders?"
    old, session = uuid.uuid4(), uuid.uuid4()
    conversation = Conversation.objects.create(id=session, book=book, last_active_at=timezone.now(), learner=learner)
    answer_id = uuid.uuid4()
    Turn.objects.create(conversation=conversation, question=question, resolved_question=question,
                        answer=f"You {CANARY} them [1].", answer_id=answer_id, response={"question": question})
    Feedback.objects.create(answer_id=answer_id, conversation_id=session, rating="down", comment=f"no {CANARY}",
                            channel="page")
    row = audit_row(answer_id=answer_id, session_id=session, learner=learner, question=question,
                    selected_text=f"selected {CANARY}", feedback_rating="down", feedback_comment=f"no {CANARY}",
                    reviewer_note=f"asked about {CANARY}")
    audit_row(session_id=old, learner=learner, question=f"Old {CANARY} question?",
              created_at=timezone.now() - timedelta(days=400))
    assert purge_old_records(days=365).archived >= 1  # the old row now lives in an archive only
    staff = StaffAnswer.objects.create(book=book, question=question, answer="Use the upload form [1].")
    Handoff.objects.create(answer_id=answer_id, book_slug=book.slug, session_id=session, channel="page",
                           learner=learner, note=f"please, {CANARY}", reply="Use the upload form [1].",
                           conversation=[{"question": question, "answer": "…"}], staff_answer=staff)
    run = TopicRun.objects.create(book_slug=book.slug, since=timezone.now() - timedelta(days=30),
                                  until=timezone.now(), status=TopicRun.Status.DONE, questions=6, topics=[{
                                      "n": 1, "terms": [CANARY, "folders"], "label": f"{CANARY} · folders",
                                      "questions": 6, "sessions": 5, "examples": [question, "Other question?"],
                                      "sections": [{"url": SECTION, "section": "Folders", "count": 6}]}])
    staff_user = User.objects.create_user(f"reviewer-{uuid.uuid4().hex[:6]}", is_staff=True)
    LogEntry.objects.create(user=staff_user, content_type=ContentType.objects.get_for_model(AuditLog),
                            object_id=str(row.pk), object_repr=question[:80], action_flag=CHANGE,
                            change_message="Marked ok.")
    other = audit_row(session_id=uuid.uuid4(), question="How do I install it?", answer="With pip [1].",
                      retrieval={"covered": True}, grounding={"passed": True})
    return {"learner": learner, "session": session, "row": row, "other": other, "run": run, "staff": staff,
            "token": Handoff.objects.get(answer_id=answer_id).token, "book": book}


def audit_row(**fields) -> AuditLog:
    defaults = {"answer_id": uuid.uuid4(), "channel": "page", "book_slug": "guide", "answer": f"Answer {CANARY}.",
                "client_ip_hash": "f" * 64, "status": AuditLog.Status.ANSWERED, "confidence": 0.9,
                "confidence_level": "high", "latency_ms": 120, "timings_ms": {"retrieval": 12.5},
                "sources": [{"n": 1, "heading_path": "Guide > Folders", "url": SECTION}],
                "retrieval": {"covered": True, "best_cosine": 0.8, "terms": [CANARY]},
                "grounding": {"passed": True, "unsupported_sentences": [CANARY]}}
    return AuditLog.objects.create(**(defaults | fields))


def canary_columns() -> list[str]:
    """``table.column`` of every text, varchar and JSON column of every table that holds the canary."""
    found = []
    with connection.cursor() as cursor:
        cursor.execute("SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = "
                       "current_schema() AND data_type IN ('text', 'character varying', 'json', 'jsonb')")
        for table, column in cursor.fetchall():
            cursor.execute(f'SELECT count(*) FROM "{table}" WHERE "{column}"::text ILIKE %s',  # noqa: S608
                           [f"%{CANARY}%"])
            if cursor.fetchone()[0]:
                found.append(f"{table}.{column}")
    return found


def canary_in_archives(data_dir: Path) -> list[str]:
    return [path.name for path in (data_dir / "archive").glob("*.gz")
            if CANARY in gzip.decompress(path.read_bytes()).decode()]


def test_the_export_holds_every_place_and_the_erasure_leaves_no_canary_but_the_counts(data_dir):
    made = canary_learner(data_dir)
    assert canary_in_archives(data_dir)
    code, out, _ = run_command("privacy", "export", "--learner", made["learner"], "--json")
    assert code == 0
    document = json.loads(out)
    for place in ("conversations", "audit_rows", "archived_audit_rows", "feedback", "handoffs", "lms_users",
                  "staff_answers_from_their_questions"):
        assert document[place] and CANARY in json.dumps(document[place]), place
    assert CANARY in json.dumps(document["conversations"][0]["turns"])
    before = {"rows": AuditLog.objects.count(), "sections": list(AuditLog.objects.filter(
        pk=made["row"].pk).values_list("section_url", "sources", "status", "confidence_level", "latency_ms"))}

    code, out, _ = run_command("privacy", "erase", "--learner", str(made["session"]), "--yes", "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["conversations"] == 1 and report["handoffs"] == 1 and report["archived_rows"] == 1
    assert canary_columns() == [] and canary_in_archives(data_dir) == []

    assert AuditLog.objects.count() == before["rows"]
    row = AuditLog.objects.get(pk=made["row"].pk)
    assert list(AuditLog.objects.filter(pk=row.pk).values_list(
        "section_url", "sources", "status", "confidence_level", "latency_ms")) == before["sections"]
    assert row.feedback_rating == "down" and row.learner == "" and row.session_id not in (None, made["session"])
    assert row.retrieval == {"covered": True, "best_cosine": 0.8, "terms": []}
    assert AuditLog.objects.get(pk=made["other"].pk).question == "How do I install it?"
    topic = TopicRun.objects.get(pk=made["run"].pk).topics[0]
    assert topic["questions"] == 6 and topic["examples"] == ["Other question?"] and topic["sections"][0]["count"] == 6
    staff = StaffAnswer.objects.get(pk=made["staff"].pk)
    assert staff.answer == "Use the upload form [1]." and staff.question == ""
    assert staff.status == StaffAnswer.Status.NEEDS_REVIEW and not staff.handoffs.exists()
    assert not Conversation.objects.filter(learner=made["learner"]).exists()
    (entry,) = tombstones.read()
    assert entry["erasure"] == report["erasure"] and made["learner"] not in json.dumps(entry)
    logged = StaffCommand.objects.filter(command="manage.py privacy erase").first()
    assert logged.target == f"erasure {report['erasure']}"


def test_a_hand_off_token_finds_the_whole_learner(data_dir):
    made = canary_learner(data_dir)
    code, out, _ = run_command("privacy", "export", f"--learner={made['token']}", "--json")  # may start with -
    assert code == 0
    assert json.loads(out)["learner"]["pseudonyms"] == [made["learner"]]


def test_export_to_a_file_and_as_text(data_dir, tmp_path):
    made = canary_learner(data_dir)
    target = tmp_path / "export.json"
    code, out, _ = run_command("privacy", "export", "--learner", made["learner"], "--out", str(target))
    assert code == 0 and "1 conversation(s)" in out and str(target) in out
    assert json.loads(target.read_text())["handoffs"] and target.stat().st_mode & 0o777 == 0o600
    code, out, err = run_command("privacy", "export", "--learner", made["learner"], "--out", str(target), "--json")
    assert code == 2 and json.loads(out)["error"] == "destination_exists"


@pytest.mark.parametrize(("identifier", "error"), [
    ("0" * 32, "unknown_learner"), (str(uuid.uuid4()), "unknown_learner"), ("A" * 43, "unknown_learner"),
    ("not a learner!", "bad_learner"), ("", "bad_learner")])
def test_an_unknown_or_malformed_learner_is_refused(identifier, error):
    for action in ("export", "erase"):
        code, out, _ = run_command("privacy", action, "--learner", identifier, "--json", *(
            ["--yes"] if action == "erase" else []))
        assert code == 2 and json.loads(out)["error"] == error
        code, _, err = run_command("privacy", action, "--learner", identifier)
        assert code == 2 and err.startswith("privacy: ")


def test_an_erasure_not_confirmed_erases_nothing(data_dir):
    made = canary_learner(data_dir)
    code, out, err = run_command("privacy", "erase", "--learner", made["learner"])
    assert code == 2 and "nothing was erased" in err and "1 conversation(s)" in err
    assert Conversation.objects.filter(learner=made["learner"]).exists() and tombstones.read() == []


@pytest.mark.parametrize("arguments", [("privacy",), ("privacy", "export"), ("privacy", "forget", "--learner", "x"),
                                       ("privacy", "export", "--learner", "x", "--yes")])
def test_bad_flags_are_refused_by_the_parser(arguments):
    from django.core.management import CommandError

    with pytest.raises(CommandError):
        run_command(*arguments)


# --- the admin's actions -----------------------------------------------------------------------------------------

@pytest.fixture
def reviewer(client):
    from django.contrib.auth.models import Group

    user = User.objects.create_user(f"rita-{uuid.uuid4().hex[:6]}", password="x", is_staff=True)
    user.groups.add(Group.objects.get(name="Reviewers"))
    client.force_login(user)
    return user


def test_the_admin_actions_need_their_own_permission_and_are_logged(client, reviewer, data_dir):
    from django.contrib.auth.models import Permission
    from django.urls import reverse

    made = canary_learner(data_dir)
    url = reverse("admin:audit_auditlog_changelist")
    page = client.get(url).content.decode()
    assert "erase_learner_data" not in page and "export_learner_data" not in page
    response = client.post(url, {"action": "erase_learner_data", "_selected_action": [made["row"].pk]})
    assert Conversation.objects.filter(learner=made["learner"]).exists(), "refused without the permission"
    assert response.status_code in (200, 302)

    reviewer.user_permissions.add(Permission.objects.get(codename="manage_learner_data"))
    assert "erase_learner_data" in client.get(url).content.decode()
    exported = client.post(url, {"action": "export_learner_data", "_selected_action": [made["row"].pk]})
    assert exported["Content-Type"] == "application/json" and CANARY in exported.content.decode()
    confirm = client.post(url, {"action": "erase_learner_data", "_selected_action": [made["row"].pk]})
    assert confirm.status_code == 200 and b"Yes, erase the learner's data" in confirm.content
    assert Conversation.objects.filter(learner=made["learner"]).exists(), "not before the confirmation"
    done = client.post(url, {"action": "erase_learner_data", "_selected_action": [made["row"].pk],
                             "confirmed": "yes"})
    assert done.status_code == 302
    assert canary_columns() == [] and not Conversation.objects.filter(learner=made["learner"]).exists()
    (entry,) = tombstones.read()
    assert LogEntry.objects.filter(user=reviewer, object_id=str(made["row"].pk),
                                   change_message=f"Erased the learner's data (erasure {entry['erasure']}).").exists()


# --- a student's "My data" -----------------------------------------------------------------------------------------

def my_data(client, body, *, erase: bool = False):
    path = "/api/v1/my-data" + ("/erase" if erase else "")
    return client.post(path, data=body if isinstance(body, str) else json.dumps(body),
                       content_type="application/json")


def test_my_data_downloads_then_deletes_what_the_browser_names_and_nothing_else(client, data_dir):
    made = canary_learner(data_dir)
    other = Conversation.objects.create(last_active_at=timezone.now(), learner=made["learner"])
    body = {"session_ids": [str(made["session"])], "handoff_tokens": [made["token"]]}
    response = my_data(client, body)
    assert response.status_code == 200 and response["Cache-Control"] == "private, no-store"
    document = response.json()
    assert [c["id"] for c in document["conversations"]] == [str(made["session"])], "no pseudonym expansion"
    assert CANARY in json.dumps(document["handoffs"]) and CANARY in json.dumps(document["audit_rows"])
    erased = my_data(client, body, erase=True)
    assert erased.status_code == 200 and erased.json()["conversations"] == 1
    assert not Conversation.objects.filter(id=made["session"]).exists()
    assert Conversation.objects.filter(id=other.id).exists(), "another browser's conversation of the learner stays"
    assert not Handoff.objects.filter(token=made["token"]).exists() and len(tombstones.read()) == 1


@pytest.mark.parametrize("body", ["[1, 2]", "not json", {}, {"session_ids": []}, {"session_ids": ["nope"]},
                                  {"handoff_tokens": ["bad token!"]}, {"session_ids": "a"},
                                  {"session_ids": [uuid.uuid4().hex]}, {"session_ids": [str(uuid.uuid4())] * 101},
                                  {"unknown": 1}])
def test_my_data_refuses_wrong_input_and_erases_nothing(client, body):
    """Each a 400 saying what is wrong, but a body that names nothing: a 404 (the schema allows it)."""
    for erase in (False, True):
        response = my_data(client, body, erase=erase)
        names_nothing = body in ({}, {"session_ids": []})
        assert response.status_code == (404 if names_nothing else 400), response.content
        assert response.json()["error"] in ("nothing_named",) if names_nothing else (
            "bad_learner", "invalid_body", "invalid_json", "unknown_field", "invalid_request"), response.json()
    assert tombstones.read() == []


def test_the_privacy_page_is_served_from_the_declaration_and_linked_from_the_chat_page(client):
    page = client.get("/privacy/")
    assert page.status_code == 200
    html = page.content.decode()
    for entry in inventory.HELD:
        assert entry.model in html
    assert "<code>manage.py privacy erase --learner=ID</code>" in html and "sessionStorage" in html
    assert 'href="/privacy/"' in client.get("/").content.decode()
    assert client.get("/lti/privacy")["Location"] == "/privacy/"
    assert page["X-Frame-Options"] == "DENY" and "frame-ancestors 'none'" in page["Content-Security-Policy"], \
        "no LMS platform registered: nobody may frame it (tests/test_lti.py: a registered one may)"


# --- what leaves the server -------------------------------------------------------------------------------------

def test_the_language_model_receives_no_identity_ip_conversation_id_or_pseudonym(client, settings, openai_server,
                                                                               manual_book, served):
    from chat.channels.access import PAGE_LEARNER, PAGE_SESSION_FLAG
    from chat.pipeline import generation

    openai_server.reset()
    settings.BOOKCHAT = {**settings.BOOKCHAT, "LLM_BASE_URL": openai_server.base_url, "LLM_API_KEY": "test",
                         "LLM_MODEL": "test-model", "DEADLINE_SECONDS": 60.0, "RETRIEVAL_SECONDS": 30.0,
                         "GENERATION_SECONDS": 30.0}
    learner = "c0ffee" * 5 + "ab"
    session = client.session
    session[PAGE_LEARNER], session[PAGE_SESSION_FLAG] = learner, True
    session.save()
    address, agent = "203.0.113.77", "StudentBrowser/1.0 (canary-agent)"
    try:
        first = client.post("/api/v1/ask", data=json.dumps({"question": "How do I ingest a folder?",
                                                             "book": "bookchat-manual"}),
                            content_type="application/json", REMOTE_ADDR=address, HTTP_USER_AGENT=agent)
        assert first.status_code == 200, first.content
        session_id = first.json()["session_id"]
        follow = client.post("/api/v1/ask", data=json.dumps({
            "question": "and how do I install it?", "book": "bookchat-manual", "session_id": session_id,
            "selected_text": "manage.py ingest PATH"}), content_type="application/json", REMOTE_ADDR=address,
            HTTP_USER_AGENT=agent)
        assert follow.status_code == 200, follow.content
    finally:
        generation._cache.clear()
    assert Conversation.objects.get(id=session_id).learner == learner, "the pseudonym was held, and not sent"
    sent = [json.dumps(payload) for path, payload in openai_server.requests if path.endswith("/chat/completions")]
    assert len(sent) == 2 and "manage.py ingest PATH" in sent[1] and "How do I ingest a folder?" in sent[1]
    hashes = set(AuditLog.objects.filter(session_id=session_id).values_list("client_ip_hash", flat=True))
    for text in sent:
        for identity in (learner, session_id, session_id.replace("-", ""), address, agent, client.session.session_key,
                         *hashes):
            assert identity not in text
    openai_server.reset()


# --- erasures survive a restore -------------------------------------------------------------------------------------

def test_rows_an_older_backup_brings_back_are_erased_again_by_the_tombstones(data_dir):
    made = canary_learner(data_dir)
    archived = {path.name: path.read_bytes() for path in (data_dir / "archive").glob("*.gz")}
    code, out, _ = run_command("privacy", "erase", "--learner", made["learner"], "--yes", "--json")
    assert code == 0 and canary_columns() == []
    # what a restore of a backup made before the erasure brings back: the rows as they were, and the old archives
    Conversation.objects.create(id=made["session"], last_active_at=timezone.now(), learner=made["learner"])
    audit_row(session_id=made["session"], learner=made["learner"], question=f"Back {CANARY}?")
    Handoff.objects.create(answer_id=uuid.uuid4(), book_slug="guide", token=made["token"], channel="page",
                           note=f"back {CANARY}")
    for name, body in archived.items():
        (data_dir / "archive" / name).write_bytes(body)
    assert canary_columns() and canary_in_archives(data_dir)
    report = tombstones.reapply()
    assert report["tombstones"] == 1 and report["erased"]["conversations"] == 1
    assert report["erased"]["handoffs"] == 1 and report["erased"]["archived_rows"] == 1
    assert canary_columns() == [] and canary_in_archives(data_dir) == []
    assert len(tombstones.read()) == 1, "a tombstone applied again writes no other"
    assert tombstones.reapply()["erased"] is None


def test_my_data_on_the_chat_page_counts_the_page_sessions_conversations(client, data_dir):
    from chat.channels.access import PAGE_CONVERSATIONS

    assert 'id="my-data"' in client.get("/").content.decode()
    made = canary_learner(data_dir)
    session = client.session
    session[PAGE_CONVERSATIONS] = {made["book"].slug: str(made["session"])}
    session.save()
    document = my_data(client, {}).json()
    assert [c["id"] for c in document["conversations"]] == [str(made["session"])]
    assert my_data(client, {}, erase=True).json()["conversations"] == 1
