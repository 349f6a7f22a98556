"""The lecture-hall drill (issue 73): a whole class asks at once, behind one campus address and one publishable
key, while the book's CI publishes one edited page. A drill (``make drills``): it brings up a deployment of its own.

``serve --role web`` (gunicorn as ``make run`` starts it) and ``serve --role worker`` run on the test database with
the limits' defaults; five pages of docusaurus-docs are published through the publishing API, then
``bench.lecture_hall`` (which ``make bench`` measures with) plays 300 students for 5 minutes, each in a conversation
of their own, searching as they type and asking, a third of them through the stream; one client asks 100 questions
a minute in one conversation, another opens a new conversation per question from another address, and one page is
published again meanwhile. No student is refused or fails, only the two other clients are throttled, and the edited
page is live within 10 s of its POST.
"""

from __future__ import annotations

import uuid

import pytest

from bench import lecture_book, lecture_hall
from tests.conftest import committed, server_environment
from tests.support.nodes import Node
from tests.support.shared_data import shared_data

pytestmark = [pytest.mark.django_db, pytest.mark.slow, pytest.mark.drill]

PUBLISH_LIVE_SECONDS = 10.0


@pytest.fixture(scope="module")
def hall_servers(tmp_path_factory, django_db_setup, django_db_blocker):
    """``serve --role web`` and ``serve --role worker`` on the test database, sharing a data folder, with the
    settings' own limits (the session's in-process overrides don't reach them)."""
    root = tmp_path_factory.mktemp("lecture-hall")
    with django_db_blocker.unblock():
        env = server_environment()
    env |= {"BOOKCHAT_DATA_DIR": str(root / "data"), "BOOKCHAT_DEBUG": "false", "BOOKCHAT_ALLOWED_HOSTS": "127.0.0.1",
            "BOOKCHAT_LOG_LEVEL": "WARNING", "DJANGO_SETTINGS_MODULE": "tests.support.node_settings"}
    logs = root / "logs"
    logs.mkdir()
    web, worker = Node("web", "web", env, logs), Node("worker", "worker", env, logs)
    try:
        web.wait_ready()
        worker.wait_ready()
        yield web, worker
    finally:
        for node in (web, worker):
            node.terminate()
            node.reap()


def test_a_lecture_hall_asks_at_once_and_only_the_abusers_are_throttled(hall_servers, tmp_path, served,
                                                                       django_db_blocker):
    web, worker = hall_servers
    slug = f"drill-hall-{uuid.uuid4().hex[:8]}"
    with django_db_blocker.unblock():
        publishing_key, widget_key = committed(lambda: lecture_book.hall_keys(slug))
    try:
        site = lecture_book.make_site(shared_data(), tmp_path)
        first = lecture_book.publish(web.url, slug, site, publishing_key)
        assert first["status"] == "done", first
        figures = lecture_hall.hall(web.url, book=slug, widget_key=widget_key, publishing_key=publishing_key,
                                    site=site, server_pids=lambda: [p.pid for p in web.tree() + worker.tree()])
    finally:
        with django_db_blocker.unblock():
            committed(lambda: lecture_book.forget_hall(slug))
    print("\n" + lecture_hall.describe(figures))

    assert not figures["errors"], f"{len(figures['errors'])} errors: {figures['errors'][:5]}"
    students = figures["requests"]["students"]
    asked = lecture_hall.STUDENTS * lecture_hall.QUESTIONS_EACH
    assert students.get("ask 200", 0) + students.get("stream 200", 0) == asked, students
    assert figures["throttled"]["students"] == 0 and figures["throttled_searches"]["students"] == 0, students
    # The 100-a-minute client is throttled in its conversation, the new-conversation client by its address's ceiling.
    assert figures["throttled"]["abuser"] > 0, figures["requests"].get("abuser")
    assert figures["throttled"]["newcomer"] >= lecture_hall.NEWCOMER_REFUSALS, figures["requests"].get("newcomer")
    assert figures["no_retry_after"] == 0, "every 429 says when to try again"
    publish = figures["publish"]
    assert publish["status"] == "done", publish
    assert publish["live_seconds"] is not None and publish["live_seconds"] <= PUBLISH_LIVE_SECONDS, publish
